"""The CPU a binlog catch-up cannot do without, part by part, against what a target rate allows.

Why: issue 17 asks the stream to catch up a 2,000,000-change backlog (``--rows 4000000`` of
``stream_throughput.py``) at 200,000 changes/s: 10 s, which on this machine's 2 cores is 20
core-seconds for everything -- the server, the decoding, the sink's work and Spark's. This
script measures, on the same workload, the parts that any run of the stream has to do, each
alone (one at a time, outside Spark, so nothing competes), and adds them up per sink:

  dump       the server sending the range to a reader that keeps no table (every event is
             dropped at its header: the server's share of any read of the range);
  walk       the server naming transaction starts for the catch-up plan, as the stream plans
             it (``cdc/binlog/catchup.plan_batch`` micro-batch after micro-batch, default options:
             ranges decoded in parallel must start at transaction starts, and MariaDB 10.11 has
             no index to find them: it walks the events);
  decode     the columnar decoder turning the range into Arrow batches (one process);
  decode x2  the same in two processes at once, the range cut in two where the plan cuts it
             (what catch-up x2 does: two decoders and the server's two dump threads share
             the two cores; not in the sums, which take the one-process figure);
  changelog  the changelog task's work beyond decoding: lines encoded and written
             (``range_items`` + ``DirectWrite.write_range``, minus ``decode``);
  delta      the Delta task's work beyond decoding: the last change per key
             (``LastChange.write_range``, minus ``decode``);
  runner     a new Python process importing PySpark's streaming source runner, which Spark
             starts at every query start before the first offset can be asked (wall time).

Then one warm stream run per sink (catch-up x2, as ``stream_throughput.py`` runs it) gives
Spark's share: the CPU of its JVM and of the driver process. The floor is the parts above plus
that share; left out are the Python workers' own costs beyond the parts (the runner's imports,
the task framework) and the extra of two decoders sharing the cores with the server, so it is
a floor. ``max_rate`` is the rate a run could reach if the floor's work kept both cores busy
all the time and the only serial part were the runner's start: ``changes / (floor / cores +
runner)``. Medians of ``--repeats``.

Last line:
    floor_changelog_core_s=<f> floor_delta_core_s=<f> budget_core_s=<f> max_rate_changelog=<int> max_rate_delta=<int>
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from stream_throughput import Bench, cpu_line, decode_counted
from workloads import cpu_seconds

from airflow_provider_mysqlcdc.cdc.binlog import catchup
from airflow_provider_mysqlcdc.cdc.binlog.fast import ChangeBatch, FastBinlogReader
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.pipeline import StreamOptions
from airflow_provider_mysqlcdc.spark.runtime import pyspark_bytecode
from airflow_provider_mysqlcdc.spark.sinks.changelog.direct import DirectWrite
from airflow_provider_mysqlcdc.spark.sinks.last_change import LastChange
from airflow_provider_mysqlcdc.spark.stream.offsets.stream_offset import StreamOffset
from airflow_provider_mysqlcdc.spark.stream.planning.batch_planning import MIN_RANGE_BYTES
from airflow_provider_mysqlcdc.spark.stream.reading.binlog_read import range_items
from airflow_provider_mysqlcdc.spark.stream.reading.change_rows import SourceLayout
from airflow_provider_mysqlcdc.spark.stream.reading.layout_book import LayoutBook

ROOT = Path(__file__).resolve().parents[1]

TABLE = TableId("bench", "events")
NOT_CAPTURED = TableId("bench", "no_such_table")


class Floor:
    """The parts of the work, each alone, on ``stream_throughput.Bench``'s server and workload."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.work = bench.work
        self.source, self.schema = bench.source, bench.schema
        self.start, self.end, self.changes = bench.start, bench.end, bench.changes

    def measure(self, fn: Callable[[], object]) -> tuple[float, float]:
        """(this process's CPU seconds, the server's CPU seconds) of one call."""
        server0, own0 = cpu_seconds().get("mariadbd", 0.0), time.process_time()
        fn()
        return time.process_time() - own0, cpu_seconds().get("mariadbd", 0.0) - server0

    def dump(self) -> None:
        with FastBinlogReader(self.source, 7001, self.start, self.end, tables=[NOT_CAPTURED]) as r:
            for _ in r.batches():
                pass

    def walk(self) -> None:
        """Plan the whole range as the stream's driver does: micro-batch ends and cuts."""
        options = StreamOptions()
        conn = self.source.connect()
        try:
            files = catchup.BinlogFiles.read(conn, self.end)
            at = self.start
            while at < self.end:
                end, _cuts = catchup.plan_batch(
                    conn,
                    files,
                    at,
                    self.end,
                    options.catchup_batch_bytes,
                    options.catchup_parallelism,
                    MIN_RANGE_BYTES,
                    tail_bytes=options.catchup_min_bytes,
                )
                if end <= at:
                    raise AssertionError(f"the plan did not move from {at}")
                at = end
        finally:
            conn.close()

    def decode(self) -> None:
        n = 0
        with FastBinlogReader(self.source, 7002, self.start, self.end, tables=[TABLE]) as r:
            for item in r.batches():
                if isinstance(item, ChangeBatch):
                    n += item.num_rows
        if n != self.changes:
            raise AssertionError(f"decoded {n} changes, expected {self.changes}")

    def decode_parallel(self, pool: multiprocessing.pool.Pool) -> float:
        """Decode the range in two processes at once; returns their CPU seconds."""
        results = pool.map(decode_counted, self.bench.decoder_jobs(2, 7004))
        if sum(n for n, _ in results) != self.changes:
            raise AssertionError("the two parts did not decode every change")
        return sum(cpu for _, cpu in results)

    def _items(self):
        layout = SourceLayout([self.schema], "UTC")
        return range_items(
            LayoutBook(layout, "UTC"),
            self.source,
            [self.schema],
            [],
            StreamOffset.boundary(self.start),
            StreamOffset.boundary(self.end),
            7003,
            self.start.file_index,
            60.0,
        )

    def changelog(self) -> None:
        out = self.work / "changelog"
        shutil.rmtree(out, ignore_errors=True)
        records = DirectWrite(str(out)).write_range(self._items(), 1, 0)
        lines = sum(records.column("lines").to_pylist())
        if lines != 2 * self.changes:  # every UPDATE is a -U and a +U line
            raise AssertionError(f"wrote {lines} lines, expected {2 * self.changes}")

    def delta(self) -> None:
        records = LastChange().write_range(self._items(), 1, 0)
        if sum(records.column("changes").to_pylist()) != self.changes:
            raise AssertionError("the last-change reduction did not see every change")


def runner_start_s() -> float:
    """Wall seconds of a new Python process importing PySpark's streaming source runner with
    the path Spark gives it (its zips first)."""
    home = pyspark_bytecode.spark_home()
    lib = home / "python" / "lib"
    path = [lib / "pyspark.zip", *lib.glob("py4j-*-src.zip")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in path))
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import pyspark.sql.streaming.python_streaming_source_runner"],
        env=env,
        check=True,
        cwd="/",
    )
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4_000_000, help="UPDATE statements in the workload (both tables)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--target", type=int, default=200_000, help="the changes/s the budget is for")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    work = ROOT / "bench" / ".work" / "stream-floor"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    bench = Bench(work, args.rows)
    f = Floor(bench)
    try:
        parts_fn = (
            ("dump", f.dump),
            ("walk", f.walk),
            ("decode", f.decode),
            ("changelog", f.changelog),
            ("delta", f.delta),
        )
        f.delta()  # warm-up: imports, the table's generated decoder, numpy's first calls
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in parts_fn}
        for _ in range(args.repeats):  # interleaved, so a drift of the shared machine hits every part alike
            for name, fn in parts_fn:
                runs[name].append(f.measure(fn))
        med = {
            name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
            for name, rs in runs.items()
        }
        for name, (own, server) in med.items():
            print(
                f"  {name:>10}: reader process {own:6.2f} core-s, server {server:6.2f} core-s "
                f"(median of {args.repeats})",
                flush=True,
            )
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            pool.map(decode_counted, [(f.source, 7004, f.start, f.start)] * 2)  # start both processes
            par: list[tuple[float, float]] = []
            for _ in range(args.repeats):
                server0, t = cpu_seconds().get("mariadbd", 0.0), time.perf_counter()
                cpu = f.decode_parallel(pool)
                par.append((cpu, cpu_seconds().get("mariadbd", 0.0) - server0, time.perf_counter() - t))
        print(
            f"  {'decode x2':>10}: reader processes {statistics.median(p[0] for p in par):6.2f} core-s, server "
            f"{statistics.median(p[1] for p in par):6.2f} core-s, {statistics.median(p[2] for p in par):.2f} s "
            f"(median of {args.repeats}; one process: {med['decode'][0]:.2f} + {med['decode'][1]:.2f})",
            flush=True,
        )
        runner = statistics.median(runner_start_s() for _ in range(max(3, args.repeats)))
        print(f"  {'runner':>10}: {runner:.2f} s to import PySpark's streaming source runner", flush=True)
        spark: dict[str, float] = {}
        for sink in ("changelog", "delta"):
            bench.stream(sink, 2)  # warm: the JVM compiles its hot paths, Python workers start
            bench.cpu.clear()
            for _ in range(args.repeats):
                bench.stream(sink, 2)
            wall = statistics.median(c["wall"] for c in bench.cpu)
            jvm = statistics.median(c.get("jvm", 0.0) for c in bench.cpu)
            driver = statistics.median(c.get("driver (python)", 0.0) for c in bench.cpu)
            spark[sink] = jvm + driver
            print(
                f"  stream -> {sink}, catch-up x2: {f.changes / wall:,.0f} changes/s ({wall:.2f} s); "
                f"JVM {jvm:.2f} + driver {driver:.2f} core-s; {cpu_line(bench.cpu)}",
                flush=True,
            )
        dump_server, walk_server, decode = med["dump"][1], med["walk"][1], med["decode"][0]
        parts = {"changelog": max(0.0, med["changelog"][0] - decode), "delta": max(0.0, med["delta"][0] - decode)}
        budget = cores * f.changes / args.target
        floors, rates = {}, {}
        for sink, work_s in parts.items():
            floors[sink] = dump_server + walk_server + decode + work_s + spark[sink]
            rates[sink] = f.changes / (floors[sink] / cores + runner)
            print(
                f"{sink}: server dump {dump_server:.2f} + plan walk {walk_server:.2f} + decode {decode:.2f} "
                f"+ sink work {work_s:.2f} + Spark {spark[sink]:.2f} = {floors[sink]:.2f} core-s; "
                f"{args.target:,} changes/s allows {budget:.2f} on {cores} cores; "
                f"at most {rates[sink]:,.0f} changes/s",
                flush=True,
            )
        print(
            f"floor_changelog_core_s={floors['changelog']:.2f} floor_delta_core_s={floors['delta']:.2f} "
            f"budget_core_s={budget:.2f} max_rate_changelog={int(rates['changelog'])} "
            f"max_rate_delta={int(rates['delta'])}"
        )
    finally:
        bench.spark.stop()
        bench.server.stop()


if __name__ == "__main__":
    main()
