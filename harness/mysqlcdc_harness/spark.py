"""A local-mode SparkSession set up the way the pipeline's jobs run."""

from __future__ import annotations

import os
import sys

from airflow_provider_mysqlcdc.spark.runtime.session import configure_builder


def local_spark(app_name: str = "mysqlcdc-tests", cores: int = 2, memory: str = "3g"):
    from pyspark.sql import SparkSession

    # Executors' Python workers must use this venv's interpreter, where the package is installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.driver.memory", memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(max(2, cores * 2)))
        .config("spark.sql.adaptive.enabled", "true")
    )
    return configure_builder(builder).getOrCreate()
