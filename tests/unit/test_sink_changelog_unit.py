"""The changelog's JSON encoding: stable, lossless, changelog-json shaped (no Spark, no server)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.spark.sinks.changelog import (
    LineEncoder, decode_value, format_micros, json_values, row_decoder,
)

UTC = dt.timezone.utc


def test_values_are_encoded_losslessly():
    cases = [
        (pa.array([Decimal("1.50"), Decimal("-0.01"), None], pa.decimal128(12, 2)), ["1.50", "-0.01", None]),
        (pa.array([Decimal("18446744073709551615"), Decimal(0)], pa.decimal128(20, 0)),
         ["18446744073709551615", "0"]),
        (pa.array([Decimal("0E-10")], pa.decimal128(20, 10)), ["0.0000000000"]),  # never exponent form
        (pa.array([b"\x00\xff", b"", None], pa.binary()), ["AP8=", "", None]),
        (pa.array([dt.datetime(1000, 1, 1, 0, 0, 0, 1), dt.datetime(2026, 3, 8, 2, 30)], pa.timestamp("us")),
         ["1000-01-01T00:00:00.000001", "2026-03-08T02:30:00.000000"]),
        (pa.array([dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
         ["1969-12-31T23:59:59.500000Z"]),
        # An instant labelled with another zone (Spark's session zone) is still printed in UTC.
        (pa.array([0], pa.int64()).cast(pa.timestamp("us", tz="America/New_York")), ["1970-01-01T00:00:00.000000Z"]),
        (pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31)], pa.date32()), ["0001-01-01", "9999-12-31"]),
        (pa.array([-3020399000000, 0], pa.int64()), [-3020399000000, 0]),  # TIME as micros
        (pa.array([1.2345678], pa.float32()), [float(pa.array([1.2345678], pa.float32())[0].as_py())]),
        (pa.array([float("nan"), float("inf")], pa.float64()), ["NaN", "Infinity"]),
        (pa.array(["h\U0001F600llo", ""], pa.string()), ["h\U0001F600llo", ""]),
    ]
    for array, expected in cases:
        assert json_values(array) == expected, array.type
        # and back to the canonical value
        back = [decode_value(v, array.type) for v in expected]
        want = array.to_pylist()
        if pa.types.is_floating(array.type):
            assert [str(b) for b in back] == [str(w) for w in want]
        elif pa.types.is_timestamp(array.type) and array.type.tz:
            assert [b.timestamp() for b in back] == [w.timestamp() for w in want]
        else:
            assert back == want, array.type


def test_format_micros_is_fixed_width():
    assert format_micros(0, utc=False) == "1970-01-01T00:00:00.000000"
    assert format_micros(1, utc=True) == "1970-01-01T00:00:00.000001Z"


def _schema() -> TableSchema:
    cols = (Column("id", 1, "int", "int(11)", False), Column("amount", 2, "decimal", "decimal(5,2)", True,
                                                              numeric_precision=5, numeric_scale=2),
            Column("raw", 3, "blob", "blob", True), Column("at", 4, "timestamp", "timestamp", True))
    return TableSchema(TableId("shop", "orders"), cols, ("id",), ("id",), ("id",))


def test_snapshot_lines_have_changelog_json_shape():
    batch = pa.record_batch({"id": pa.array([1, 2], pa.int32()),
                             "amount": pa.array([Decimal("9.99"), None], pa.decimal128(5, 2)),
                             "raw": pa.array([b"\x01", None]),
                             "at": pa.array([0, None], pa.timestamp("us", tz="UTC"))})
    enc = LineEncoder(("id", "amount", "raw", "at"), "shop", "orders", snapshot_batch="shop.orders#0-2")
    text = enc(batch).decode("utf-8")
    assert text.endswith("\n") and text.count("\n") == 2
    first = text.splitlines()[0]
    assert first == ('{"data":{"id":1,"amount":"9.99","raw":"AQ==","at":"1970-01-01T00:00:00.000000Z"},'
                     '"op":"+I","meta":{"database":"shop","table":"orders","snapshot_batch":"shop.orders#0-2"}}')
    assert enc(batch) == enc(batch), "stable bytes"
    decode = row_decoder(_schema())
    assert decode(json.loads(first)["data"]) == {"id": 1, "amount": Decimal("9.99"), "raw": b"\x01",
                                                 "at": dt.datetime(1970, 1, 1, tzinfo=UTC)}


def test_stream_lines_carry_op_and_offsets():
    batch = pa.record_batch({
        "id": pa.array([7], pa.int32()), "_op": ["-D"], "_database": ["shop"], "_table": ["orders"],
        "_binlog_file": ["mariadb-bin.000003"], "_binlog_pos": pa.array([1234], pa.int64()),
        "_binlog_row": pa.array([2], pa.int64()), "_gtid": ["0-1-42"],
        "_event_time": pa.array([dt.datetime(2024, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
        "_seq": pa.array([17], pa.int64())})
    line = json.loads(LineEncoder(("id",), "shop", "orders", stream_batch=123)(batch))
    assert line == {"data": {"id": 7}, "op": "-D", "meta": {
        "database": "shop", "table": "orders", "binlog_file": "mariadb-bin.000003", "binlog_pos": 1234,
        "binlog_row": 2, "gtid": "0-1-42", "event_time": "2024-01-01T00:00:00.000000Z", "seq": 17,
        "batch": 123}}
    assert list(line) == ["data", "op", "meta"]
