"""Snapshot throughput: the consistent batch reader vs the `mariadb` CLI vs Spark's plain JDBC.

Reads a 2,000,000-row table (override with --rows) into Parquet through the batch reader
(LW, one predicate per chunk, materialize, HW, backfill, corrections), and in the same run
times (a) the `mariadb` command-line client scanning the same table and (b) Spark's plain
JDBC read of it into Parquet with the same partitioning (no consistency). Runs interleave,
and medians are compared, because the machine is shared and noisy.

Last line: ratio_vs_cli=<float> ratio_vs_spark_jdbc=<float>  (throughput ratios: >1 = faster)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.sql import range_predicate
from airflow_provider_mysqlcdc.spark.runtime.session import JDBC_DRIVER_CLASS
from airflow_provider_mysqlcdc.spark.snapshot.batch_reader import ConsistentBatchReader, jdbc_url
from mysqlcdc_harness import pipeline
from mysqlcdc_harness.mariadb import MariaDB
from mysqlcdc_harness.spark import local_spark
from mysqlcdc_harness.tables import create_int_table

ROOT = Path(__file__).resolve().parents[1]


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--chunk-size", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--png",
        metavar="PATH",
        default=None,
        help="also write a PNG there: rows/s (medians) of the consistent reader vs the mariadb CLI "
        "vs Spark's plain JDBC (needs matplotlib, the 'dev' extra)",
    )
    args = ap.parse_args()
    if args.png:
        import plots

        plots.require()  # before the minutes of work, not after

    work = ROOT / "bench" / ".work" / "snapshot"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    server = MariaDB(base_dir=work / "mariadb", server_id=1)
    server.start()
    try:
        db = "bench"
        server.execute(f"CREATE DATABASE {db}")
        t = time.perf_counter()
        create_int_table(server, db, args.rows, table="orders")
        print(f"loaded {args.rows} rows in {time.perf_counter() - t:.1f}s", flush=True)
        source = server.source_config()
        table_id = TableId(db, "orders")
        plan = pipeline.plan_table(source, table_id, chunk_size=args.chunk_size, chunks_per_batch=10**9)
        batch = plan.batches[0]
        assert len(plan.batches) == 1
        print(f"{len(batch.chunks)} chunks of about {args.chunk_size} rows", flush=True)

        spark = local_spark("mysqlcdc-bench-snapshot", memory="4g")
        spark.sparkContext.setLogLevel("ERROR")
        schema = plan.schema

        def cli() -> None:
            with open(os.devnull, "wb") as devnull:
                subprocess.run(
                    server.cli("-N", "-B", "-e", f"SELECT * FROM {db}.orders"),
                    env=server.cli_env(),
                    stdout=devnull,
                    check=True,
                )

        def plain_jdbc() -> None:
            out = work / "plain.parquet"
            shutil.rmtree(out, ignore_errors=True)
            preds = [range_predicate(schema, c.start, c.end, c.includes_null) for c in batch.chunks]
            df = spark.read.jdbc(
                jdbc_url(source),
                f"{db}.orders",
                predicates=preds,
                properties={
                    "user": source.user,
                    "password": source.password,
                    "driver": JDBC_DRIVER_CLASS,
                    "fetchsize": str(source.jdbc_fetch_size),
                },
            )
            df.write.parquet(str(out))

        # Staged materialization: one JVM pass writes the SELECTs' rows as Parquet, read back
        # for the output (spark/snapshot/materialize.py); the cache costs a second, slower pass.
        reader = ConsistentBatchReader(spark, source, {table_id: schema}, staging_dir=str(work / "staging"))

        def ours() -> None:
            out = work / "ours.parquet"
            shutil.rmtree(out, ignore_errors=True)
            got = reader.read(batch)
            got.frame(table_id).write.parquet(str(out))
            got.unpersist()

        ours()  # warm-up: JVM, JIT, driver class loading, buffer pool
        plain_jdbc()
        times: dict[str, list[float]] = {"cli": [], "spark_jdbc": [], "ours": []}
        for i in range(args.repeats):
            for name, fn in (("cli", cli), ("spark_jdbc", plain_jdbc), ("ours", ours)):
                times[name].append(timed(fn))
            print(f"run {i + 1}: " + " ".join(f"{k}={v[-1]:.2f}s" for k, v in times.items()), flush=True)
        med = {k: statistics.median(v) for k, v in times.items()}
        n = spark.read.parquet(str(work / "ours.parquet")).count()
        assert n == args.rows, f"ours wrote {n} rows, expected {args.rows}"
        for k, v in med.items():
            print(f"{k:>11}: median {v:.2f}s = {args.rows / v:,.0f} rows/s")
        spark.stop()
        if args.png:
            import plots

            names = {
                "cli": "mariadb CLI scan",
                "spark_jdbc": "Spark plain JDBC -> Parquet (not consistent)",
                "ours": "consistent batch reader -> Parquet",
            }
            out = plots.rows_per_second(
                args.png,
                {names[k]: args.rows / v for k, v in med.items()},
                title=f"snapshot read of {args.rows:,} rows, {len(batch.chunks)} chunks, median of {args.repeats}",
                highlight=names["ours"],
            )
            print(f"png: {out}", flush=True)
        print(f"ratio_vs_cli={med['cli'] / med['ours']:.3f} ratio_vs_spark_jdbc={med['spark_jdbc'] / med['ours']:.3f}")
    finally:
        server.stop()
        with contextlib.suppress(Exception):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
