"""The last-change reduction in Arrow: the same rows the row path's window keeps."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.spark.sinks.change_arrow import OP_CODES, explode_changes, last_per_identity
from airflow_provider_mysqlcdc.spark.sinks.direct import spec_from_json
from airflow_provider_mysqlcdc.spark.sinks.last_change import (
    LastChange,
    _Reduced,
    change_table,
    from_ipc,
    merged_rows,
    to_ipc,
)

IMAGE = pa.struct([("id", pa.int64()), ("k", pa.string()), ("f", pa.float64()), ("v", pa.int64())])


def _source_batch(rows: list[tuple[str, dict | None, dict | None]], seq0: int = 0) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "op": pa.array([r[0] for r in rows]),
            "seq": pa.array(range(seq0, seq0 + len(rows)), pa.int64()),
            "t0": pa.array(
                [{"before": r[1], "after": r[2]} for r in rows], pa.struct([("before", IMAGE), ("after", IMAGE)])
            ),
        }
    )


def _window_reference(rows: pa.Table, identity: list[str]) -> list[dict]:
    """row_number() over (partition by identity order by _seq desc) = 1, one row at a time."""
    best: dict[tuple, dict] = {}
    for r in rows.to_pylist():
        key = tuple(0.0 if isinstance(r[c], float) and r[c] == 0 else r[c] for c in identity)
        if key not in best or r["_seq"] > best[key]["_seq"]:
            best[key] = r
    return sorted(best.values(), key=lambda r: r["_seq"])


def _sorted(rows: pa.Table) -> list[dict]:
    return sorted(rows.to_pylist(), key=lambda r: r["_seq"])


def test_explode_follows_the_change_row_rules():
    a, b = {"id": 1, "k": "a", "f": 0.5, "v": 1}, {"id": 1, "k": "a", "f": 0.5, "v": 2}
    ch = explode_changes(_source_batch([("insert", None, a), ("update", a, b), ("delete", b, None)], seq0=10), "t0")
    assert [OP_CODES[c] for c in ch.op_code] == ["+I", "-U", "+U", "-D"]
    assert list(ch.seq) == [20, 22, 23, 24]
    assert ch.images.to_pylist() == [a, a, b, b]
    assert list(ch.source_row) == [0, 1, 1, 2]


@pytest.mark.parametrize("identity", [["id"], ["k", "f"], ["id", "k", "f", "v"]])
def test_reduction_equals_the_window_for_random_changes(identity):
    rnd = random.Random(7)
    ops, rows = [], {}
    for _ in range(3000):
        key = rnd.randrange(40)
        f = rnd.choice([0.0, -0.0, 1.5, None])
        k = rnd.choice(["a", "A", None, "é"])
        new = {"id": key, "k": k, "f": f, "v": rnd.randrange(5)}
        if key in rows and rnd.random() < 0.2:
            ops.append(("delete", rows.pop(key), None))
        elif key in rows:
            ops.append(("update", rows[key], new))  # identity may change: -U and +U differ
            rows[key] = new
        else:
            ops.append(("insert", None, new))
            rows[key] = new
    table = change_table(explode_changes(_source_batch(ops), "t0"), ["id", "k", "f", "v"])
    got = last_per_identity(table, identity, "_seq")
    assert _sorted(got) == _window_reference(table, identity)

    # in pieces, as a range's batches arrive and as ranges meet on the driver: the same rows
    r = _Reduced(identity)
    for start in range(0, table.num_rows, 701):
        r.add(table.slice(start, 701), 0)
    assert _sorted(r.result()) == _sorted(got)
    assert r.first_seq == int(table.column("_seq")[0].as_py()) and r.last_seq == int(table.column("_seq")[-1].as_py())


def test_negative_zero_and_null_identities_group_as_spark_groups_them():
    rows = pa.table({"f": pa.array([0.0, -0.0, None, None], pa.float64()), "_seq": pa.array([1, 2, 3, 4], pa.int64())})
    assert last_per_identity(rows, ["f"], "_seq").column("_seq").to_pylist() == [2, 4]


def test_spec_round_trip_and_records():
    spec = spec_from_json(LastChange().to_json())
    assert isinstance(spec, LastChange)
    with pytest.raises(ValueError, match="unknown kind 'parquet-files'"):
        spec_from_json('{"kind": "parquet-files"}')
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "_op": ["+U", "-D"], "_seq": pa.array([5, 9], pa.int64())})
    assert from_ipc(to_ipc(rows)).equals(rows)


def test_merged_rows_reduce_across_ranges_in_seq_order():
    from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema

    schema = TableSchema(TableId("d", "t"), (Column("id", 1, "bigint", "bigint", False),), ("id",), ("id",), ("id",))
    r1 = pa.table({"id": pa.array([1, 2], pa.int64()), "_op": ["+U", "+I"], "_seq": pa.array([3, 7], pa.int64())})
    r2 = pa.table(
        {"id": pa.array([2, 3, 1], pa.int64()), "_op": ["-D", "+I", "-U"], "_seq": pa.array([11, 12, 20], pa.int64())}
    )
    out = merged_rows(schema, [to_ipc(r2), to_ipc(r1)])
    assert out.to_pylist() == [
        {"id": 2, "_op": "-D", "_seq": 11},
        {"id": 3, "_op": "+I", "_seq": 12},
        {"id": 1, "_op": "-U", "_seq": 20},
    ]
