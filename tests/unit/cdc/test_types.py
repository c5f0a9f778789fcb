"""Type mapping per MySQL type, and the binlog normalizer on library-style raw values."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError, SchemaMismatchError
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.types import (
    arrow_schema,
    format_decimal,
    map_column,
    map_table,
    row_normalizer,
    time_micros,
)

UTC = dt.timezone.utc


def col(name, data_type, column_type=None, nullable=True, **kw) -> Column:
    return Column(
        name=name, ordinal=1, data_type=data_type, column_type=column_type or data_type, nullable=nullable, **kw
    )


def table(*cols: Column) -> TableSchema:
    return TableSchema(TableId("db", "t"), tuple(cols), (), (), ())


@pytest.mark.parametrize(
    "data_type,column_type,kw,arrow,read",
    [
        ("tinyint", "tinyint(4)", {}, pa.int8(), "BYTE"),
        ("tinyint", "tinyint(1)", {}, pa.int8(), "BYTE"),
        ("tinyint", "tinyint(3) unsigned", {}, pa.int16(), "SHORT"),
        ("smallint", "smallint(6)", {}, pa.int16(), "SHORT"),
        ("smallint", "smallint(5) unsigned", {}, pa.int32(), "INT"),
        ("mediumint", "mediumint(9)", {}, pa.int32(), "INT"),
        ("mediumint", "mediumint(8) unsigned", {}, pa.int32(), "INT"),
        ("int", "int(11)", {}, pa.int32(), "INT"),
        ("int", "int(10) unsigned", {}, pa.int64(), "BIGINT"),
        ("bigint", "bigint(20)", {}, pa.int64(), "BIGINT"),
        ("bigint", "bigint(20) unsigned", {}, pa.decimal128(20, 0), "DECIMAL(20,0)"),
        (
            "decimal",
            "decimal(10,2)",
            dict(numeric_precision=10, numeric_scale=2),
            pa.decimal128(10, 2),
            "DECIMAL(10,2)",
        ),
        (
            "decimal",
            "decimal(38,10)",
            dict(numeric_precision=38, numeric_scale=10),
            pa.decimal128(38, 10),
            "DECIMAL(38,10)",
        ),
        ("decimal", "decimal(65,30)", dict(numeric_precision=65, numeric_scale=30), pa.string(), "STRING"),
        ("float", "float", {}, pa.float32(), "DOUBLE"),
        ("double", "double", {}, pa.float64(), "DOUBLE"),
        ("datetime", "datetime(6)", dict(datetime_precision=6), pa.timestamp("us"), "STRING"),
        ("timestamp", "timestamp(3)", dict(datetime_precision=3), pa.timestamp("us", tz="UTC"), "BIGINT"),
        ("date", "date", {}, pa.date32(), "STRING"),
        ("time", "time(6)", dict(datetime_precision=6), pa.int64(), "BIGINT"),
        ("year", "year(4)", {}, pa.int16(), "SHORT"),
        ("json", "json", {}, pa.string(), "STRING"),
        ("longtext", "longtext", dict(charset="utf8mb4"), pa.string(), "STRING"),
        ("bit", "bit(1)", dict(numeric_precision=1), pa.int64(), "BIGINT"),
        ("bit", "bit(63)", dict(numeric_precision=63), pa.int64(), "BIGINT"),
        ("bit", "bit(64)", dict(numeric_precision=64), pa.decimal128(20, 0), "DECIMAL(20,0)"),
        ("enum", "enum('a','b')", {}, pa.string(), "STRING"),
        ("set", "set('a','b')", {}, pa.string(), "STRING"),
        ("char", "char(5)", dict(charset="latin1"), pa.string(), "STRING"),
        ("varchar", "varchar(5)", dict(charset="utf8mb4"), pa.string(), "STRING"),
        ("binary", "binary(4)", dict(char_max_length=4), pa.binary(), "BINARY"),
        ("varbinary", "varbinary(4)", {}, pa.binary(), "BINARY"),
        ("blob", "blob", {}, pa.binary(), "BINARY"),
    ],
)
def test_map_column_types(data_type, column_type, kw, arrow, read):
    mp = map_column(col("c", data_type, column_type, **kw), "UTC")
    assert mp.arrow_type == arrow
    assert mp.jdbc_read_type == read


def test_select_sql_avoids_zone_and_precision_traps():
    ts = map_column(col("c", "timestamp", "timestamp(6)", datetime_precision=6), "UTC")
    assert "UNIX_TIMESTAMP(`c`)" in ts.select_sql and ts.finalize_sql == "timestamp_micros({c})"
    dtm = map_column(col("c", "datetime", "datetime"), "UTC")
    assert "DATE_FORMAT(`c`" in dtm.select_sql and "TIMESTAMP_NTZ" in dtm.finalize_sql
    assert map_column(col("c", "float"), "UTC").select_sql == "CAST(`c` AS DOUBLE)"
    assert map_column(col("c", "int", "int(11)"), "UTC").select_sql == "`c`"
    assert map_column(col("we`ird", "int", "int(11)"), "UTC").select_sql == "`we``ird`"


@pytest.mark.parametrize(
    "data_type,column_type",
    [("geometry", "geometry"), ("point", "point"), ("vector", "vector(3)"), ("uuid", "uuid"), ("", "")],
)
def test_unknown_type_is_a_config_error_naming_table_column_type(data_type, column_type):
    schema = TableSchema(
        TableId("shop", "orders"),
        (col("id", "int", "int(11)"), col("geo", data_type, column_type)),
        ("id",),
        ("id",),
        ("id",),
    )
    with pytest.raises(ConfigError) as e:
        map_table(schema, "UTC")
    msg = str(e.value)
    assert "shop.orders" in msg and "'geo'" in msg and repr(column_type) in msg


def test_bad_server_time_zone_is_a_config_error():
    with pytest.raises(ConfigError, match="server_time_zone"):
        map_column(col("c", "int", "int(11)"), "Mars/Olympus")
    assert map_column(col("c", "int", "int(11)"), "+02:00").server_time_zone == "+02:00"


def test_arrow_schema_all_nullable():
    s = arrow_schema(map_table(table(col("a", "int", "int(11)", nullable=False), col("b", "date")), "UTC"))
    assert s.names == ["a", "b"] and all(f.nullable for f in s)
    assert s.field("b").type == pa.date32()


ALL = table(
    col("ti1", "tinyint", "tinyint(1)"),
    col("bu", "bigint", "bigint(20) unsigned"),
    col("d2", "decimal", "decimal(10,2)", numeric_precision=10, numeric_scale=2),
    col("d65", "decimal", "decimal(65,30)", numeric_precision=65, numeric_scale=30),
    col("d0", "decimal", "decimal(50,0)", numeric_precision=50, numeric_scale=0),
    col("f", "float"),
    col("dt", "datetime", datetime_precision=0),
    col("ts", "timestamp", "timestamp(3)", datetime_precision=3),
    col("da", "date"),
    col("tm6", "time", "time(6)", datetime_precision=6),
    col("tm0", "time", datetime_precision=0),
    col("y", "year", "year(4)"),
    col("b1", "bit", "bit(1)", numeric_precision=1),
    col("b64", "bit", "bit(64)", numeric_precision=64),
    col("e", "enum", "enum('x','it''s')"),
    col("s", "set", "set('a','b','c')"),
    col("sn", "set", "set('a','b')", nullable=False),
    col("l", "varchar", "varchar(9)", charset="latin1"),
    col("v", "varchar", "varchar(9)", charset="utf8mb4"),
    col("j", "json"),
    col("bn", "binary", "binary(4)", char_max_length=4),
    col("vb", "varbinary", "varbinary(4)"),
)


def raw(**over):
    base = dict(
        ti1=5,
        bu=18446744073709551615,
        d2=Decimal("000000001.50"),
        d65=Decimal("-12345678901234567890123456789012345.123456789012345678901234567891"),
        d0=Decimal("12"),
        f=1.2345677614212036,
        dt=dt.datetime(2026, 3, 8, 2, 30),
        ts=dt.datetime(2026, 3, 8, 7, 30, 0, 123000),
        da=dt.date(1000, 1, 1),
        tm6=dt.timedelta(days=-1, seconds=43199, microseconds=1),
        tm0=dt.timedelta(days=-35, seconds=3601),
        y=1900,
        b1="1",
        b64="1" * 64,
        e="it's",
        s={"c", "a"},
        sn=None,
        l="caf\u00e9",
        v="h\U0001f600",
        j={b"b": [1, 2.5], b"a": None},
        bn=b"\x01",
        vb="",
    )
    base.update(over)
    return base


def test_normalizer_canonical_values():
    out = row_normalizer(ALL, "UTC")(raw())
    assert out == dict(
        ti1=5,
        bu=Decimal("18446744073709551615"),
        d2=Decimal("1.50"),
        d65="-12345678901234567890123456789012345.123456789012345678901234567891",
        d0="12",
        f=1.2345677614212036,
        dt=dt.datetime(2026, 3, 8, 2, 30),
        ts=dt.datetime(2026, 3, 8, 7, 30, 0, 123000, tzinfo=UTC),
        da=dt.date(1000, 1, 1),
        tm6=-(43200 * 10**6 + 1),
        tm0=-3020399 * 10**6,
        y=0,
        b1=1,
        b64=Decimal(2**64 - 1),
        e="it's",
        s="a,c",
        sn="",
        l="caf\u00e9",
        v="h\U0001f600",
        j='{"b": [1, 2.5], "a": null}',
        bn=b"\x01\x00\x00\x00",
        vb=b"",
    )
    assert str(out["d2"]) == "1.50"
    assert out["ts"].tzinfo is UTC and out["dt"].tzinfo is None


def test_normalizer_nulls_zero_dates_and_empty_set():
    n = row_normalizer(ALL, "UTC")
    out = n({k: None for k in raw()})
    assert out["sn"] == "" and all(v is None for k, v in out.items() if k != "sn")
    # a nullable SET's empty set is told apart from NULL by the library's none_sources
    assert n(raw(s=None), {"s": "empty set"})["s"] == ""
    # TIMESTAMP zero is stored as epoch 0 -> NULL, like the SELECT
    assert n(raw(ts=dt.datetime(1970, 1, 1)))["ts"] is None
    assert n(raw(ts=dt.datetime(1970, 1, 1, 0, 0, 1, 500000)))["ts"] == dt.datetime(
        1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC
    )


def test_normalizer_decodes_bytes_with_column_charset():
    out = row_normalizer(ALL, "UTC")(raw(l="caf\u00e9".encode("cp1252"), v="h\U0001f600".encode()))
    assert out["l"] == "caf\u00e9" and out["v"] == "h\U0001f600"


def test_normalizer_rejects_missing_columns_and_bad_values():
    n = row_normalizer(ALL, "UTC")
    r = raw()
    del r["bu"]
    with pytest.raises(SchemaMismatchError, match="bu"):
        n(r)
    with pytest.raises(SchemaMismatchError, match="binary"):
        n(raw(vb="text"))
    with pytest.raises(SchemaMismatchError, match="d2"):
        n(raw(d2="not a number"))


@pytest.mark.parametrize(
    "lib_us,fsp,true_us",
    [
        (-43200999999, 6, -43200000001),  # '-12:00:00.000001'
        (-1500000, 1, -1500000),  # '-00:00:01.5' happens to decode right
        (-200000, 1, -800000),  # '-00:00:00.8': int part -1 s, fraction 0.2 s
        (-2615125200000, 1, -2615125800000),
        (-3020399000000, 0, -3020399000000),
        (-5000000, 6, -5000000),  # whole seconds are exact
        (43200000001, 6, 43200000001),
    ],
)
def test_time_micros_undoes_negative_fraction_decoding(lib_us, fsp, true_us):
    assert time_micros(dt.timedelta(microseconds=lib_us), fsp) == true_us


@pytest.mark.parametrize(
    "value,scale,text",
    [
        (Decimal("-1E-30"), 30, "-0.000000000000000000000000000001"),
        (Decimal("0.5"), 3, "0.500"),
        (Decimal("12"), 0, "12"),
        (Decimal("-0.000"), 3, "0.000"),
        (Decimal("9" * 35 + "." + "9" * 30), 30, "9" * 35 + "." + "9" * 30),
    ],
)
def test_format_decimal_like_server(value, scale, text):
    assert format_decimal(value, scale) == text
