"""SparkSession settings every job of the pipeline needs."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

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


def class_sharing_options(record: Path | None = None) -> list[str]:
    """The class-data-sharing options of a Spark driver JVM started on this host (local mode):
    the archive the local Spark Connect server built (``class_sharing.py``), which maps Spark's
    classes for any JVM with Spark's class path, not only the server's. Measured here: a local
    spark-submit job 8.2 s -> 4.5 s from start to exit, 9.6 -> 5.3 core-s. With no archive yet and
    ``record`` given, the JVM records the classes it loads into that file instead, for
    ``build_class_sharing_archive`` once it stopped. Empty when CDS is off, when the user's own
    ``SPARK_SUBMIT_OPTS`` choose class sharing, or when there is nothing to use or record."""
    from . import class_sharing

    if not class_sharing.enabled():
        return []
    options = class_sharing.java_options(
        class_sharing_key(), record or Path(os.devnull), os.environ.get("SPARK_SUBMIT_OPTS", "")
    )
    if record is None and not any(o.startswith("-XX:SharedArchiveFile=") for o in options):
        return []
    return options


def class_sharing_key() -> str | None:
    from . import class_sharing

    jar = jdbc_jar_path()  # the local Connect server's key: one archive for the server and the jobs
    return class_sharing.archive_key((jar,) if jar else ())


def with_class_sharing(java_options: str, options: list[str]) -> str:
    """``java_options`` (a ``SPARK_SUBMIT_OPTS`` value) with the class-sharing ``options`` after them."""
    return " ".join(filter(None, [(java_options or "").strip(), *options]))


def class_sharing_for_next_driver(record: Path | None = None) -> bool:
    """Have the driver JVM this process starts next (PySpark launching a local one) use the class
    archive, or record its classes into ``record`` when there is none yet (True then). Through
    ``SPARK_SUBMIT_OPTS``, as ``light_jit_for_next_driver``."""
    options = class_sharing_options(record)
    if options:
        os.environ["SPARK_SUBMIT_OPTS"] = with_class_sharing(os.environ.get("SPARK_SUBMIT_OPTS", ""), options)
    return any(o.startswith("-XX:DumpLoadedClassList=") for o in options)


def build_class_sharing_archive(java_argv: list[str] | None, class_list: Path) -> None:
    """After a recording driver stopped: build the archive in the background (once per host, JDK
    and Spark; see class_sharing.start_build), then drop the class list."""
    from . import class_sharing

    key = class_sharing_key()
    try:
        if java_argv and key is not None and class_sharing.start_build(key, java_argv, class_list):
            logging.getLogger(__name__).info(
                "building the class-data-sharing archive %s in the background", class_sharing.archive_path(key)
            )
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            class_list.unlink()


def driver_java_command(spark: Any) -> list[str] | None:
    """The ``java`` command line of the local driver JVM PySpark launched for ``spark`` (the
    spark-submit process it started has exec'd java by the time a session exists)."""
    from . import class_sharing

    try:
        return class_sharing.java_command_of(spark.sparkContext._gateway.proc.pid)
    except Exception:  # not launched by this process (spark-submit), or no gateway (Connect)
        return None


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
