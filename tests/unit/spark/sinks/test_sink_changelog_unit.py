"""The changelog's JSON encoding: stable, lossless, changelog-json shaped (no Spark, no server)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.spark.sinks.json_values import decode_value, format_micros, json_values, row_decoder

UTC = dt.timezone.utc


def test_values_are_encoded_losslessly():
    cases = [
        (pa.array([Decimal("1.50"), Decimal("-0.01"), None], pa.decimal128(12, 2)), ["1.50", "-0.01", None]),
        (pa.array([Decimal("18446744073709551615"), Decimal(0)], pa.decimal128(20, 0)), ["18446744073709551615", "0"]),
        (pa.array([Decimal("0E-10")], pa.decimal128(20, 10)), ["0.0000000000"]),  # never exponent form
        (pa.array([b"\x00\xff", b"", None], pa.binary()), ["AP8=", "", None]),
        (
            pa.array([dt.datetime(1000, 1, 1, 0, 0, 0, 1), dt.datetime(2026, 3, 8, 2, 30)], pa.timestamp("us")),
            ["1000-01-01T00:00:00.000001", "2026-03-08T02:30:00.000000"],
        ),
        (
            pa.array([dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
            ["1969-12-31T23:59:59.500000Z"],
        ),
        # An instant labelled with another zone (Spark's session zone) is still printed in UTC.
        (pa.array([0], pa.int64()).cast(pa.timestamp("us", tz="America/New_York")), ["1970-01-01T00:00:00.000000Z"]),
        (pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31)], pa.date32()), ["0001-01-01", "9999-12-31"]),
        (pa.array([-3020399000000, 0], pa.int64()), [-3020399000000, 0]),  # TIME as micros
        (pa.array([1.2345678], pa.float32()), [float(pa.array([1.2345678], pa.float32())[0].as_py())]),
        (pa.array([float("nan"), float("inf")], pa.float64()), ["NaN", "Infinity"]),
        (pa.array(["h\U0001f600llo", ""], pa.string()), ["h\U0001f600llo", ""]),
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
    cols = (
        Column("id", 1, "int", "int(11)", False),
        Column("amount", 2, "decimal", "decimal(5,2)", True, numeric_precision=5, numeric_scale=2),
        Column("raw", 3, "blob", "blob", True),
        Column("at", 4, "timestamp", "timestamp", True),
    )
    return TableSchema(TableId("shop", "orders"), cols, ("id",), ("id",), ("id",))


def test_row_decoder_turns_a_line_back_into_canonical_values():
    decode = row_decoder(_schema())
    data = json.loads('{"id":1,"amount":"9.99","raw":"AQ==","at":"1970-01-01T00:00:00.000000Z"}')
    assert decode(data) == {
        "id": 1,
        "amount": Decimal("9.99"),
        "raw": b"\x01",
        "at": dt.datetime(1970, 1, 1, tzinfo=UTC),
    }


def _seq_batches(*runs: list[int]) -> list[pa.RecordBatch]:
    return [pa.record_batch({"line": [f"l{k}" for k in r], "_seq": pa.array(r, pa.int64())}) for r in runs]


def test_in_order_keeps_ordered_input_and_sorts_the_rest():
    from airflow_provider_mysqlcdc.spark.sinks.files.arrow import in_order

    ordered = _seq_batches([1, 2, 5], [], [5, 9])
    got, first, last = in_order(iter(ordered), "_seq")
    assert (first, last) == (1, 9) and [b.num_rows for b in got] == [3, 2]  # passed through
    assert got[0] is ordered[0]
    for runs in ([[3, 1, 2]], [[1, 4], [2, 3]]):  # unsorted inside a batch, or across batches
        got, first, last = in_order(iter(_seq_batches(*runs)), "_seq")
        lines = [x for b in got for x in b.column("line").to_pylist()]
        assert lines == [f"l{k}" for k in sorted(k for r in runs for k in r)] and (first, last) == (
            1,
            max(map(max, runs)),
        )
    assert in_order(iter(_seq_batches([])), "_seq")[0] == []


@pytest.mark.parametrize("kernel", ["copy_file_range", "refused", "refused midway"])
def test_append_files_joins_in_order(tmp_path, monkeypatch, kernel):
    """The direct write's join on a local filesystem: the first part grows into the batch's file."""
    import os

    from airflow_provider_mysqlcdc.spark.sinks.changelog.sink import append_files

    parts = [tmp_path / f"p{i}" for i in range(3)]
    data = [bytes([65 + i]) * (3_000_000 + i) for i in range(3)]
    for p, d in zip(parts, data):
        p.write_bytes(d)
    if kernel != "copy_file_range":
        real = os.copy_file_range
        calls = []

        def copy_file_range(src, dst, count, offset_src, offset_dst):
            calls.append(count)
            if kernel == "refused" or len(calls) > 1:
                raise OSError(18, "Invalid cross-device link")
            return real(src, dst, min(count, 1000), offset_src, offset_dst)

        monkeypatch.setattr(os, "copy_file_range", copy_file_range)
    append_files(str(parts[0]), [str(parts[1]), str(parts[2])])
    assert parts[0].read_bytes() == b"".join(data)
    assert parts[1].read_bytes() == data[1]
