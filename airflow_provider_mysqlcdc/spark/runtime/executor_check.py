"""Can the cluster's executors run this package? Asked once before a job's first real task.

On a cluster the executors run the cluster's Python, not the Airflow worker's: a node without the
package (or with another version of it) fails the job's first task deep inside Spark, with a
worker traceback that names neither the node's interpreter nor what to install, and Airflow
retries it as if it were transient. One tiny task per executor slot imports the package and
reports its version, interpreter and host; anything wrong becomes a ``ConfigError`` (not
retried) that says what to install where.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from ...cdc.errors import ConfigError


def _report(batches: Iterator[Any]) -> Iterator[Any]:
    """Runs on an executor: the package's version there (importing it is the check)."""
    import socket
    import sys

    import pyarrow as pa

    import airflow_provider_mysqlcdc as pkg

    for _ in batches:
        yield pa.RecordBatch.from_pydict(
            {"version": [pkg.__version__], "python": [sys.executable], "host": [socket.gethostname()]}
        )


def check_executors(spark: Any, where: str) -> list[dict[str, str]]:
    """Raise ``ConfigError`` unless every probed executor imports this package at this version.

    ``where`` names the cluster in the message (its master or endpoint). Returns what each
    probe saw (version, python, host)."""
    import airflow_provider_mysqlcdc as pkg

    try:
        slots = max(2, int(spark.conf.get("spark.default.parallelism", "0") or 0))
    except Exception:
        slots = 2
    try:
        rows = (
            spark.range(0, slots, 1, slots).mapInArrow(_report, "version string, python string, host string").collect()
        )
    except Exception as e:
        text = str(e)
        missing = re.search(r"No module named '?([\w.]+)'?", text)
        what = (
            f"cannot import {missing.group(1)!r}"
            if missing
            else f"failed a probe task: {text.strip().splitlines()[0][:300] if text.strip() else type(e).__name__}"
        )
        raise ConfigError(
            f"the executors of {where} {what}. Fix: install this package (airflow-provider-mysqlcdc=="
            f"{pkg.__version__}) and its requirements into the Python the cluster's executors run -- python3 on the "
            "nodes' PATH, or the interpreter named by spark.pyspark.python -- or ship an environment with "
            "python_archive."
        ) from None
    seen = [r.asDict() for r in rows]
    other = sorted({(r["version"], r["python"], r["host"]) for r in seen if r["version"] != pkg.__version__})
    if other:
        version, python, host = other[0]
        raise ConfigError(
            f"the executors of {where} run airflow-provider-mysqlcdc {version} ({python} on {host}), this Airflow "
            f"worker {pkg.__version__}: the two halves of a load must run the same code. Fix: install version "
            f"{pkg.__version__} on the cluster's nodes (or the Airflow workers' version there)."
        )
    return seen
