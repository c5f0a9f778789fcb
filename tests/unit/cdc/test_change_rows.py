"""The columnar source layout is lossless for every canonical value, numbers rows by binlog position,
and its change rows follow Flink's RowKind."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from airflow_provider_mysqlcdc.cdc.events import RowChange
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.types import map_table
from airflow_provider_mysqlcdc.spark.sinks.base import META_COLUMNS
from airflow_provider_mysqlcdc.spark.stream.reading import change_rows as cr

T = TableId("shop", "all_types")
UTC = dt.timezone.utc


def _schema() -> TableSchema:
    cols = [
        Column("id", 1, "bigint", "bigint(20)", False, numeric_precision=19, numeric_scale=0),
        Column("u64", 2, "bigint", "bigint(20) unsigned", True, numeric_precision=20, numeric_scale=0),
        Column("amount", 3, "decimal", "decimal(12,2)", True, numeric_precision=12, numeric_scale=2),
        Column("huge", 4, "decimal", "decimal(65,30)", True, numeric_precision=65, numeric_scale=30),
        Column("f", 5, "float", "float", True),
        Column("d", 6, "double", "double", True),
        Column("dt", 7, "datetime", "datetime(6)", True, datetime_precision=6),
        Column("ts", 8, "timestamp", "timestamp(3)", True, datetime_precision=3),
        Column("day", 9, "date", "date", True),
        Column("t", 10, "time", "time(6)", True, datetime_precision=6),
        Column(
            "s",
            11,
            "varchar",
            "varchar(20)",
            True,
            charset="utf8mb4",
            collation="utf8mb4_general_ci",
            char_max_length=20,
        ),
        Column("b", 12, "varbinary", "varbinary(10)", True, char_max_length=10),
        Column("e", 13, "enum", "enum('a','b')", True, charset="utf8mb4"),
    ]
    return TableSchema(T, tuple(cols), ("id",), ("id",), ("id",))


def _row(i: int) -> dict:
    return {
        "id": i,
        "u64": decimal.Decimal(2**64 - 1),
        "amount": decimal.Decimal("-12.50"),
        "huge": "-0.000000000000000000000000000001",
        "f": 1.2345678806304932,
        "d": 0.1 + 0.2,
        "dt": dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
        "ts": dt.datetime(2038, 1, 19, 3, 14, 7, 123000, UTC),
        "day": dt.date(1, 1, 1),
        "t": -3020399000000,
        "s": "é😀 x",
        "b": b"\x00\xff\x00",
        "e": "",
    }


F2 = "mysql-bin.000002"


def _change(kind: str, before, after, pos: int = 400, row: int = 1, file: str = F2) -> RowChange:
    return RowChange(kind, T, before, after, BinlogOffset(file, pos, row=row), "0-1-9", 1_700_000_000)


def _layout() -> cr.SourceLayout:
    other = TableSchema(
        TableId("shop", "other"),
        (Column("k", 1, "int", "int(11)", False, numeric_precision=10, numeric_scale=0),),
        ("k",),
        ("k",),
        ("k",),
    )
    return cr.SourceLayout([other, _schema()], "UTC")


def test_row_changes_round_trip_losslessly_through_the_layout():
    layout = _layout()
    changes = [
        _change("insert", None, _row(7)),
        _change("update", _row(7), dict(_row(7), s=None), pos=500),
        _change("delete", {k: None for k in _row(1)}, None, pos=600, row=0),
    ]
    (batch,) = layout.from_changes(changes, first_file_index=2)
    assert batch.schema == layout.arrow_schema
    rows = batch.to_pylist()
    assert [r["t0"] for r in rows] == [None, None, None]  # the other table's column stays empty
    assert rows[0]["t1"] == {"before": None, "after": _row(7)}
    assert [type(v) for v in rows[0]["t1"]["after"].values()] == [type(v) for v in _row(7).values()]
    assert rows[1]["t1"]["after"]["s"] is None and rows[1]["t1"]["before"] == _row(7)
    assert rows[2]["t1"]["before"] == {k: None for k in _row(1)}
    assert [(r["op"], r["binlog_pos"], r["binlog_row"], r["gtid"]) for r in rows] == [
        ("insert", 400, 1, "0-1-9"),
        ("update", 500, 1, "0-1-9"),
        ("delete", 600, 0, "0-1-9"),
    ]
    assert rows[0]["event_time"] == dt.datetime.fromtimestamp(1_700_000_000, UTC)


def test_seq_follows_binlog_order_across_files_and_rows():
    offsets = [
        (F2, 4, 0),
        (F2, 400, 0),
        (F2, 400, 1),
        (F2, 401, 0),
        ("mysql-bin.000003", 4, 0),
        ("mysql-bin.000003", 2**32 - 1, 2**20 - 1),
        ("mysql-bin.000012", 7, 3),
    ]
    seqs = [cr.seq_of(f, p, r, 2) for f, p, r in offsets]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert 2 * max(seqs) + 1 < 2**63
    with pytest.raises(ValueError):
        cr.seq_of("mysql-bin.000001", 4, 0, 2)  # before the micro-batch's first file
    with pytest.raises(ValueError):
        cr.seq_of(F2, 4, 2**20, 2)


def test_from_arrow_numbers_rows_like_from_changes_and_casts_images():
    import pyarrow as pa

    layout = _layout()
    slot = layout.slot(T)
    changes = [_change("insert", None, _row(1), pos=900, row=0), _change("insert", None, _row(2), pos=900, row=1)]
    (expected,) = layout.from_changes(changes, first_file_index=1)
    # a fast-decoder batch: the same metadata, before/after as plain structs
    src = pa.RecordBatch.from_arrays(
        [
            expected.column(n)
            for n in ("database", "table", "op", "binlog_file", "binlog_pos", "binlog_row", "gtid", "event_time")
        ]
        + [expected.column("t1").field("before"), expected.column("t1").field("after")],
        names=[
            "database",
            "table",
            "op",
            "binlog_file",
            "binlog_pos",
            "binlog_row",
            "gtid",
            "event_time",
            "before",
            "after",
        ],
    )
    got = layout.from_arrow(T, src, first_file_index=1)
    assert got.equals(expected)
    assert got.column("seq").to_pylist() == [cr.seq_of(F2, 900, r, 1) for r in (0, 1)]
    assert slot.column == "t1"


def test_a_binlog_image_with_other_columns_is_a_schema_mismatch():
    import pyarrow as pa

    from airflow_provider_mysqlcdc.cdc.errors import SchemaMismatchError

    layout = _layout()
    (good,) = layout.from_changes([_change("insert", None, _row(1))], first_file_index=2)
    after = good.column("t1").field("after")
    fewer = pa.StructArray.from_arrays(after.flatten()[:-1], names=[f.name for f in after.type][:-1])
    src = pa.RecordBatch.from_arrays(
        [
            good.column(n)
            for n in ("database", "table", "op", "binlog_file", "binlog_pos", "binlog_row", "gtid", "event_time")
        ]
        + [fewer, fewer],
        names=[
            "database",
            "table",
            "op",
            "binlog_file",
            "binlog_pos",
            "binlog_row",
            "gtid",
            "event_time",
            "before",
            "after",
        ],
    )
    with pytest.raises(SchemaMismatchError, match="reads one shape per table for the whole query"):
        layout.from_arrow(T, src, first_file_index=2)
    with pytest.raises(SchemaMismatchError, match="lacks column 'e'"):
        layout.from_changes([_change("insert", None, {k: v for k, v in _row(1).items() if k != "e"})], 2)


def test_change_schema_is_snapshot_type_plus_meta():
    from airflow_provider_mysqlcdc.spark.types import struct_type

    mappings = map_table(_schema(), "UTC")
    s = cr.change_schema(mappings)
    assert s.fields[: len(mappings)] == struct_type(mappings).fields
    assert tuple(s.names[len(mappings) :]) == META_COLUMNS


def test_typed_changes_one_row_per_op_in_order(spark):
    layout = _layout()
    changes = [
        _change("update", _row(1), dict(_row(1), amount=decimal.Decimal("3.00")), pos=400, row=0),
        _change("insert", None, _row(2), pos=500, row=0),
        _change("delete", _row(2), None, pos=600, row=0),
    ]
    batches = layout.from_changes(changes, first_file_index=2)
    frame = spark.createDataFrame(pa_table(batches), layout.spark_schema)
    out = cr.typed_changes(frame, layout, T).orderBy("_seq").toArrow().to_pylist()
    assert [r["_op"] for r in out] == ["-U", "+U", "+I", "-D"]
    seqs = [r["_seq"] for r in out]
    assert seqs[1] == seqs[0] + 1 and seqs == sorted(seqs)
    assert {k: out[0][k] for k in _row(1)} == _row(1)
    assert out[1]["amount"] == decimal.Decimal("3.00")
    assert {k: out[2][k] for k in _row(2)} == _row(2) == {k: out[3][k] for k in _row(2)}
    assert (out[0]["_database"], out[0]["_table"], out[0]["_binlog_file"], out[0]["_binlog_pos"], out[0]["_gtid"]) == (
        "shop",
        "all_types",
        F2,
        400,
        "0-1-9",
    )
    assert [f.name for f in cr.typed_changes(frame, layout, T).schema.fields] == [
        f.name for f in cr.change_schema(map_table(_schema(), "UTC")).fields
    ]


def pa_table(batches):
    import pyarrow as pa

    return pa.Table.from_batches(batches)
