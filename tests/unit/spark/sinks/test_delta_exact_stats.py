"""The Delta sink's MERGE finds every key whatever delta-rs writes as file stats.

delta-rs records decimal min/max it cannot hold (DECIMAL(20,0) clamped to the int64 range,
DECIMAL(17,4) rounded through a double) and prunes MERGE's files by them: a delete of a BIGINT
UNSIGNED key >= 2^63 matched nothing, an update inserted a second row. Real delta-rs, no server.
"""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.spark.sinks.base import META_OP
from airflow_provider_mysqlcdc.spark.sinks.delta.sink import STATS_COLUMNS, DeltaSink, exact_stats, stats_columns
from airflow_provider_mysqlcdc.spark.sinks.files.arrow import table_arrow_schema

D = decimal.Decimal
T = TableId("shop", "u")
TOP = 2**64 - 1

KEYS = {
    "bigint unsigned": (
        Column("id", 1, "bigint", "bigint(20) unsigned", False),
        [D(TOP - i) for i in range(40)] + [D(i) for i in range(40)] + [D(2**63 + i) for i in range(-3, 3)],
    ),
    "decimal(38,0)": (
        Column("id", 1, "decimal", "decimal(38,0)", False, numeric_precision=38, numeric_scale=0),
        [D(10**37 - i) for i in range(20)] + [D(-(10**37) + i) for i in range(20)],
    ),
    "decimal(17,4)": (
        Column("id", 1, "decimal", "decimal(17,4)", False, numeric_precision=17, numeric_scale=4),
        [D("1234567890123.4567") + D(i) / 10**4 for i in range(20)],
    ),
}


def _schema(key: Column) -> TableSchema:
    return TableSchema(T, (key, Column("note", 2, "varchar", "varchar(20)", True)), ("id",), ("id",), ("id",))


def _merge(sink: DeltaSink, schema: TableSchema, keys, op: str, note: str, batch_id: int) -> None:
    rows = pa.table(
        {
            "id": pa.array(keys, table_arrow_schema(schema).field("id").type),
            "note": [note] * len(keys),
            META_OP: [op] * len(keys),
        }
    )
    table = sink._unapplied(T, batch_id)
    sink._merge(table, schema, sink._merge_source(schema, rows), batch_id)


def _rows(sink: DeltaSink) -> list[tuple]:
    return sorted((r["id"], r["note"]) for r in sink.open_table(T).to_pyarrow_table().to_pylist())


def _load(sink: DeltaSink, schema: TableSchema, keys) -> None:
    write_deltalake(
        sink.table_uri(T),
        pa.table({"id": pa.array(keys, table_arrow_schema(schema).field("id").type), "note": ["a"] * len(keys)}),
        mode="append",
    )


@pytest.mark.parametrize("kind", list(KEYS))
@pytest.mark.parametrize("existing", [False, True], ids=["new-table", "table-made-before-the-fix"])
def test_updates_and_deletes_of_keys_delta_rs_cannot_hold_in_stats_reach_the_table(tmp_path, kind, existing):
    key, keys = KEYS[kind]
    schema = _schema(key)
    sink = DeltaSink(str(tmp_path))
    if existing:  # as an earlier release made it: no property, delta-rs' wrong stats in the log
        DeltaTable.create(sink.table_uri(T), table_arrow_schema(schema))
        _load(sink, schema, keys)
        assert STATS_COLUMNS not in (sink.open_table(T).metadata().configuration or {})
    sink.prepare([schema])
    if not existing:
        _load(sink, schema, keys)
    expected = {k: "a" for k in keys}
    # several micro-batches: each MERGE rewrites the file with delta-rs' writer (its stats), the next prunes by them
    for batch_id, (picked, op) in enumerate(
        [
            (keys[:1], "+U"),
            (keys[1:3], "-D"),
            (keys[-2:], "-D"),
            (keys[3:4], "+U"),
            (keys[4:6], "-D"),
            (keys[-4:-2], "+U"),
        ],
        start=1,
    ):
        _merge(sink, schema, picked, op, f"b{batch_id}", batch_id)
        for k in picked:
            if op == "-D":
                expected.pop(k)
            else:
                expected[k] = f"b{batch_id}"
        assert _rows(sink) == sorted(expected.items()), f"{kind} after micro-batch {batch_id} ({op} {picked})"


def test_only_tables_with_a_decimal_delta_rs_gets_wrong_name_their_stats_columns():
    assert exact_stats(pa.decimal128(15, 5)) and exact_stats(pa.decimal128(18, 0)) and exact_stats(pa.int64())
    assert not exact_stats(pa.decimal128(20, 0)) and not exact_stats(pa.decimal128(16, 1))
    plain = pa.schema([("id", pa.int64()), ("d", pa.decimal128(10, 2))])
    assert stats_columns(plain) == {}
    odd = pa.schema([("id", pa.decimal128(20, 0)), ("we,ird`", pa.string()), ("n", pa.int32())])
    assert stats_columns(odd) == {STATS_COLUMNS: "`we,ird```,`n`"}
    assert stats_columns(pa.schema([("id", pa.decimal128(20, 0))])) == {STATS_COLUMNS: ""}


def test_a_resnapshot_range_of_big_unsigned_keys_reads_the_sinks_keys_inside_it(tmp_path):
    """keys_in_sink with BIGINT UNSIGNED bounds at and above 2^63 (an int bound overflowed the filter)."""
    from airflow_provider_mysqlcdc.cdc.chunks import KeyRange

    schema = _schema(KEYS["bigint unsigned"][0])
    sink = DeltaSink(str(tmp_path))
    sink.prepare([schema])
    keys = [D(v) for v in (0, 5, 2**63 - 1, 2**63, TOP - 1, TOP)]
    _load(sink, schema, keys)

    def inside(start, end):
        got = sink.keys_in_sink(schema, KeyRange(T, start, end)).column("id").to_pylist()
        return sorted(int(k) for k in got)

    assert inside((2**63,), None) == [2**63, TOP - 1, TOP]
    assert inside((5,), (2**63 + 1,)) == [5, 2**63 - 1, 2**63]
    assert inside(None, (2**63,)) == [0, 5, 2**63 - 1]
