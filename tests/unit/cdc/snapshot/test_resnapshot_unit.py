"""The pure parts of a re-snapshot handed to the stream: manifests, pending, range membership,
and the change rows that replace a range (the integration test runs them on real sinks)."""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.chunks import Batch, Chunk, KeyRange
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.snapshot.resnapshot import (
    Handoff,
    mark_applied,
    pending,
    read_applied,
    write_manifest,
)
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.sinks.resnapshot_rows import RESNAPSHOT_SEQ, replacement_table, resnapshot_lines
from airflow_provider_mysqlcdc.spark.stream.tables.resnapshots import _in_range, _keys_not_in

T = TableId("shop", "orders")
SCHEMA = TableSchema(
    T,
    (Column("id", 1, "bigint", "bigint", False), Column("s", 2, "varchar", "varchar(20)", True)),
    ("id",),
    ("id",),
    ("id",),
)


def _handoff(hid: str, created: float) -> Handoff:
    batch = Batch("batch-0001", (Chunk(T, 1, (100,), (200,)),))
    return Handoff(
        hid,
        batch,
        BinlogOffset("mysql-bin.000002", 500),
        BinlogOffset("mysql-bin.000002", 400),
        {T: SCHEMA},
        {T: f"handoffs/{hid}/rows/shop.orders"},
        {T: 7},
        5405,
        created,
    )


def test_a_manifest_round_trips_and_pending_lists_unapplied_ones_oldest_first(tmp_path):
    state = StateStore(str(tmp_path))
    assert pending(state) == []
    write_manifest(state, _handoff("b", 2.0))
    write_manifest(state, _handoff("a", 1.0))
    (tmp_path / "handoffs" / "died-before-its-manifest" / "rows").mkdir(parents=True)
    got = pending(state)
    assert [h.handoff_id for h in got] == ["a", "b"]
    assert got[0] == _handoff("a", 1.0) and got[0].ranges == (KeyRange(T, (100,), (200,)),)
    mark_applied(state, "a", {"micro_batch": 3, "rows": 7})
    assert [h.handoff_id for h in pending(state)] == ["b"] and read_applied(state, "a")["micro_batch"] == 3


def test_the_health_check_lists_waiting_and_taken_over_handoffs(tmp_path):
    from airflow_provider_mysqlcdc.cdc.snapshot.resnapshot import status

    state = StateStore(str(tmp_path))
    assert status(state) == {"pending": [], "applied": [], "applied_total": 0, "table_reads": []}
    write_manifest(state, _handoff("a", 1.0))
    write_manifest(state, _handoff("b", 2.0))
    mark_applied(state, "a", {"micro_batch": 9, "rows": 7, "deleted": 0})
    got = status(state)
    assert [p["handoff"] for p in got["pending"]] == ["b"] and got["pending"][0]["batch"] == "batch-0001"
    assert got["applied_total"] == 1 and got["applied"][0]["micro_batch"] == 9


def test_a_table_read_request_lives_until_it_is_forgotten_and_carries_its_last_error(tmp_path):
    from airflow_provider_mysqlcdc.cdc.snapshot.resnapshot import (
        forget_table_read,
        note_table_read,
        request_table_read,
        status,
        table_read_requests,
    )

    state = StateStore(str(tmp_path))
    odd = TableId("my.db", "t/1`x")  # a name that is no file name as it is
    request_table_read(state, odd, {"file": "b.000001", "position": 4}, "RENAME TABLE a TO t")
    request_table_read(state, T, {"file": "b.000001", "position": 9}, "RENAME TABLE b TO t")
    assert [(r["database"], r["name"]) for r in table_read_requests(state)] == [
        ("my.db", "t/1`x"),
        (T.database, T.table),
    ]
    note_table_read(state, odd, error="OperationalError: gone")
    note_table_read(state, TableId("x", "never"), error="ignored")  # no request: nothing written
    assert [r.get("error") for r in status(state)["table_reads"]] == ["OperationalError: gone", None]
    forget_table_read(state, odd)
    assert [r["table"] for r in table_read_requests(state)] == [str(T)]


def test_range_membership_with_integer_keys_and_nulls():
    keys = pa.table({"id": pa.array([99, 100, 150, 199, 200, None], pa.int64())})
    assert _in_range(keys, SCHEMA, KeyRange(T, (100,), (200,)), None).column("id").to_pylist() == [100, 150, 199]
    assert _in_range(keys, SCHEMA, KeyRange(T, None, (100,), True), None).column("id").to_pylist() == [99, None]
    assert _in_range(keys, SCHEMA, KeyRange(T, (200,), None), None).column("id").to_pylist() == [200]


def test_keys_the_rows_lack_are_deleted_once_each():
    keys = pa.table({"id": pa.array([1, 2, 3, 3, 4], pa.int64())})
    rows = pa.table({"id": pa.array([2, 4], pa.int64()), "s": ["b", "d"]})
    assert _keys_not_in(keys, rows, ("id",)).column("id").to_pylist() == [1, 3]


def test_the_replacement_rows_come_after_every_change_in_the_sinks_layout():
    image = pa.struct([pa.field("id", pa.int64()), pa.field("s", pa.string())])
    rows = pa.table({"id": pa.array([2, 4], pa.int32()), "s": ["b", "d"]})
    gone = pa.table({"id": pa.array([1], pa.int64())})
    t = replacement_table(image, rows, gone, RESNAPSHOT_SEQ)
    assert t.schema.names == ["id", "s", "_op", "_seq"] and t.schema.field("id").type == pa.int64()
    assert t.to_pylist() == [
        {"id": 2, "s": "b", "_op": "+I", "_seq": RESNAPSHOT_SEQ},
        {"id": 4, "s": "d", "_op": "+I", "_seq": RESNAPSHOT_SEQ},
        {"id": 1, "s": None, "_op": "-D", "_seq": RESNAPSHOT_SEQ},
    ]
    from airflow_provider_mysqlcdc.spark.stream.reading.change_rows import seq_of

    last = seq_of("mysql-bin.000511", (1 << 32) - 1, (1 << 20) - 1, 0)  # 512 files into a micro-batch
    assert RESNAPSHOT_SEQ > 2 * last + 1


def test_changelog_lines_name_the_ranges_and_where_the_rows_are_exact():
    import json

    rows = pa.table({"id": pa.array([2], pa.int64()), "s": ["b"]})
    info = {"batch": "batch-0001", "handoff": "h1", "exact_at": {"file": "mysql-bin.000002", "position": 900}}
    head, line = [json.loads(x) for x in resnapshot_lines(T, rows, KeyRange(T, (100,), (200,)), info, 12, "abc")]
    assert head["op"] == "RS" and head["resnapshot"]["ranges"] == [KeyRange(T, (100,), (200,)).to_dict()]
    assert head["resnapshot"]["exact_at"] == info["exact_at"] and head["resnapshot"]["rows"] == 1
    assert line == {
        "data": {"id": 2, "s": "b"},
        "op": "r",
        "meta": {"database": "shop", "table": "orders", "batch": 12, "resnapshot": "h1", "schema_id": "abc"},
    }


def test_a_batch_is_handed_over_in_pieces_of_consecutive_chunks_per_table():
    from airflow_provider_mysqlcdc.spark.snapshot.job import split_batch

    u = TableId("shop", "items")
    chunks = tuple(Chunk(T, i, (i * 10,) if i else None, ((i + 1) * 10,)) for i in range(5)) + (
        Chunk(u, 5, None, None),
    )
    batch = Batch("batch-0003", chunks)
    pieces = split_batch(batch, estimated_rows=600, piece_rows=250)  # ~100 rows a chunk: 2 chunks a piece
    assert [[c.chunk_id for c in p.chunks] for p in pieces] == [[0, 1], [2, 3], [4], [5]]
    assert all(p.batch_id == "batch-0003" and len(p.tables) == 1 for p in pieces)
    assert pieces[1].ranges() == (KeyRange(T, (20,), (40,)),)
    assert [len(p.chunks) for p in split_batch(batch, 0, 250)] == [5, 1]  # no estimate: one piece a table
    assert len(split_batch(batch, 6_000_000, 100_000)) == 6  # never less than a chunk


def test_a_created_table_counts_when_the_list_matches_it_and_it_is_no_schema_change_helper():
    from airflow_provider_mysqlcdc.spark.stream.settings import StreamSettings

    s = StreamSettings.__new__(StreamSettings)
    object.__setattr__(s, "include", (r"shop\..*",))
    object.__setattr__(s, "exclude", ("shop.audit",))
    assert s.new_table(TableId("shop", "refunds"))
    assert not s.new_table(TableId("shop", "audit")) and not s.new_table(TableId("other", "refunds"))
    for helper in ("_orders_gho", "_orders_ghc", "_orders_del", "_orders_new", "_orders_old"):
        assert not s.new_table(TableId("shop", helper)), helper
    object.__setattr__(s, "include", ())
    assert not s.new_table(TableId("shop", "refunds"))


def test_taken_over_rows_and_old_orphans_leave_the_state(tmp_path):
    import os
    import time as _time

    from airflow_provider_mysqlcdc.cdc.snapshot.resnapshot import forget_orphans, forget_rows

    state = StateStore(str(tmp_path))
    write_manifest(state, _handoff("a", 1.0))
    (tmp_path / "handoffs" / "a" / "rows" / "shop.orders").mkdir(parents=True)
    forget_rows(state, "a")
    assert (
        not (tmp_path / "handoffs" / "a" / "rows").exists() and (tmp_path / "handoffs" / "a" / "manifest.json").exists()
    )
    old, young = tmp_path / "handoffs" / "dead-old" / "rows", tmp_path / "handoffs" / "dead-young" / "rows"
    old.mkdir(parents=True)
    young.mkdir(parents=True)
    past = _time.time() - 7 * 3600
    os.utime(old.parent, (past, past))
    assert forget_orphans(state) == ["dead-old"]
    assert young.exists() and not old.parent.exists() and (tmp_path / "handoffs" / "a").exists()


def test_a_sink_reads_only_an_integer_ranges_keys(tmp_path):
    from dataclasses import replace

    from airflow_provider_mysqlcdc.spark.sinks.base import META_OP
    from airflow_provider_mysqlcdc.spark.sinks.delta.sink import DeltaSink
    from airflow_provider_mysqlcdc.spark.sinks.resnapshot_rows import integer_bounds

    assert integer_bounds(SCHEMA, KeyRange(T, (100,), (200,))) == ("id", 100, 200)
    assert integer_bounds(SCHEMA, KeyRange(T, None, (200,))) == ("id", None, 200)
    assert integer_bounds(SCHEMA, KeyRange(T, None, (200,), True)) is None  # NULL keys: read all
    text_key = replace(SCHEMA, chunk_key=("s",))
    assert integer_bounds(text_key, KeyRange(T, ("a",), ("m",))) is None  # collations: read all
    sink = DeltaSink(str(tmp_path))
    sink.prepare([SCHEMA])
    rows = pa.table({"id": pa.array(range(0, 300, 10), pa.int64()), "s": ["x"] * 30, META_OP: ["+I"] * 30})
    sink._merge(sink.open_table(T), SCHEMA, sink._merge_source(SCHEMA, rows), batch_id=0)
    got = sink.keys_in_sink(SCHEMA, KeyRange(T, (100,), (200,))).column("id").to_pylist()
    assert sorted(got) == list(range(100, 200, 10))
    assert len(sink.keys_in_sink(SCHEMA, KeyRange(T, None, None, True))) == 30


def test_piece_rows_round_trip_through_the_state_without_spark(tmp_path):
    """The rows a batch job hands over are written and read with pyarrow through the state's file
    system (no Hadoop connector), types and nulls kept; the part files of a hand-off an earlier
    version wrote through Spark are read too, in file order."""
    import datetime as dt
    import decimal

    import pyarrow.parquet as pq
    import pytest

    from airflow_provider_mysqlcdc.cdc.snapshot.resnapshot import read_rows, rows_rel, write_rows

    state = StateStore(str(tmp_path))
    rows = pa.table(
        {
            "id": pa.array([1, 2**63 - 1, None], pa.int64()),
            "u": pa.array([decimal.Decimal(2**64 - 1), decimal.Decimal(0), None], pa.decimal128(20, 0)),
            "ts": pa.array([dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc), None, None], pa.timestamp("us", "UTC")),
            "s": pa.array(["a\x00b", "", None]),
        }
    )
    rel = rows_rel("h1", T)
    write_rows(state, rel, rows)
    assert read_rows(state, rel).equals(rows)
    write_rows(state, rows_rel("h0", T), rows.slice(0, 0))
    empty = read_rows(state, rows_rel("h0", T))
    assert empty.num_rows == 0 and empty.schema == rows.schema

    legacy = tmp_path / "handoffs" / "h2" / "rows" / "shop.orders"
    legacy.mkdir(parents=True)
    pq.write_table(rows.slice(1), legacy / "part-00001-x.snappy.parquet")
    pq.write_table(rows.slice(0, 1), legacy / "part-00000-x.snappy.parquet")
    (legacy / "_SUCCESS").write_text("")
    assert read_rows(state, rows_rel("h2", T)).equals(rows)
    with pytest.raises(FileNotFoundError, match="no Parquet rows"):
        read_rows(state, rows_rel("missing", T))
