"""A batch read again while the stream runs: what it costs the stream, against the same stream without it.

Setup: ``bench.items`` with ``--rows`` rows, planned in batches of ``--batch-rows``, every batch
snapshotted into a changelog sink, the stream started (trigger 0.5 s, as the DAG's defaults).
A writer commits ``--rate`` single-row UPDATEs per second (each writes its commit time into the
row), cycling over the table's keys, for the whole run.

1. Baseline, ``--seconds`` of writing with nothing else going on.
2. One batch is read again (the snapshot job in the same Spark application, as a cleared task
   would run it) and handed to the stream; the writer keeps going until ``--seconds`` after the
   stream took it over.

It reports the commit-to-visible latency (changelog file mtime minus the row's commit time, for
every streamed ``+U`` line) in the baseline and in the window from the first hand-off to 5 s
after the last take-over, the take-over micro-batches' durations against the median micro-batch
(a batch is handed over in pieces of ~stream_options.handoff_piece_rows rows, one piece a micro-batch), and
the rows re-snapshotted per second of the stream's time spent on them (the take-over
micro-batches minus the median one each: the extra work the issue allows). ``takeover_batch_s``
is the longest take-over micro-batch.

Last line:
    resnapshot_rows_per_s=<int> p99_latency_s=<float> p99_baseline_s=<float> takeover_batch_s=<float>
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import threading
import time
from pathlib import Path

from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.snapshot.resnapshot import ROOT as HANDOFFS
from airflow_provider_mysqlcdc.cdc.snapshot.resnapshot import read_applied
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.sinks.factory import build_sink
from airflow_provider_mysqlcdc.spark.snapshot.job import run_snapshot_batch
from airflow_provider_mysqlcdc.spark.stream.query import start_stream
from mysqlcdc_harness.mariadb import MariaDB
from mysqlcdc_harness.spark import local_spark

ROOT = Path(__file__).resolve().parents[1]


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


class Writer(threading.Thread):
    """``rate`` autocommit UPDATEs per second, each holding its own commit time."""

    def __init__(self, server: MariaDB, rate: int, keys: int) -> None:
        super().__init__(daemon=True)
        self.server, self.rate, self.keys = server, rate, keys
        self.halt = threading.Event()
        self.done = 0

    def run(self) -> None:
        conn = self.server.connect("bench")
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            while not self.halt.is_set():
                due = t0 + self.done / self.rate
                pause = due - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                cur.execute(
                    "UPDATE items SET v = %s WHERE id = %s", (repr(time.time()), (self.done * 7919) % self.keys + 1)
                )
                self.done += 1
        conn.close()


def latencies(root: Path) -> list[tuple[float, float]]:
    """(commit time, latency) of every streamed update."""
    out = []
    for f in glob.glob(str(root / "bench" / "items" / "stream" / "*.jsonl")):
        visible = os.stat(f).st_mtime
        with open(f) as fh:
            for line in fh:
                rec = json.loads(line)
                if rec["op"] == "+U":
                    committed = float(rec["data"]["v"])
                    out.append((committed, visible - committed))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--batch-rows", type=int, default=50_000)
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--work", default=str(ROOT / "bench" / ".work" / "resnapshot"))
    ap.add_argument(
        "--png",
        metavar="PATH",
        default=None,
        help="also write a PNG there: the empirical CDF of the commit-to-visible latencies, baseline "
        "vs the hand-off window, p50/p99 marked (needs matplotlib, the 'dev' extra)",
    )
    args = ap.parse_args()
    if args.png:
        import plots

        plots.require()  # before the minutes of work, not after

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    server = MariaDB(base_dir=work / "mariadb", server_id=1).start()
    try:
        server.execute("CREATE DATABASE bench")
        server.execute(
            "CREATE TABLE items (id BIGINT PRIMARY KEY, v VARCHAR(32), pad VARCHAR(64))",
            f"INSERT INTO items SELECT seq, '0', REPEAT('x', 60) FROM seq_1_to_{args.rows}",
            "ANALYZE TABLE items",
            database="bench",
        )
        source = server.source_config(server_id_range="7100-7199")
        root = work / "changelog"
        config = PipelineConfig(
            name="bench-resnapshot",
            source=source,
            include=("bench.items",),
            state_location=str(work / "state"),
            sink=SinkConfig("changelog", {"root": str(root)}),
            split=SplitOptions(chunk_size=max(1, args.batch_rows // 5)),
            stream=StreamOptions(heartbeat_s=1.0, trigger_interval_s=0.5),
        )
        plan = build_plan(source, config.include, split=config.split, chunks_per_batch=5)
        state = StateStore(config.state_location)
        state.write_plan(plan)
        spark = local_spark("mysqlcdc-bench-resnapshot", memory="4g")
        spark.sparkContext.setLogLevel("ERROR")
        for b in plan.batches:
            run_snapshot_batch(spark, config, b.batch_id, plan=plan)
        state.write_finished(state.finished_from_results())
        print(f"table: {args.rows:,} rows in {len(plan.batches)} batches of ~{args.batch_rows:,}", flush=True)
        query = start_stream(
            spark, config, build_sink(config.sink), list(plan.schemas.values()), password=source.password
        )
        writer = Writer(server, args.rate, args.rows)
        try:
            time.sleep(5)
            writer.start()
            base_from = time.time()
            time.sleep(args.seconds)
            base_to = time.time()
            victim = plan.batches[len(plan.batches) // 2]
            t_read = time.time()
            result = run_snapshot_batch(spark, config, victim.batch_id, plan=plan)
            ids = result["handoff"]  # one per piece of ~stream_options.handoff_piece_rows rows
            t_handed = min(os.stat(state.path(HANDOFFS, h, "manifest.json")).st_mtime for h in ids)
            outcomes = []
            for hid in ids:
                while (applied := read_applied(state, hid)) is None:
                    time.sleep(0.2)
                outcomes.append(applied)
            t_applied = max(os.stat(state.path(HANDOFFS, h, "applied.json")).st_mtime for h in ids)
            time.sleep(args.seconds)
            writer.halt.set()
            writer.join()
            time.sleep(3)
            progress = {p["batchId"]: p for p in query.recentProgress}
        finally:
            writer.halt.set()
            query.stop()
        lat = latencies(root)
        base = [x for t, x in lat if base_from <= t < base_to]
        window = [x for t, x in lat if t_handed - 1 <= t <= t_applied + 5]
        rows = sum(a["rows"] for a in outcomes)
        takers = {a["micro_batch"] for a in outcomes}
        durations = [
            p["durationMs"].get("triggerExecution", 0) / 1000
            for b, p in progress.items()
            if p.get("numInputRows", 0) > 0 and b not in takers
        ]
        median = statistics.median(durations) if durations else float("nan")
        taken = [progress.get(b, {}).get("durationMs", {}).get("triggerExecution", 0) / 1000 for b in sorted(takers)]
        takeover = max(taken) if taken else float("nan")
        extra = max(sum(t - median for t in taken), 1e-3)
        print(f"writer: {writer.done:,} updates at {args.rate} tx/s", flush=True)
        print(
            f"batch {victim.batch_id} read again in {len(ids)} piece(s), the first handed over "
            f"{t_handed - t_read:.1f} s after the job started, the last taken over {t_applied - t_handed:.1f} s after "
            f"the first was handed, in micro-batches {sorted(takers)}: {rows:,} rows, "
            f"{sum(a['events'] for a in outcomes)} binlog events between HWs and take-overs, records built in "
            f"{max(a['seconds'] for a in outcomes):.2f} s at most",
            flush=True,
        )
        print(
            f"micro-batches: median {median:.2f} s, the take-over ones {', '.join(f'{t:.2f}' for t in taken)} s "
            f"(extra {extra:.2f} s for {rows:,} rows)",
            flush=True,
        )
        print(
            f"latency, baseline: p50={pct(base, 50):.3f}s p99={pct(base, 99):.3f}s over {len(base):,} changes",
            flush=True,
        )
        print(
            f"latency, hand-off to 5 s after the take-over: p50={pct(window, 50):.3f}s p99={pct(window, 99):.3f}s "
            f"max={max(window) if window else float('nan'):.3f}s over {len(window):,} changes",
            flush=True,
        )
        if args.png:
            import plots

            out = plots.latency_cdf(
                args.png,
                {"baseline (no re-read)": base, "hand-off window": window},
                title=f"commit -> visible at {args.rate} tx/s, batch {victim.batch_id} "
                f"({rows:,} rows) read again while the stream runs",
            )
            print(f"png: {out}", flush=True)
        print(
            f"resnapshot_rows_per_s={rows / extra:.0f} p99_latency_s={pct(window, 99):.3f} "
            f"p99_baseline_s={pct(base, 99):.3f} takeover_batch_s={takeover:.3f}",
            flush=True,
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
