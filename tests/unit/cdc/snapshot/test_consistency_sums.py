"""The consistency check's arithmetic: hashes that agree across readers, and sums moved by the binlog."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.chunks import Batch, Chunk
from airflow_provider_mysqlcdc.cdc.events import RowChange
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.snapshot.consistency import (
    MASK64,
    RangeSums,
    WindowSums,
    canonical_value,
    int_hash,
    int_hash_array,
    key_hash,
    sums_of_keys,
    table_layouts,
)

T = TableId("db", "t")
EXTREMES_SIGNED = [0, 1, -1, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63), 12345678901234]
EXTREMES_UNSIGNED = [0, 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1]


def col(name: str, data_type: str, column_type: str | None = None, **kw) -> Column:
    return Column(name, 1, data_type, column_type or data_type, False, **kw)


def schema(*cols: Column, identity: tuple[str, ...] = ("k",)) -> TableSchema:
    return TableSchema(T, tuple(cols), identity, identity, identity)


def test_int_hash_array_agrees_with_int_hash_at_the_extremes():
    signed = np.array(EXTREMES_SIGNED, dtype=np.int64)
    unsigned = np.array(EXTREMES_UNSIGNED, dtype=np.uint64)
    assert [int(h) for h in int_hash_array(signed)] == [int_hash(v) for v in EXTREMES_SIGNED]
    assert [int(h) for h in int_hash_array(unsigned)] == [int_hash(v) for v in EXTREMES_UNSIGNED]
    assert len({int_hash(v) for v in EXTREMES_UNSIGNED}) == len(EXTREMES_UNSIGNED)
    assert all(0 <= int_hash(v) <= MASK64 for v in EXTREMES_SIGNED + EXTREMES_UNSIGNED)


@pytest.mark.parametrize(
    "column,a,b",
    [
        (col("k", "bigint", "bigint unsigned"), 2**64 - 1, decimal.Decimal(2**64 - 1)),
        (col("k", "decimal", numeric_scale=2), decimal.Decimal("1.50"), decimal.Decimal("1.5")),
        (
            col("k", "datetime", datetime_precision=6),
            dt.datetime(2024, 1, 1, 12, 0, 0, 5),
            dt.datetime(2024, 1, 1, 12, 0, 0, 5, tzinfo=dt.timezone.utc),
        ),
        (
            col("k", "timestamp"),
            dt.datetime(2024, 1, 1, 10),
            dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        ),
        (col("k", "date"), dt.date(2024, 2, 29), dt.datetime(2024, 2, 29)),
        (col("k", "time"), -dt.timedelta(hours=838, minutes=59, seconds=59), -3_020_399_000_000),
        (col("k", "time"), dt.timedelta(microseconds=1), "00:00:00.000001"),
        (col("k", "bit", "bit(16)"), b"\x01\x00", 256),
        (col("k", "binary", "binary(4)", char_max_length=4, charset="binary"), b"a", b"a\x00\x00\x00"),
        (col("k", "varchar", charset="latin1"), "caf\u00e9", "caf\u00e9".encode("latin1")),
    ],
)
def test_one_value_from_different_readers_has_one_encoding(column, a, b):
    assert canonical_value(column, a) == canonical_value(column, b)


@pytest.mark.parametrize(
    "column,a,b",
    [
        (col("k", "varchar", collation="utf8mb4_general_ci"), "a", "A"),  # equal keys, different values
        (col("k", "varchar", collation="utf8mb4_general_ci"), "a", "a "),
        (col("k", "varbinary", charset="binary"), b"\x00", b""),
        (col("k", "decimal", numeric_scale=2), decimal.Decimal("-0.01"), decimal.Decimal("0.01")),
        (col("k", "datetime", datetime_precision=6), dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, 0, 0, 0, 1)),
    ],
)
def test_values_the_sink_must_keep_apart_are_hashed_apart(column, a, b):
    assert canonical_value(column, a) != canonical_value(column, b)


def test_composite_keys_do_not_collide_on_concatenation():
    cols = (col("a", "varchar"), col("b", "varchar"))
    assert key_hash(cols, ("ab", "c")) != key_hash(cols, ("a", "bc"))


def _layout(unsigned: bool = True, bounds=(10, 2**63)):
    s = schema(col("k", "bigint", "bigint unsigned" if unsigned else "bigint"))
    edges = [None, *[(b,) for b in bounds], None]
    chunks = [Chunk(T, i, edges[i], edges[i + 1]) for i in range(len(edges) - 1)]
    batches = [Batch(f"b{i}", (c,)) for i, c in enumerate(chunks)]
    return table_layouts({T: s}, batches)[T]


def test_the_sink_side_counts_and_sums_per_range_with_numpy_as_the_row_path_does():
    lay = _layout()
    keys = [0, 9, 10, 11, 2**63 - 1, 2**63, 2**64 - 1]
    as_decimal = pa.table({"k": pa.array([decimal.Decimal(k) for k in keys], pa.decimal128(20, 0))})
    got = sums_of_keys(lay, as_decimal)
    expected = RangeSums.zeros(3)
    for k in keys:
        expected.add(0 if k < 10 else (1 if k < 2**63 else 2), int_hash(k))
    assert got == expected
    assert got.counts == [2, 3, 2]


def _change(kind, before, after, pos, row=0):
    return RowChange(
        kind,
        T,
        None if before is None else {"k": before},
        None if after is None else {"k": after},
        BinlogOffset("mysql-bin.000001", pos, None, row),
    )


def test_the_window_moves_sums_forward_and_back_between_checkpoints():
    lay = _layout(unsigned=False, bounds=(100,))
    start, mid, end = (BinlogOffset("mysql-bin.000001", p) for p in (4, 500, 900))
    w = WindowSums(start, {T: lay}, {T: [start, mid, end]})
    w.feed(
        [
            _change("insert", None, 5, 100),
            _change("update", 5, 150, 200, 0),  # a key move across ranges
            _change("delete", 7, None, 200, 1),
            _change("insert", None, 7, 600),  # delete-and-reinsert the same key, after mid
            _change("update", 150, 150, 700),  # a value update: nothing moves
        ]
    )
    w.finish()
    before_mid = w.between(T, start, mid)
    assert before_mid.counts == [-1, 1]  # 5 in, 5 out, 7 out (range 0); 150 in (range 1)
    assert before_mid.sums == [(-int_hash(7)) & MASK64, int_hash(150)]
    after_mid = w.between(T, mid, end)
    assert after_mid.counts == [1, 0] and after_mid.sums == [int_hash(7), 0]
    backwards = w.between(T, end, mid)
    assert backwards.plus(after_mid) == RangeSums.zeros(2)
    assert w.changes == 5


@pytest.mark.parametrize("ranges", [3, 40])
def test_many_ranges_sum_as_few_do(ranges):
    import random

    rng = random.Random(ranges)
    bounds = sorted({rng.randrange(-(2**62), 2**62) for _ in range(ranges - 1)})
    lay = _layout(unsigned=False, bounds=bounds)
    keys = sorted(set(rng.randrange(-(2**63), 2**63) for _ in range(5000)) | {-(2**63), 2**63 - 1, *bounds})
    got = sums_of_keys(lay, pa.table({"k": pa.array(keys, pa.int64())}))
    step = len(keys) // 7 + 1
    pieces = pa.chunked_array([pa.array(keys[i : i + step], pa.int64()) for i in range(0, len(keys), step)])
    assert sums_of_keys(lay, pa.table({"k": pieces})) == got
    expected = RangeSums.zeros(ranges)
    import bisect

    for k in keys:
        expected.add(bisect.bisect_right(bounds, k), int_hash(k))
    assert got == expected
