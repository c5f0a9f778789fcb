"""Is this Python's PySpark one version, or two on top of each other?

``pyspark`` (with Spark's jars, what spark-submit runs) and ``pyspark-client`` (which the
Spark provider requires) install the same ``pyspark/`` files. pip treats them as two
packages, so it may install them at different versions -- the client lags behind on some
indexes -- and the files on disk are then a mixture of both releases, which fails in
confusing ways inside a Spark job. Checked before any Spark job starts.
"""

from __future__ import annotations

from importlib import metadata

from ...cdc.errors import ConfigError


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def check_pyspark_install(pyspark: str | None = None, client: str | None = None) -> None:
    """ConfigError when pyspark and pyspark-client are both installed at different versions."""
    pyspark = pyspark if pyspark is not None else installed("pyspark")
    client = client if client is not None else installed("pyspark-client")
    if pyspark and client and pyspark != client:
        raise ConfigError(
            f"pyspark {pyspark} and pyspark-client {client} are both installed: they ship the same pyspark/ "
            "files, so this installation mixes two Spark releases. Fix: install them at one version, e.g. "
            f"pip install 'pyspark=={client}' (or 'pyspark-client=={pyspark}' where that exists), on every "
            "Airflow worker."
        )
