"""The routed sink's stream publish (spark/sinks/routed.py), against a recording sink: one step per
sink table and micro-batch with every shard's transformed last changes; a table no rule touches
passes through as it is (its DDL too); a DDL that would change a transformed sink's columns stops."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import Column, TableId
from airflow_provider_mysqlcdc.cdc.schema.steps import ChangeStep, RowsStep
from airflow_provider_mysqlcdc.cdc.transform.table_views import resolve_views
from airflow_provider_mysqlcdc.spark.sinks.last_change import from_ipc, to_ipc
from airflow_provider_mysqlcdc.spark.sinks.routed import RoutedSink
from tests.unit.cdc.transform.test_table_views import SHARDS, orders, rows_of

D = decimal.Decimal


class Recording:
    name = "recording"

    def __init__(self) -> None:
        self.calls: list[tuple[TableId, list]] = []

    def publish_steps(self, table_id, steps, batch_id):
        self.calls.append((table_id, list(steps)))
        return sum(getattr(s, "changes", 0) for s in steps)


def _rows_step(schema, rows: list[dict], ops: list[str], changes: int) -> RowsStep:
    table = (
        rows_of(schema, rows)
        .append_column("_op", pa.array(ops))
        .append_column("_seq", pa.array(range(len(rows)), pa.int64()))
    )
    return RowsStep(({"payload": to_ipc(table), "changes": changes},), schema, schema)


def _sink():
    tables = [orders("orders_1"), orders("orders_2"), orders("other")]
    return RoutedSink(Recording(), SHARDS, resolve_views(SHARDS, tables)), {t.table_id: t for t in tables}


def test_shards_are_published_once_into_their_sink_table_and_other_tables_as_they_are():
    sink, s = _sink()
    o1, o2, other = (TableId("shop", n) for n in ("orders_1", "orders_2", "other"))
    ddl = ChangeStep("ALTER TABLE other ADD c INT", {"file": "f", "position": 4}, 1, (), s[other], s[other], s[other])
    planned = {
        o1: [
            _rows_step(
                s[o1],
                [{"id": 1, "name": "a", "amount": D("20")}, {"id": 2, "name": "b", "amount": D("1")}],
                ["+I", "+U"],
                2,
            )
        ],
        o2: [_rows_step(s[o2], [{"id": 1, "name": "c", "amount": D("30")}], ["+U"], 1)],
        other: [ddl],
    }
    assert sink.publish_micro_batch(planned, 7) == 3
    calls = dict(sink.inner.calls)
    assert calls[other] == [ddl]
    (step,) = calls[TableId("shop", "orders")]
    assert step.sink.row_identity == ("_source_table", "id") and step.changes == 3
    got = {
        (r["_source_table"], r["id"]): (r["name_uc"], r["_op"])
        for r in from_ipc(step.records[0]["payload"]).to_pylist()
    }
    assert got == {
        ("shop.orders_1", 1): ("A", "+I"),
        ("shop.orders_1", 2): (None, "-D"),
        ("shop.orders_2", 1): ("C", "+U"),
    }


def test_a_ddl_that_keeps_a_transformed_sink_is_followed_and_one_that_changes_it_stops_the_stream():
    sink, s = _sink()
    o1 = TableId("shop", "orders_1")
    wider = s[o1].columns + (Column("note", 4, "varchar", "varchar(10)", True, charset="utf8mb4"),)
    after = type(s[o1])(o1, wider, ("id",), ("id",), ("id",))
    step = ChangeStep(
        "ALTER TABLE orders_1 ADD note VARCHAR(10)", {"file": "f", "position": 9}, 2, (), s[o1], after, after
    )
    assert sink.publish_micro_batch({o1: [step]}, 8) == 0  # the projection names its columns: no change
    plain = RoutedSink(
        Recording(),
        type(SHARDS)(route=SHARDS.route),
        resolve_views(type(SHARDS)(route=SHARDS.route), [s[o1], orders("orders_2")]),
    )
    with pytest.raises(
        ConfigError, match=r"shop.orders_1 changed \(DDL\).*note: string in shop.orders_1, missing"
    ) as e:
        plain.publish_micro_batch({o1: [step]}, 8)
    assert "Fix:" in str(e.value) and plain.inner.calls == []
