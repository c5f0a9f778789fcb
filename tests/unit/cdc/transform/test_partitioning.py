"""A transform's partition_keys (cdc/transform/partitioning.py and the views): the entries' text, the
sink table's columns and types each transform takes, the sinks that partition, and the pipeline
file's problems (key path, line, fix) for each."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.transform.partitioning import (
    PartitionKey,
    check_partition_keys,
    parse_partition_key,
    parse_partition_keys,
)
from airflow_provider_mysqlcdc.cdc.transform.table_views import Rules, resolve_views, sink_partitioning
from airflow_provider_mysqlcdc.pipelines.loader import load_file, read_file, refuse_unapplied_rules

T = TableId("shop", "orders")


@pytest.mark.parametrize(
    "text,key",
    [
        ("region", PartitionKey("identity", "region")),
        (" day( ts ) ", PartitionKey("day", "ts")),
        ("YEAR(ts)", PartitionKey("year", "ts")),
        ("month(ts)", PartitionKey("month", "ts")),
        ("hour(ts)", PartitionKey("hour", "ts")),
        ("bucket(16, id)", PartitionKey("bucket", "id", 16)),
        ("truncate(3,name)", PartitionKey("truncate", "name", 3)),
        ("`my col`", PartitionKey("identity", "my col")),
        ("day(`created at`)", PartitionKey("day", "created at")),
    ],
)
def test_entries_are_a_column_or_a_transform_over_one(text, key):
    assert parse_partition_key(text) == key
    assert parse_partition_key(key.text) == key  # the entry's text reads back as itself


@pytest.mark.parametrize(
    "text,message",
    [
        ("days(ts)", "days is not a partition transform. Fix: use one of year(col)"),
        ("bucket(ts)", "bucket takes a bucket count first. Fix: write bucket(16, ts)"),
        ("truncate(0, name)", "the width must be a whole number from 1"),
        ("bucket(-2, id)", "the bucket count must be a whole number from 1"),
        ("day(4, ts)", "day takes the column only. Fix: write day(ts)"),
        ("id + 1", "not a column name nor a transform over one"),
        ("day(ts", "not a column name nor a transform over one"),
        ("", "need a column name or a transform over one"),
    ],
)
def test_bad_entries_say_what_to_write(text, message):
    with pytest.raises(ConfigError) as e:
        parse_partition_key(text)
    assert message in str(e.value) and "Fix:" in str(e.value)


def test_two_entries_over_one_column_are_refused_with_their_index():
    with pytest.raises(ConfigError, match=r"^\[1\]: found 'day\(TS\)' and 'ts': two entries over the column TS"):
        parse_partition_keys(["ts", "day(TS)"])


COLUMNS = pa.schema(
    [
        ("id", pa.int64()),
        ("n", pa.int32()),
        ("name", pa.string()),
        ("amount", pa.decimal128(12, 2)),
        ("ratio", pa.float64()),
        ("flag", pa.bool_()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("tstz", pa.timestamp("us", tz="UTC")),
        ("blob", pa.binary()),
    ]
)
TAKES = {
    "identity": {"id", "n", "name", "amount", "ratio", "flag", "d", "ts", "tstz", "blob"},
    "year": {"d", "ts", "tstz"},
    "month": {"d", "ts", "tstz"},
    "day": {"d", "ts", "tstz"},
    "hour": {"ts", "tstz"},
    "bucket": {"id", "n", "name", "amount", "d", "ts", "tstz", "blob"},
    "truncate": {"id", "n", "name", "amount", "blob"},
}


@pytest.mark.parametrize("transform", sorted(TAKES))
def test_each_transform_takes_the_column_types_iceberg_defines_it_for(transform):
    for column in COLUMNS.names:
        width = 4 if transform in ("bucket", "truncate") else None
        key = PartitionKey(transform, column.upper(), width)
        if column in TAKES[transform]:
            # matched case-blind, spelled as the table spells it
            assert check_partition_keys(T, [key], COLUMNS) == (PartitionKey(transform, column, width),)
        else:
            with pytest.raises(ConfigError, match=f"{transform} needs .* and {column} is .*Fix: use another"):
                check_partition_keys(T, [key], COLUMNS)
    with pytest.raises(ConfigError, match="names nope, which the sink table shop.orders does not have"):
        check_partition_keys(T, [PartitionKey(transform, "nope", 4)], COLUMNS)


def _orders() -> TableSchema:
    cols = (
        Column("id", 1, "int", "int(11)", False),
        Column("name", 2, "varchar", "varchar(40)", True, charset="utf8mb4", char_max_length=40),
        Column("created", 3, "datetime", "datetime(6)", True, datetime_precision=6),
    )
    return TableSchema(T, cols, ("id",), ("id",), ("id",))


def test_views_carry_partition_keys_and_refuse_what_cannot_apply():
    rules = Rules.from_values(transform=[{"source_table": "shop.orders", "partition_keys": ["day(CREATED)", "name"]}])
    views = resolve_views(rules, [_orders()], sink_type="iceberg")
    view = views[T]
    assert view.identity  # the rows go as they are
    assert [k.text for k in view.partition_keys] == ["day(created)", "name"]
    assert sink_partitioning(views) == {T: view.partition_keys}
    with pytest.raises(ConfigError, match="partition_keys are applied by the iceberg sink only, and the sink is delta"):
        resolve_views(rules, [_orders()], sink_type="delta")
    day_of_int = Rules.from_values(transform=[{"source_table": "shop.orders", "partition_keys": ["day(id)"]}])
    with pytest.raises(ConfigError, match=r"transform of shop.orders: partition_keys entry 'day\(id\)': day needs"):
        resolve_views(day_of_int, [_orders()], sink_type="iceberg")
    # the projection's output is the sink table: a column it leaves out cannot partition it
    projected = Rules.from_values(
        transform=[{"source_table": "shop.orders", "projection": "id, name", "partition_keys": ["day(created)"]}]
    )
    with pytest.raises(ConfigError, match="names created, which the sink table shop.orders does not have"):
        resolve_views(projected, [_orders()], sink_type="iceberg")


def test_shards_merged_into_one_table_must_partition_it_alike():
    shards = [replace(_orders(), table_id=TableId("shop", f"orders_{i}")) for i in (1, 2)]
    rules = Rules.from_values(
        route=[{"source_table": r"shop\.orders_\d", "sink_table": "shop.orders"}],
        transform=[
            {"source_table": "shop.orders_1", "partition_keys": ["day(created)"]},
            {"source_table": "shop.orders_2", "partition_keys": ["month(created)"]},
        ],
    )
    with pytest.raises(ConfigError, match="merged into shop.orders give it different partition_keys"):
        resolve_views(rules, shards, sink_type="iceberg")


# --- pipeline files ----------------------------------------------------------------------------

BASE: dict[str, Any] = {
    "source": {"conn_id": "shop_db", "tables": ["shop.orders"]},
    "sink": {"type": "iceberg", "options": {"root": "/lake"}},
    "transform": [{"source_table": "shop.orders", "partition_keys": ["day(created)", "bucket(8, id)"]}],
    "pipeline": {"name": "shop", "state_location": "/state/shop"},
}


def _file(tmp_path: Path, partition_keys: Any, sink_type: str = "iceberg") -> Path:
    data = {**BASE, "sink": {**BASE["sink"], "type": sink_type}}
    data["transform"] = [{"source_table": "shop.orders", "partition_keys": partition_keys}]
    path = tmp_path / "shop.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_a_pipeline_file_hands_partition_keys_to_the_run(tmp_path):
    path = _file(tmp_path, ["day(created)", "bucket(8, id)"])
    spec = load_file(path)
    assert refuse_unapplied_rules(str(path), spec) == []
    assert spec.dag_arguments()["transform"] == [
        {"source_table": "shop.orders", "partition_keys": ("day(created)", "bucket(8, id)")}
    ]
    rules = Rules.from_values(transform=spec.dag_arguments()["transform"])
    assert rules.transform[0]["partition_keys"] == ["day(created)", "bucket(8, id)"]


@pytest.mark.parametrize(
    "partition_keys,key,line,message",
    [
        (
            ["day(created)", "hours(created)"],
            "transform[0].partition_keys[1]",
            13,
            "hours is not a partition transform",
        ),
        (["bucket(id)"], "transform[0].partition_keys[0]", 12, "bucket takes a bucket count first"),
        ("day(created)", "transform[0].partition_keys", 11, "need a list"),
        ([], "transform[0].partition_keys", 11, "need at least 1 entry"),
    ],
)
def test_a_bad_entry_is_a_problem_at_its_line_with_a_fix(tmp_path, partition_keys, key, line, message):
    path = _file(tmp_path, partition_keys)
    spec, problems = read_file(path, "shop.yaml")
    assert spec is None and [p.key for p in problems] == [key]
    assert message in problems[0].message and "Fix:" in problems[0].message
    assert problems[0].line == line  # the entry's line, or the key's
    assert str(problems[0]).startswith(f"shop.yaml:{line}: {key}: ")


def test_partition_keys_with_a_sink_that_does_not_partition_is_refused_at_the_key(tmp_path):
    path = _file(tmp_path, ["day(created)"], sink_type="delta")
    problems = refuse_unapplied_rules(str(path), load_file(path))
    assert [p.key for p in problems] == ["transform[0].partition_keys"]
    assert "applied by the iceberg sink only" in problems[0].message
    assert "Fix: remove partition_keys, or set sink.type to iceberg" in problems[0].message


def test_a_transform_of_partition_keys_only_is_a_transform():
    from airflow_provider_mysqlcdc.pipelines.spec import TransformRule

    rule = TransformRule.model_validate({"source_table": "shop.orders", "partition_keys": ["region"]})
    assert rule.partition_keys == ("region",)
