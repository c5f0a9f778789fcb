"""Every key type, through every path, into every sink: sink equals source, every cell.

One table per type MySQL accepts in a PRIMARY KEY (harness/mysqlcdc_harness/key_matrix.py: every integer
width signed and unsigned at 0, -1 and its ends, 2^63 - 1 / 2^63 / 2^64 - 1, DECIMAL of scale 0
and not, negative, wider than 38 digits, strings under binary, NO PAD, case- and
accent-insensitive collations, BINARY/VARBINARY with 0x00 and 0xFF, the temporal types, YEAR,
ENUM, BIT, composite keys mixing them). Each pipeline below captures its own copy of the tables:

* inserts, value updates, key moves, deletes, delete-and-insert-again run inside each snapshot
  batch's window (after the batch's SELECTs, before its high watermark), then while the stream
  runs, then after a batch was read again while streaming;
* the paths: the Arrow snapshot reader and the JDBC reader; the stream's direct write (each
  binlog range reduced by the task that decoded it) and its row path (Spark reduces); a batch
  read again while the stream runs (handed to the stream); routed and transformed tables;
* the sinks: Delta, PostgreSQL, the changelog (replayed from its lines) and Iceberg (read back
  through its catalog).

The sink is compared with the source row by row and cell by cell in canonical values; the
report names every divergent cell. One server and one Spark application for the whole matrix.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.batching import BatchSizing
from airflow_provider_mysqlcdc.cdc.model import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.snapshot.resnapshot import read_applied
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.cdc.transform.table_views import Rules
from airflow_provider_mysqlcdc.cdc.types import map_table, row_normalizer
from airflow_provider_mysqlcdc.spark.sinks.routed import pipeline_sink
from airflow_provider_mysqlcdc.spark.snapshot.batch_reader import ConsistentBatchReader
from airflow_provider_mysqlcdc.spark.snapshot.job import run_snapshot_batch
from airflow_provider_mysqlcdc.spark.stream.offsets.stream_offset import StreamOffset
from airflow_provider_mysqlcdc.spark.stream.query import start_stream
from mysqlcdc_harness import key_matrix as M

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@dataclass(frozen=True)
class Path_:
    """One pipeline of the matrix: which reader, stream write and sink it goes through."""

    name: str
    sink: str  # delta | postgres | changelog | iceberg
    reader: str  # the source's snapshot_reader
    direct: bool  # the stream's direct write (False: Spark reduces the change rows)
    resnapshot: bool = False  # a batch read again while the stream runs
    routed: bool = False  # every table routed to r_<table> with a projection


PATHS_ALL = (
    Path_("delta-arrow-direct-resnapshot", "delta", "arrow", True, resnapshot=True),
    Path_("delta-jdbc-rows", "delta", "jdbc", False),
    Path_("postgres-direct-routed-resnapshot", "postgres", "auto", True, resnapshot=True, routed=True),
    Path_("postgres-rows", "postgres", "auto", False),
    Path_("changelog-direct", "changelog", "auto", True),
    # "auto" reads through JDBC here: the Arrow reader needs a sink that takes a batch's rows as files (Delta)
    Path_("iceberg-direct-resnapshot", "iceberg", "auto", True, resnapshot=True),
)
# MYSQLCDC_KEY_PATHS=delta-jdbc-rows,... runs only those pipelines (while working on one path)
PATHS = tuple(
    p
    for p in PATHS_ALL
    if not os.environ.get("MYSQLCDC_KEY_PATHS") or p.name in os.environ["MYSQLCDC_KEY_PATHS"].split(",")
)


@dataclass
class Running:
    path: Path_
    db: str
    config: PipelineConfig
    schemas: dict[str, TableSchema]
    query: Any = None
    handoffs: tuple[str, ...] = ()


def _rules(db: str) -> Rules:
    route = tuple({"source_table": f"{db}.{kt.name}", "sink_table": f"{db}.r_{kt.name}"} for kt in M.KEY_TYPES)
    transform = tuple(
        {"source_table": f"{db}.{kt.name}", "projection": ", ".join(kt.key_names) + ", v, n + 1 AS n1"}
        for kt in M.KEY_TYPES
    )
    return Rules(route=route, transform=transform)


def _sink_config(p: Path_, work: Path, postgres, db: str) -> SinkConfig:
    if p.sink == "postgres":
        return SinkConfig("postgres", {"dsn": postgres.dsn, "schema": db, "direct_write": p.direct})
    if p.sink == "changelog":
        return SinkConfig("changelog", {"root": str(work / "log")})
    if p.sink == "iceberg":  # the default catalog: SQLite beside the local warehouse
        return SinkConfig("iceberg", {"root": str(work / "warehouse"), "direct_write": p.direct})
    return SinkConfig("delta", {"root": str(work / "lake"), "direct_write": p.direct})


def _window_hook(monkeypatch, mariadb, done: set) -> None:
    """The window round of each table, run the first time a batch holding it takes its HW: after
    the batch's SELECTs saw the rows, before the HW, so only the window's corrections make them right."""
    read, high = ConsistentBatchReader.read, ConsistentBatchReader._high_watermark

    def reading(self, batch):
        self._matrix_batch = batch
        return read(self, batch)

    def high_watermark(self, conn, version):
        for t in self._matrix_batch.tables:
            if (t.database, t.table) not in done:
                done.add((t.database, t.table))
                mariadb.execute(*M.window(_kt(t.table)), database=t.database)
        return high(self, conn, version)

    monkeypatch.setattr(ConsistentBatchReader, "read", reading)
    monkeypatch.setattr(ConsistentBatchReader, "_high_watermark", high_watermark)


def _caught_up(runs: list[Running], head: BinlogOffset, timeout_s: float = 60) -> None:
    """Until every stream's last micro-batch ends at or after ``head``."""
    deadline = time.time() + timeout_s
    for run in runs:
        while True:
            assert run.query.exception() is None, f"{run.path.name}: {run.query.exception()}"
            p = run.query.lastProgress
            end = p["sources"][0]["endOffset"] if p and p["sources"] else None
            if end is not None and StreamOffset.from_dict(json.loads(end) if isinstance(end, str) else end).at >= head:
                break
            assert time.time() < deadline, f"{run.path.name}: the stream did not reach {head} in {timeout_s} s"
            time.sleep(0.1)


def _kt(table: str) -> M.KeyType:
    return next(k for k in M.KEY_TYPES if k.name == table)


def _wait_applied(state: StateStore, ids, query, timeout_s: float = 120) -> None:
    deadline = time.time() + timeout_s
    for hid in ids:
        while (applied := read_applied(state, hid)) is None:
            assert query.exception() is None, query.exception()
            assert time.time() < deadline, f"hand-off {hid} not taken over in {timeout_s} s"
            time.sleep(0.3)
        assert "superseded" not in applied, applied


# --- reading both sides in canonical values ----------------------------------------------------


def _source(mariadb, schema: TableSchema, routed: bool) -> dict[tuple, dict]:
    """The table as pymysql reads it, in the mapping's canonical values. TIME is turned into signed
    microseconds here: the normalizer's TIME rule undoes a binlog library's borrow that pymysql's
    (correct) timedelta does not have."""
    norm = row_normalizer(schema, "UTC")
    times = [c.name for c in schema.columns if c.data_type.lower() == "time"]
    cols = ", ".join(f"`{c}`" for c in schema.column_names)
    out = {}
    for r in mariadb.query(f"SELECT {cols} FROM {schema.table_id.quoted}"):
        raw = dict(zip(schema.column_names, r))
        d = norm({**raw, **{c: None for c in times}})
        d.update({c: None if raw[c] is None else raw[c] // dt.timedelta(microseconds=1) for c in times})
        if routed:
            d["n1"] = None if d["n"] is None else d["n"] + 1
            del d["n"]
        out[tuple(d[c] for c in schema.row_identity)] = d
    return out


def _decimal_text(schema: TableSchema) -> set[str]:
    return {m.name for m in map_table(schema, "UTC") if m.kind == "decimal_text"}


def _sink(run: Running, work: Path, postgres, schema: TableSchema) -> dict[tuple, dict]:
    t = schema.table_id
    name = f"r_{t.table}" if run.path.routed else t.table
    ident = schema.row_identity
    if run.path.sink == "delta":
        from deltalake import DeltaTable

        rows = DeltaTable(f"{run.config.sink.options['root']}/{t.database}/{name}").to_pyarrow_table().to_pylist()
    elif run.path.sink == "postgres":
        cols = [("n1" if run.path.routed and c == "n" else c) for c in schema.column_names]
        texts = _decimal_text(schema)
        got = postgres.query(
            f'SELECT {", ".join(chr(34) + c + chr(34) for c in cols)} FROM "{run.db}"."{t.database}__{name}"'
        )
        rows = []
        for r in got:
            d = dict(zip(cols, r))
            for c in texts:  # numeric(p > 38) comes back a Decimal; the mapping's value is the server's text
                d[c] = None if d[c] is None else _server_text(d[c], schema.column(c).numeric_scale or 0)
            rows.append(d)
    elif run.path.sink == "iceberg":
        from mysqlcdc_harness.sink_compare import iceberg_rows

        rows = list(iceberg_rows(run.config.sink.options["root"], TableId(t.database, name), ident).values())
    else:
        rows = list(_replay(Path(run.config.sink.options["root"]), t, schema).values())
    return {tuple(r[c] for c in ident): r for r in rows}


def _server_text(v: decimal.Decimal, scale: int) -> str:
    return f"{v:.{scale}f}"


def _replay(root: Path, t: TableId, schema: TableSchema) -> dict[tuple, dict]:
    """The changelog's snapshot lines then its stream lines, applied in order (no re-snapshot in
    this pipeline: its RS lines would need the server's key order to replace ranges)."""
    from airflow_provider_mysqlcdc.spark.sinks.json_values import read_json_lines, row_decoder

    decode = row_decoder(schema)
    files = sorted((root / t.database / t.table / "snapshot").rglob("*.jsonl"))
    files += sorted((root / t.database / t.table / "stream").glob("batch-*.jsonl"))
    state: dict[tuple, dict] = {}
    for f in files:
        for line in read_json_lines(str(f)):
            assert line["op"] in ("+I", "+U", "-U", "-D"), line
            row = decode(line["data"])
            k = tuple(row[c] for c in schema.row_identity)
            if line["op"] in ("+I", "+U"):
                state[k] = row
            else:
                assert k in state, f"{t}: {line['op']} of a key the changelog never had: {k!r}"
                del state[k]
    return state


def _divergence(expected: dict[tuple, dict], actual: dict[tuple, dict]) -> list[str]:
    """Every divergent cell, named: a missing or extra row counts each of its cells."""
    out = []
    for k in sorted(set(expected) | set(actual), key=repr):
        e, a = expected.get(k), actual.get(k)
        if e is None or a is None:
            row = e if e is not None else a
            out += [f"{'missing' if a is None else 'extra'} row {k!r}: {c}={row[c]!r}" for c in row]
            continue
        out += [f"row {k!r} column {c}: source {e[c]!r}, sink {a.get(c)!r}" for c in e if e[c] != a.get(c)]
    return out


def _compare(mariadb, postgres, work: Path, run: Running, timeout_s: float) -> dict[str, list[str]]:
    """{table: divergent cells}, polled until none diverge or the time is up."""
    deadline = time.time() + timeout_s
    while True:
        report: dict[str, list[str]] = {}
        for table, schema in run.schemas.items():
            try:
                cells = _divergence(_source(mariadb, schema, run.path.routed), _sink(run, work, postgres, schema))
            except Exception as e:  # a sink table not readable yet
                cells = [f"sink not readable: {e!r}"]
            if cells:
                report[table] = cells
        if not report or time.time() > deadline:
            return report
        time.sleep(1.0)


# --- the matrix, run once for every test of this module ----------------------------------------


@pytest.fixture(scope="module")
def matrix(mariadb, postgres, spark):
    mp = pytest.MonkeyPatch()
    work = Path(tempfile.mkdtemp(prefix="mysqlcdc-keys-"))
    mp.setenv("PGPASSWORD", postgres.password)
    window_done: set = set()
    _window_hook(mp, mariadb, window_done)
    runs: list[Running] = []
    timings: dict[str, float] = {}
    try:
        t0 = time.monotonic()

        def snapshot(i: int, p: Path_) -> Running:
            """One path's tables, plan and snapshot batches; the paths run side by side in one Spark
            application (each its own database, state and sink), as several DAG runs' tasks do."""
            db = f"keys_{i}_{p.sink}"
            mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`")
            for kt in M.KEY_TYPES:
                mariadb.execute(*M.initial(kt), database=db)
            if p.sink == "postgres":
                postgres.execute(f'CREATE SCHEMA IF NOT EXISTS "{db}"')
            pw = work / p.name
            src = mariadb.source_config(server_id_range=f"{6300 + 20 * i}-{6319 + 20 * i}", snapshot_reader=p.reader)
            config = PipelineConfig(
                name=f"keys-{p.name}",
                source=src,
                include=(f"{db}\\..*",),
                state_location=str(pw / "state"),
                sink=_sink_config(p, pw, postgres, db),
                split=SplitOptions(chunk_size=3),
                rules=_rules(db) if p.routed else Rules(),
                stream=StreamOptions(max_events_per_batch=5000, heartbeat_s=1.0, trigger_interval_s=0.3),
            )
            # packed as the Airflow plan step packs: a few batches of many tables, some tables' chunks in two
            plan = build_plan(
                src,
                config.include,
                split=config.split,
                sizing=BatchSizing(rows_per_batch=100, parallelism=2, min_rows_per_batch=1),
            )
            assert len(plan.schemas) == len(M.KEY_TYPES) and 2 <= len(plan.batches) <= 4, len(plan.batches)
            state = StateStore(config.state_location)
            state.write_plan(plan)
            for b in plan.batches:
                run_snapshot_batch(spark, config, b.batch_id, plan=plan)
            state.write_finished(state.finished_from_results())
            return Running(p, db, config, {t.table: s for t, s in plan.schemas.items()})

        with ThreadPoolExecutor(max_workers=len(PATHS)) as pool:
            loaded = list(pool.map(lambda ip: snapshot(*ip), enumerate(PATHS)))
        timings["snapshots"] = time.monotonic() - t0
        t0 = time.monotonic()
        for run in loaded:
            schemas = list(StateStore(run.config.state_location).read_plan().schemas.values())
            run.query = start_stream(spark, run.config, pipeline_sink(run.config, schemas), schemas)
            runs.append(run)
        timings["stream starts"] = time.monotonic() - t0
        t0 = time.monotonic()
        assert len(window_done) == len(PATHS) * len(M.KEY_TYPES), "a table's window round did not run"
        for run in runs:
            for kt in M.KEY_TYPES:
                mariadb.execute(*M.stream(kt), database=run.db)

        def reread(run: Running) -> None:
            state = StateStore(run.config.state_location)
            plan = state.read_plan()
            # the second batch, and every batch holding BIGINT UNSIGNED keys (keys at and above 2^63; the plan
            # packs each of these small tables into one batch, so their range is the whole table: a range
            # bounded at 2^63 or above is tests/unit/spark/sinks/test_delta_exact_stats.py's)
            victims = [
                b
                for i, b in enumerate(plan.batches)
                if i == 1 or any(t.table in ("k_bigint_u", "k_u64_dt6") for t in b.tables)
            ]
            for victim in victims:
                result = run_snapshot_batch(spark, run.config, victim.batch_id, plan=plan)
                assert result["handoff"], result
                run.handoffs += tuple(result["handoff"])

        with ThreadPoolExecutor(max_workers=len(runs)) as pool:  # the re-reading paths side by side
            list(pool.map(reread, [run for run in runs if run.path.resnapshot]))
        timings["stream round + re-snapshots"] = time.monotonic() - t0
        t0 = time.monotonic()
        # after the re-read batches' HW: the stream corrects their rows with these changes when it takes
        # them over (it does so at a micro-batch that ends at or after their HW: on an idle server, the
        # next write's)
        steps = len(M.late(M.KEY_TYPES[0]))
        for step in range(steps):  # one micro-batch per step: every table's MERGE of one key
            for run in runs:
                for kt in M.KEY_TYPES:
                    mariadb.execute(*M.late(kt)[step], database=run.db)
            _caught_up(runs, BinlogOffset(*mariadb.master_status()))
        for run in runs:
            _wait_applied(StateStore(run.config.state_location), run.handoffs, run.query)
        with ThreadPoolExecutor(max_workers=len(runs)) as pool:
            compared = list(pool.map(lambda run: _compare(mariadb, postgres, work, run, timeout_s=120), runs))
        reports = {run.path.name: report for run, report in zip(runs, compared)}
        timings["late round + compare"] = time.monotonic() - t0
        for run in runs:
            assert run.query.exception() is None, f"{run.path.name}: {run.query.exception()}"
        print("key matrix timings:", {k: round(v, 1) for k, v in timings.items()})
        yield runs, reports
    finally:
        for run in runs:
            with contextlib.suppress(Exception):
                run.query.stop()
        mp.undo()
        shutil.rmtree(work, ignore_errors=True)


def test_every_statement_of_the_workload_matched_its_row(matrix, mariadb):
    runs, _ = matrix
    for run in runs:
        for kt in M.KEY_TYPES:
            (n,) = mariadb.query(f"SELECT COUNT(*) FROM `{run.db}`.`{kt.name}`")[0]
            assert n == len(M.final_keys(kt, ["window", "stream", "late"])), (run.db, kt.name)


@pytest.mark.parametrize("path", [p.name for p in PATHS])
def test_the_sink_equals_the_source_in_every_cell_for_every_key_type(matrix, path):
    _, reports = matrix
    report = reports[path]
    cells = sum(len(v) for v in report.values())
    shown = "\n".join(f"{t}: {len(c)} divergent cell(s)\n  " + "\n  ".join(c[:12]) for t, c in sorted(report.items()))
    assert not report, f"{path}: {cells} divergent cell(s) in {len(report)} of {len(M.KEY_TYPES)} tables\n{shown}"


def test_the_resnapshot_paths_handed_their_batches_to_the_stream(matrix):
    runs, _ = matrix
    assert all(r.handoffs for r in runs if r.path.resnapshot)


# --- the consistency check over the same pipelines ---------------------------------------------------

_CHECKED = (
    "delta-arrow-direct-resnapshot",
    "postgres-direct-routed-resnapshot",
    "postgres-rows",
    "changelog-direct",
    "iceberg-direct-resnapshot",
)


def _check(run: Running):
    from airflow_provider_mysqlcdc.spark.consistency import run_check

    sink = pipeline_sink(run.config, [s for s in run.schemas.values()])
    try:
        return run_check(run.config, sink, rescan_ranges=1)
    finally:
        sink.close()


@pytest.mark.parametrize("path", [p for p in _CHECKED if p in {q.name for q in PATHS}])
def test_the_consistency_check_finds_every_key_type_consistent_while_the_stream_runs(matrix, mariadb, path):
    """Twice: the first check scans the source; the second, after a delete and a key move per table
    that the stream may not have applied yet, reads only the binlog since the first (and re-scans
    one range per table), and still compares both sides at the stream's committed offset."""
    runs, _ = matrix
    run = next(r for r in runs if r.path.name == path)
    first = _check(run)
    if run.path.sink == "changelog":
        assert {t.state for t in first.tables} == {"not compared"}
        assert "keeps no table" in first.tables[0].reason
        return
    assert first.consistent, first.summary()
    assert {t.state for t in first.tables} == {"consistent"}, first.summary()
    assert all(t.scanned_ranges == len(t.ranges) for t in first.tables)
    assert sum(t.source_rows for t in first.tables) > 0
    for kt in M.KEY_TYPES:
        keys = ", ".join(f"`{c}`" for c in kt.key_names)
        mariadb.execute(
            f"DELETE FROM `{kt.name}` ORDER BY {keys} LIMIT 1",
            f"UPDATE `{kt.name}` SET v = 'checked' ORDER BY {keys} DESC LIMIT 1",
            database=run.db,
        )
    second = _check(run)
    assert {t.state for t in second.tables} == {"consistent"}, second.summary()
    assert all(t.scanned_ranges <= 1 for t in second.tables), [t.scanned_ranges for t in second.tables]
    assert not any(t.baseline_drift for t in second.tables), [(t.table, t.baseline_drift) for t in second.tables]
    _caught_up([run], BinlogOffset(*mariadb.master_status()))
    third = _check(run)
    assert third.consistent and third.binlog_changes >= 0, third.summary()
    assert sum(t.source_rows for t in third.tables) == sum(t.source_rows for t in first.tables) - len(M.KEY_TYPES)


def _key_in(kt_name: str, run: Running, mariadb):
    schema = run.schemas[kt_name]
    cols = ", ".join(f"`{c}`" for c in schema.row_identity)
    return mariadb.query(f"SELECT {cols} FROM `{run.db}`.`{kt_name}` ORDER BY {cols} DESC LIMIT 1")[0]


@pytest.mark.parametrize(
    "path",
    [
        p
        for p in ("delta-arrow-direct-resnapshot", "postgres-rows", "iceberg-direct-resnapshot")
        if p in {q.name for q in PATHS}
    ],
)
def test_the_consistency_check_names_the_batch_of_a_row_the_sink_lost(matrix, mariadb, postgres, path):
    """A row deleted from the sink behind the stream's back (what the lost deletes of keys >= 2^63
    looked like, the other way round): the check fails that table and names the batch holding it."""
    from airflow_provider_mysqlcdc.cdc.snapshot.keyorder import key_order_for

    runs, _ = matrix
    run = next(r for r in runs if r.path.name == path)
    table = "k_bigint_u"
    schema = run.schemas[table]
    (key,) = _key_in(table, run, mariadb)
    assert key >= 2**63
    if run.path.sink == "delta":
        from deltalake import DeltaTable

        DeltaTable(str(Path(run.config.sink.options["root"]) / run.db / table)).delete(f"k = {key}")
    elif run.path.sink == "iceberg":
        from pyiceberg.expressions import EqualTo

        sink = pipeline_sink(run.config, list(run.schemas.values()))
        sink.open_table(schema.table_id).delete(EqualTo("k", decimal.Decimal(key)))
        sink.close()
    else:
        sink = pipeline_sink(run.config, list(run.schemas.values()))
        postgres.execute(f"DELETE FROM {sink.table(schema).qualified} WHERE k = {key}")
        sink.close()
    report = _check(run)
    assert not report.consistent
    bad = [t for t in report.tables if t.state == "differs"]
    assert [t.table for t in bad] == [f"{run.db}.{table}"], report.summary()
    assert bad[0].sink_rows == bad[0].source_rows - 1
    plan = StateStore(run.config.state_location).read_plan()
    order = key_order_for(schema)
    holding = [
        b.batch_id
        for b in plan.batches
        for r in b.ranges()
        if r.table_id == schema.table_id and order.contains(r.start, r.end, r.includes_null, (key,))
    ]
    assert report.batches_to_reread() == holding, (report.batches_to_reread(), holding)
