"""This package as files for Spark: its job entry points, a zip for ``--py-files`` and a digest.

Executors (and a Spark Connect server's Python workers) must run exactly the code of the task
that sends them work: the zip ships it to a cluster, the digest tells a reused local server
whether it still runs the same code.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[2]


def application_path(name: str) -> str:
    """The file spark-submit runs for job ``name`` ('snapshot_chunks' or 'binlog_stream'): the
    entry points ship inside the package (``jobs/``), so an installed provider finds them."""
    path = PACKAGE_DIR / "jobs" / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no Spark job {name!r} at {path}")
    return str(path)


def package_digest() -> str:
    h = hashlib.sha1()
    for p in sorted(PACKAGE_DIR.rglob("*.py")):
        st = p.stat()
        h.update(f"{p.relative_to(PACKAGE_DIR)}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:12]


def package_zip(cache_dir: str | None = None) -> str:
    """A zip of this package for ``--py-files``, so executors run exactly the worker's code.

    Built once per package content (cached by a digest of file names, sizes and mtimes).
    Third-party dependencies are not in it: on a cluster ship an environment archive
    (``python_archive``), in local mode the executors use this interpreter.
    """
    cache = Path(cache_dir or os.path.join(tempfile.gettempdir(), "mysqlcdc-pyfiles"))
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / f"airflow_provider_mysqlcdc-{package_digest()}.zip"
    if target.exists():
        return str(target)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(PACKAGE_DIR.rglob("*.py")):
            z.write(p, Path(PACKAGE_DIR.name) / p.relative_to(PACKAGE_DIR))
    os.replace(tmp, target)
    _prune(cache, keep=target)
    return str(target)


def _prune(cache: Path, keep: Path, max_age_s: float = 86_400) -> None:
    """Drop zips of older package versions a day after they were built (running jobs may
    still be reading a recent one)."""
    import time

    for old in cache.glob("airflow_provider_mysqlcdc-*.zip"):
        try:
            if old != keep and time.time() - old.stat().st_mtime > max_age_s:
                old.unlink()
        except OSError:
            pass
