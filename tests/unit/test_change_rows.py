"""Payload encoding is lossless for every canonical value, and change rows follow Flink's RowKind."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pytest

from airflow_provider_mysqlcdc.cdc.events import RowChange
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.types import map_table
from airflow_provider_mysqlcdc.spark import change_rows as cr
from airflow_provider_mysqlcdc.spark.sinks.base import META_COLUMNS

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
        Column("s", 11, "varchar", "varchar(20)", True, charset="utf8mb4", collation="utf8mb4_general_ci",
               char_max_length=20),
        Column("b", 12, "varbinary", "varbinary(10)", True, char_max_length=10),
        Column("e", 13, "enum", "enum('a','b')", True, charset="utf8mb4"),
    ]
    return TableSchema(T, tuple(cols), ("id",), ("id",), ("id",))


def _row(i: int) -> dict:
    return {
        "id": i, "u64": decimal.Decimal(2**64 - 1), "amount": decimal.Decimal("-12.50"),
        "huge": "-0.000000000000000000000000000001", "f": 1.2345678806304932, "d": 0.1 + 0.2,
        "dt": dt.datetime(1969, 12, 31, 23, 59, 59, 999999), "ts": dt.datetime(2038, 1, 19, 3, 14, 7, 123000, UTC),
        "day": dt.date(1, 1, 1), "t": -3020399000000, "s": "é😀 x", "b": b"\x00\xff\x00", "e": "",
    }


def test_payload_round_trip_is_lossless():
    mappings = map_table(_schema(), "UTC")
    row = _row(7)
    payload = json.loads(cr.encode_payload(row, None))
    assert payload["after"] is None
    back = cr.decode_image(payload["before"], mappings)
    assert back == row
    assert [type(v) for v in back.values()] == [type(v) for v in row.values()]


def test_nulls_round_trip():
    mappings = map_table(_schema(), "UTC")
    row = {k: None for k in _row(1)}
    assert cr.decode_image(json.loads(cr.encode_payload(None, row))["after"], mappings) == row


def _src(kind: str, before, after, seq: int = 3) -> dict:
    ch = RowChange(kind, T, before, after, BinlogOffset("mysql-bin.000002", 400, row=1), "0-1-9", 1_700_000_000)
    names = [f.name for f in cr.change_schema(map_table(_schema(), "UTC")).fields]
    assert len(names) == len(_schema().columns) + len(META_COLUMNS)
    from airflow_provider_mysqlcdc.spark.binlog_source import SOURCE_SCHEMA

    return dict(zip(SOURCE_SCHEMA.names, cr.source_row(ch, seq)))


@pytest.mark.parametrize("kind, ops", [("insert", ["+I"]), ("delete", ["-D"]), ("update", ["-U", "+U"])])
def test_one_row_per_op_in_order(kind, ops):
    decode = cr.image_decoder(map_table(_schema(), "UTC"))
    before = _row(1) if kind != "insert" else None
    after = dict(_row(2), amount=decimal.Decimal("3.00")) if kind != "delete" else None
    rows = cr.change_records(_src(kind, before, after), decode)
    assert [r["_op"] for r in rows] == ops
    assert [r["_seq"] for r in rows] == [6, 7][: len(ops)]
    images = {"+I": after, "-D": before, "-U": before, "+U": after}
    for r in rows:
        assert {k: r[k] for k in _row(0)} == images[r["_op"]]
        assert (r["_database"], r["_table"], r["_binlog_file"], r["_binlog_pos"], r["_binlog_row"], r["_gtid"]) == \
            ("shop", "all_types", "mysql-bin.000002", 400, 1, "0-1-9")
        assert r["_event_time"] == dt.datetime.fromtimestamp(1_700_000_000, UTC)


def test_missing_column_is_a_schema_mismatch():
    from airflow_provider_mysqlcdc.cdc.errors import SchemaMismatchError

    img = cr.encode_image(_row(1))
    del img["s"]
    with pytest.raises(SchemaMismatchError, match="lacks column 's'"):
        cr.decode_image(img, map_table(_schema(), "UTC"))


def test_change_schema_is_snapshot_type_plus_meta():
    from airflow_provider_mysqlcdc.spark.types import struct_type

    mappings = map_table(_schema(), "UTC")
    s = cr.change_schema(mappings)
    assert s.fields[: len(mappings)] == struct_type(mappings).fields
    assert tuple(s.names[len(mappings):]) == META_COLUMNS


def test_arrow_conversion_builds_typed_batches():
    import pyarrow as pa

    mappings = map_table(_schema(), "UTC")
    from airflow_provider_mysqlcdc.spark.binlog_source import SOURCE_SCHEMA

    src = [_src("update", _row(1), _row(2), seq=0), _src("insert", None, _row(3), seq=1)]
    batch = pa.RecordBatch.from_pylist(src)
    out = list(cr._to_change_batches(mappings)(iter([batch])))
    rows = [r for b in out for r in b.to_pylist()]
    assert [r["_op"] for r in rows] == ["-U", "+U", "+I"]
    assert [r["_seq"] for r in rows] == [0, 1, 2]
    assert {k: rows[2][k] for k in _row(3)} == _row(3)
    assert len(SOURCE_SCHEMA.names) == 10
