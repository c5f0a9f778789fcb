"""An Iceberg sink table after ``--batches`` stream micro-batches, read before and after maintenance.

Why: each micro-batch the stream applies is one copy-on-write commit (``spark/sinks/iceberg/
apply.py``): it rewrites the files holding a touched key and adds one file for the upserts, so
after a day of micro-batches a table is many small files, many manifests and many snapshots.
This bench builds that state the way the stream does (the same ``apply_changes`` commit per
micro-batch, on a local warehouse with the default SQLite catalog; no Spark, no server: the
driver-side commit is the part measured), then times reads of the table. ``--workload append``
(the default): each micro-batch inserts new keys at the end, as an event log does, so each
commit adds a small file no later commit touches (the case compaction is for);
``spread``: updates and deletes anywhere in the table, so each commit rewrites the files they
fall in (small ones merged with the upserts into one, so the table stays a few files). The reads:

  full scan   ``table.scan().to_arrow()``, every row (what a reader of the replica does);
  point read  ``row_filter id == k`` for ``--points`` keys (a lookup: planning cost dominates);
  plan        ``scan().plan_files()`` alone (manifests read, files pruned);

medians of ``--repeats``, before maintenance and after ``maintain`` (compaction of the small
files, expiry of the snapshots older than ``--max-age-s``, keeping ``--retain-last``), with the
files, manifests and snapshots counted each time. A micro-batch commit's own time is printed
too (the median of the first and of the last 100, with the stream's own expiry of its oldest
snapshots, sink option ``snapshots_kept``, as the stream runs it).

Last line:
    workload=<w> batches=<n> scan_before_s=<f> scan_after_s=<f> scan_speedup=<f> point_before_s=<f> point_after_s=<f> point_speedup=<f> maintain_s=<f>
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.spark.sinks.base import META_OP
from airflow_provider_mysqlcdc.spark.sinks.iceberg.apply import BATCH_KEY, STEP_KEY, apply_changes, with_op
from airflow_provider_mysqlcdc.spark.sinks.iceberg.maintenance import MaintenancePolicy, maintain
from airflow_provider_mysqlcdc.spark.sinks.iceberg.sink import STEP_SCALE, IcebergSink

TABLE = TableId("bench", "events")
SCHEMA = TableSchema(
    TABLE,
    (
        Column("id", 1, "bigint", "bigint(20)", False),
        Column("v", 2, "int", "int(11)", True),
        Column("note", 3, "varchar", "varchar(64)", True, charset="utf8mb4", char_max_length=64),
        Column("ts", 4, "datetime", "datetime(3)", True, datetime_precision=3),
    ),
    ("id",),
    ("id",),
    ("id",),
)


def _changes(ids: list[int], batch: int, deletes: set[int]) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([batch] * n, pa.int32()),
            "note": pa.array([f"batch {batch} row {i}" for i in ids], pa.string()),
            "ts": pa.array([dt.datetime(2026, 12, 7, 12, 0, 0)] * n, pa.timestamp("ms")),
            META_OP: pa.array(["-D" if i in deletes else "+U" for i in ids]),
        }
    )


def _median(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _shape(table: Any) -> str:
    snap = table.current_snapshot()
    manifests = len(snap.manifests(table.io)) if snap is not None else 0
    files = len(list(table.scan().plan_files()))
    return f"{files} data files, {manifests} manifests, {len(table.metadata.snapshots)} snapshots"


def _reads(table: Any, rows: int, points: list[int], repeats: int) -> dict[str, float]:
    from pyiceberg.expressions import EqualTo

    def scan() -> None:
        got = table.scan().to_arrow()
        assert got.num_rows == rows, (got.num_rows, rows)

    def point() -> None:
        for k in points:
            table.scan(row_filter=EqualTo("id", k)).to_arrow()

    return {
        "scan": _median(scan, repeats),
        "point": _median(point, repeats) / max(1, len(points)),
        "plan": _median(lambda: list(table.scan().plan_files()), repeats),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000, help="rows loaded before the micro-batches")
    ap.add_argument("--batches", type=int, default=1000, help="micro-batches applied")
    ap.add_argument("--changes", type=int, default=50, help="changed rows per micro-batch (10%% deletes)")
    ap.add_argument("--points", type=int, default=20, help="point reads per repeat")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-age-s", type=float, default=0.0, help="maintenance: expire snapshots older than this")
    ap.add_argument("--retain-last", type=int, default=10)
    ap.add_argument(
        "--workload",
        choices=("append", "spread"),
        default="append",
        help="append: new keys at the end and changes to recent rows (files pile up); spread: changes anywhere",
    )
    ap.add_argument("--work", default=None, help="folder for the warehouse (default: a temporary one)")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="iceberg-maint-"))
    shutil.rmtree(work / "wh", ignore_errors=True)
    rng = random.Random(7)
    sink = IcebergSink(str(work / "wh"))
    sink.prepare([SCHEMA])
    # the snapshot: files of 20,000 rows in key order, as a snapshot's batches leave them
    all_ids = list(range(args.rows))
    for lo in range(0, args.rows, 20_000):
        table = sink.open_table(TABLE)
        target = table.schema().as_arrow()
        table.append(_changes(all_ids[lo : lo + 20_000], 0, set()).select(target.names).cast(target))
    live = set(all_ids)
    commit_s: list[float] = []
    t_all = time.perf_counter()
    top = args.rows
    for b in range(1, args.batches + 1):
        if args.workload == "spread":  # keys anywhere in the table: some new, 10 % deletes
            ids = rng.sample(range(int(args.rows * 1.05)), args.changes)
            deletes = {i for i in ids if rng.random() < 0.1}
        else:  # new keys at the end only (an event log): each commit adds a file no later one touches
            ids = list(range(top, top + args.changes))
            top += len(ids)
            deletes = set()
        table = sink.open_table(TABLE)
        t0 = time.perf_counter()
        apply_changes(
            table,
            SCHEMA,
            with_op(table, _changes(ids, b, deletes)),
            {STEP_KEY: str(b * STEP_SCALE), BATCH_KEY: str(b)},
        )
        sink._bound_history(TABLE)  # as the stream's commit does (sink option snapshots_kept)
        commit_s.append(time.perf_counter() - t0)
        live |= set(ids) - deletes
        live -= deletes
        if b % 100 == 0:
            print(f"  {b} micro-batches, last 100 commits median {statistics.median(commit_s[-100:]) * 1000:.0f} ms")
    print(
        f"{args.workload}: {args.batches} micro-batches of {args.changes} changes on {args.rows} rows in "
        f"{time.perf_counter() - t_all:.1f} s; commit median first 100 {statistics.median(commit_s[:100]) * 1000:.0f} ms, "
        f"last 100 {statistics.median(commit_s[-100:]) * 1000:.0f} ms"
    )
    table = sink.open_table(TABLE)
    points = rng.sample(sorted(live), min(args.points, len(live)))
    print(f"before maintenance: {_shape(table)}")
    before = _reads(table, len(live), points, args.repeats)
    policy = MaintenancePolicy(snapshot_max_age_s=args.max_age_s, retain_last=args.retain_last)
    t0 = time.perf_counter()
    report = maintain(table, policy)
    maintain_s = time.perf_counter() - t0
    print(f"maintenance: {report.line()}")
    table = sink.open_table(TABLE)
    print(f"after maintenance: {_shape(table)}")
    after = _reads(table, len(live), points, args.repeats)
    for name in ("scan", "point", "plan"):
        print(
            f"{name:>5}: before {before[name] * 1000:9.1f} ms  after {after[name] * 1000:9.1f} ms  "
            f"({before[name] / after[name]:.1f}x)"
        )
    print(
        f"workload={args.workload} batches={args.batches} scan_before_s={before['scan']:.3f} scan_after_s={after['scan']:.3f} "
        f"scan_speedup={before['scan'] / after['scan']:.2f} point_before_s={before['point']:.4f} "
        f"point_after_s={after['point']:.4f} point_speedup={before['point'] / after['point']:.2f} "
        f"maintain_s={maintain_s:.2f}"
    )
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
