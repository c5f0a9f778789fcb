"""The changelog sink's direct stream write (the source's tasks write the lines) on a real
MariaDB and local Spark: replays, rows python-mysql-replication reads, status rows."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.binlog.fast.batches import UnsupportedRows
from airflow_provider_mysqlcdc.cdc.binlog.fast.reader import FastBinlogReader
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.runtime.stream_status import note_rows_written, rows_written
from airflow_provider_mysqlcdc.spark.sinks.changelog.sink import ChangelogSink
from airflow_provider_mysqlcdc.spark.stream.query import start_stream
from mysqlcdc_harness.memory_sink import apply_rows
from mysqlcdc_harness.stream_job import committed
from mysqlcdc_harness.tables import create_int_table
from mysqlcdc_harness.verify import diff
from tests.integration.test_binlog_stream import (
    _assert_exactly_once,
    _caught_up,
    _config,
    _head,
    _schemas,
    _source_rows,
    _wait,
    changes_of,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _stream_to_head(spark, cfg, sink, schemas, head, what: str = "the stream to reach the head") -> None:
    query = start_stream(spark, cfg, sink, schemas)
    try:
        _wait(_caught_up(query, head), 90, what, query)
    finally:
        query.stop()


def _seqs_ascending(root: Path, t: TableId) -> None:
    import json

    for f in sorted((root / t.database / t.table / "stream").glob("batch-*.jsonl")):
        seqs = [json.loads(x)["meta"]["seq"] for x in f.read_text().splitlines()]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), f.name


def test_replayed_direct_batch_rewrites_the_same_file(mariadb, fresh_db, spark, tmp_dir):
    """A crash after the parts were joined but before Spark committed: the batch runs again,
    its file comes out byte for byte the same, and the batch's parts directory is gone."""
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
        max_events_per_batch=30,
        trigger_interval_s=0.0,
    )
    schemas = _schemas(cfg, fresh_db, [spec.table])
    checkpoint = Path(StateStore(cfg.state_location).checkpoint_url())
    initial = _source_rows(mariadb, schemas[0])
    mariadb.execute(f"UPDATE {t.quoted} SET a = a + 1")
    mariadb.execute(f"DELETE FROM {t.quoted} WHERE id < 20")
    mariadb.execute(f"INSERT INTO {t.quoted} (id, a) VALUES (1000, 1), (1001, 2)")
    head = _head(mariadb)
    root = tmp_dir / "sink"
    sink = ChangelogSink(str(root))
    sink.prepare(schemas)
    assert sink.direct_write() is not None
    _stream_to_head(spark, cfg, sink, schemas, head)
    before = changes_of(root, schemas[0])
    stream_dir = root / t.database / t.table / "stream"
    files = {int(p.stem.split("-")[1]): p for p in stream_dir.glob("batch-*.jsonl")}
    assert len(files) >= 3  # 50 updates + 19 deletes + 2 inserts, at most 30 per micro-batch
    last, _ = committed(checkpoint)
    replayed = max(files)
    for n in range(replayed, last + 1):
        (checkpoint / "commits" / str(n)).unlink()
        (checkpoint / "commits" / f".{n}.crc").unlink(missing_ok=True)
    kept = files[replayed].read_bytes()
    files[replayed].unlink()
    orphan = stream_dir / f".tmp-{replayed:09d}" / "part-0000-deadbeef0000-a0.jsonl"
    orphan.parent.mkdir(parents=True)
    orphan.write_text('{"a failed attempt": true}\n')
    query = start_stream(spark, cfg, sink, schemas)
    try:
        _wait(lambda: (committed(checkpoint) or (-1,))[0] >= last, 60, "the replay", query)
    finally:
        query.stop()
    assert files[replayed].read_bytes() == kept
    assert not list(stream_dir.glob(".tmp-*"))
    after = changes_of(root, schemas[0])
    assert after == before
    _assert_exactly_once(after)
    _seqs_ascending(root, t)
    state = dict(initial)
    apply_rows(state, after, schemas[0])
    assert diff(_source_rows(mariadb, schemas[0]), state) == ""


def test_rows_the_library_reads_are_merged_in_binlog_order(mariadb, fresh_db, spark, tmp_dir):
    """A table whose first events the fast decoder refuses (a character set it has no trusted
    codec for), then accepts after an ALTER: the library's rows reach the task after the fast
    ones, but every line of the batch's file is in binlog order."""
    db = fresh_db
    mariadb.execute("CREATE TABLE mixed (id INT PRIMARY KEY, s VARCHAR(20) CHARACTER SET macroman)", database=db)
    t = TableId(db, "mixed")
    start = _head(mariadb)
    mariadb.execute(*[f"INSERT INTO mixed VALUES ({i}, 'old {i}')" for i in range(1, 6)], database=db)
    mariadb.execute("ALTER TABLE mixed MODIFY s VARCHAR(20) CHARACTER SET utf8mb4", database=db)
    mariadb.execute(
        *[f"INSERT INTO mixed VALUES ({i}, 'new {i}')" for i in range(6, 11)],
        "UPDATE mixed SET s = 'changed' WHERE id IN (2, 7)",
        "DELETE FROM mixed WHERE id = 3",
        database=db,
    )
    head = _head(mariadb)
    cfg = _config(
        mariadb,
        db,
        tmp_dir,
        ["mixed"],
        "specific-offset",
        {"file": start.file, "position": start.position},
        trigger_interval_s=0.0,
    )
    schemas = _schemas(cfg, db, ["mixed"])
    # the fast reader really refuses the first rows events (else this test proves nothing)
    reader = FastBinlogReader(
        cfg.source,
        cfg.source.server_id_range.pick(5),
        start,
        stop=head,
        tables=[t],
        blocking=False,
        heartbeat_s=None,
        on_unsupported="report",
    )
    with contextlib.closing(reader):
        refused = [i for i in reader.batches() if isinstance(i, UnsupportedRows)]
    assert len(refused) == 5, refused
    root = tmp_dir / "sink"
    sink = ChangelogSink(str(root))
    sink.prepare(schemas)
    _stream_to_head(spark, cfg, sink, schemas, head)
    schema_changes: list = []
    changes = changes_of(root, schemas[0], schema_changes)
    assert [c["schema_change"]["ddl"] for c in schema_changes] == [
        "ALTER TABLE mixed MODIFY s VARCHAR(20) CHARACTER SET utf8mb4"
    ], schema_changes
    _assert_exactly_once(changes)
    _seqs_ascending(root, t)
    assert [(c["_op"], c["id"]) for c in changes][:5] == [("+I", i) for i in range(1, 6)]
    assert len(changes) == 5 + 5 + 4 + 1  # inserts, inserts, two updates as -U/+U, a delete
    state: dict = {}
    apply_rows(state, changes, schemas[0])
    assert diff(_source_rows(mariadb, schemas[0]), state) == ""


def test_direct_batches_report_changes_not_part_records(mariadb, fresh_db, spark, tmp_dir):
    """status.json's rows_last_batch comes from the sink: Spark's numInputRows counts part records."""
    spec = create_int_table(mariadb, fresh_db, 200)
    t = TableId(fresh_db, spec.table)
    start = _head(mariadb)
    mariadb.execute(f"UPDATE {t.quoted} SET a = a + 1")
    head = _head(mariadb)
    cfg = _config(
        mariadb,
        fresh_db,
        tmp_dir,
        [spec.table],
        "specific-offset",
        {"file": start.file, "position": start.position},
        trigger_interval_s=0.0,
    )
    schemas = _schemas(cfg, fresh_db, [spec.table])
    sink = ChangelogSink(str(tmp_dir / "sink"))
    sink.prepare(schemas)
    noted: list[tuple[str, int, int]] = []
    import airflow_provider_mysqlcdc.spark.runtime.stream_status as status

    original = status.note_rows_written
    status.note_rows_written = lambda q, b, n: (noted.append((q, b, n)), original(q, b, n))  # type: ignore
    try:
        query = start_stream(spark, cfg, sink, schemas)
        try:
            _wait(_caught_up(query, head), 90, "the stream to reach the head", query)
            progress = [p for p in query.recentProgress if p["numInputRows"]]
        finally:
            query.stop()
    finally:
        status.note_rows_written = original
    assert progress and all(p["numInputRows"] == 1 for p in progress)  # one part record per batch
    assert sum(n for _, _, n in noted) == 200 and all(q == str(query.id) for q, _, _ in noted)
    note_rows_written(str(query.id), 99, 5)
    assert rows_written(str(query.id), 99) == 5
