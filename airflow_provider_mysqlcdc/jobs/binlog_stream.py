"""spark-submit entry: the long-lived binlog stream into the sink.

    MYSQLCDC_PASSWORD=... spark-submit airflow_provider_mysqlcdc/jobs/binlog_stream.py --config pipeline.json

The password comes from $MYSQLCDC_PASSWORD or --password-file (mode 600), never from the
command line. It runs until killed; killed (even SIGKILL) and started again with the same
config, it resumes from the checkpoint in the state location (``stream/checkpoint``) and the
sink receives every change exactly once.

Started with plain ``python`` (no spark-submit), it runs Spark in local mode as
``local[2, 4]``: two cores, and a failed task is retried up to 4 times -- plain ``local[n]``
gives up after the first failure. The source itself retries lost connections (server
restarts) before a task fails at all. ``--sink-factory module:function`` builds the sink
from ``SinkConfig`` instead of the built-in factory (custom sinks, tests).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys

DEFAULT_LOCAL_MASTER = "local[2,4]"


def _load_factory(spec: str):
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr or "build")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="pipeline config JSON, a path or fsspec URL (no password inside)")
    ap.add_argument("--password-file", help="file holding the source password (mode 600)")
    ap.add_argument("--sink-factory", help="module:function(SinkConfig) -> Sink, instead of the built-in sinks")
    ap.add_argument("--master", help=f"Spark master when not under spark-submit (default {DEFAULT_LOCAL_MASTER})")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("mysqlcdc.binlog_stream")

    from pyspark.sql import SparkSession

    from airflow_provider_mysqlcdc.cdc.discovery import discover_tables
    from airflow_provider_mysqlcdc.cdc.pipeline import load_pipeline_config, read_password
    from airflow_provider_mysqlcdc.spark.session import configure_builder
    from airflow_provider_mysqlcdc.spark.sinks.factory import build_sink
    from airflow_provider_mysqlcdc.spark.stream import start_stream

    password = read_password(args.password_file)
    config = load_pipeline_config(args.config, password=password)
    with contextlib.closing(config.source.connect()) as conn:
        schemas = discover_tables(conn, config.include, config.exclude, config.split.chunk_key_columns)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(f"mysqlcdc {config.name} binlog stream")
    if args.master or "PYSPARK_GATEWAY_PORT" not in os.environ:  # not launched by spark-submit
        builder = builder.master(args.master or DEFAULT_LOCAL_MASTER)
    builder = builder.config("spark.task.maxFailures", "4").config("spark.ui.showConsoleProgress", "false")
    spark = configure_builder(builder).getOrCreate()

    sink = _load_factory(args.sink_factory)(config.sink) if args.sink_factory else build_sink(config.sink)
    try:
        sink.prepare(schemas)
        query = start_stream(spark, config, sink, schemas, password=password)
        log.info("streaming %d tables (%s) into %s", len(schemas),
                 ", ".join(str(s.table_id) for s in schemas[:10]), sink.name)
        query.awaitTermination()
    finally:
        sink.close()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
