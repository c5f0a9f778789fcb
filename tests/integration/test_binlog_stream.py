"""The exactly-once binlog stream against a real MariaDB and a local Spark.

The sink is the test MemorySink (harness/mysqlcdc_harness/memory_sink.py): one JSON-lines file per
(table, micro-batch). Once spark/sinks/changelog/sink.py exists, SINK_FACTORY below is the one
line that switches the subprocess job to the real ChangelogSink (and ``changes_of`` reads it).

Slow tests (a Spark subprocess, a server restart) carry ``pytest.mark.slow``.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from airflow_provider_mysqlcdc.cdc.chunks import FinishedBatch, KeyRange
from airflow_provider_mysqlcdc.cdc.model import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.stream.offsets.stream_offset import StreamOffset
from airflow_provider_mysqlcdc.spark.stream.query import source_frame, start_stream
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.memory_sink import MemorySink, apply_rows, batch_files, read_changes
from mysqlcdc_harness.stream_job import committed, start_job
from mysqlcdc_harness.tables import create_composite_table, create_int_table
from mysqlcdc_harness.verify import diff
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark]

# The subprocess job writes into the real ChangelogSink; ["--sink-factory", "mysqlcdc_harness.memory_sink:build"]
# (and memory_sink.read_changes in changes_of) puts the test sink back.
SINK_FACTORY: list[str] = []


def changes_of(sink_dir: Path, schema: TableSchema, schema_changes: list | None = None) -> list[dict]:
    """The ChangelogSink's stream lines of a table as change rows (columns + _op + META_*), in order;
    schema change lines (op "SC") go to ``schema_changes`` when given."""
    from airflow_provider_mysqlcdc.spark.sinks.json_values import read_json_lines, row_decoder

    decode = row_decoder(schema)
    out = []
    files = sorted((sink_dir / schema.table_id.database / schema.table_id.table / "stream").glob("batch-*.jsonl"))
    for f in files:
        for line in read_json_lines(str(f)):
            if line["op"] == "SC":
                if schema_changes is not None:
                    schema_changes.append(line)
                continue
            row = decode(line["data"])
            row["_op"] = line["op"]
            row.update({f"_{k}": v for k, v in line["meta"].items()})
            out.append(row)
    return out


# --- helpers ----------------------------------------------------------------------------------


def _config(
    mariadb,
    db: str,
    tmp: Path,
    tables: list[str],
    mode: str = "latest-offset",
    offset: dict | None = None,
    **stream: Any,
) -> PipelineConfig:
    src = mariadb.source_config(server_id_range="6100-6199")
    return PipelineConfig(
        name="t",
        source=src,
        include=tuple(f"{db}.{t}" for t in tables),
        state_location=str(tmp / "state"),
        sink=SinkConfig("changelog", {"path": str(tmp / "sink")}),
        startup_mode=mode,
        startup_offset=offset,
        stream=StreamOptions(
            **{"max_events_per_batch": 10_000, "heartbeat_s": 1.0, "trigger_interval_s": 0.2, **stream}
        ),
    )


def _schemas(cfg: PipelineConfig, db: str, tables: list[str]) -> list[TableSchema]:
    with contextlib.closing(cfg.source.connect()) as c:
        return [read_table_schema(c, TableId(db, t)) for t in tables]


def _head(mariadb) -> BinlogOffset:
    f, p = mariadb.master_status()
    return BinlogOffset(f, p)


def _offset_of_progress(query) -> StreamOffset | None:
    p = query.lastProgress
    if not p or not p["sources"]:
        return None
    end = p["sources"][0]["endOffset"]
    return StreamOffset.from_dict(json.loads(end) if isinstance(end, str) else end)


def _wait(pred: Callable[[], bool], timeout: float, what: str, query=None) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if query is not None and query.exception() is not None:
            raise AssertionError(f"query failed while waiting for {what}: {query.exception()}")
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _caught_up(query, head: BinlogOffset) -> Callable[[], bool]:
    def pred() -> bool:
        off = _offset_of_progress(query)
        return off is not None and off.at >= head

    return pred


def _state_after(sink_dir: Path, schema: TableSchema, initial: dict | None = None) -> dict:
    state = dict(initial or {})
    apply_rows(state, read_changes(sink_dir, schema), schema)
    return state


def _source_rows(mariadb, schema: TableSchema) -> dict:
    """The table now, in canonical values (pymysql + the binlog normalizer's rules)."""
    from airflow_provider_mysqlcdc.cdc.types import row_normalizer

    norm = row_normalizer(schema, "UTC")
    cols = ", ".join(f"`{c}`" for c in schema.column_names)
    rows = mariadb.query(f"SELECT {cols} FROM {schema.table_id.quoted}")
    out = {}
    for r in rows:
        d = norm(dict(zip(schema.column_names, r)))
        out[tuple(d[c] for c in schema.row_identity)] = d
    return out


def _assert_exactly_once(changes: list[dict]) -> None:
    """No change twice and binlog order: (file, pos, row) strictly increasing per change event."""
    seen = [(c["_binlog_file"], c["_binlog_pos"], c["_binlog_row"], c["_op"]) for c in changes]
    assert len(seen) == len(set(seen)), "a change reached the sink twice"
    keys = [BinlogOffset(f, p, row=r) for f, p, r, op in seen if op != "+U"]
    assert all(a < b for a, b in zip(keys, keys[1:])), "changes out of binlog order"


# --- tests --------------------------------------------------------------------------------------


def test_two_tables_in_one_stream_equal_the_source(mariadb, fresh_db, spark, tmp_dir):
    """Inserts, updates, deletes and key changes of two tables, from a specific offset."""
    orders = create_int_table(mariadb, fresh_db, 200)
    items = create_composite_table(mariadb, fresh_db, 200)
    tables = [orders.table, items.table]
    start = _head(mariadb)
    cfg = _config(
        mariadb, fresh_db, tmp_dir, tables, "specific-offset", {"file": start.file, "position": start.position}
    )
    schemas = _schemas(cfg, fresh_db, tables)
    initial = {s.table_id: _source_rows(mariadb, s) for s in schemas}
    sink = MemorySink(str(tmp_dir / "sink"))
    sink.prepare(schemas)
    query = start_stream(spark, cfg, sink, schemas)
    try:
        for spec, seed in ((orders, 1), (items, 2)):
            w = ConcurrentWriter(lambda spec=spec: mariadb.connect(fresh_db), spec, seed=seed, threads=2, pause_s=0.01)
            with w:
                time.sleep(1.5)
            assert w.stats.key_moves and w.stats.deletes and w.stats.updates and w.stats.inserts
        head = _head(mariadb)
        _wait(_caught_up(query, head), 60, "the stream to reach the head", query)
    finally:
        query.stop()
    for s in schemas:
        changes = read_changes(tmp_dir / "sink", s)
        _assert_exactly_once(changes)
        assert diff(_source_rows(mariadb, s), _state_after(tmp_dir / "sink", s, initial[s.table_id])) == ""
    # the password never shows in the plan (Spark redacts the 'password' option) or the progress
    plan = source_frame(spark, cfg, schemas)._jdf.queryExecution().toString()
    assert "password=*********(redacted)" in plan and ROOT_PASSWORD not in plan
    assert ROOT_PASSWORD not in json.dumps(query.recentProgress, default=str)


def test_handoff_filter_drops_events_the_batches_hold(mariadb, fresh_db, spark, tmp_dir):
    spec = create_int_table(mariadb, fresh_db, 100)  # ids 2, 4, ..., 200
    t = TableId(fresh_db, spec.table)
    o1 = _head(mariadb)
    mariadb.execute(f"UPDATE {t.quoted} SET a = 1 WHERE id IN (10, 150)")
    o2 = _head(mariadb)
    mariadb.execute(f"UPDATE {t.quoted} SET a = 2 WHERE id IN (12, 152)")
    o3 = _head(mariadb)
    mariadb.execute(f"UPDATE {t.quoted} SET a = 3 WHERE id IN (14, 154)")
    o4 = _head(mariadb)
    # batch A holds ids < 100 as of o3; batch B ids >= 100 as of o1 (the stream starts there)
    finished = [
        FinishedBatch("A", (KeyRange(t, None, (100,)),), o3),
        FinishedBatch("B", (KeyRange(t, (100,), None),), o1),
    ]
    cfg = _config(mariadb, fresh_db, tmp_dir, [spec.table], "initial")
    StateStore(cfg.state_location).write_finished(finished)
    schemas = _schemas(cfg, fresh_db, [spec.table])
    sink = MemorySink(str(tmp_dir / "sink"))
    sink.prepare(schemas)
    query = start_stream(spark, cfg, sink, schemas)
    try:
        _wait(_caught_up(query, o4), 60, "the stream to reach the head", query)
    finally:
        query.stop()
    got = [(c["id"], c["a"], c["_op"]) for c in read_changes(tmp_dir / "sink", schemas[0]) if c["_op"] == "+U"]
    assert got == [(150, 1, "+U"), (152, 2, "+U"), (14, 3, "+U"), (154, 3, "+U")]
    assert o2 < o3


def test_rate_limit_bounds_every_micro_batch(mariadb, fresh_db, spark, tmp_dir):
    """500 changes, max 50 per micro-batch: a 250-row transaction is cut mid-event and resumed."""
    spec = create_int_table(mariadb, fresh_db, 10)
    t = TableId(fresh_db, spec.table)
    start = _head(mariadb)
    mariadb.execute(f"INSERT INTO {t.quoted} (id, a) SELECT 1000 + seq, seq FROM seq_1_to_250", database=fresh_db)
    for i in range(25):
        mariadb.execute(
            "START TRANSACTION",
            *[f"UPDATE {t.quoted} SET a = a + 1 WHERE id = {1001 + i * 10 + j}" for j in range(10)],
            "COMMIT",
        )
    head = _head(mariadb)
    cfg = _config(
        mariadb,
        fresh_db,
        tmp_dir,
        [spec.table],
        "specific-offset",
        {"file": start.file, "position": start.position},
        max_events_per_batch=50,
        trigger_interval_s=0.0,
    )
    schemas = _schemas(cfg, fresh_db, [spec.table])
    sink = MemorySink(str(tmp_dir / "sink"))
    sink.prepare(schemas)
    query = start_stream(spark, cfg, sink, schemas)
    try:
        _wait(_caught_up(query, head), 90, "the stream to reach the head", query)
        rows_per_batch = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    changes = read_changes(tmp_dir / "sink", schemas[0])
    _assert_exactly_once(changes)
    events: dict[int, set] = {}
    for c in changes:
        events.setdefault(c["_batch_id"], set()).add((c["_binlog_file"], c["_binlog_pos"], c["_binlog_row"]))
    assert sum(len(e) for e in events.values()) == 500
    assert max(len(e) for e in events.values()) <= 50
    assert len(events) >= 10
    assert max(rows_per_batch) <= 50, rows_per_batch


def test_heartbeat_moves_offsets_while_only_uncaptured_tables_change(mariadb, fresh_db, spark, tmp_dir):
    spec = create_int_table(mariadb, fresh_db, 10)
    mariadb.execute("CREATE TABLE other (id INT PRIMARY KEY AUTO_INCREMENT, v INT)", database=fresh_db)
    cfg = _config(mariadb, fresh_db, tmp_dir, [spec.table], "latest-offset", heartbeat_s=1.0)
    schemas = _schemas(cfg, fresh_db, [spec.table])
    sink = MemorySink(str(tmp_dir / "sink"))
    sink.prepare(schemas)
    query = start_stream(spark, cfg, sink, schemas)
    try:
        _wait(lambda: _offset_of_progress(query) is not None, 60, "the first micro-batch", query)
        first = _offset_of_progress(query)
        for i in range(200):
            mariadb.execute(f"INSERT INTO other (v) VALUES ({i})", database=fresh_db)
        head = _head(mariadb)
        assert head > first.at
        _wait(_caught_up(query, head), 30, "the offset to move past the unrelated changes", query)
    finally:
        query.stop()
    assert batch_files(tmp_dir / "sink", schemas[0].table_id) == {}


def test_replayed_batch_changes_nothing(mariadb, fresh_db, spark, tmp_dir):
    """A crash after the sink wrote a batch but before Spark committed it: the batch runs again."""
    spec = create_int_table(mariadb, fresh_db, 50)
    t = TableId(fresh_db, spec.table)
    start = _head(mariadb)
    cfg = _config(
        mariadb,
        fresh_db,
        tmp_dir,
        [spec.table],
        "specific-offset",
        {"file": start.file, "position": start.position},
        max_events_per_batch=20,
        trigger_interval_s=0.0,
    )
    schemas = _schemas(cfg, fresh_db, [spec.table])
    checkpoint = Path(StateStore(cfg.state_location).checkpoint_url())
    mariadb.execute(f"UPDATE {t.quoted} SET a = a + 1")
    mariadb.execute(f"DELETE FROM {t.quoted} WHERE id < 20")
    head = _head(mariadb)
    sink = MemorySink(str(tmp_dir / "sink"))
    sink.prepare(schemas)
    query = start_stream(spark, cfg, sink, schemas)
    try:
        _wait(_caught_up(query, head), 60, "the stream to reach the head", query)
    finally:
        query.stop()
    before = read_changes(tmp_dir / "sink", schemas[0])
    last, _ = committed(checkpoint)
    files = batch_files(tmp_dir / "sink", t)
    last_with_rows = max(files)
    # Forget every commit from the last batch that wrote rows on: Spark replays them.
    for n in range(last_with_rows, last + 1):
        (checkpoint / "commits" / str(n)).unlink()
        (checkpoint / "commits" / f".{n}.crc").unlink(missing_ok=True)
    kept = files[last_with_rows].read_text()
    files[last_with_rows].unlink()  # and the sink lost that batch's file too
    query = start_stream(spark, cfg, sink, schemas)
    try:
        _wait(lambda: (committed(checkpoint) or (-1,))[0] >= last, 60, "the replay", query)
    finally:
        query.stop()
    assert files[last_with_rows].read_text() == kept  # same rows again (MemorySink asserts equality too)
    after = read_changes(tmp_dir / "sink", schemas[0])
    assert after == before
    _assert_exactly_once(after)


@pytest.mark.slow
@pytest.mark.parametrize("sink_kind", ["memory", "changelog"])
def test_mariadb_restart_mid_stream_loses_nothing(mariadb, fresh_db, spark, tmp_dir, sink_kind):
    """The reader reconnects and skips what it already emitted: with the test sink (row path)
    and with the changelog, whose lines the reading task writes itself."""
    from airflow_provider_mysqlcdc.spark.sinks.changelog.sink import ChangelogSink

    spec = create_int_table(mariadb, fresh_db, 100)
    start = _head(mariadb)
    cfg = _config(
        mariadb,
        fresh_db,
        tmp_dir,
        [spec.table],
        "specific-offset",
        {"file": start.file, "position": start.position},
        max_events_per_batch=100,
    )
    schemas = _schemas(cfg, fresh_db, [spec.table])
    initial = _source_rows(mariadb, schemas[0])
    sink = MemorySink(str(tmp_dir / "sink")) if sink_kind == "memory" else ChangelogSink(str(tmp_dir / "sink"))
    sink.prepare(schemas)
    query = start_stream(spark, cfg, sink, schemas)
    try:
        with ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=7, threads=1, pause_s=0.01):
            time.sleep(1.0)
        mariadb.restart()
        with ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=8, threads=1, pause_s=0.01):
            time.sleep(1.0)
        head = _head(mariadb)
        _wait(_caught_up(query, head), 90, "the stream to reach the head after the restart", query)
    finally:
        query.stop()
    if sink_kind == "memory":
        changes = read_changes(tmp_dir / "sink", schemas[0])
    else:
        changes = changes_of(tmp_dir / "sink", schemas[0])
        assert not list((tmp_dir / "sink").rglob(".tmp-*"))
    assert changes
    _assert_exactly_once(changes)
    state = dict(initial)
    apply_rows(state, changes, schemas[0])
    assert diff(_source_rows(mariadb, schemas[0]), state) == ""


def test_purged_binlog_fails_with_the_documented_error(mariadb, fresh_db, spark, tmp_dir):
    spec = create_int_table(mariadb, fresh_db, 10)
    t = TableId(fresh_db, spec.table)
    start = _head(mariadb)
    mariadb.execute(f"UPDATE {t.quoted} SET a = 5")
    mariadb.execute("FLUSH BINARY LOGS")
    newest = mariadb.master_status()[0]
    deadline = time.time() + 20
    while any(r[0] == start.file for r in mariadb.query("SHOW BINARY LOGS")):
        # MariaDB keeps a file until its binlog checkpoint is written (asynchronously after FLUSH)
        assert time.time() < deadline, "could not purge the binlog"
        mariadb.execute(f"PURGE BINARY LOGS TO '{newest}'")
        time.sleep(0.2)
    cfg = _config(mariadb, fresh_db, tmp_dir, [spec.table], "initial")
    StateStore(cfg.state_location).write_finished([FinishedBatch("A", (KeyRange(t, None, None, True),), start)])
    schemas = _schemas(cfg, fresh_db, [spec.table])
    sink = MemorySink(str(tmp_dir / "sink"))
    query = start_stream(spark, cfg, sink, schemas)
    with pytest.raises(Exception) as err:
        query.awaitTermination(60)
        raise AssertionError("the query did not fail")
    msg = str(err.value)
    assert start.file in msg and "purged" in msg and "snapshotted again" in msg, msg
    assert newest in msg


# --- the spark-submit job, SIGKILLed ----------------------------------------------------------------


def _job(cfg_path: Path, log: Path) -> subprocess.Popen:
    return start_job(cfg_path, log, ROOT_PASSWORD, SINK_FACTORY)


def test_latest_offset_start_is_asked_once_per_checkpoint(mariadb, fresh_db, tmp_dir):
    """Spark asks for the initial offset to plan micro-batch 0, to run it and to replay it after a
    crash; with latest-offset the head moves in between, so the first answer is kept."""
    from airflow_provider_mysqlcdc.spark.stream.binlog_source import BinlogStreamReader
    from airflow_provider_mysqlcdc.spark.stream.server.startup import INITIAL_OFFSET_FILE
    from airflow_provider_mysqlcdc.spark.stream.settings import settings_from_options

    spec = create_int_table(mariadb, fresh_db, 5)
    cfg = _config(mariadb, fresh_db, tmp_dir, [spec.table], "latest-offset")
    schemas = _schemas(cfg, fresh_db, [spec.table])
    checkpoint = tmp_dir / "checkpoint"
    options = {
        "config": cfg.to_json(),
        "schemas": json.dumps([s.to_dict() for s in schemas]),
        "password": ROOT_PASSWORD,
        "checkpoint_location": str(checkpoint),
    }
    first = BinlogStreamReader(settings_from_options(options))
    start = first.initialOffset()
    assert StreamOffset.from_dict(start).at == _head(mariadb)
    mariadb.execute(f"UPDATE {TableId(fresh_db, spec.table).quoted} SET a = a + 1")
    assert _head(mariadb) > StreamOffset.from_dict(start).at
    assert first.initialOffset() == start  # the same reader: the same answer
    restarted = BinlogStreamReader(settings_from_options(options))  # a restart before the first commit
    assert restarted.initialOffset() == start
    assert (checkpoint / INITIAL_OFFSET_FILE).exists()
    fresh = BinlogStreamReader(settings_from_options({**options, "checkpoint_location": str(tmp_dir / "other")}))
    assert StreamOffset.from_dict(fresh.initialOffset()).at == _head(mariadb)  # a new checkpoint: the head now
