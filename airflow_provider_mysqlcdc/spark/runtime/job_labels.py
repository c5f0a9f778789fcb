"""Naming a job's Spark work, the same way in a classic session and a Spark Connect client.

A classic session labels jobs through its SparkContext (the Spark UI shows the group and the
description). A Spark Connect client has no SparkContext: its operations carry tags instead,
which the server shows on its jobs and which ``interruptTag`` stops (the operator's kill).
"""

from __future__ import annotations

import re
from typing import Any


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect client session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def tag_of(group: str) -> str:
    """A Connect tag for a job group: tags may not hold commas or be empty."""
    return re.sub(r"[^A-Za-z0-9_.:-]+", "_", group) or "mysqlcdc"


def set_job_group(spark: Any, group: str, description: str) -> None:
    if is_connect(spark):
        spark.clearTags()
        spark.addTag(tag_of(group))
    else:
        spark.sparkContext.setJobGroup(group, description)


def describe(spark: Any, text: str | None) -> None:
    """The next jobs' description (classic only: a Connect operation is named by its tags)."""
    if not is_connect(spark):
        spark.sparkContext.setJobDescription(text)  # type: ignore[arg-type]
