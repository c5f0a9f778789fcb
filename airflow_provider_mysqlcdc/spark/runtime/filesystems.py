"""Whether Spark itself can write a location, or only this package's Python writers can.

Spark reads and writes paths through Hadoop's file systems: ``s3://`` needs Hadoop's S3
connector jars on the cluster, which a local Spark does not have (and cannot fetch without
Maven). The package's own writers go through fsspec, pyarrow and delta-rs instead, so the
sinks and the state files work on object storage either way; the few places where Spark's
own writer would touch a location ask here first.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit


def spark_can_write(spark: Any, url: str) -> bool:
    """True for local paths, and for a URL whose scheme the driver's Hadoop configuration has a
    file system for. A Spark Connect session cannot be asked: only local paths count there."""
    scheme = urlsplit(url).scheme
    if not scheme or len(scheme) == 1 or scheme == "file":
        return True
    try:
        jvm = spark._jvm  # raises on a Spark Connect session
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, spark._jsc.hadoopConfiguration())
        return True
    except Exception:
        return False
