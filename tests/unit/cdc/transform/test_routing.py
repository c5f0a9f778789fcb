"""Route resolution and the change semantics under a filter (cdc/transform/routing.py): shards merged into
one sink with the source table in the key, first match wins, the refusals with their fixes."""

from __future__ import annotations

from typing import Optional

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.transform.routing import (
    DELETE,
    INSERT,
    UPDATE,
    Routing,
    filtered_changes,
    resolve_routing,
    sink_table_id,
)
from airflow_provider_mysqlcdc.cdc.transform.transform_exprs import compile_filter
from airflow_provider_mysqlcdc.pipelines.spec import RouteRule, TransformRule


def table(
    name: str,
    columns: tuple[str, ...] = ("id", "amount"),
    key: tuple[str, ...] = ("id",),
    identity: Optional[tuple[str, ...]] = None,
) -> TableSchema:
    db, tbl = name.split(".")
    cols = tuple(
        Column(c, i + 1, "varchar", "varchar(20)", c not in key, charset="utf8mb4")
        if c == "name"
        else Column(c, i + 1, "bigint", "bigint", c not in key)
        for i, c in enumerate(columns)
    )
    return TableSchema(TableId(db, tbl), cols, key, key or columns, identity or key or columns)


SHARDS = [table(f"shop.orders_{i}") for i in (1, 2, 3)]
OTHERS = [table("shop.customers", ("id", "name")), table("crm.orders_9")]
SHARD_ROUTE = RouteRule(source_table=r"shop\.orders_\d+", sink_table="shop.orders")


def tid(name: str) -> TableId:
    return TableId.parse(name)


def test_shards_merge_into_one_sink_keyed_by_their_source_table() -> None:
    routing = resolve_routing([SHARD_ROUTE], SHARDS + OTHERS)
    sink = routing.sink_for(tid("shop.orders_2"))
    assert sink.table_id == tid("shop.orders") and sink.merged
    assert sink.sources == (tid("shop.orders_1"), tid("shop.orders_2"), tid("shop.orders_3"))
    assert sink.source_column == "_source_table" and sink.row_identity == ("_source_table", "id")
    assert Routing.source_value(tid("shop.orders_2")) == "shop.orders_2"
    # tables no route matches keep their names (the pattern is anchored: crm.orders_9 stays)
    assert routing.sink_of[tid("crm.orders_9")] == tid("crm.orders_9")
    customers = routing.sink_for(tid("shop.customers"))
    assert not customers.merged and customers.source_column is None and customers.row_identity == ("id",)
    assert [s.table_id for s in routing.merged] == [tid("shop.orders")]


def test_a_pattern_route_merges_even_with_one_table_so_a_new_shard_changes_nothing() -> None:
    routing = resolve_routing([SHARD_ROUTE], SHARDS[:1])
    sink = routing.sink_for(tid("shop.orders_1"))
    assert sink.merged and sink.row_identity == ("_source_table", "id")
    later = resolve_routing([SHARD_ROUTE], SHARDS).sink_for(tid("shop.orders_1"))
    assert (later.row_identity, later.source_column) == (sink.row_identity, sink.source_column)


def test_an_exact_route_renames_without_merging() -> None:
    routing = resolve_routing([{"source_table": "shop.customers", "sink_table": "crm.clients"}], OTHERS)
    sink = routing.sink_for(tid("shop.customers"))
    assert sink.table_id == tid("crm.clients") and not sink.merged and sink.row_identity == ("id",)


def test_two_exact_routes_into_one_sink_merge() -> None:
    rules = [
        RouteRule(source_table="shop.orders_1", sink_table="shop.orders"),
        RouteRule(source_table="shop.orders_2", sink_table="shop.orders"),
    ]
    sink = resolve_routing(rules, SHARDS[:2]).sinks[tid("shop.orders")]
    assert sink.merged and sink.sources == (tid("shop.orders_1"), tid("shop.orders_2"))


def test_the_first_matching_route_wins() -> None:
    rules = [
        RouteRule(source_table="shop.orders_3", sink_table="archive.orders_3"),
        SHARD_ROUTE,
        RouteRule(source_table=r"shop\..*", sink_table="shop.everything"),
    ]
    routing = resolve_routing(rules, SHARDS + OTHERS)
    assert routing.sink_of[tid("shop.orders_3")] == tid("archive.orders_3")
    assert routing.sink_of[tid("shop.orders_1")] == tid("shop.orders")
    assert routing.sink_of[tid("shop.customers")] == tid("shop.everything")
    assert routing.sinks[tid("shop.orders")].sources == (tid("shop.orders_1"), tid("shop.orders_2"))


def test_table_entry_forms() -> None:
    tables = [table("my db.t$1"), table("shop.customers", ("id", "name"))]
    rules = [
        RouteRule(source_table="`my db`.`t$1`", sink_table="`lake db`.`t 1`"),
        RouteRule(source_table="customers", sink_table="crm.customers"),
    ]
    routing = resolve_routing(rules, tables, default_database="shop")
    assert routing.sink_of[TableId("my db", "t$1")] == TableId("lake db", "t 1")
    assert routing.sink_of[tid("shop.customers")] == tid("crm.customers")
    with pytest.raises(ConfigError, match="has no database"):
        resolve_routing(rules, tables)


def test_a_bad_sink_table_is_refused() -> None:
    with pytest.raises(ConfigError, match="Fix: name the sink table with its database"):
        sink_table_id("orders")
    assert sink_table_id("`a.b`.`c`") == TableId("a.b", "c")


def test_a_sink_that_is_an_unrouted_captured_table_is_refused() -> None:
    tables = SHARDS + [table("shop.orders")]
    with pytest.raises(ConfigError) as e:
        resolve_routing([SHARD_ROUTE], tables)
    msg = str(e.value)
    assert "sink table shop.orders is also a captured table that no route moves" in msg
    assert "shop.orders_1, shop.orders_2, shop.orders_3" in msg and "Fix: " in msg
    # routing it as well (into itself, with the shards) is the fix the message names
    routing = resolve_routing([RouteRule(source_table=r"shop\.orders(_\d+)?", sink_table="shop.orders")], tables)
    assert len(routing.sinks[tid("shop.orders")].sources) == 4


def test_a_table_moved_away_frees_its_name() -> None:
    rules = [
        RouteRule(source_table="shop.customers", sink_table="crm.customers"),
        RouteRule(source_table="crm.orders_9", sink_table="shop.customers"),
    ]
    routing = resolve_routing(rules, OTHERS)
    assert routing.sink_of[tid("crm.orders_9")] == tid("shop.customers")


def test_merged_tables_must_identify_rows_by_the_same_columns() -> None:
    tables = [table("shop.orders_1"), table("shop.orders_2", ("order_id", "amount"), ("order_id",))]
    with pytest.raises(ConfigError) as e:
        resolve_routing([SHARD_ROUTE], tables)
    msg = str(e.value)
    assert "identify rows by different columns" in msg and "shop.orders_1: id; shop.orders_2: order_id" in msg
    assert "Fix: route them to separate sink tables, or give a transform with the same primary_keys" in msg


def test_same_identity_columns_in_another_order_or_case_merge() -> None:
    tables = [table("shop.orders_1", ("a", "b", "v"), ("a", "b")), table("shop.orders_2", ("B", "A", "v"), ("B", "A"))]
    sink = resolve_routing([SHARD_ROUTE], tables).sinks[tid("shop.orders")]
    assert sink.row_identity == ("_source_table", "a", "b")


def test_tables_without_a_key_use_every_column() -> None:
    tables = [table("shop.orders_1", ("x", "y"), ()), table("shop.orders_2", ("x", "y"), ())]
    assert resolve_routing([SHARD_ROUTE], tables).sinks[tid("shop.orders")].row_identity == ("_source_table", "x", "y")
    tables[1] = table("shop.orders_2", ("x", "z"), ())
    with pytest.raises(ConfigError, match="different columns"):
        resolve_routing([SHARD_ROUTE], tables)


def test_primary_keys_of_a_transform_replace_the_identity() -> None:
    tables = [table("shop.orders_1"), table("shop.orders_2", ("order_id", "amount"), ("order_id",))]
    transforms = [
        TransformRule(
            source_table=r"shop\.orders_1",
            projection="id AS oid, amount, __table_name__ AS src",
            primary_keys=["src", "oid"],
        ),
        TransformRule(
            source_table=r"shop\.orders_2",
            projection="order_id AS oid, amount, __table_name__ AS src",
            primary_keys=["src", "oid"],
        ),
    ]
    sink = resolve_routing([SHARD_ROUTE], tables, transforms=transforms).sinks[tid("shop.orders")]
    assert sink.merged and sink.row_identity == ("src", "oid") and sink.source_column == "_source_table"


def test_primary_keys_that_differ_or_are_missing_for_some_tables_are_refused() -> None:
    one = TransformRule(source_table="shop.orders_1", primary_keys=["id"])
    other = TransformRule(source_table="shop.orders_2", primary_keys=["amount"])
    with pytest.raises(ConfigError, match="give different primary_keys.*Fix: give the same primary_keys"):
        resolve_routing([SHARD_ROUTE], SHARDS[:2], transforms=[one, other])
    with pytest.raises(ConfigError, match="shop.orders_2: none \\(its row identity\\)"):
        resolve_routing([SHARD_ROUTE], SHARDS[:2], transforms=[one])


def test_primary_keys_must_be_projected_columns() -> None:
    rule = TransformRule(source_table="shop.customers", projection="name", primary_keys=["id"])
    with pytest.raises(ConfigError) as e:
        resolve_routing([], OTHERS, transforms=[rule])
    assert "primary_keys id are not columns of its output (name)" in str(e.value) and "Fix: " in str(e.value)


def test_a_projection_dropping_identity_columns_needs_primary_keys() -> None:
    drop = TransformRule(source_table="shop.customers", projection="upper(name) AS name")
    with pytest.raises(ConfigError) as e:
        resolve_routing([], OTHERS, transforms=[drop])
    msg = str(e.value)
    assert "drops id of the row identity (id)" in msg and msg.rstrip().split(". ")[-1].startswith("Fix: ")
    keyed = TransformRule(source_table="shop.customers", projection="upper(name) AS name", primary_keys=["NAME"])
    assert resolve_routing([], OTHERS, transforms=[keyed]).sinks[tid("shop.customers")].row_identity == ("NAME",)
    kept = TransformRule(source_table="shop.customers", projection="*, upper(name) AS name_uc")
    assert resolve_routing([], OTHERS, transforms=[kept]).sinks[tid("shop.customers")].row_identity == ("id",)
    renamed_case = TransformRule(source_table="shop.customers", projection="ID, name")
    assert resolve_routing([], OTHERS, transforms=[renamed_case]).sinks[tid("shop.customers")].row_identity == ("id",)


def test_the_first_matching_transform_applies() -> None:
    rules = [
        TransformRule(source_table="shop.customers", projection="id, name"),
        TransformRule(source_table=r"shop\..*", projection="name"),
    ]
    assert resolve_routing([], OTHERS, transforms=rules).sinks[tid("shop.customers")].row_identity == ("id",)


def test_the_source_column_must_not_be_a_column_of_a_merged_table() -> None:
    tables = [table("shop.orders_1", ("id", "_source_table")), table("shop.orders_2", ("id", "_source_table"))]
    with pytest.raises(ConfigError, match="has a column '_source_table'.*Fix: choose another source column"):
        resolve_routing([SHARD_ROUTE], tables)
    sink = resolve_routing([SHARD_ROUTE], tables, source_column="_shard").sinks[tid("shop.orders")]
    assert sink.source_column == "_shard" and sink.row_identity == ("_shard", "id")
    # an unmerged sink adds no column, so the name is free there
    assert not resolve_routing([], tables[:1]).sinks[tid("shop.orders_1")].merged


def test_projections_read_the_tables_arrow_schema() -> None:
    rule = TransformRule(source_table=r"shop\.orders_\d+", projection="id, amount * 2 AS double_amount")
    schemas = {t.table_id: pa.schema([("id", pa.int64()), ("amount", pa.decimal128(10, 2))]) for t in SHARDS}
    sink = resolve_routing([SHARD_ROUTE], SHARDS, transforms=[rule], arrow_schemas=schemas).sinks[tid("shop.orders")]
    assert sink.row_identity == ("_source_table", "id")
    # without arrow_schemas they come from the engine's type mapping of the TableSchema
    assert resolve_routing([SHARD_ROUTE], SHARDS, transforms=[rule]).sinks[tid("shop.orders")] == sink


# --- changes under a filter -------------------------------------------------------------------

# (has before image, has after image, before passes, after passes) -> what reaches the sink
FILTER_TABLE = [
    # updates: both images
    (True, True, True, True, UPDATE),
    (True, True, True, False, DELETE),  # the row left the filtered set: delete its before image
    (True, True, False, True, INSERT),  # the row entered the filtered set: insert its after image
    (True, True, False, False, None),
    (True, True, None, True, INSERT),  # NULL counts as not passing, as in SQL WHERE
    (True, True, True, None, DELETE),
    (True, True, None, None, None),
    # inserts: the after image only
    (False, True, None, True, INSERT),
    (False, True, None, False, None),
    (False, True, True, None, None),
    (False, True, True, True, INSERT),  # a before verdict without a before image is ignored
    # deletes: the before image only
    (True, False, True, None, DELETE),
    (True, False, False, None, None),
    (True, False, True, True, DELETE),
    (True, False, None, True, None),
]


@pytest.mark.parametrize("has_before, has_after, before_in, after_in, expected", FILTER_TABLE)
def test_filtered_change(
    has_before: bool, has_after: bool, before_in: Optional[bool], after_in: Optional[bool], expected: Optional[str]
) -> None:
    assert filtered_changes([has_before], [has_after], [before_in], [after_in]).to_pylist() == [expected]


def test_filtered_changes_is_vectorized_over_arrow_masks() -> None:
    rows = FILTER_TABLE
    got = filtered_changes(
        pa.array([r[0] for r in rows]),
        pa.chunked_array([[r[1] for r in rows]]),
        pa.array([r[2] for r in rows], pa.bool_()),
        pa.array([r[3] for r in rows], pa.bool_()),
    )
    assert got.type == pa.string() and got.to_pylist() == [r[4] for r in rows]
    assert filtered_changes([], [], [], []).to_pylist() == []


def test_a_filter_over_before_and_after_images() -> None:
    """An update of amount 5 -> 50 under `amount > 10` inserts; 50 -> 5 deletes; the op metadata
    column sees -U for before images and +U for after images."""
    schema = pa.schema([("id", pa.int64()), ("amount", pa.int64())])
    f = compile_filter("amount > 10 AND __data_event_type__ <> '-D'", schema, "shop.orders_1")
    before = pa.RecordBatch.from_pylist(
        [{"id": 1, "amount": 5}, {"id": 2, "amount": 50}, {"id": 3, "amount": 70}, {"id": 4, "amount": 20}],
        schema=schema,
    )
    after = pa.RecordBatch.from_pylist(
        [{"id": 1, "amount": 50}, {"id": 2, "amount": 5}, {"id": 3, "amount": 80}, {"id": 4}], schema=schema
    )
    ops_before = pa.array(["-U", "-U", "-U", "-D"])
    before_in = f.evaluate(before, database="shop", table="orders_1", op=ops_before)
    after_in = f.evaluate(after, database="shop", table="orders_1", op="+U")
    kinds = filtered_changes([True] * 4, [True, True, True, False], before_in, after_in)
    assert kinds.to_pylist() == [INSERT, DELETE, UPDATE, None]  # a delete of a passing row is filtered by op
