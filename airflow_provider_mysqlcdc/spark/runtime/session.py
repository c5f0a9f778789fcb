"""SparkSession settings every job of the pipeline needs."""

from __future__ import annotations

import logging
import os

from airflow_provider_mysqlcdc.spark.runtime.pyspark_bytecode import missing_bytecode_note

# Debian's libmariadb-java; on a cluster pass the driver jar with --jars instead.
DEFAULT_JDBC_JAR = "/usr/share/java/mariadb-java-client.jar"
JDBC_DRIVER_CLASS = "org.mariadb.jdbc.Driver"


def jdbc_jar_path() -> str | None:
    path = os.environ.get("MYSQLCDC_JDBC_JAR", DEFAULT_JDBC_JAR)
    return path if os.path.exists(path) else None


def configure_builder(builder):
    """Add the JDBC driver jar and the settings the consistent reader relies on."""
    note = missing_bytecode_note()
    if note:
        logging.getLogger(__name__).info(note)
    jar = jdbc_jar_path()
    if jar:
        builder = builder.config("spark.jars", jar)
    # Arrow for Python UDFs / createDataFrame of the (small) correction rows.
    builder = builder.config("spark.sql.execution.arrow.pyspark.enabled", "true")
    # Timestamps are handled as instants in UTC end to end (see spark/types.py).
    builder = builder.config("spark.sql.session.timeZone", "UTC")
    return builder
