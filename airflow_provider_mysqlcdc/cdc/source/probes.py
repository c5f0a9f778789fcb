"""Checks the plan step runs before any Spark job starts, so a setting that cannot work fails
in seconds with its fix instead of inside a job with a raw error.

* A storage location (state location, a sink's root) is written and read back with a small
  probe file, which is then removed; a directory the probe had to create is removed too, so
  a failed check leaves nothing behind.
* ``startup_offset`` has the shape the stream reads, and its binlog file is still on the
  server.
"""

from __future__ import annotations

import posixpath
import re
import uuid
from typing import Any, Mapping

from ..errors import ConfigError

_BINLOG_FILE = re.compile(r"^[^/\\\s]+\.\d{6,}$")


def probe_writable(location: str, what: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Write, read back and delete a probe file under ``location`` (a path or fsspec URL)."""
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(location, **dict(storage_options or {}))
    except (ImportError, ValueError) as e:
        raise ConfigError(
            f"{what} {location!r} cannot be opened ({e}). Fix: use a local path or a URL whose "
            "file system is installed (s3:// needs s3fs, abfss:// adlfs, gs:// gcsfs)."
        ) from None
    created = []
    probe = posixpath.join(root.rstrip("/") or "/", f"_mysqlcdc_probe-{uuid.uuid4().hex[:8]}")
    try:
        parent = root.rstrip("/") or "/"
        missing = []
        while parent not in ("", "/") and not fs.exists(parent):
            missing.append(parent)
            parent = posixpath.dirname(parent)
        fs.makedirs(root, exist_ok=True)
        created = missing
        with fs.open(probe, "wb") as f:
            f.write(b"mysqlcdc")
        with fs.open(probe, "rb") as f:
            if f.read() != b"mysqlcdc":
                raise OSError("the probe file read back differs")
    except Exception as e:
        raise ConfigError(
            f"{what} {location!r} is not writable: {type(e).__name__}: {e}. Fix: use a location "
            "this worker and every Spark node can write (check its permissions, bucket and "
            "credentials), then trigger again."
        ) from None
    finally:
        try:
            if fs.exists(probe):
                fs.rm(probe)
            for d in created:  # deepest first: leave nothing the probe made
                if fs.exists(d) and not fs.ls(d):
                    fs.rmdir(d)
        except Exception:  # cleanup is best effort; the check's verdict stands
            pass


def check_startup_offset(spec: Mapping[str, Any] | None, binlog_files: list[str] | None = None) -> None:
    """``{"file": "mysql-bin.000003", "position": 4}`` or ``{"gtid": "<set>"}``; with the server's
    ``binlog_files`` (``SHOW BINARY LOGS``), the file must still be there."""
    fix = (
        'Fix: give {"file": "mysql-bin.000003", "position": 4} (a file SHOW BINARY LOGS lists) or '
        '{"gtid": "<gtid set>"}.'
    )
    if not spec:
        raise ConfigError(f"startup_mode 'specific-offset' needs startup_offset. {fix}")
    unknown = sorted(set(spec) - {"file", "position", "gtid"})
    if unknown:
        raise ConfigError(f"startup_offset: unknown key(s) {', '.join(map(repr, unknown))}. {fix}")
    if "gtid" in spec:
        if not isinstance(spec["gtid"], str) or not spec["gtid"].strip():
            raise ConfigError(f"startup_offset.gtid: found {spec['gtid']!r}, need a GTID set. {fix}")
        return
    file, position = spec.get("file"), spec.get("position", 4)
    if not isinstance(file, str) or not _BINLOG_FILE.match(file):
        raise ConfigError(
            f"startup_offset.file: found {file!r}, need a binlog file name like 'mysql-bin.000003'. {fix}"
        )
    if isinstance(position, bool) or not isinstance(position, int) or position < 4:
        raise ConfigError(f"startup_offset.position: found {position!r}, need an integer >= 4. {fix}")
    if binlog_files is not None and file not in binlog_files:
        have = f"{binlog_files[0]} .. {binlog_files[-1]}" if binlog_files else "none"
        raise ConfigError(
            f"startup_offset.file: {file!r} is not on the server (its binlog files: {have}); it "
            f"was purged or never existed. {fix}"
        )
