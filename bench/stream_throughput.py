"""Binlog stream throughput and latency, against baselines measured in the same run.

Workload (bench/workloads.py, issue 5): ``--rows`` (default 400,000) autocommit single-row
UPDATEs alternating between the captured table ``bench.events`` and an uncaptured one.
Rates are changes of the captured table per second (half the statements). On that one
binlog range it times, median of ``--repeats``, each repeat right after a run of the
``mariadb-binlog`` baseline (ratios are the median of those paired ratios):

  * ``mariadb-binlog -v --table=events`` decoding the range from the binlog file (the C baseline);
  * the old library path: python-mysql-replication through the engine's ``BinlogReader``
    (``--library-repeats``, default 1: it is slow);
  * the new decoder alone: ``FastBinlogReader.batches()`` in one process;
  * the decoder with parallel catch-up: the range cut in 2 at a transaction start the server
    names (``cdc/binlog/catchup.py``), each half decoded in its own process with its own server id;
  * the stream job end to end (Structured Streaming, source -> typed change rows -> sink),
    from ``start_stream`` until the sink holds every change, with ``catchup_parallelism`` 1
    and 2 into the changelog sink, and 2 into the Delta and the Iceberg sinks (``--sinks``).
    Delta and Iceberg take turns: each repeat is one ``mariadb-binlog`` run, then a stream into
    each, the order reversed every other repeat; Iceberg's ratio to Delta is the median of the
    repeats' pairs. Both tables are compared with the source table row by row at the end of
    every run (Delta through deltalake, Iceberg through pyiceberg). The Spark session is warmed
    by two streams over the whole range (Python workers are reused, the JVM has compiled its
    hot paths), so the figures hold query start and every micro-batch, not JVM start; the
    rate inside micro-batches (changes over the summed ``triggerExecution`` of those with
    rows) is printed below each.

Then it runs a steady ``--latency-rate`` transactions/s into a live stream (changelog sink)
and reports commit-to-visible latency: from the client's commit to the sink file holding
the row. With iceberg in ``--sinks``, the same into a live Iceberg stream: from the client's
commit to a new snapshot of the table holding the row, as a reader polling the catalog every
20 ms (in a process of its own, through pyiceberg) first sees it.

Last, schema changes under load: a steady ``--latency-rate`` tx/s writer on the captured table
into a live stream per sink of ``--ddl-sinks`` (changelog and Delta), ``--ddl-rounds`` times
``ALTER TABLE events ADD COLUMN <new> VARCHAR(32) NULL`` in the writer's own sequence, every
later UPDATE giving the new column a value. It reports the time from the ALTER's commit (the
client's clock when ``execute`` returns) to the sink first holding a row with a non-null
value in that column (changelog: a published line whose ``data`` has it; Delta: the table's
schema has the column and a row has it non-null), median and max per sink. The Delta line
also says when the column alone reached the table's schema.

The stream's query start includes Spark starting its driver-side Python process for the
source, which imports PySpark from ``$SPARK_HOME/python/lib/pyspark.zip``. The first line says
whether that zip holds bytecode (``make`` adds it; without it each query start compiles PySpark,
about 0.5 s more per stream run here: see ``spark/runtime/pyspark_bytecode.py``).

Below each stream run: the CPU seconds the server, the JVM, Spark's Python workers and the
driver used (median per run), against the core-seconds the run's wall time offered.

Last line (end to end into the changelog sink with the default catchup_parallelism, 2; the
DDL-to-visible time is the changelog sink's median, or nan with ``--ddl-rounds 0``; the
iceberg_* fields with iceberg in ``--sinks``):
    rows_per_s=<int> ratio_vs_mariadb_binlog=<float> p99_latency_s=<float> ddl_to_visible_s=<float>
    [iceberg_rows_per_s=<int> ratio_iceberg_vs_delta=<float> iceberg_p99_latency_s=<float>]
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import threading
import time
from pathlib import Path

from workloads import KEYS, binlog_bytes, binlog_files, cpu_seconds, load, timed

from airflow_provider_mysqlcdc.cdc.binlog import catchup
from airflow_provider_mysqlcdc.cdc.binlog.fast import ChangeBatch, FastBinlogReader
from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader
from airflow_provider_mysqlcdc.cdc.events import RowChange
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig
from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
from airflow_provider_mysqlcdc.spark.runtime import pyspark_bytecode
from airflow_provider_mysqlcdc.spark.runtime.session import light_jit_for_next_driver
from airflow_provider_mysqlcdc.spark.sinks.factory import build_sink
from airflow_provider_mysqlcdc.spark.stream.query import start_stream
from mysqlcdc_harness.mariadb import MariaDB, _find
from mysqlcdc_harness.spark import local_spark

ROOT = Path(__file__).resolve().parents[1]

TABLE = TableId("bench", "events")


def decode_counted(args: tuple[SourceConfig, int, BinlogOffset, BinlogOffset]) -> tuple[int, float]:
    """(changes, this process's CPU seconds) of decoding one range: a pool worker's function
    (``stream_floor.py`` adds up the CPU of parallel parts)."""
    source, server_id, start, end = args
    cpu0, n = time.process_time(), 0
    with FastBinlogReader(source, server_id, start, end, tables=[TABLE]) as r:
        for item in r.batches():
            if isinstance(item, ChangeBatch):
                n += item.num_rows
    return n, time.process_time() - cpu0


def _decode_range(args: tuple[SourceConfig, int, BinlogOffset, BinlogOffset]) -> int:
    return decode_counted(args)[0]


class Bench:
    def __init__(self, work: Path, rows: int) -> None:
        self.work = work
        self.server = MariaDB(
            base_dir=work / "mariadb", server_id=1, extra_args=("--max-binlog-size=1073741824",)
        ).start()
        t0 = time.perf_counter()
        try:
            self.start, self.end, self.changes = load(self.server, rows)
        except BaseException:
            self.server.stop()  # main's clean-up only covers a Bench that was built
            raise
        print(
            f"workload: {rows} single-row UPDATEs ({self.changes} on the captured table), "
            f"{binlog_bytes(self.server, self.start, self.end):,} binlog bytes "
            f"({len(binlog_files(self.server, self.start, self.end))} file(s)), written in {time.perf_counter() - t0:.1f}s",
            flush=True,
        )
        self.source = self.server.source_config(server_id_range="7000-7099")
        conn = self.source.connect()
        self.schema = read_table_schema(conn, TABLE)
        conn.close()
        # as the stream job starts its local Spark for the sinks run here (all write directly from
        # the source's tasks): the driver JVM without C2 (spark/runtime/session.py)
        light_jit_for_next_driver()
        self.spark = local_spark("mysqlcdc-bench-stream", memory="4g")
        self.spark.sparkContext.setLogLevel("ERROR")
        self.runs = 0
        self.in_batches: list[float] = []  # per stream run: changes / seconds spent in micro-batches
        self.cpu: list[dict[str, float]] = []  # per stream run: CPU seconds by process kind, and wall

    # --- baselines and decoders ---------------------------------------------------------------

    def mariadb_binlog(self) -> int:
        paths = [str(self.server.datadir / f) for f in binlog_files(self.server, self.start, self.end)]
        with open(os.devnull, "wb") as devnull:
            subprocess.run(
                [
                    _find("mariadb-binlog"),
                    "--no-defaults",
                    "-v",
                    f"--start-position={self.start.position}",
                    f"--stop-position={self.end.position}",
                    "--table=events",
                    *paths,
                ],
                stdout=devnull,
                check=True,
            )
        return self.changes

    def library(self) -> int:
        n = 0
        with BinlogReader(self.source, 7090, self.start, stop=self.end, tables=[TABLE]) as reader:
            for ev in reader:
                n += isinstance(ev, RowChange)
        return n

    def decoder(self) -> int:
        return _decode_range((self.source, 7091, self.start, self.end))

    def decoder_jobs(self, parts: int, first_server_id: int) -> list[tuple]:
        """The range cut where the server says transactions start, as one decode job per part."""
        conn = self.source.connect()
        try:
            files = catchup.BinlogFiles.read(conn, self.end)
            cuts = catchup.split_range(conn, files, self.start, self.end, parts, 1 << 20)
        finally:
            conn.close()
        bounds = [self.start, *cuts, self.end]
        return [(self.source, first_server_id + i, a, b) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]

    def decoder_parallel(self, pool: multiprocessing.pool.Pool, parts: int = 2) -> int:
        """Cut the range where the server says transactions start, decode the parts in parallel."""
        return sum(pool.map(_decode_range, self.decoder_jobs(parts, 7092)))

    # --- the stream job ---------------------------------------------------------------------------

    def _config(self, sink: SinkConfig, start: BinlogOffset, parallelism: int) -> PipelineConfig:
        self.runs += 1
        return PipelineConfig(
            name=f"bench{self.runs}",
            source=self.source,
            include=(str(TABLE),),
            state_location=str(self.work / f"state{self.runs}"),
            sink=sink,
            startup_mode="specific-offset",
            startup_offset={"file": start.file, "position": start.position},
            stream=StreamOptions(heartbeat_s=1.0, trigger_interval_s=0.05, catchup_parallelism=parallelism),
        )

    @staticmethod
    def changelog_lines(root: Path) -> int:
        n = 0
        for f in glob.glob(str(root / "bench" / "events" / "stream" / "*.jsonl")):
            with open(f, "rb") as fh:
                n += sum(1 for _ in fh)
        return n

    def stream(
        self,
        kind: str,
        parallelism: int,
        start: BinlogOffset | None = None,
        end: BinlogOffset | None = None,
        expect: int | None = None,
    ) -> int:
        """Stream ``[start, end)`` into a fresh sink; returns the changes it holds at the end."""
        start, end = start or self.start, end or self.end
        expect = self.changes if expect is None else expect
        root = self.work / f"{kind}{self.runs + 1}"
        sink_cfg = SinkConfig(kind, {"root": str(root)})
        config = self._config(sink_cfg, start, parallelism)
        sink = build_sink(sink_cfg)
        sink.prepare([self.schema])
        cpu0 = cpu_seconds()
        t = time.perf_counter()
        query = start_stream(self.spark, config, sink, [self.schema], password=self.source.password)
        try:
            while not self._reached(query, end):
                if query.exception() is not None:
                    raise RuntimeError(query.exception())
                if time.perf_counter() - t > 900:
                    raise TimeoutError(f"{kind}: not done after 900 s")
                time.sleep(0.02)
            progress = [p for p in query.recentProgress if p["numInputRows"]]
            busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
            input_rows = sum(p["numInputRows"] for p in progress)
            wall = time.perf_counter() - t
            cpu1 = cpu_seconds()
            self.cpu.append({"wall": wall, **{k: cpu1[k] - cpu0.get(k, 0.0) for k in cpu1}})
        finally:
            query.stop()
        if kind == "changelog":
            got = self.changelog_lines(root) // 2  # every UPDATE is a -U and a +U line
        elif kind == "iceberg":
            got = self._iceberg_check(root, expect)
        else:
            got = self._delta_check(root, expect)
        if sink.direct_write() is not None:
            input_rows = got  # the source's tasks did the sink's work: Spark's rows are their records
        self.in_batches.append(input_rows / busy if busy else 0.0)
        return got

    @staticmethod
    def _reached(query, end: BinlogOffset) -> bool:
        """The last completed micro-batch ended at or after ``end``."""
        from airflow_provider_mysqlcdc.spark.stream.offsets.stream_offset import StreamOffset

        progress = query.lastProgress
        if not progress or not progress.get("sources"):
            return False
        offset = progress["sources"][0].get("endOffset")
        if isinstance(offset, str):
            offset = json.loads(offset)
        return bool(offset) and StreamOffset.from_dict(offset).at >= end

    def _delta_check(self, root: Path, expect: int) -> int:
        """The Delta table equals the source table; then it holds all ``expect`` changes."""
        from deltalake import DeltaTable

        got = DeltaTable(str(root / "bench" / "events")).to_pyarrow_table(columns=["id", "v"]).to_pydict()
        want = dict(self.server.query("SELECT id, v FROM events", database="bench"))
        assert dict(zip(got["id"], got["v"])) == want, "the Delta sink differs from the source table"
        return expect

    def _iceberg_check(self, root: Path, expect: int) -> int:
        """The Iceberg table equals the source table (row by row, read with pyiceberg); then it
        holds all ``expect`` changes."""
        from airflow_provider_mysqlcdc.spark.sinks.iceberg.sink import IcebergSink

        table = IcebergSink(str(root)).open_table(TABLE)
        got = table.scan(selected_fields=("id", "v")).to_arrow().to_pydict()
        want = dict(self.server.query("SELECT id, v FROM events", database="bench"))
        assert len(got["id"]) == len(want), f"the Iceberg sink has {len(got['id'])} rows, the source {len(want)}"
        assert dict(zip(got["id"], got["v"])) == want, "the Iceberg sink differs from the source table"
        return expect

    def latency_iceberg(self, rate: int, seconds: float) -> tuple[list[float], int, int]:
        """Commit-to-visible latency at a steady ``rate`` transactions/s into a live Iceberg stream:
        from the client's commit to a new snapshot of the table holding the row, as a reader
        polling the catalog every 20 ms sees it (``_iceberg_poller``, a process of its own so its
        reads do not take this process's GIL from the stream's driver). A value overwritten by a
        later UPDATE of its row before any snapshot held it never becomes visible: counted apart.
        Returns the latencies, the values written, the values never visible."""
        root = self.work / "latency-iceberg"
        sink_cfg = SinkConfig("iceberg", {"root": str(root)})
        config = self._config(sink_cfg, BinlogOffset(*self.server.master_status()), 1)
        sink = build_sink(sink_cfg)
        sink.prepare([self.schema])
        ctx = multiprocessing.get_context("spawn")
        halt = ctx.Event()
        parent, child = ctx.Pipe()
        poller = ctx.Process(target=_iceberg_poller, args=(str(root), halt, child), daemon=True)
        query = start_stream(self.spark, config, sink, [self.schema], password=self.source.password)
        written: dict[str, float] = {}
        last: dict[int, str] = {}
        try:
            poller.start()
            time.sleep(5)  # the first micro-batches
            # the poller polls before the first write (its start -- a spawned process importing
            # pyiceberg -- took longer than those 5 s on a loaded machine, and its delay then read
            # as the sink's latency)
            if not parent.poll(120) or parent.recv() != "ready":
                raise TimeoutError("iceberg latency: the poller did not start")
            conn = self.server.connect("bench")
            total = int(rate * seconds)
            t0 = time.perf_counter()
            with conn.cursor() as cur:
                for k in range(total):
                    due = t0 + k / rate
                    pause = due - time.perf_counter()
                    if pause > 0:
                        time.sleep(pause)
                    v, key = repr(time.time()), k % KEYS + 1
                    cur.execute("UPDATE events SET v = %s WHERE id = %s", (v, key))
                    written[v] = float(v)
                    last[key] = v
            conn.close()
            achieved = total / (time.perf_counter() - t0)
            table = IcebergProbe(root)
            deadline = time.time() + 120
            while time.time() < deadline:
                if query.exception() is not None:
                    raise RuntimeError(query.exception())
                if table.values() == last:
                    break
                time.sleep(0.25)
            else:
                raise TimeoutError("iceberg latency: the table does not hold the last values 120 s after the writes")
            time.sleep(0.2)  # the poller's next round sees the last snapshot too
        finally:
            halt.set()
            seen = parent.recv() if poller.is_alive() or parent.poll(5) else {}
            poller.join(10)
            query.stop()
        lat = sorted(at - written[v] for v, at in seen.items() if v in written)
        missed = len(written) - len(lat)
        # by when the change was committed: does the latency grow with the table's snapshots?
        t_first = min(written.values())
        windows: dict[int, list[float]] = {}
        for v, at in seen.items():
            if v in written:
                windows.setdefault(int((written[v] - t_first) // 5), []).append(at - written[v])
        print(
            "latency (iceberg) per 5 s of commits, p50/p99/max: "
            + ", ".join(
                f"{5 * w}-{5 * w + 5}s {pct(sorted(x), 50):.2f}/{pct(sorted(x), 99):.2f}/{max(x):.2f}"
                for w, x in sorted(windows.items())
            ),
            flush=True,
        )
        print(
            f"latency (iceberg): {len(lat)} changes visible at {achieved:.0f} tx/s achieved "
            f"({missed} overwritten before a snapshot held them)",
            flush=True,
        )
        return lat, len(written), missed

    def latency(self, rate: int, seconds: float) -> list[float]:
        """Commit-to-visible latency at a steady ``rate`` transactions/s into a live changelog stream."""
        root = self.work / "latency"
        sink_cfg = SinkConfig("changelog", {"root": str(root)})
        config = self._config(sink_cfg, BinlogOffset(*self.server.master_status()), 1)
        sink = build_sink(sink_cfg)
        sink.prepare([self.schema])
        query = start_stream(self.spark, config, sink, [self.schema], password=self.source.password)
        try:
            time.sleep(5)  # the first micro-batches
            conn = self.server.connect("bench")
            total = int(rate * seconds)
            t0 = time.perf_counter()
            with conn.cursor() as cur:
                for k in range(total):
                    due = t0 + k / rate
                    pause = due - time.perf_counter()
                    if pause > 0:
                        time.sleep(pause)
                    cur.execute("UPDATE events SET v = %s WHERE id = %s", (repr(time.time()), k % KEYS + 1))
            conn.close()
            achieved = total / (time.perf_counter() - t0)
            deadline = time.time() + 120
            while self.changelog_lines(root) < 2 * total and time.time() < deadline:
                time.sleep(0.1)
        finally:
            query.stop()
        lat = []
        for f in glob.glob(str(root / "bench" / "events" / "stream" / "*.jsonl")):
            visible = os.stat(f).st_mtime
            with open(f) as fh:
                for line in fh:
                    rec = json.loads(line)
                    if rec["op"] == "+U":
                        lat.append(visible - float(rec["data"]["v"]))
        print(f"latency: {len(lat)} changes at {achieved:.0f} tx/s achieved", flush=True)
        return sorted(lat)

    def ddl_latency(
        self, kind: str, rate: int, rounds: int, settle_s: float = 2.0, timeout_s: float = 60.0
    ) -> tuple[list[float], list[float]]:
        """DDL commit to the first row of the new shape visible in a live stream's ``kind`` sink, at a
        steady ``rate`` tx/s: ``rounds`` ADD COLUMNs, ``settle_s`` of plain load before each. Returns
        the latencies and (Delta) those of the column alone reaching the table's schema."""
        conn = self.source.connect()
        schema = read_table_schema(conn, TABLE)  # with the columns earlier sinks' rounds added
        conn.close()
        root = self.work / f"ddl-{kind}"
        sink_cfg = SinkConfig(kind, {"root": str(root)})
        config = self._config(sink_cfg, BinlogOffset(*self.server.master_status()), 1)
        sink = build_sink(sink_cfg)
        sink.prepare([schema])
        probe = ChangelogProbe(root) if kind == "changelog" else DeltaProbe(root)
        query = start_stream(self.spark, config, sink, [schema], password=self.source.password)
        writer = SteadyWriter(self.server, rate)
        lat: list[float] = []
        in_schema: list[float] = []
        try:
            time.sleep(5)  # the first micro-batches
            writer.start()
            for i in range(rounds):
                time.sleep(settle_s)
                column = f"ddl_{kind}_{i + 1}"
                committed = writer.add_column(column)
                deadline = time.time() + timeout_s
                seen_schema = None
                while True:
                    if query.exception() is not None:
                        raise RuntimeError(query.exception())
                    if writer.error is not None:
                        raise RuntimeError(f"writer: {writer.error!r}")
                    probe.refresh()
                    if seen_schema is None and probe.has_column(column):
                        seen_schema = time.time()
                    if seen_schema is not None and probe.has_value(column):
                        lat.append(time.time() - committed)
                        in_schema.append(seen_schema - committed)
                        break
                    if time.time() > deadline:
                        raise TimeoutError(f"{kind}: no row with {column} in the sink {timeout_s:.0f} s after the DDL")
                    time.sleep(probe.poll_s)
        finally:
            writer.stop()
            query.stop()
        print(f"ddl: {kind}: {len(lat)} ADD COLUMNs under {writer.achieved:.0f} tx/s achieved", flush=True)
        return lat, in_schema


class IcebergProbe:
    """Reads the ``bench.events`` Iceberg table under ``root`` as another reader would: the catalog's
    current metadata, then the snapshot's rows."""

    def __init__(self, root: Path | str) -> None:
        from airflow_provider_mysqlcdc.spark.sinks.iceberg.sink import IcebergSink

        self.sink = IcebergSink(str(root))
        self.snapshot_id: int | None = None
        self.table = None

    def refresh(self) -> bool:
        """Whether the table has a snapshot other than the last one read (then ``values`` reads it)."""
        table = self.sink.open_table(TABLE)
        snap = table.current_snapshot()
        sid = snap.snapshot_id if snap is not None else None
        if sid == self.snapshot_id:
            return False
        self.snapshot_id, self.table = sid, table
        return True

    def values(self) -> dict[int, str]:
        """id -> v of the snapshot ``refresh`` found, or of the current one."""
        table = self.table if self.table is not None else self.sink.open_table(TABLE)
        self.table = None
        got = table.scan(selected_fields=("id", "v")).to_arrow().to_pydict()
        return dict(zip(got["id"], got["v"]))


def _iceberg_poller(root: str, halt, conn) -> None:
    """Every 20 ms: a new snapshot? Then each value of ``v`` it holds that no earlier one did is
    visible from now (the time the poll returned). Sends {value: epoch seconds} when ``halt`` is set."""
    probe = IcebergProbe(root)
    seen: dict[str, float] = {}
    known: dict[int, str] = {}
    ready = False
    while not halt.is_set():
        try:
            if probe.refresh():
                now = time.time()
                for key, v in probe.values().items():
                    if known.get(key) != v:
                        known[key] = v
                        seen.setdefault(v, now)
        except Exception:  # noqa: BLE001 -- the table before its first commit: poll again
            pass
        if not ready:
            conn.send("ready")
            ready = True
        time.sleep(0.02)
    conn.send(seen)


class SteadyWriter(threading.Thread):
    """Single-row UPDATEs of ``bench.events`` at a steady ``rate`` per second on one connection
    (autocommit); ``add_column`` runs an ALTER TABLE in that same sequence, and from then on
    every UPDATE also sets the new column."""

    def __init__(self, server: MariaDB, rate: int) -> None:
        super().__init__(name="ddl-writer", daemon=True)
        self.conn = server.connect("bench")
        self.rate = rate
        self.column: str | None = None
        self.error: BaseException | None = None
        self.achieved = 0.0
        self._request: str | None = None
        self._committed = threading.Event()
        self._committed_at = 0.0
        self._halt = threading.Event()

    def add_column(self, column: str) -> float:
        """Run the DDL at the writer's next slot; returns the client's clock once it committed."""
        self._committed.clear()
        self._request = column
        if not self._committed.wait(60):
            raise TimeoutError(f"ALTER TABLE ... ADD COLUMN {column}: not done after 60 s ({self.error!r})")
        return self._committed_at

    def run(self) -> None:
        k = 0
        t0 = time.perf_counter()
        try:
            with self.conn.cursor() as cur:
                while not self._halt.is_set():
                    pause = t0 + k / self.rate - time.perf_counter()
                    if pause > 0:
                        time.sleep(pause)
                    if self._request is not None:
                        column, self._request = self._request, None
                        cur.execute(f"ALTER TABLE events ADD COLUMN `{column}` VARCHAR(32) NULL")
                        self._committed_at = time.time()  # DDL commits implicitly: execute returned
                        self.column = column
                        self._committed.set()
                    key = k % KEYS + 1
                    if self.column is None:
                        cur.execute("UPDATE events SET v = %s WHERE id = %s", (f"w{k}", key))
                    else:
                        cur.execute(
                            f"UPDATE events SET v = %s, `{self.column}` = %s WHERE id = %s", (f"w{k}", f"c{k}", key)
                        )
                    k += 1
        except BaseException as e:  # noqa: BLE001 -- reported by the measuring loop
            self.error = e
            self._committed.set()
        finally:
            self.achieved = k / (time.perf_counter() - t0)
            self.conn.close()

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(10)


class ChangelogProbe:
    """Reads each published stream file of ``bench.events`` once (a file appears whole, by a rename)."""

    poll_s = 0.02

    def __init__(self, root: Path) -> None:
        self.dir = root / "bench" / "events" / "stream"
        self.read: set[str] = set()
        self.columns: dict[str, bool] = {}  # column -> a line with a non-null value seen

    def refresh(self) -> None:
        try:
            names = sorted(e.name for e in os.scandir(self.dir) if e.name.endswith(".jsonl") and e.is_file())
        except FileNotFoundError:
            return
        for name in names:
            if name in self.read:
                continue
            self.read.add(name)
            with open(self.dir / name, "rb") as fh:
                for line in fh:
                    if b'"ddl_' not in line:
                        continue
                    rec = json.loads(line)
                    for c, value in (rec.get("data") or {}).items():
                        if c.startswith("ddl_"):
                            self.columns[c] = self.columns.get(c, False) or value is not None

    def has_column(self, column: str) -> bool:
        return column in self.columns

    def has_value(self, column: str) -> bool:
        return self.columns.get(column, False)


class DeltaProbe:
    """Follows the Delta table's log; reads the new column only once the schema has it."""

    poll_s = 0.05

    def __init__(self, root: Path) -> None:
        from deltalake import DeltaTable

        self.table = DeltaTable(str(root / "bench" / "events"))

    def refresh(self) -> None:
        self.table.update_incremental()

    def has_column(self, column: str) -> bool:
        return column in {f.name for f in self.table.schema().fields}

    def has_value(self, column: str) -> bool:
        values = self.table.to_pyarrow_table(columns=[column]).column(column)
        return values.null_count < len(values)


def cpu_line(runs: list[dict[str, float]]) -> str:
    """Median CPU seconds per process kind over the runs, and the share of two cores they used."""
    kinds = sorted({k for r in runs for k in r} - {"wall"})
    med = {k: statistics.median(r.get(k, 0.0) for r in runs) for k in kinds}
    wall = statistics.median(r["wall"] for r in runs)
    cores = os.cpu_count() or 1
    parts = ", ".join(f"{k} {v:.1f}" for k, v in med.items())
    return f"CPU s per run: {parts}; {sum(med.values()):.1f} of {cores * wall:.1f} core-s available"


def pct(xs: list[float], p: float) -> float:
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=400_000, help="UPDATE statements in the workload (both tables)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--library-repeats", type=int, default=1)
    ap.add_argument(
        "--decoder-repeats",
        type=int,
        default=None,
        help="runs of mariadb-binlog alone and of the decoders (default --repeats; 0: skip them, the "
        "stream runs still pair each repeat with a mariadb-binlog run)",
    )
    ap.add_argument("--latency-rate", type=int, default=500)
    ap.add_argument("--latency-seconds", type=float, default=20)
    ap.add_argument(
        "--sinks",
        default="changelog,delta,iceberg",
        help="the stream runs' sinks, comma-separated: changelog (catch-up x1 and x2), delta and "
        "iceberg (x2, taking turns after each repeat's mariadb-binlog run; Iceberg's ratio to Delta "
        "is the median of the repeats' pairs); iceberg also adds its commit-to-visible latency (the "
        "changelog's is measured either way)",
    )
    ap.add_argument("--ddl-rounds", type=int, default=5, help="ADD COLUMNs per sink under load (0: skip)")
    ap.add_argument("--ddl-sinks", default="changelog,delta", help="sinks the DDL latency is measured into")
    ap.add_argument(
        "--png",
        metavar="PATH",
        default=None,
        help="also write a PNG there: changes/s (medians) of every run above -- mariadb-binlog, the "
        "library, the decoder, the stream per sink and catch-up parallelism (needs matplotlib, "
        "the 'dev' extra)",
    )
    args = ap.parse_args()
    if args.png:
        import plots

        plots.require()  # before the minutes of work, not after
    home = pyspark_bytecode.spark_home()
    print(
        "spark python zip:", pyspark_bytecode.zip_state(home / "python" / "lib" / "pyspark.zip").describe(), flush=True
    )
    work = ROOT / "bench" / ".work" / "stream"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    sinks = [k.strip() for k in args.sinks.split(",") if k.strip()]
    unknown = set(sinks) - {"changelog", "delta", "iceberg"}
    if unknown:
        ap.error(f"--sinks: unknown {sorted(unknown)} (changelog, delta, iceberg)")
    table_sinks = [k for k in ("delta", "iceberg") if k in sinks]
    decoder_repeats = args.repeats if args.decoder_repeats is None else args.decoder_repeats
    b = Bench(work, args.rows)
    n = b.changes
    rates: dict[str, float] = {}

    ratios: dict[str, float] = {}

    def paired(name: str, fn, repeats: int) -> float:
        """Median seconds of ``fn``; its ratio to mariadb-binlog is the median of the ratios to
        a baseline run just before each repeat, so drift of the shared machine over the
        script's minutes cancels out (absolute figures moved 20-30% within one run)."""
        secs, pair = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            b.mariadb_binlog()
            base = time.perf_counter() - t
            took = timed(fn, n, 1)
            secs.append(took)
            pair.append(base / took)
        ratios[name] = statistics.median(pair)
        return statistics.median(secs)

    def paired_sinks(kinds: list[str], repeats: int) -> None:
        """The table sinks on the same range, catch-up x2: each repeat one ``mariadb-binlog`` run, then
        one stream per sink, the order reversed every other repeat, so drift hits them alike. Each
        sink's ratio to mariadb-binlog, and to the first sink, is the median of the repeats' pairs."""
        secs: dict[str, list[float]] = {k: [] for k in kinds}
        pair: dict[str, list[float]] = {k: [] for k in kinds}
        inside: dict[str, list[float]] = {k: [] for k in kinds}
        cpu: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
        for r in range(repeats):
            t = time.perf_counter()
            b.mariadb_binlog()
            base = time.perf_counter() - t
            for kind in kinds if r % 2 == 0 else list(reversed(kinds)):
                b.in_batches.clear()
                b.cpu.clear()
                took = timed(lambda kind=kind: b.stream(kind, 2), n, 1)
                secs[kind].append(took)
                pair[kind].append(base / took)
                inside[kind] += b.in_batches
                cpu[kind] += b.cpu
                print(f"    ({kind} repeat {r + 1}: {n / took:,.0f} changes/s, {took:.2f} s)", flush=True)
        first = kinds[0]
        for kind in kinds:
            name = f"stream -> {kind}, catch-up x2"
            ratios[name] = statistics.median(pair[kind])
            report(name, statistics.median(secs[kind]), repeats)
            print(
                f"  {'':>34}  {statistics.median(inside[kind]):>10,.0f} changes/s inside micro-batches "
                "(without query start-up)",
                flush=True,
            )
            print(f"  {'':>34}  {cpu_line(cpu[kind])}", flush=True)
            if kind != first:
                each = [a / o for a, o in zip(secs[first], secs[kind])]
                vs[kind] = statistics.median(each)
                print(
                    f"  {'':>34}  {vs[kind]:.3f}x {first} (paired, median of {', '.join(f'{x:.3f}' for x in each)})",
                    flush=True,
                )

    vs: dict[str, float] = {}

    def report(name: str, secs: float, repeats: int) -> None:
        rates[name] = n / secs
        ratio = f"  ({ratios[name]:.2f}x mariadb-binlog, paired)" if name in ratios else ""
        print(f"  {name:>34}: {n / secs:>10,.0f} changes/s  {secs:7.2f} s, median of {repeats}{ratio}", flush=True)

    try:
        # warm the session as a long-running stream is: Python workers and the data source
        # registration are reused, and the JVM has compiled its hot paths -- which took about
        # three runs of the whole range here (a 32 MiB warm-up left the x1 runs 20-30% slower)
        for parallelism in (1, 2):
            b.stream("changelog", parallelism)
        for kind in table_sinks:  # their own imports and first commits (pyiceberg's, delta-rs') not in a figure
            b.stream(kind, 2)
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            runs = [
                ("mariadb-binlog -v", b.mariadb_binlog, decoder_repeats),
                ("library (old stream path)", b.library, args.library_repeats),
                ("decoder alone", b.decoder, decoder_repeats),
                ("decoder, parallel catch-up x2", lambda: b.decoder_parallel(pool), decoder_repeats),
            ]
            if "changelog" in sinks:
                runs += [
                    ("stream -> changelog, catch-up x1", lambda: b.stream("changelog", 1), args.repeats),
                    ("stream -> changelog, catch-up x2", lambda: b.stream("changelog", 2), args.repeats),
                ]
            for name, fn, repeats in runs:
                if repeats <= 0:
                    print(f"  {name:>34}: skipped (0 repeats)", flush=True)
                    continue
                b.in_batches.clear()
                b.cpu.clear()
                report(name, timed(fn, n, repeats) if fn == b.mariadb_binlog else paired(name, fn, repeats), repeats)
                if b.in_batches:
                    print(
                        f"  {'':>34}  {statistics.median(b.in_batches):>10,.0f} changes/s inside micro-batches "
                        "(without query start-up)",
                        flush=True,
                    )
                    print(f"  {'':>34}  {cpu_line(b.cpu)}", flush=True)
            if table_sinks and args.repeats > 0:
                paired_sinks(table_sinks, args.repeats)
        lat = b.latency(args.latency_rate, args.latency_seconds)
        p50, p99 = pct(lat, 50), pct(lat, 99)
        print(f"commit-to-visible latency at {args.latency_rate} tx/s: p50={p50:.3f}s p99={p99:.3f}s", flush=True)
        ice_p99 = float("nan")
        if "iceberg" in sinks:
            lat, written, missed = b.latency_iceberg(args.latency_rate, args.latency_seconds)
            ice_p99 = pct(lat, 99)
            print(
                f"commit-to-visible latency into iceberg at {args.latency_rate} tx/s: p50={pct(lat, 50):.3f}s "
                f"p99={ice_p99:.3f}s max={lat[-1]:.3f}s ({len(lat)} of {written} values seen in a snapshot)",
                flush=True,
            )
        ddl: dict[str, float] = {}
        for kind in [k.strip() for k in args.ddl_sinks.split(",") if k.strip()] if args.ddl_rounds > 0 else []:
            lat, in_schema = b.ddl_latency(kind, args.latency_rate, args.ddl_rounds)
            ddl[kind] = statistics.median(lat)
            schema_part = (
                f"; column in the table's schema: median={statistics.median(in_schema):.3f}s max={max(in_schema):.3f}s"
                if kind == "delta"
                else ""
            )
            print(
                f"DDL commit to first row of the new shape visible in {kind} at {args.latency_rate} tx/s: "
                f"median={ddl[kind]:.3f}s max={max(lat):.3f}s over {len(lat)} ADD COLUMNs "
                f"({', '.join(f'{x:.2f}' for x in lat)}){schema_part}",
                flush=True,
            )
        headline = (
            f"stream -> changelog, catch-up x{StreamOptions().catchup_parallelism}"
            if "changelog" in sinks
            else f"stream -> {table_sinks[0]}, catch-up x2"
        )
        if args.png:
            import plots

            out = plots.rows_per_second(
                args.png,
                rates,
                highlight=headline,
                unit="changes/s",
                title=f"binlog catch-up of {n:,} captured changes (changes/s, medians)",
            )
            print(f"png: {out}", flush=True)
        print(
            f"rows_per_s={int(rates[headline])} ratio_vs_mariadb_binlog={ratios[headline]:.3f} "
            f"p99_latency_s={p99:.3f} ddl_to_visible_s={ddl.get('changelog', float('nan')):.3f}"
            + (
                f" iceberg_rows_per_s={int(rates['stream -> iceberg, catch-up x2'])}"
                f" ratio_iceberg_vs_delta={vs.get('iceberg', float('nan')):.3f}"
                f" iceberg_p99_latency_s={ice_p99:.3f}"
                if "stream -> iceberg, catch-up x2" in rates
                else ""
            )
        )
    finally:
        b.spark.stop()
        b.server.stop()


if __name__ == "__main__":
    main()
