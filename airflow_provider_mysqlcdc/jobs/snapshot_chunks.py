"""spark-submit entry: snapshot one batch of chunks into the sink.

    spark-submit --jars /usr/share/java/mariadb-java-client.jar \
        airflow_provider_mysqlcdc/jobs/snapshot_chunks.py --config pipeline.json --batch-id 'shop.orders#0-63'

The JDBC driver jar must be given to spark-submit (``--jars``): the driver JVM is running
before this code starts, so a jar configured from Python reaches only the executors.

The password comes from $MYSQLCDC_PASSWORD or --password-file (mode 600), never from the
command line. On success the batch's result file (ranges, HW, rows per chunk) is in the
state location, and the same JSON is printed on stdout after ``MYSQLCDC_RESULT ``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="pipeline config JSON, a path or fsspec URL (no password inside)")
    ap.add_argument("--batch-id", required=True, help="a batch id of the plan in the state location")
    ap.add_argument("--password-file", help="file holding the source password (mode 600)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # connection chatter, not the job's progress

    from pyspark.sql import SparkSession

    from airflow_provider_mysqlcdc.cdc.pipeline import load_pipeline_config, read_password
    from airflow_provider_mysqlcdc.spark.runtime.session import (
        build_class_sharing_archive,
        class_sharing_for_next_driver,
        configure_builder,
        driver_java_command,
    )
    from airflow_provider_mysqlcdc.spark.snapshot.job import run_snapshot_batch

    config = load_pipeline_config(args.config, password=read_password(args.password_file))
    builder = SparkSession.builder.appName(f"mysqlcdc {config.name} snapshot {args.batch_id}")
    class_list = Path(tempfile.gettempdir()) / f"mysqlcdc-classes-{os.getpid()}.lst"
    # Started by plain python, PySpark launches a local driver here: Spark's classes come from the
    # host's class-data-sharing archive, or the first such driver records them for one.
    recording = "PYSPARK_GATEWAY_PORT" not in os.environ and class_sharing_for_next_driver(record=class_list)
    spark = configure_builder(builder).getOrCreate()
    java_argv = driver_java_command(spark) if recording else None
    try:
        result = run_snapshot_batch(spark, config, args.batch_id)
    finally:
        spark.stop()
        if recording:
            build_class_sharing_archive(java_argv, class_list)
    rows = sum(sum(v.values()) for v in result["rows_per_chunk"].values())
    summary = {
        "batch_id": result["batch_id"],
        "rows": rows,
        "chunks": len(result["chunks"]),
        "high_watermark": result["high_watermark"],
        "seconds": result["seconds"],
        "rows_per_s": result["rows_per_s"],
    }
    print("MYSQLCDC_RESULT " + json.dumps(summary, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
