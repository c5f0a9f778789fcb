"""A local-mode SparkSession set up the way the pipeline's jobs run."""

from __future__ import annotations

import os
import sys

from airflow_provider_mysqlcdc.spark.runtime.session import (
    class_sharing_for_next_driver,
    configure_builder,
    light_jit_for_next_driver,
)


def local_spark(app_name: str = "mysqlcdc-tests", cores: int = 2, memory: str = "3g", light_jit: bool = False):
    from pyspark.sql import SparkSession

    # Executors' Python workers must use this venv's interpreter, where the package is installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # light_jit (the tests' session): the JVM without C2, as the pipeline's own jobs run where rows
    # bypass it. The JIT tier changes no result, and the tests' small jobs never run long enough to
    # repay C2 (measured: the snapshot consistency cases 9 % faster). Only for this JVM: the jobs
    # the tests start later choose their own JIT, as they do in production; the benches keep C2.
    before = os.environ.get("SPARK_SUBMIT_OPTS")
    if light_jit:
        light_jit_for_next_driver()
    class_sharing_for_next_driver()  # Spark's classes from the host's archive, when there is one
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.driver.memory", memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(max(2, cores * 2)))
        .config("spark.sql.adaptive.enabled", "true")
    )
    try:
        return configure_builder(builder).getOrCreate()
    finally:
        if before is None:
            os.environ.pop("SPARK_SUBMIT_OPTS", None)
        else:
            os.environ["SPARK_SUBMIT_OPTS"] = before
