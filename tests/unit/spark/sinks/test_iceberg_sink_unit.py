"""The Iceberg sink's table protocol on a real pyiceberg SQL catalog (SQLite) and warehouse in a
temporary directory, no Spark: a micro-batch's copy-on-write commit against a plain reference
(a dict of rows), identity columns with NULLs and composite keys, BIGINT UNSIGNED keys at 2^63
and 2^64 - 1, the micro-batch record a replay is skipped by, the catalog options refused."""

from __future__ import annotations

import datetime as dt
import decimal
import random

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.spark.sinks.base import META_OP

pytest.importorskip("pyiceberg")

from airflow_provider_mysqlcdc.spark.sinks.iceberg.apply import (  # noqa: E402
    BATCH_KEY,
    STEP_KEY,
    apply_changes,
    last_recorded,
    with_op,
)
from airflow_provider_mysqlcdc.spark.sinks.iceberg.sink import STEP_SCALE, IcebergSink  # noqa: E402

D = decimal.Decimal


def _schema(composite: bool = False, nullable_identity: bool = False) -> TableSchema:
    cols = [
        Column("id", 1, "bigint", "bigint(20) unsigned", nullable_identity, numeric_precision=20, numeric_scale=0),
        Column("k", 2, "varchar", "varchar(10)", nullable_identity, charset="utf8mb4", char_max_length=10),
        Column("a", 3, "tinyint", "tinyint(4)", True),
        Column("amount", 4, "decimal", "decimal(12,2)", True, numeric_precision=12, numeric_scale=2),
        Column("ts", 5, "datetime", "datetime(6)", True, datetime_precision=6),
    ]
    pk = ("id", "k") if composite else ("id",)
    if nullable_identity:  # a table without a primary key: every column is the row's identity
        return TableSchema(TableId("shop", "t"), tuple(cols), (), ("id",), ("id", "k"))
    return TableSchema(TableId("shop", "t"), tuple(cols), pk, ("id",), pk)


def _rows(changes: list[tuple]) -> pa.Table:
    """(id, k, a, op) tuples as change rows."""
    return pa.table(
        {
            "id": pa.array([None if c[0] is None else D(c[0]) for c in changes], pa.decimal128(20, 0)),
            "k": pa.array([c[1] for c in changes], pa.string()),
            "a": pa.array([c[2] for c in changes], pa.int8()),
            "amount": pa.array([D("1.25")] * len(changes), pa.decimal128(12, 2)),
            "ts": pa.array([dt.datetime(2024, 2, 29, 23, 59, 59, 999999)] * len(changes), pa.timestamp("us")),
            META_OP: pa.array([c[3] for c in changes]),
        }
    )


def _contents(sink: IcebergSink, schema: TableSchema) -> dict[tuple, int]:
    got = sink.open_table(schema.table_id).scan().to_arrow().to_pylist()
    ident = schema.row_identity
    out = {tuple(r[c] for c in ident): r["a"] for r in got}
    assert len(out) == len(got), "an identity is held twice"
    return out


@pytest.mark.parametrize("composite,nullable", [(False, False), (True, False), (False, True)])
def test_micro_batches_applied_copy_on_write_equal_a_reference(tmp_path, composite, nullable):
    schema = _schema(composite, nullable)
    sink = IcebergSink(str(tmp_path / "wh"))
    sink.prepare([schema])
    rng = random.Random(5)
    ids = [0, 1, 2, 3, 2**63 - 1, 2**63, 2**64 - 1] + ([None] if nullable else [])
    keys = ["x", "y"] + ([None] if nullable else [])
    expected: dict[tuple, int] = {}
    for batch in range(1, 9):
        last: dict[tuple, tuple] = {}
        for _ in range(rng.randint(1, 12)):  # reduced: the last change per identity
            ident = (rng.choice(ids), rng.choice(keys) if composite or nullable else "x")
            op = rng.choice(["+I", "+U", "-D", "-U"])
            last[ident] = (*ident, rng.randint(-128, 127), op)
        table = sink.open_table(schema.table_id)
        apply_changes(
            table,
            schema,
            with_op(table, _rows(list(last.values()))),
            {STEP_KEY: str(batch * STEP_SCALE), BATCH_KEY: str(batch)},
        )
        for (i, k), (_, _, a, op) in last.items():
            key = (None if i is None else D(i),) + ((k,) if composite or nullable else ())
            if op in ("+I", "+U"):
                expected[key] = a
            else:
                expected.pop(key, None)
        assert _contents(sink, schema) == expected, f"after micro-batch {batch}"
        assert last_recorded(sink.open_table(schema.table_id), BATCH_KEY) == batch


def test_a_replayed_micro_batch_is_skipped(tmp_path):
    schema = _schema()
    sink = IcebergSink(str(tmp_path / "wh"))
    sink.prepare([schema])
    table = sink.open_table(schema.table_id)
    apply_changes(table, schema, with_op(table, _rows([(1, "x", 1, "+I")])), sink._props(3, 3 * STEP_SCALE, True))
    assert sink._unapplied(schema.table_id, 3 * STEP_SCALE) is None
    assert sink._unapplied(schema.table_id, 2 * STEP_SCALE) is None
    assert sink._unapplied(schema.table_id, 4 * STEP_SCALE) is not None
    # the consistency check reads the table as it was up to a micro-batch
    apply_changes(
        table,
        schema,
        with_op(sink.open_table(schema.table_id), _rows([(2, "x", 1, "+I")])),
        sink._props(4, 4 * STEP_SCALE, True),
    )
    before, _ = sink.consistency_keys(schema, 3)
    after, _ = sink.consistency_keys(schema, 4)
    assert before.column("id").to_pylist() == [D(1)] and sorted(after.column("id").to_pylist()) == [D(1), D(2)]


def test_a_table_that_does_not_match_and_secrets_in_the_catalog_are_refused(tmp_path):
    sink = IcebergSink(str(tmp_path / "wh"))
    sink.prepare([_schema()])
    other = _schema()
    other = TableSchema(other.table_id, other.columns[:3], other.primary_key, other.chunk_key, other.row_identity)
    with pytest.raises(ConfigError, match="does not match the source table.*unexpected column 'amount'"):
        sink.prepare([other])
    with pytest.raises(ConfigError, match="holds a secret"):
        IcebergSink(str(tmp_path / "wh"), catalog={"type": "sql", "uri": "postgresql+psycopg://u:pw@h/db"})
    with pytest.raises(ConfigError, match="needed for a warehouse at s3://bucket"):
        IcebergSink("s3://bucket/wh")
    assert sink.forget_tables([other.table_id]) and not sink.catalog.table_exists(("shop", "t"))
