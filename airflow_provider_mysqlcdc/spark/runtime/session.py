"""SparkSession settings every job of the pipeline needs."""

from __future__ import annotations

import logging
import os

from airflow_provider_mysqlcdc.spark.runtime.pyspark_bytecode import missing_bytecode_note

# Debian's libmariadb-java; on a cluster pass the driver jar with --jars instead.
DEFAULT_JDBC_JAR = "/usr/share/java/mariadb-java-client.jar"
JDBC_DRIVER_CLASS = "org.mariadb.jdbc.Driver"


# The JVM's JIT without its optimizing tier (C2). Where the rows bypass the JVM (the snapshot's
# Arrow reader, the stream's direct writes) it only plans and schedules, and C2's compilations
# were half of its CPU: in a snapshot load 14.4 -> 6.9 core-s, in a 2M-change catch-up into Delta
# 1.95 of its 3.3 core-s.
LIGHT_JIT_OPTION = "-XX:TieredStopAtLevel=1"


def with_light_jit(java_options: str) -> str:
    """``java_options`` with the light JIT added, unless they already choose the JIT."""
    own = (java_options or "").strip()
    if "TieredStopAtLevel" in own or "TieredCompilation" in own:
        return own
    return " ".join(filter(None, [own, LIGHT_JIT_OPTION]))


def light_jit_for_next_driver() -> None:
    """Have the Spark driver JVM this process starts next (PySpark launching a local one) use the
    light JIT. Through ``SPARK_SUBMIT_OPTS``, which Spark's launcher puts on a client-mode driver's
    command line before ``spark.driver.extraJavaOptions``: a JIT option set there still wins, and
    options set anywhere else are kept (a builder's ``extraJavaOptions`` would replace those of
    spark-defaults.conf)."""
    os.environ["SPARK_SUBMIT_OPTS"] = with_light_jit(os.environ.get("SPARK_SUBMIT_OPTS", ""))


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
