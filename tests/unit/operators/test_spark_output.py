"""What of spark-submit's output a snapshot task log shows, and at which level."""

from __future__ import annotations

import logging

from airflow_provider_mysqlcdc.operators._spark_output import SparkOutputLog, classify


def test_spark_lines_keep_their_level_and_its_chatter_is_debug():
    assert classify("25/11/25 10:00:01 WARN TaskSetManager: Lost task 0.0 in stage 1.0") == (
        logging.WARNING,
        "Spark TaskSetManager: Lost task 0.0 in stage 1.0",
    )
    assert classify("25/11/25 10:00:01 ERROR Executor: Exception in task 3.0")[0] == logging.ERROR
    assert classify("25/11/25 10:00:01 INFO SparkContext: Running Spark version 4.2.0")[0] == logging.DEBUG
    assert (
        classify("25/11/25 10:00:01 INFO SparkContext: Running Spark version 4.2.0", spark_level=logging.INFO)[0]
        == logging.INFO
    )
    assert (
        classify(
            "25/11/25 10:00:00 WARN NativeCodeLoader: Unable to load native-hadoop library for your "
            "platform... using builtin-java classes where applicable"
        )[0]
        == logging.DEBUG
    )
    assert (
        classify("Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties")[0] == logging.DEBUG
    )


def test_the_jobs_own_lines_keep_their_level_and_machine_lines_are_hidden():
    assert classify(
        "2026-11-25 10:00:02,123 INFO airflow_provider_mysqlcdc.spark.snapshot.progress: progress: 3/8 chunks read"
    ) == (logging.INFO, "progress: 3/8 chunks read")
    assert classify("2026-11-25 10:00:02,123 WARNING x.y: careful")[0] == logging.WARNING
    assert classify('MYSQLCDC_RESULT {"batch_id": "batch-0000"}')[0] == logging.DEBUG
    assert classify("Traceback (most recent call last):") == (logging.INFO, "Traceback (most recent call last):")


def test_the_router_relevels_only_bare_lines():
    got: list[tuple[int, str]] = []

    class Target:
        def log(self, level, fmt, *args):
            got.append((level, fmt % args))

        def info(self, fmt, *args):
            got.append((logging.INFO, fmt % args))

    out = SparkOutputLog(Target())
    out.info("25/11/25 10:00:01 WARN Foo: bar")
    out.info("Spark-Submit cmd: %s", "spark-submit ...")
    assert got == [(logging.WARNING, "Spark Foo: bar"), (logging.INFO, "Spark-Submit cmd: spark-submit ...")]
