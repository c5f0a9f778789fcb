"""Offsets a query's Spark checkpoint holds: where a micro-batch ends, where the last commit ended.

Spark writes ``offsets/<id>`` (a version line, the batch's metadata line, one offset line per
source: this query has one) before it runs micro-batch ``id``, and ``commits/<id>`` once the
batch is done, so a replayed micro-batch finds the same end as the first run.
"""

from __future__ import annotations

import json
import posixpath

from .stream_offset import StreamOffset


def batch_end_offset(checkpoint: str, batch_id: int) -> StreamOffset | None:
    """The end of micro-batch ``batch_id`` from the checkpoint's offsets log (version line,
    metadata line, one offset line for this query's one source)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(checkpoint)
    path = posixpath.join(root, "offsets", str(int(batch_id)))
    if not fs.exists(path):
        return None
    with fs.open(path, "r") as f:
        lines = [ln for ln in f.read().splitlines() if ln.strip()]
    return StreamOffset.from_dict(json.loads(lines[-1]))


def _last_id(checkpoint: str, log_dir: str) -> int | None:
    """The highest batch id in the checkpoint's ``offsets`` or ``commits`` log."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(checkpoint)
    d = posixpath.join(root, log_dir)
    if not fs.exists(d):
        return None
    ids = [int(n) for n in (posixpath.basename(str(p).rstrip("/")) for p in fs.ls(d, detail=False)) if n.isdigit()]
    return max(ids) if ids else None


def committed_end(checkpoint: str) -> StreamOffset | None:
    """The end offset of the checkpoint's last committed micro-batch."""
    last = _last_id(checkpoint, "commits")
    return batch_end_offset(checkpoint, last) if last is not None else None


def latest_end(checkpoint: str) -> StreamOffset | None:
    """The end of the checkpoint's last offsets entry, committed or not: where a restarted
    query next asks for an offset (an uncommitted entry is first replayed with its own range)."""
    last = _last_id(checkpoint, "offsets")
    return batch_end_offset(checkpoint, last) if last is not None else None


def check_readable(checkpoint: str) -> None:
    """Fail with the file and the fix when a checkpoint file cannot be parsed, before Spark
    starts: Spark itself would stop with a JSON parser's stack trace naming neither."""
    import fsspec

    from ....cdc.errors import ConfigError

    fs, root = fsspec.core.url_to_fs(checkpoint)
    if not fs.exists(root):
        return
    paths = [posixpath.join(root, "metadata")] if fs.exists(posixpath.join(root, "metadata")) else []
    for log_dir in ("offsets", "commits"):
        d = posixpath.join(root, log_dir)
        if fs.exists(d):
            paths += sorted(p for p in fs.ls(d, detail=False) if posixpath.basename(str(p).rstrip("/")).isdigit())
    for path in paths:
        name = posixpath.basename(str(path).rstrip("/"))
        try:
            with fs.open(path, "r") as f:
                lines = [ln for ln in f.read().splitlines() if ln.strip()]
            if name == "metadata":
                json.loads(lines[0])
                continue
            if not lines or not lines[0].startswith("v"):
                raise ValueError("no version line")
            for line in lines[1:]:
                json.loads(line)
            if posixpath.basename(posixpath.dirname(str(path).rstrip("/"))) == "offsets" and len(lines) < 3:
                raise ValueError("no offset line")
        except (ValueError, IndexError, UnicodeDecodeError) as e:
            raise ConfigError(
                f"the stream's checkpoint {path} is unreadable ({type(e).__name__}: {str(e)[:120]}): a disk that "
                "filled up or a copy that stopped half way. Fix: if it is the newest file under offsets/ and "
                "commits/ has no file of its number, delete it (that micro-batch is planned again from the last "
                "commit); otherwise restore the checkpoint from a copy, or trigger with reset=true to load "
                "everything again."
            ) from None
