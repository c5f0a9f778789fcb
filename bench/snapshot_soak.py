"""Consistency soak: the snapshot + handoff contract with more rows and more seeds than the tests.

Usage: python bench/snapshot_soak.py [--rows 300000] [--seeds 10] [--variants int,composite,string]
Prints one line per run and exits non-zero on the first difference between sink and source.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from mysqlcdc_harness.mariadb import MariaDB
from mysqlcdc_harness.pipeline import run_consistency_case
from mysqlcdc_harness.spark import local_spark

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--variants", default="int,composite,string")
    ap.add_argument("--chunk-size", type=int, default=8096)
    ap.add_argument("--chunks-per-batch", type=int, default=8)
    args = ap.parse_args()
    work = ROOT / "bench" / ".work" / "soak"
    shutil.rmtree(work, ignore_errors=True)
    server = MariaDB(base_dir=work / "mariadb").start()
    spark = local_spark("mysqlcdc-soak")
    spark.sparkContext.setLogLevel("ERROR")
    failures = 0
    try:
        for seed in range(args.seeds):
            for variant in args.variants.split(","):
                db = f"soak_{variant}_{seed}"
                server.execute(f"CREATE DATABASE {db}")
                t = time.perf_counter()
                r = run_consistency_case(
                    server, spark, db, variant, seed, args.rows, args.chunk_size, args.chunks_per_batch
                )
                status = "OK" if not r.problem else "DIFF"
                print(
                    f"{status} {variant} seed={seed} rows={r.rows} batches={r.batches} "
                    f"writer_changes={r.writer_changes} streamed={r.streamed} {time.perf_counter() - t:.1f}s",
                    flush=True,
                )
                if r.problem:
                    print(r.problem)
                    failures += 1
                server.execute(f"DROP DATABASE {db}")
    finally:
        spark.stop()
        server.stop()
    print(f"soak: {failures} failing runs")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
