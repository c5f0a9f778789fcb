"""spark-submit entry points, shipped inside the package.

The operators submit these files by path (``application_path()``), so an installed provider
finds them without the repository; ``spark_jobs/`` at the top of the repository holds thin
copies for running them by hand.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def application_path(name: str) -> str:
    """The file spark-submit runs for job ``name`` ('snapshot_chunks' or 'binlog_stream')."""
    path = _HERE / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no Spark job {name!r} at {path}")
    return str(path)
