"""Route and transform views (cdc/transform/table_views.py): a source table's rows, last changes and snapshot
corrections in its sink table's terms, and the rules refused before any row is read."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig
from airflow_provider_mysqlcdc.cdc.snapshot.corrections import TableCorrections
from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig
from airflow_provider_mysqlcdc.cdc.transform.table_views import Rules, apply_primary_keys, resolve_views, sink_schemas
from airflow_provider_mysqlcdc.cdc.types import arrow_schema, map_table

D = decimal.Decimal


def orders(name: str, amount_type: str = "decimal(10,2)") -> TableSchema:
    cols = (
        Column("id", 1, "int", "int(11)", False),
        Column("name", 2, "varchar", "varchar(40)", True, charset="utf8mb4", char_max_length=40),
        Column("amount", 3, amount_type.split("(")[0], amount_type, True, numeric_precision=10, numeric_scale=2),
    )
    return TableSchema(TableId("shop", name), cols, ("id",), ("id",), ("id",))


SHARDS = Rules(
    route=({"source_table": r"shop\.orders_\d+", "sink_table": "shop.orders"},),
    transform=(
        {
            "source_table": r"shop\.orders_\d+",
            "projection": "id, upper(name) AS name_uc, amount * 2 AS amount2",
            "filter": "amount > 10",
        },
    ),
)


def rows_of(schema: TableSchema, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=arrow_schema(map_table(schema, "UTC")))


def test_merged_shards_get_the_source_column_in_their_key_and_the_projected_columns():
    views = resolve_views(SHARDS, [orders("orders_1"), orders("orders_2")], sink_type="delta")
    v1 = views[TableId("shop", "orders_1")]
    assert v1.sink_id == TableId("shop", "orders")
    assert v1.sink_schema.row_identity == ("_source_table", "id")
    assert [c.name for c in v1.sink_schema.columns] == ["_source_table", "id", "name_uc", "amount2"]
    assert [str(f.type) for f in v1.sink_arrow] == ["string", "int32", "string", "decimal128(12, 2)"]
    assert len(sink_schemas(views)) == 1


def test_snapshot_rows_are_filtered_projected_and_tagged_with_their_source():
    v = resolve_views(SHARDS, [orders("orders_1"), orders("orders_2")])[TableId("shop", "orders_2")]
    out = v.rows(
        rows_of(
            v.source,
            [
                {"id": 1, "name": "ab", "amount": D("10.00")},
                {"id": 2, "name": "cd", "amount": D("10.01")},
                {"id": 3, "name": None, "amount": None},
            ],
        )
    )
    assert out.to_pylist() == [{"_source_table": "shop.orders_2", "id": 2, "name_uc": "CD", "amount2": D("20.02")}]


def test_last_changes_leaving_the_filter_become_deletes_of_their_identity():
    v = resolve_views(SHARDS, [orders("orders_1"), orders("orders_2")])[TableId("shop", "orders_1")]
    rows = rows_of(
        v.source,
        [
            {"id": 1, "name": "in", "amount": D("50")},  # +U, passes: upsert
            {"id": 2, "name": "out", "amount": D("5")},  # +U out of the filter: delete
            {"id": 3, "name": "gone", "amount": D("99")},  # -D: delete
            {"id": 4, "name": "new", "amount": D("11")},
        ],
    )  # +I, passes
    rows = rows.append_column("_op", pa.array(["+U", "+U", "-D", "+I"])).append_column("_seq", pa.array([1, 2, 3, 4]))
    out = {r["id"]: r for r in v.changes(rows, extra=["_seq"]).to_pylist()}
    assert out[1] == {
        "_source_table": "shop.orders_1",
        "id": 1,
        "name_uc": "IN",
        "amount2": D("100.00"),
        "_op": "+U",
        "_seq": 1,
    }
    assert out[2] == {
        "_source_table": "shop.orders_1",
        "id": 2,
        "name_uc": None,
        "amount2": None,
        "_op": "-D",
        "_seq": 2,
    }
    assert out[3]["_op"] == "-D" and out[3]["name_uc"] is None
    assert out[4]["_op"] == "+I" and out[4]["name_uc"] == "NEW"


def test_a_delete_is_not_evaluated_by_the_projection():
    rules = Rules(transform=({"source_table": "shop.orders_1", "projection": "id, 100 / amount AS inv"},))
    v = resolve_views(rules, [orders("orders_1")])[TableId("shop", "orders_1")]
    rows = rows_of(v.source, [{"id": 1, "name": "x", "amount": D("0")}]).append_column("_op", pa.array(["-D"]))
    assert v.changes(rows).to_pylist() == [{"id": 1, "inv": None, "_op": "-D"}]


def test_corrections_become_sink_keys_and_rows():
    v = resolve_views(SHARDS, [orders("orders_1"), orders("orders_2")])[TableId("shop", "orders_1")]
    tc = TableCorrections()
    tc.delete((7,))
    tc.upsert((8,), {"id": 8, "name": "x", "amount": D("20")})
    tc.upsert((9,), {"id": 9, "name": "y", "amount": D("1")})
    out = v.corrections(tc)
    assert out.deleted == {("shop.orders_1", 7), ("shop.orders_1", 9)}
    assert out.upserts == {
        ("shop.orders_1", 8): {"_source_table": "shop.orders_1", "id": 8, "name_uc": "X", "amount2": D("40.00")}
    }


def test_an_unrouted_untransformed_table_is_unchanged():
    rules = Rules(transform=({"source_table": "shop.orders_1", "filter": "amount > 0"},))
    views = resolve_views(rules, [orders("orders_1"), orders("other")])
    assert views[TableId("shop", "other")].identity
    assert not views[TableId("shop", "orders_1")].identity
    assert views[TableId("shop", "orders_1")].sink_schema.columns == orders("orders_1").columns


@pytest.mark.parametrize(
    "projection, words",
    [
        ("name, amount", "the projection drops id of the row identity (id)"),
        ("id + 1 AS id, name", "computes it"),
        ("name AS id, amount", "computes it"),
    ],
)
def test_a_projection_must_keep_the_identity_as_it_is(projection, words):
    rules = Rules(transform=({"source_table": "shop.orders_1", "projection": projection},))
    with pytest.raises(ConfigError) as e:
        resolve_views(rules, [orders("orders_1")])
    assert words in str(e.value) and "Fix:" in str(e.value)


def test_primary_keys_other_than_the_identity_are_refused_naming_the_fix():
    rules = Rules(transform=({"source_table": "shop.orders_1", "primary_keys": ["name"]},))
    with pytest.raises(ConfigError, match="primary_keys name differ from the table's primary key"):
        resolve_views(rules, [orders("orders_1")])
    same = Rules(transform=({"source_table": "shop.orders_1", "primary_keys": ["id"]},))
    assert resolve_views(same, [orders("orders_1")])


def test_a_filter_on_the_change_kind_is_refused():
    rules = Rules(transform=({"source_table": "shop.orders_1", "filter": "__data_event_type__ <> '-D'"},))
    with pytest.raises(ConfigError, match="__data_event_type__ in a filter"):
        resolve_views(rules, [orders("orders_1")])


def test_merged_tables_of_different_types_are_refused_naming_the_column():
    rules = Rules(route=({"source_table": r"shop\.orders_\d+", "sink_table": "shop.orders"},))
    with pytest.raises(ConfigError) as e:
        resolve_views(rules, [orders("orders_1"), orders("orders_2", "double")])
    assert "amount: decimal128(10, 2) in shop.orders_1, double in shop.orders_2" in str(e.value)


@pytest.mark.parametrize("sink_type", ["console"])
def test_sinks_that_do_not_apply_views_are_refused(sink_type):
    with pytest.raises(ConfigError, match=f"the {sink_type} sink does not apply routes and transforms"):
        resolve_views(SHARDS, [orders("orders_1")], sink_type=sink_type)
    with pytest.raises(ConfigError, match="direct_write: false"):
        resolve_views(SHARDS, [orders("orders_1")], sink_type="delta", direct_write=False)


def test_computed_boolean_and_timestamp_columns_have_sink_types():
    rules = Rules(
        transform=(
            {
                "source_table": "shop.orders_1",
                "projection": "id, amount > 10 AS big, CAST('2026-01-01' AS TIMESTAMP) AS ts, CAST(id AS DOUBLE) AS d",
            },
        )
    )
    v = resolve_views(rules, [orders("orders_1")])[TableId("shop", "orders_1")]
    assert [str(f.type) for f in v.sink_arrow] == ["int32", "bool", "timestamp[us, tz=UTC]", "double"]


def test_rules_survive_pipeline_json():
    config = PipelineConfig(
        name="p",
        source=SourceConfig(),
        include=("shop.orders_1",),
        state_location="/tmp/x",
        rules=Rules.from_values(SHARDS.route, SHARDS.transform),
    )
    back = PipelineConfig.from_json(config.to_json())
    assert back.rules == config.rules and back.rules
    assert (
        "route"
        not in PipelineConfig(name="p", source=SourceConfig(), include=("a.b",), state_location="/tmp/x").to_dict()
    )


def test_rules_from_bad_text_name_the_fix():
    with pytest.raises(ConfigError, match="not a JSON list"):
        Rules.from_values("{oops")
    with pytest.raises(ConfigError, match=r"transform\[0\]: unknown key\(s\) where"):
        Rules.from_values(None, [{"source_table": "a.b", "where": "x"}])


def test_a_table_no_rule_touches_keeps_its_schema_exactly():
    plain = orders("other")
    plain = TableSchema(plain.table_id, plain.columns, (), ("amount",), ("id",))  # a chunk key of its own
    v = resolve_views(SHARDS, [orders("orders_1"), plain])[plain.table_id]
    assert v.identity and v.sink_schema is plain


def test_primary_keys_key_a_table_that_has_no_primary_key():
    base = orders("log_1")
    keyless = TableSchema(base.table_id, base.columns, (), ("id",), base.column_names)  # identity: every column
    rules = Rules(
        route=({"source_table": r"shop\.log_\d+", "sink_table": "shop.log"},),
        transform=({"source_table": r"shop\.log_\d+", "primary_keys": ["ID"]},),
    )
    (keyed,) = apply_primary_keys(rules, [keyless])
    assert keyed.row_identity == ("id",) and keyed.primary_key == ()
    v = resolve_views(rules, [keyless])[keyless.table_id]
    assert v.source.row_identity == ("id",) and v.sink_schema.row_identity == ("_source_table", "id")
    with pytest.raises(ConfigError, match="primary_keys nope are not columns of the table"):
        apply_primary_keys(Rules(transform=({"source_table": "shop.log_1", "primary_keys": ["nope"]},)), [keyless])


def test_a_rules_description_is_not_part_of_what_is_compared():
    a = Rules.from_values([{"source_table": "a.b", "sink_table": "a.c", "description": "one"}])
    b = Rules.from_values([{"source_table": "a.b", "sink_table": "a.c", "description": "two"}])
    assert a == b and a.route == ({"source_table": "a.b", "sink_table": "a.c"},)


def _layout_batch(v, ops, befores, afters):
    image = pa.struct(list(v.source_arrow))
    pair = pa.StructArray.from_arrays([pa.array(befores, image), pa.array(afters, image)], names=["before", "after"])
    return pa.RecordBatch.from_arrays(
        [pa.array(ops), pa.array(range(len(ops)), pa.int64()), pair], names=["op", "seq", "t0"]
    )


def test_binlog_changes_become_the_sink_tables_changes_as_the_filter_makes_them():
    v = resolve_views(SHARDS, [orders("orders_1"), orders("orders_2")])[TableId("shop", "orders_1")]
    row = lambda i, amount: {"id": i, "name": f"n{i}", "amount": D(amount)}  # noqa: E731
    batch = _layout_batch(
        v,
        ["insert", "insert", "update", "update", "update", "update", "delete", "delete"],
        [None, None, row(3, "20"), row(4, "20"), row(5, "1"), row(6, "1"), row(7, "20"), row(8, "1")],
        [row(1, "20"), row(2, "1"), row(3, "30"), row(4, "1"), row(5, "20"), row(6, "2"), None, None],
    )
    out = v.layout_rows(batch, "t0")
    got = [
        (op, (b or {}).get("id"), (a or {}).get("id"), (a or b)["_source_table"], (a or b)["name_uc"])
        for op, b, a in zip(out.column("op").to_pylist(), *[x.to_pylist() for x in out.column("t0").flatten()])
    ]
    assert got == [
        ("insert", None, 1, "shop.orders_1", "N1"),  # passes: kept
        ("update", 3, 3, "shop.orders_1", "N3"),  # in both: an update
        ("delete", 4, None, "shop.orders_1", "N4"),  # left the filter: its before image goes
        ("insert", None, 5, "shop.orders_1", "N5"),  # entered it: its after image comes
        ("delete", 7, None, "shop.orders_1", "N7"),
    ]  # deleted while in it
    assert out.column("seq").to_pylist() == [0, 2, 3, 4, 6]
    assert out.schema.field("t0").type.field("before").type == pa.struct(list(v.sink_arrow))
