"""The even-split arithmetic: exact integers, no overflow at the top of BIGINT (UNSIGNED)."""

import pytest

from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.snapshot.splitter import (
    chunks_from_boundaries,
    distribution_factor,
    even_boundaries,
    even_width,
    is_even_candidate,
)

BIGINT_MAX = 2**63 - 1
UBIGINT_MAX = 2**64 - 1


def col(name, data_type, scale=None):
    return Column(name, 1, data_type, data_type, False, numeric_scale=scale)


def test_even_candidates():
    for t in ("tinyint", "smallint", "mediumint", "int", "bigint"):
        assert is_even_candidate([col("k", t)])
    assert is_even_candidate([col("k", "decimal", 0)])
    assert not is_even_candidate([col("k", "decimal", 2)])
    assert not is_even_candidate([col("k", "varchar")])
    assert not is_even_candidate([col("a", "int"), col("b", "int")])


@pytest.mark.parametrize(
    "lo,hi",
    [
        (BIGINT_MAX - 100_000, BIGINT_MAX),
        (-(2**63), -(2**63) + 100_000),
        (UBIGINT_MAX - 99_999, UBIGINT_MAX),
    ],
)
def test_boundaries_never_leave_the_type_range(lo, hi):
    width = even_width(lo, hi, rows=hi - lo + 1, chunk_size=8096)
    b = even_boundaries(lo, hi, width)
    assert b == sorted(b) and len(set(b)) == len(b)
    assert all(lo < x <= hi for x in b)
    assert len(b) == (hi - lo) // 8096


def test_width_follows_flink_rule():
    assert even_width(1, 1000, 1000, 100) == 100  # factor 1
    assert even_width(1, 10_000, 1000, 100) == 1000  # factor 10
    assert even_width(1, 10, 1000, 1) == 1  # never below 1
    assert distribution_factor(1, 1000, 0) == float("inf")


def test_chunks_from_boundaries_are_contiguous():
    t = TableId("d", "t")
    schema = TableSchema(t, (col("k", "int"),), ("k",), ("k",), ("k",))
    cs = chunks_from_boundaries(schema, [(10,), (20,)], includes_null=True)
    assert [(c.chunk_id, c.start, c.end, c.includes_null) for c in cs] == [
        (0, None, (10,), True),
        (1, (10,), (20,), False),
        (2, (20,), None, False),
    ]
    assert [(c.start, c.end) for c in chunks_from_boundaries(schema, [], False)] == [(None, None)]
