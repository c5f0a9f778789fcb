"""The Arrow reader's pure parts: which expression each column travels as, the casts into the
sink's types, the password kept out of messages, and when the server's JVM can run light."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig
from airflow_provider_mysqlcdc.cdc.types import arrow_schema, map_column
from airflow_provider_mysqlcdc.spark.snapshot import arrow_read as ar
from airflow_provider_mysqlcdc.spark.snapshot.arrow_tasks import records_of, split_parts


def col(name, data_type, column_type, **kw):
    return Column(name=name, ordinal=1, data_type=data_type, column_type=column_type, nullable=True, **kw)


def m(name, data_type, column_type, **kw):
    return map_column(col(name, data_type, column_type, **kw), "UTC", "d.t")


def test_values_the_binary_protocol_carries_exactly_are_selected_as_stored():
    assert ar.wire_sql(m("a", "int", "int(11)")) == "`a`"
    assert ar.wire_sql(m("f", "float", "float")) == "`f`"  # float32 exactly, not a DOUBLE cast
    assert ar.wire_sql(m("c", "char", "char(5)", charset="latin1")) == "`c`"
    assert ar.wire_sql(m("d", "datetime", "datetime(3)", datetime_precision=3)) == "`d`"
    assert "DATE_FORMAT" in ar.wire_sql(m("d", "datetime", "datetime(3)", datetime_precision=3), raw_dates=False)
    assert "UNIX_TIMESTAMP" in ar.wire_sql(m("ts", "timestamp", "timestamp"))  # the wire value is zoned
    assert "TIME_TO_SEC" in ar.wire_sql(m("tm", "time", "time"))


@pytest.mark.parametrize(
    "p,s,native",
    [(12, 2, True), (18, 0, True), (28, 10, True), (20, 0, False), (20, 11, False), (65, 30, False), (29, 10, False)],
)
def test_a_decimal_goes_as_text_unless_connectorx_holds_it_exactly(p, s, native):
    mapping = m("x", "decimal", f"decimal({p},{s})", numeric_precision=p, numeric_scale=s)
    assert (ar.wire_sql(mapping) == "`x`") is native


def test_conform_casts_into_the_sink_types_and_nulls_year_zero_dates():
    maps = [
        m("id", "int", "int(10) unsigned"),
        m("x", "decimal", "decimal(12,2)", numeric_precision=12, numeric_scale=2),
        m("d", "datetime", "datetime"),
        m("da", "date", "date"),
        m("b", "varbinary", "varbinary(4)"),
    ]
    raw = pa.table(
        {
            "id": pa.array([1, 4294967295], pa.uint32()),
            "x": pa.array([Decimal("-1.5"), None], pa.decimal128(38, 10)),
            "d": pa.array([dt.datetime(2026, 3, 8, 2, 30), None], pa.timestamp("us")),
            "da": pa.array(["0000-05-06", "2020-02-30"]),  # text form: year 0 and no such day -> NULL
            "b": pa.array([b"\x00", b""], pa.large_binary()),
        }
    )
    got = ar.conform(raw, maps)
    assert got.schema == arrow_schema(maps)
    assert got.column("id").to_pylist() == [1, 4294967295]
    assert got.column("x").to_pylist() == [Decimal("-1.50"), None]
    assert got.column("da").to_pylist() == [None, None]
    assert got.column("b").to_pylist() == [b"\x00", b""]


def test_a_value_that_does_not_fit_fails_instead_of_changing():
    maps = [m("x", "decimal", "decimal(4,2)", numeric_precision=4, numeric_scale=2)]
    with pytest.raises(ValueError, match="cannot make it decimal128"):
        ar.conform(pa.table({"x": pa.array([Decimal("1.125")], pa.decimal128(38, 10))}), maps)


def test_text_datetimes_keep_their_microseconds():
    maps = [m("d", "datetime", "datetime(6)", datetime_precision=6)]
    got = ar.conform(pa.table({"d": pa.array(["1000-01-01 00:00:00.000001", None])}), maps)
    assert got.column("d").to_pylist() == [dt.datetime(1000, 1, 1, 0, 0, 0, 1), None]


def test_the_password_never_reaches_a_message():
    source = SourceConfig(user="u@x", password="p@ss/w:rd")
    url = ar.connection_url(source, "db")
    assert "p@ss/w:rd" not in url and "p%40ss%2Fw%3Ard" in url
    assert "p@ss" not in ar.scrub(f"failed {url} with p@ss/w:rd", source)


def test_arrow_is_refused_where_it_cannot_be_used_and_auto_falls_back():
    tls = SourceConfig(ssl={"ca": "/x.pem"})
    assert ar.choose_reader(tls) == "jdbc"
    with pytest.raises(ConfigError, match="snapshot_reader 'arrow'.*TLS"):
        ar.choose_reader(dataclasses.replace(tls, snapshot_reader="arrow"))
    assert ar.choose_reader(SourceConfig(snapshot_reader="jdbc")) == "jdbc"
    assert ar.choose_reader(SourceConfig()) == "arrow"
    with pytest.raises(ConfigError, match="snapshot_reader: found 'fast'"):
        SourceConfig(snapshot_reader="fast")


def test_the_jvm_runs_light_only_when_the_rows_bypass_it():
    assert ar.reads_bypass_jvm(SourceConfig(), "delta", {})
    assert not ar.reads_bypass_jvm(SourceConfig(), "delta", {"snapshot_writer": "spark"})
    assert not ar.reads_bypass_jvm(SourceConfig(), "postgres", {})
    assert not ar.reads_bypass_jvm(SourceConfig(snapshot_reader="jdbc"), "delta", {})
    assert not ar.reads_bypass_jvm(SourceConfig(ssl={"ca": "/x"}, snapshot_reader="arrow"), "delta", {})


def test_groups_split_into_contiguous_runs_and_records_add_up():
    assert split_parts(5, 2) == [[0, 1], [2, 3, 4]]
    assert split_parts(2, 5) == [[0], [1]]
    records, per_group = records_of(
        [
            {"path": "a.parquet", "size": 10, "num_rows": 3, "stats": "{}", "counts": '{"0": 1, "1": 2}'},
            {"path": "", "size": 0, "num_rows": 0, "stats": None, "counts": '{"2": 0}'},
        ]
    )
    assert [r.path for r in records] == ["a.parquet"] and per_group == {0: 1, 1: 2, 2: 0}


def test_select_reads_the_chunk_range_of_the_stored_key():
    schema = TableSchema(TableId("d", "t"), (col("id", "bigint", "bigint(20)"),), ("id",), ("id",), ("id",))
    maps = [map_column(c, "UTC", "d.t") for c in schema.columns]
    assert ar.select_sql(schema, maps, "`id` >= 5") == "SELECT `id` AS `id` FROM `d`.`t` WHERE `id` >= 5"


def test_a_dictionary_only_for_columns_with_few_distinct_values():
    from airflow_provider_mysqlcdc.spark.snapshot.arrow_tasks import dictionary_columns

    rows = pa.table(
        {
            "id": list(range(1000)),
            "state": ["a", "b"] * 500,
            "s": [f"r{i}" for i in range(1000)],
            "few": [i % 3 for i in range(1000)],
        }
    )
    assert dictionary_columns(rows) == ["state", "few"]
    assert dictionary_columns(rows, ("state",)) == ["few"]
