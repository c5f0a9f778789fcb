"""Binlog stream throughput and latency, against baselines measured in the same run.

On one binlog range each (single-row transactions, then 1000-row transactions) it times:
  * `mariadb-binlog -v` decoding the range from the binlog file (the C baseline),
  * python-mysql-replication parsing the range (through the engine's BinlogReader),
  * our stream job end to end (Structured Streaming + handoff + sink) into the changelog sink,
  * the same into the Delta sink,
then runs a steady 500 transactions/s load into a live stream (changelog sink) and reports
commit-to-visible latency: from the client's commit to the sink file holding the row.

Last line (single-row case, changelog sink):
    rows_per_s=<int> ratio_vs_mariadb_binlog=<float> p99_latency_s=<float>
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_provider_mysqlcdc.cdc.binlog import BinlogReader  # noqa: E402
from airflow_provider_mysqlcdc.cdc.discovery import read_table_schema  # noqa: E402
from airflow_provider_mysqlcdc.cdc.events import RowChange  # noqa: E402
from airflow_provider_mysqlcdc.cdc.model import TableId  # noqa: E402
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset  # noqa: E402
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions  # noqa: E402
from airflow_provider_mysqlcdc.spark.sinks.factory import build_sink  # noqa: E402
from airflow_provider_mysqlcdc.spark.stream import start_stream  # noqa: E402
from tests.support.mariadb import MariaDB, _find  # noqa: E402
from tests.support.spark import local_spark  # noqa: E402

DDL = ("CREATE TABLE events (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(64), amount DECIMAL(12,2), "
       "ts DATETIME(3), note TEXT, sent_at DOUBLE)")


def row_sql(var: str) -> str:
    return f"{var}, CONCAT('value-', {var}), {var} / 100, NOW(3), REPEAT('x', 40), UNIX_TIMESTAMP(NOW(6))"


class Bench:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.server = MariaDB(base_dir=work / "mariadb", server_id=1).start()
        self.server.execute("CREATE DATABASE bench")
        self.server.execute(DDL, database="bench")
        self.source = self.server.source_config()
        self.table = TableId("bench", "events")
        conn = self.source.connect()
        self.schema = read_table_schema(conn, self.table)
        conn.close()
        self.next_id = 1
        self.spark = local_spark("mysqlcdc-bench-stream", memory="3g")
        self.spark.sparkContext.setLogLevel("ERROR")
        self.runs = 0

    def offset(self) -> BinlogOffset:
        return BinlogOffset(*self.server.master_status())

    # --- workloads ---------------------------------------------------------------------------

    def single_row(self, n: int) -> tuple[BinlogOffset, BinlogOffset, int]:
        """n autocommit INSERTs, one transaction each (a server-side loop: the client is not the limit)."""
        self.server.execute("FLUSH BINARY LOGS")
        start, a = self.offset(), self.next_id
        self.server.execute(
            f"BEGIN NOT ATOMIC FOR i IN {a}..{a + n - 1} DO INSERT INTO events VALUES ({row_sql('i')}); END FOR; END",
            database="bench")
        self.next_id += n
        return start, self.offset(), n

    def multi_row(self, transactions: int, rows: int) -> tuple[BinlogOffset, BinlogOffset, int]:
        self.server.execute("FLUSH BINARY LOGS")
        start = self.offset()
        for _ in range(transactions):
            a = self.next_id
            self.server.execute(f"INSERT INTO events SELECT {row_sql('seq')} "
                                f"FROM seq_{a}_to_{a + rows - 1}", database="bench")
            self.next_id += rows
        return start, self.offset(), transactions * rows

    # --- readers -----------------------------------------------------------------------------

    def mariadb_binlog(self, start: BinlogOffset, end: BinlogOffset) -> float:
        assert start.file == end.file
        path = self.server.datadir / start.file
        t = time.perf_counter()
        with open(os.devnull, "wb") as devnull:
            subprocess.run([_find("mariadb-binlog"), "--no-defaults", "-v", f"--start-position={start.position}",
                            f"--stop-position={end.position}", str(path)], stdout=devnull, check=True)
        return time.perf_counter() - t

    def library(self, start: BinlogOffset, end: BinlogOffset, expect: int) -> float:
        t = time.perf_counter()
        n = 0
        with BinlogReader(self.source, 5450, start, stop=end, tables=[self.table]) as reader:
            for ev in reader:
                n += isinstance(ev, RowChange)
        took = time.perf_counter() - t
        assert n == expect, f"library read {n} rows, expected {expect}"
        return took

    def _config(self, sink: SinkConfig, start: BinlogOffset, max_events: int, trigger_s: float) -> PipelineConfig:
        self.runs += 1
        return PipelineConfig(
            name=f"bench{self.runs}", source=self.source, include=(str(self.table),),
            state_location=str(self.work / f"state{self.runs}"), sink=sink,
            startup_mode="specific-offset", startup_offset={"file": start.file, "position": start.position},
            stream=StreamOptions(max_events_per_batch=max_events, heartbeat_s=1.0, trigger_interval_s=trigger_s))

    def changelog_lines(self, root: Path) -> int:
        n = 0
        for f in glob.glob(str(root / "bench" / "events" / "stream" / "*.jsonl")):
            with open(f, "rb") as fh:
                n += sum(1 for _ in fh)
        return n

    @staticmethod
    def delta_rows(root: Path) -> int:
        from deltalake import DeltaTable

        try:
            return DeltaTable(str(root / "bench" / "events")).to_pyarrow_dataset().count_rows()
        except Exception:
            return 0

    def stream(self, kind: str, start: BinlogOffset, expect: int, max_events: int = 50_000) -> float:
        root = self.work / f"{kind}{self.runs + 1}"
        sink_cfg = SinkConfig(kind, {"root": str(root)})
        config = self._config(sink_cfg, start, max_events, trigger_s=0.05)
        sink = build_sink(sink_cfg)
        sink.prepare([self.schema])
        count = (lambda: self.changelog_lines(root)) if kind == "changelog" else (lambda: self.delta_rows(root))
        t = time.perf_counter()
        query = start_stream(self.spark, config, sink, [self.schema], password=self.source.password)
        try:
            while count() < expect:
                if query.exception() is not None:
                    raise RuntimeError(query.exception())
                if time.perf_counter() - t > 600:
                    raise TimeoutError(f"{kind}: {count()} of {expect} rows after 600 s")
                time.sleep(0.05)
            took = time.perf_counter() - t
        finally:
            query.stop()
        got = count()
        assert got == expect, f"{kind} sink has {got} rows, expected {expect}"
        return took

    def latency(self, rate: int, seconds: float) -> list[float]:
        """Commit-to-visible latency at a steady ``rate`` transactions/s into a live changelog stream."""
        root = self.work / "latency"
        sink_cfg = SinkConfig("changelog", {"root": str(root)})
        config = self._config(sink_cfg, self.offset(), 50_000, trigger_s=0.05)
        sink = build_sink(sink_cfg)
        sink.prepare([self.schema])
        query = start_stream(self.spark, config, sink, [self.schema], password=self.source.password)
        try:
            time.sleep(5)  # warm: first micro-batches, Python workers
            conn = self.server.connect("bench")
            total = int(rate * seconds)
            t0 = time.perf_counter()
            with conn.cursor() as cur:
                for k in range(total):
                    due = t0 + k / rate
                    pause = due - time.perf_counter()
                    if pause > 0:
                        time.sleep(pause)
                    i = self.next_id
                    self.next_id += 1
                    cur.execute("INSERT INTO events VALUES (%s, 'lat', 0, NOW(3), '', %s)", (i, time.time()))
            conn.close()
            achieved = total / (time.perf_counter() - t0)
            deadline = time.time() + 120
            while self.changelog_lines(root) < total and time.time() < deadline:
                time.sleep(0.1)
        finally:
            query.stop()
        lat = []
        for f in glob.glob(str(root / "bench" / "events" / "stream" / "*.jsonl")):
            visible = os.stat(f).st_mtime
            with open(f) as fh:
                for line in fh:
                    lat.append(visible - json.loads(line)["data"]["sent_at"])
        print(f"latency: {len(lat)} rows at {achieved:.0f} tx/s achieved", flush=True)
        return sorted(lat)


def pct(xs: list[float], p: float) -> float:
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=30_000, help="rows per workload")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--latency-rate", type=int, default=500)
    ap.add_argument("--latency-seconds", type=float, default=20)
    args = ap.parse_args()
    work = ROOT / "bench" / ".work" / "stream"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    b = Bench(work)
    results: dict[str, dict[str, float]] = {}
    try:
        # Each workload is measured before the next is written: the stream reads to the head.
        workloads = {"single-row": lambda: b.single_row(args.rows),
                     "1000-row": lambda: b.multi_row(max(1, args.rows // 1000), 1000)}
        for name, make in workloads.items():
            start, end, n = make()
            times: dict[str, list[float]] = {"mariadb-binlog": [], "library": [], "stream->changelog": [],
                                             "stream->delta": []}
            for _ in range(args.repeats):
                times["mariadb-binlog"].append(b.mariadb_binlog(start, end))
                times["library"].append(b.library(start, end, n))
                times["stream->changelog"].append(b.stream("changelog", start, n))
                times["stream->delta"].append(b.stream("delta", start, n))
            results[name] = {k: n / statistics.median(v) for k, v in times.items()}
            print(f"{name} ({n} rows, {args.repeats} runs, medians):", flush=True)
            for k, v in results[name].items():
                print(f"  {k:>18}: {v:>10,.0f} rows/s  ({v / results[name]['mariadb-binlog']:.3f} of mariadb-binlog)",
                      flush=True)
        lat = b.latency(args.latency_rate, args.latency_seconds)
        p50, p99 = pct(lat, 50), pct(lat, 99)
        print(f"commit-to-visible latency at {args.latency_rate} tx/s: p50={p50:.3f}s p99={p99:.3f}s", flush=True)
        single = results["single-row"]
        print(f"rows_per_s={int(single['stream->changelog'])} "
              f"ratio_vs_mariadb_binlog={single['stream->changelog'] / single['mariadb-binlog']:.3f} "
              f"p99_latency_s={p99:.3f}")
    finally:
        b.spark.stop()
        b.server.stop()


if __name__ == "__main__":
    main()
