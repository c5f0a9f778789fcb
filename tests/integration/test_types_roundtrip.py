"""Every supported type comes out identical via Spark JDBC (snapshot) and via the binlog.

Runs with the Python process, the driver JVM and the Spark session in America/New_York
(DST) so that any dependence on a local zone shows up as a shifted value.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from decimal import Decimal

import pytest

from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.types import map_table, row_normalizer
from airflow_provider_mysqlcdc.spark.types import (
    finalize_columns,
    jdbc_custom_schema,
    jdbc_url,
    rows_to_dataframe,
    snapshot_select,
    struct_type,
)
from mysqlcdc_harness.mariadb import ROOT_PASSWORD

pytestmark = pytest.mark.integration

ZONE = "America/New_York"
UTC = dt.timezone.utc

DDL = """CREATE TABLE t (
  id INT PRIMARY KEY,
  ti TINYINT, ti1 TINYINT(1), tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED,
  f FLOAT, d DOUBLE, dec10 DECIMAL(10,2), dec65 DECIMAL(65,30), dec0 DECIMAL(20,0),
  dt DATETIME, dt6 DATETIME(6), ts TIMESTAMP NULL, ts3 TIMESTAMP(3) NULL, da DATE,
  tm TIME, tm6 TIME(6), tm1 TIME(1), y YEAR,
  j JSON, b1 BIT(1), b64 BIT(64), e ENUM('x','y','z'), s SET('a','b','c'),
  sn SET('a','b') NOT NULL DEFAULT '',
  v VARCHAR(20) CHARACTER SET utf8mb4, l VARCHAR(20) CHARACTER SET latin1,
  c CHAR(5) CHARACTER SET latin1, tx TEXT,
  bn BINARY(4), vb VARBINARY(10), bl BLOB
)"""

EMOJI = "h\U0001f600llo \u4e2d"
LATIN = "caf\u00e9 \u00e0 \u00fc\u00df"
ROWS = [
    # extremes, DST-gap DATETIME, negative TIME, emoji, latin1
    "(1, -128, 5, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,"
    " -9223372036854775808, 18446744073709551615, 1.2345678, 0.30000000000000004, -12345678.91,"
    " '-12345678901234567890123456789012345.123456789012345678901234567891', 99999999999999999999,"
    " '2026-03-08 02:30:00', '1000-01-01 00:00:00.000001', '2038-01-19 03:14:07', '1970-01-01 00:00:01.5',"
    " '1000-01-01', '-838:59:59', '-12:00:00.000001', '-00:00:01.5', 1901,"
    " '{\"b\": [1, 2.5], \"a\": null}', b'1', b'1111111111111111111111111111111111111111111111111111111111111111',"
    f" 'y', 'c,a', 'b,a', '{EMOJI}', '{LATIN}', 'ab  ', 'txt', x'01000000', x'0000', x'00ff')",
    # all NULL (sn is NOT NULL)
    "(2" + ", NULL" * 30 + ", 'a'" + ", NULL" * 7 + ")",
    # other ends of the ranges, DST fall-back hour
    "(3, 127, 0, 0, 32767, 0, 8388607, 0, 2147483647, 0, 9223372036854775807, 0,"
    " 3.4028235e38, 1.7976931348623157e308, 99999999.99, '0.5', 0,"
    " '9999-12-31 23:59:59', '2026-11-01 01:30:00.5', '2026-11-01 05:30:00', '2026-03-08 07:30:00.123',"
    " '9999-12-31', '838:59:59', '838:59:59.999999', '00:00:00.1', 2155,"
    " '[]', b'0', b'0', '', '', '', '', '', '', '', x'', x'', x'')",
    # zero dates, YEAR 0, empty sets, tiny doubles
    "(4, 0, -1, 1, 0, 1, 0, 1, 0, 1, 0, 1, -0.0, 5e-324, -0.01, '-0.000000000000000000000000000001', 1,"
    " '0000-00-00 00:00:00', '2020-00-15 00:00:00', '0000-00-00 00:00:00', NULL, '0000-00-00',"
    " '00:00:00', '-00:00:00.5', '00:00:00', 0, 'null', b'0',"
    " b'1000000000000000000000000000000000000000000000000000000000000000', 'z', 'a,b,c', 'b',"
    " ' ', 'x', 'x', ' ', x'00', x'00', x'00')",
]


def _schema(mariadb, db: str) -> TableSchema:
    cols = mariadb.query(
        "SELECT column_name, ordinal_position, data_type, column_type, is_nullable, character_set_name,"
        " collation_name, character_maximum_length, numeric_precision, numeric_scale, datetime_precision"
        " FROM information_schema.columns WHERE table_schema=%s AND table_name='t' ORDER BY ordinal_position",
        (db,),
    )
    columns = tuple(
        Column(
            name=r[0],
            ordinal=r[1],
            data_type=r[2],
            column_type=r[3],
            nullable=r[4] == "YES",
            charset=r[5],
            collation=r[6],
            char_max_length=r[7],
            numeric_precision=r[8],
            numeric_scale=r[9],
            datetime_precision=r[10],
        )
        for r in cols
    )
    return TableSchema(TableId(db, "t"), columns, ("id",), ("id",), ("id",))


@contextlib.contextmanager
def _local_zone_everywhere(spark):
    """Python, the driver JVM and the Spark session all in a DST zone, restored afterwards."""
    old_tz = os.environ.get("TZ")
    jtz = spark.sparkContext._jvm.java.util.TimeZone
    old_jvm = jtz.getDefault()
    old_session = spark.conf.get("spark.sql.session.timeZone")
    os.environ["TZ"] = ZONE
    time.tzset()
    jtz.setDefault(jtz.getTimeZone(ZONE))
    spark.conf.set("spark.sql.session.timeZone", ZONE)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", old_session)
        jtz.setDefault(old_jvm)
        if old_tz is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old_tz
        time.tzset()


def _snapshot(spark, mariadb, db, mappings, ids):
    df = (
        spark.read.format("jdbc")
        # the session zone of the connection must not matter either
        .option("url", jdbc_url("127.0.0.1", mariadb.port, db, "sessionVariables=time_zone='-05:00'"))
        .option("driver", "org.mariadb.jdbc.Driver")
        .option("dbtable", snapshot_select(mappings, f"`{db}`.`t`", f"id IN ({','.join(map(str, ids))})"))
        .option("customSchema", jdbc_custom_schema(mappings))
        .option("user", "root")
        .option("password", ROOT_PASSWORD)
        .load()
    )
    return finalize_columns(df, mappings)


def _binlog_rows(mariadb, db, start, normalize):
    """After-images of table t from ``start`` to now, through the engine's binlog reader."""
    from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader
    from airflow_provider_mysqlcdc.cdc.events import RowChange
    from airflow_provider_mysqlcdc.cdc.model import TableId
    from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset

    t = TableId(db, "t")
    stop = BinlogOffset(*mariadb.master_status())
    out = []
    with BinlogReader(
        mariadb.source_config(), 9001, BinlogOffset(*start), stop=stop, tables=[t], normalizers={t: normalize}
    ) as reader:
        for ch in reader:
            if isinstance(ch, RowChange) and ch.after is not None:
                out.append(dict(ch.after))
    return out


def _stable(df):
    """Zone-free projection: TIMESTAMP as epoch micros (collect() gives local naive times)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    return df.select(
        *[
            F.unix_micros(F.col(f.name)).alias(f.name) if isinstance(f.dataType, TimestampType) else F.col(f.name)
            for f in df.schema.fields
        ]
    )


def _assert_same(snap_df, binlog_df):
    assert snap_df.schema == binlog_df.schema
    a = {r["id"]: r.asDict() for r in _stable(snap_df).collect()}
    b = {r["id"]: r.asDict() for r in _stable(binlog_df).collect()}
    assert sorted(a) == sorted(b)
    for k in a:
        for name in a[k]:
            assert a[k][name] == b[k][name] and type(a[k][name]) is type(b[k][name]), (k, name, a[k][name], b[k][name])
    return a


def test_every_type_identical_via_jdbc_and_binlog(mariadb, fresh_db, spark):
    db = fresh_db
    mariadb.execute(DDL, database=db)
    schema = _schema(mariadb, db)
    mappings = map_table(schema, "UTC")
    mariadb.execute("FLUSH BINARY LOGS")
    start = mariadb.master_status()
    with _local_zone_everywhere(spark):
        mariadb.execute("SET SESSION sql_mode = ''", *[f"INSERT INTO t VALUES {r}" for r in ROWS], database=db)
        normalize = row_normalizer(schema, "UTC")
        inserted = _binlog_rows(mariadb, db, start, normalize)
        assert len(inserted) == 4

        snap = _snapshot(spark, mariadb, db, mappings, [1, 2, 3, 4])
        assert snap.schema == struct_type(mappings)
        got = _assert_same(snap, rows_to_dataframe(spark, inserted, mappings))
        _check_expected_values(got, {r["id"]: r for r in inserted})

        # a row changed after the snapshot: its after-image equals a re-read
        mariadb.execute(
            "SET SESSION sql_mode = ''",
            "UPDATE t SET dt = '2026-03-08 02:59:59', ts = '2026-11-01 06:30:00', tm6 = '-00:00:00.000001',"
            " s = 'b', v = 'x\U0001f680', l = '\u00c5ngstr\u00f6m', bu = 9223372036854775808 WHERE id = 3",
            database=db,
        )
        changed = [r for r in _binlog_rows(mariadb, db, start, normalize)[4:]]
        assert [r["id"] for r in changed] == [3]
        got2 = _assert_same(_snapshot(spark, mariadb, db, mappings, [3]), rows_to_dataframe(spark, changed, mappings))
        assert got2[3]["dt"] == dt.datetime(2026, 3, 8, 2, 59, 59)
        assert got2[3]["tm6"] == -1
        assert got2[3]["bu"] == Decimal(9223372036854775808)
        assert got2[3]["l"] == "\u00c5ngstr\u00f6m"


def _check_expected_values(got, normalized):
    """Absolute values, so both paths being wrong the same way still fails."""
    r1, r2, r3, r4 = got[1], got[2], got[3], got[4]
    assert r1["ti1"] == 5 and r1["ti"] == -128 and r1["tiu"] == 255 and r1["iu"] == 4294967295
    assert r1["bu"] == Decimal("18446744073709551615") and r1["bi"] == -(2**63)
    assert r1["f"] == 1.2345677614212036 and r1["d"] == 0.30000000000000004
    assert r1["dec10"] == Decimal("-12345678.91")
    assert r1["dec65"] == "-12345678901234567890123456789012345.123456789012345678901234567891"
    assert r3["dec65"] == "0.500000000000000000000000000000"
    assert r4["dec65"] == "-0.000000000000000000000000000001"
    assert r1["dec0"] == Decimal("99999999999999999999")
    assert r1["dt"] == dt.datetime(2026, 3, 8, 2, 30)  # inside the New York DST gap
    assert r1["dt6"] == dt.datetime(1000, 1, 1, 0, 0, 0, 1)
    assert r3["dt6"] == dt.datetime(2026, 11, 1, 1, 30, 0, 500000)  # ambiguous hour in New York
    assert r1["ts"] == int(dt.datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC).timestamp()) * 10**6
    assert r1["ts3"] == 1_500_000
    assert r3["ts"] == int(dt.datetime(2026, 11, 1, 5, 30, tzinfo=UTC).timestamp()) * 10**6
    assert normalized[1]["ts"] == dt.datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC)
    assert r1["da"] == dt.date(1000, 1, 1) and r3["da"] == dt.date(9999, 12, 31)
    assert r1["tm"] == -3020399 * 10**6 and r3["tm"] == 3020399 * 10**6
    assert r1["tm6"] == -(43200 * 10**6 + 1) and r3["tm6"] == 3020399999999
    assert r1["tm1"] == -1_500_000 and r4["tm6"] == -500_000
    assert r1["y"] == 1901 and r3["y"] == 2155 and r4["y"] == 0
    assert r1["j"] == '{"b": [1, 2.5], "a": null}'
    assert r1["b1"] == 1 and r1["b64"] == Decimal(2**64 - 1) and r4["b64"] == Decimal(2**63)
    assert r1["e"] == "y" and r3["e"] == ""
    assert r1["s"] == "a,c" and r1["sn"] == "a,b" and r3["s"] == "" and r3["sn"] == "" and r4["s"] == "a,b,c"
    assert r1["v"] == EMOJI and r1["l"] == LATIN and r1["c"] == "ab" and r4["c"] == "x"
    assert r1["bn"] == bytearray(b"\x01\x00\x00\x00") and r4["bn"] == bytearray(b"\x00\x00\x00\x00")
    assert r3["bn"] == bytearray(b"\x00\x00\x00\x00")
    assert r1["vb"] == bytearray(b"\x00\x00") and r1["bl"] == bytearray(b"\x00\xff") and r3["vb"] == bytearray(b"")
    # NULL stays NULL; zero / invalid dates are NULL on both paths
    assert all(v is None for k, v in r2.items() if k not in ("id", "sn")) and r2["sn"] == "a"
    assert r4["dt"] is None and r4["dt6"] is None and r4["ts"] is None and r4["da"] is None


def test_every_type_identical_via_the_arrow_reader_and_binlog(mariadb, fresh_db):
    """The Arrow reader (connectorx, ``spark/snapshot/arrow_read.py``) gives the binlog path's values
    for every type, exactly, in the sink's Arrow types: its fast form (dates as stored) on rows
    without zero dates, and its text form when a zero or invalid date makes the fast one fail."""
    import pyarrow as pa

    from airflow_provider_mysqlcdc.cdc.types import arrow_schema
    from airflow_provider_mysqlcdc.spark.snapshot.arrow_read import read_rows, select_sql

    db = fresh_db
    mariadb.execute(DDL, database=db)
    schema = _schema(mariadb, db)
    mappings = map_table(schema, "UTC")
    mariadb.execute("FLUSH BINARY LOGS")
    start = mariadb.master_status()
    mariadb.execute("SET SESSION sql_mode = ''", *[f"INSERT INTO t VALUES {r}" for r in ROWS], database=db)
    inserted = {r["id"]: r for r in _binlog_rows(mariadb, db, start, row_normalizer(schema, "UTC"))}
    expected = pa.Table.from_pylist(list(inserted.values()), schema=arrow_schema(mappings))
    source = mariadb.source_config()

    def read(where):
        return read_rows(
            source,
            db,
            mappings,
            select_sql(schema, mappings, where),
            select_sql(schema, mappings, where, raw_dates=False),
        )

    clean, used_text = read("id IN (1, 2, 3)")  # no zero date: the fast form reads them
    assert not used_text
    everything, used_text = read("id >= 1")  # row 4's zero dates: read again as text
    assert used_text
    for got in (clean, everything):
        assert got.schema == arrow_schema(mappings)
        rows = {r["id"]: r for r in got.to_pylist()}
        want = {r["id"]: r for r in expected.to_pylist()}
        for k, row in rows.items():
            for name, value in row.items():
                assert value == want[k][name] and type(value) is type(want[k][name]), (k, name, value, want[k][name])
    assert sorted(r["id"] for r in everything.to_pylist()) == [1, 2, 3, 4]

    def stable(v):  # as _stable() gives them from Spark: a TIMESTAMP as epoch microseconds
        if isinstance(v, dt.datetime) and v.tzinfo is not None:
            return (v - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)
        return v

    _check_expected_values({r["id"]: {k: stable(v) for k, v in r.items()} for r in everything.to_pylist()}, inserted)
