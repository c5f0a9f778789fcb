"""PostgreSQL sink against a real PostgreSQL, MariaDB and Spark.

Snapshots are read with the real batch reader and compared with the source row by row;
change rows for write_changes are built by hand (the stream job is someone else's).
"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any, Iterator

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.types import map_table
from airflow_provider_mysqlcdc.spark.sinks.base import META_COLUMNS, META_OP, META_SEQ
from airflow_provider_mysqlcdc.spark.sinks.postgres.connection import PgConnection
from airflow_provider_mysqlcdc.spark.sinks.postgres.sink import PostgresSink
from airflow_provider_mysqlcdc.spark.sinks.postgres.tables import BATCH_COLUMN, STAGING_PREFIX, PgTable, qi
from airflow_provider_mysqlcdc.spark.snapshot.batch_reader import ConsistentBatchReader
from airflow_provider_mysqlcdc.spark.types import struct_type
from mysqlcdc_harness.pipeline import fresh_select, plan_table
from mysqlcdc_harness.postgres import PostgreSQL, running_postgres
from mysqlcdc_harness.tables import create_int_table, create_string_table
from mysqlcdc_harness.verify import diff

pytestmark = pytest.mark.integration
UTC = dt.timezone.utc


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgreSQL]:
    with running_postgres() as server:
        yield server


@pytest.fixture
def sink(pg: PostgreSQL, request) -> Iterator[PostgresSink]:
    schema = pg.fresh_schema("t_")
    s = PostgresSink(pg.dsn, schema=schema, password=pg.password)
    try:
        yield s
    finally:
        s.close()
        pg.execute(f"DROP SCHEMA {qi(schema)} CASCADE")


# --- helpers ----------------------------------------------------------------------------------


def pg_rows(pg: PostgreSQL, t: PgTable) -> dict[tuple, dict]:
    """The sink table's rows (source columns only), keyed by identity."""
    with pg.connect() as c:
        cur = c.execute(f"SELECT {t.column_list()} FROM {t.qualified}")
        names = [d.name for d in cur.description]
        out = {}
        for r in cur.fetchall():
            row = dict(zip(names, r))
            key = tuple(row[k] for k in t.identity)
            assert key not in out, f"duplicate identity {key}"
            out[key] = row
        return out


def staging_tables(pg: PostgreSQL, schema: str) -> list[str]:
    return [
        r[0]
        for r in pg.query(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND starts_with(tablename, %s)",
            (schema, STAGING_PREFIX),
        )
    ]


def snapshot_all(spark, source, plan, sink: PostgresSink) -> None:
    reader = ConsistentBatchReader(spark, source, {plan.schema.table_id: plan.schema})
    for b in plan.batches:
        got = reader.read(b)
        sink.write_snapshot(plan.schema, got.frame(plan.schema.table_id), b.ranges(), b.batch_id)
        got.unpersist()


def rerun(spark, source, plan, sink: PostgresSink, index: int):
    reader = ConsistentBatchReader(spark, source, {plan.schema.table_id: plan.schema})
    b = plan.batches[index]
    got = reader.read(b)
    try:
        return sink.write_snapshot(plan.schema, got.frame(plan.schema.table_id), b.ranges(), b.batch_id)
    finally:
        got.unpersist()


# --- snapshot ---------------------------------------------------------------------------------


def test_snapshot_batches_equal_source_and_rerun_is_unchanged(mariadb, fresh_db, spark, pg, sink):
    create_int_table(mariadb, fresh_db, 2000)
    source = mariadb.source_config()
    plan = plan_table(source, TableId(fresh_db, "orders"), chunk_size=400, chunks_per_batch=3)
    assert len(plan.batches) >= 2
    sink.prepare([plan.schema])
    sink.prepare([plan.schema])  # idempotent
    snapshot_all(spark, source, plan, sink)
    t = sink.table(plan.schema)
    expected = fresh_select(spark, source, plan.schema)
    assert diff(expected, pg_rows(pg, t)) == ""
    assert len(expected) == 2000

    before = pg_rows(pg, t)
    tags_before = pg.query(f"SELECT {qi(BATCH_COLUMN)}, count(*) FROM {t.qualified} GROUP BY 1 ORDER BY 1")
    result = rerun(spark, source, plan, sink, 0)
    assert result.details["deleted_previous"] == result.rows_written > 0
    assert result.details["parts"] >= 2  # executors copied in parallel (one part per chunk)
    assert pg_rows(pg, t) == before
    assert pg.query(f"SELECT {qi(BATCH_COLUMN)}, count(*) FROM {t.qualified} GROUP BY 1 ORDER BY 1") == tags_before
    assert staging_tables(pg, sink.schema) == []


def test_ci_string_keys_with_case_variants(mariadb, fresh_db, spark, pg, sink):
    """MySQL orders 'k..' and 'K..' together (utf8mb4_general_ci); PostgreSQL's C order does not."""
    create_string_table(mariadb, fresh_db, 1000)
    mariadb.execute(
        "INSERT INTO codes (code, a, s) VALUES ('a', 1, 'x'), ('B', 2, 'x'), ('c ', 3, 'x'), "
        "('é', 4, 'x'), ('Z', 5, 'x'), ('_', 6, 'x'), ('k0000600', 7, 'x')",
        database=fresh_db,
    )
    source = mariadb.source_config()
    plan = plan_table(source, TableId(fresh_db, "codes"), chunk_size=150, chunks_per_batch=3)
    assert len(plan.batches) >= 3
    snapshot_all(spark, source, plan, sink)
    t = sink.table(plan.schema)
    assert diff(fresh_select(spark, source, plan.schema), pg_rows(pg, t)) == ""

    # Between runs, replace keys of batch 1's range by case variants (equal under _ci, not in PG),
    # then rerun only that batch: old spellings go, new ones come, neighbours keep theirs.
    b = plan.batches[1]
    lo, hi = b.chunks[0].start[0], b.chunks[-1].end[0]
    keys = [
        r[0]
        for r in mariadb.query(
            "SELECT code FROM codes WHERE code >= %s AND code < %s AND BINARY code LIKE 'k%%x' ORDER BY code LIMIT 3",
            (lo, hi),
            database=fresh_db,
        )
    ]
    assert len(keys) == 3
    mariadb.execute(
        f"UPDATE codes SET code = UPPER(code), a = -1 WHERE code IN ('{keys[0]}', '{keys[1]}')",
        f"DELETE FROM codes WHERE code = '{keys[2]}'",
        database=fresh_db,
    )
    result = rerun(spark, source, plan, sink, 1)
    got = pg_rows(pg, t)
    assert diff(fresh_select(spark, source, plan.schema), got) == ""
    assert result.details["deleted_previous"] == result.rows_written + 1
    for k in keys[:2]:
        assert (k.upper(),) in got and (k,) not in got and got[(k.upper(),)]["a"] == -1
    assert (keys[2],) not in got


MANY_DDL = """CREATE TABLE many (
  id INT PRIMARY KEY, bu BIGINT UNSIGNED, ti TINYINT, dec65 DECIMAL(65,30), dec10 DECIMAL(10,2),
  f FLOAT, d DOUBLE, dt6 DATETIME(6), ts6 TIMESTAMP(6) NULL, da DATE, tm TIME, tm6 TIME(6), y YEAR,
  b1 BIT(3), b64 BIT(64), j JSON, e ENUM('x','y'), s SET('a','b','c'),
  v VARCHAR(40) CHARACTER SET utf8mb4, tx TEXT, bn BINARY(4), vb VARBINARY(10), bl BLOB
)"""
MANY_ROWS = [
    "(1, 18446744073709551615, -128, '-12345678901234567890123456789012345.123456789012345678901234567891',"
    " -12345678.91, 1.2345678, 0.30000000000000004, '1000-01-01 00:00:00.000001', '2038-01-19 03:14:07.999999',"
    " '1000-01-01', '-838:59:59', '-12:00:00.000001', 1901, b'101',"
    " b'1111111111111111111111111111111111111111111111111111111111111111', '{\"b\": [1, 2.5], \"a\": null}',"
    " 'y', 'c,a', 'h\U0001f600llo \u4e2d \"q\" ''s'' ,;\\\\', 'line1\nline2\ttab', x'01000000', x'00ff', x'')",
    "(2" + ", NULL" * 22 + ")",
    "(3, 0, 127, '0.000000000000000000000000000001', 0, -0.0, 5e-324, '9999-12-31 23:59:59.999999',"
    " '1970-01-01 00:00:01', '9999-12-31', '838:59:59', '00:00:00.5', 2155, b'0', b'0', '[]', 'x', '',"
    " '', '', x'00', x'', x'00')",
]


def _comparable(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "float":  # PostgreSQL real and Spark float: the same float32
        return struct.unpack("<f", struct.pack("<f", value))[0]
    if kind == "decimal_text":
        return Decimal(value)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def test_many_types_equal_source(mariadb, fresh_db, spark, pg, sink):
    mariadb.execute(
        "SET SESSION sql_mode = ''", MANY_DDL, *[f"INSERT INTO many VALUES {r}" for r in MANY_ROWS], database=fresh_db
    )
    source = mariadb.source_config()
    plan = plan_table(source, TableId(fresh_db, "many"), chunk_size=1000, chunks_per_batch=1)
    reader = ConsistentBatchReader(spark, source, {plan.schema.table_id: plan.schema})
    got = reader.read(plan.batches[0])
    frame = got.frame(plan.schema.table_id)
    sink.write_snapshot(plan.schema, frame, plan.batches[0].ranges(), plan.batches[0].batch_id)
    expected_rows = frame.toArrow().to_pylist()  # Arrow keeps TIMESTAMP zone-aware (UTC)
    got.unpersist()

    t = sink.table(plan.schema)
    kinds = {name: kind for name, _typ, kind in t.columns}
    actual = pg_rows(pg, t)
    assert len(actual) == len(expected_rows) == 3
    for exp in expected_rows:
        act = actual[(exp["id"],)]
        for name, kind in kinds.items():
            assert _comparable(act[name], kind) == _comparable(exp[name], kind), (exp["id"], name, act[name], exp[name])

    # absolute values, so a mapping wrong on both sides still fails
    r1, r3 = actual[(1,)], actual[(3,)]
    assert r1["bu"] == Decimal("18446744073709551615")
    assert format(r1["dec65"], "f") == "-12345678901234567890123456789012345.123456789012345678901234567891"
    assert format(r3["dec65"], "f") == "0.000000000000000000000000000001"
    assert r1["dt6"] == dt.datetime(1000, 1, 1, 0, 0, 0, 1)
    assert r1["ts6"] == dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC)
    assert r1["tm"] == -3020399000000 and r1["tm6"] == -43200000001 and r3["tm6"] == 500000
    assert r1["v"] == "h\U0001f600llo \u4e2d \"q\" 's' ,;\\" and r3["v"] == "" and actual[(2,)]["v"] is None
    assert r1["tx"] == "line1\nline2\ttab"
    assert bytes(r1["bn"]) == b"\x01\x00\x00\x00" and bytes(r1["bl"]) == b"" and bytes(r3["bn"]) == b"\x00\x00\x00\x00"
    assert r1["b64"] == Decimal(2**64 - 1) and r1["b1"] == 5 and r1["y"] == 1901 and r1["ti"] == -128
    assert r1["j"] == '{"b": [1, 2.5], "a": null}' and r1["s"] == "a,c"
    assert all(v is None for k, v in actual[(2,)].items() if k != "id")
    types = dict(
        pg.query(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
            (t.schema, t.name),
        )
    )
    assert types["bu"] == "numeric" and types["dt6"] == "timestamp without time zone"
    assert types["ts6"] == "timestamp with time zone" and types["tm"] == "bigint" and types["bl"] == "bytea"


def test_killed_between_staging_and_commit(mariadb, fresh_db, spark, pg, sink):
    create_int_table(mariadb, fresh_db, 800)
    source = mariadb.source_config()
    plan = plan_table(source, TableId(fresh_db, "orders"), chunk_size=400, chunks_per_batch=1)
    snapshot_all(spark, source, plan, sink)
    t = sink.table(plan.schema)
    before = pg_rows(pg, t)

    # the source moves on, then a run of batch 0 stages and "dies" before its commit
    mariadb.execute("UPDATE orders SET a = a + 1 WHERE id <= 100", "DELETE FROM orders WHERE id = 2", database=fresh_db)
    reader = ConsistentBatchReader(spark, source, {plan.schema.table_id: plan.schema})
    b = plan.batches[0]
    got = reader.read(b)
    staged = sink.stage_snapshot(plan.schema, got.frame(plan.schema.table_id), b.batch_id, b.ranges())
    got.unpersist()
    assert staged.rows > 0 and staging_tables(pg, sink.schema) == [staged.staging]
    assert pg_rows(pg, t) == before

    # the rerun drops the dead run's staging and replaces the batch
    rerun(spark, source, plan, sink, 0)
    assert staging_tables(pg, sink.schema) == []
    assert diff(fresh_select(spark, source, plan.schema), pg_rows(pg, t)) == ""
    with pytest.raises(RuntimeError, match="staging table .* is gone"):
        sink.commit_snapshot(staged)
    assert diff(fresh_select(spark, source, plan.schema), pg_rows(pg, t)) == ""


# --- stream -----------------------------------------------------------------------------------


def _col(name: str, data_type: str, column_type: str, ordinal: int, nullable: bool = True, **kw) -> Column:
    return Column(name, ordinal, data_type, column_type, nullable, **kw)


ITEMS = TableSchema(
    TableId("shop", "items"),
    (
        _col("code", "varchar", "varchar(20)", 1, False, charset="utf8mb4", collation="utf8mb4_general_ci"),
        _col("qty", "int", "int(11)", 2),
        _col("price", "decimal", "decimal(10,2)", 3, numeric_precision=10, numeric_scale=2),
        _col("blob", "varbinary", "varbinary(8)", 4),
        _col("at", "timestamp", "timestamp(6)", 5, datetime_precision=6),
    ),
    ("code",),
    ("code",),
    ("code",),
)


def _changes(spark, schema: TableSchema, rows: list[tuple[str, dict]]):
    """Change rows (table columns + metadata) in the given order; ``_seq`` follows it."""
    base = struct_type(map_table(schema, "UTC"))
    meta_types = {
        META_OP: StringType(),
        META_SEQ: LongType(),
        "_binlog_pos": LongType(),
        "_binlog_row": LongType(),
        "_event_time": TimestampType(),
    }
    fields = list(base.fields) + [StructField(m, meta_types.get(m, StringType()), True) for m in META_COLUMNS]
    data = []
    for seq, (op, values) in enumerate(rows):
        full = {c.name: values.get(c.name) for c in schema.columns}
        meta = {
            META_OP: op,
            "_database": schema.table_id.database,
            "_table": schema.table_id.table,
            "_binlog_file": "mysql-bin.000001",
            "_binlog_pos": 4 + seq,
            "_binlog_row": 0,
            "_gtid": None,
            "_event_time": dt.datetime(2024, 1, 1, tzinfo=UTC),
            META_SEQ: seq,
        }
        data.append(tuple(full[f.name] if f.name in full else meta[f.name] for f in fields))
    return spark.createDataFrame(data, StructType(fields)).repartition(3)


def _row(
    code: str, qty: int | None, price: str | None = None, blob: bytes | None = None, at: dt.datetime | None = None
) -> dict:
    return {"code": code, "qty": qty, "price": Decimal(price) if price else None, "blob": blob, "at": at}


def _state(pg: PostgreSQL, sink: PostgresSink, schema: TableSchema) -> dict[str, tuple]:
    return {
        k[0]: (v["qty"], v["price"], None if v["blob"] is None else bytes(v["blob"]), v["at"])
        for k, v in pg_rows(pg, sink.table(schema)).items()
    }


def test_write_changes_inserts_updates_deletes_key_changes_and_replay(spark, pg, sink):
    at = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    batch1 = [
        ("+I", _row("a", 1, "1.50", b"\x00\x01", at)),
        ("+I", _row("b", 2)),
        ("+I", _row("c", 3)),
        ("+I", _row("d", 4)),
        ("+I", _row("e", 5, blob=b"")),
    ]
    sink.write_changes(ITEMS, _changes(spark, ITEMS, batch1), 0)
    assert _state(pg, sink, ITEMS) == {
        "a": (1, Decimal("1.50"), b"\x00\x01", at),
        "b": (2, None, None, None),
        "c": (3, None, None, None),
        "d": (4, None, None, None),
        "e": (5, None, b"", None),
    }
    batch2 = [
        ("-U", _row("a", 1, "1.50", b"\x00\x01", at)),
        ("+U", _row("a", 10, "2.00", b"\xff", at)),  # update
        ("-D", _row("b", 2)),  # delete
        ("-U", _row("c", 3)),
        ("+U", _row("C", 3)),  # key change to a case variant
        ("+I", _row("f", 6)),
        ("-D", _row("f", 6)),  # inserted and deleted in the batch
        ("-D", _row("d", 4)),
        ("+I", _row("d", 40)),  # deleted and inserted again
        ("+I", _row("g", 7)),
        ("-U", _row("g", 7)),
        ("+U", _row("g", 70)),  # inserted then updated
        ("-U", _row("e", 5)),
        ("+U", _row("x", 5)),
        ("-U", _row("x", 5)),
        ("+U", _row("e", 50)),  # key moved back
    ]
    sink.write_changes(ITEMS, _changes(spark, ITEMS, batch2), 1)
    expected = {
        "a": (10, Decimal("2.00"), b"\xff", at),
        "C": (3, None, None, None),
        "d": (40, None, None, None),
        "g": (70, None, None, None),
        "e": (50, None, None, None),
    }
    assert _state(pg, sink, ITEMS) == expected
    assert sink.last_batch_id(ITEMS) == 1

    # replays (even with different contents) change nothing
    sink.write_changes(ITEMS, _changes(spark, ITEMS, batch2), 1)
    sink.write_changes(ITEMS, _changes(spark, ITEMS, [("-D", _row("a", 10))]), 1)
    sink.write_changes(ITEMS, _changes(spark, ITEMS, batch1), 0)
    assert _state(pg, sink, ITEMS) == expected
    # the in-transaction check holds too (another writer got there first)
    t = sink.table(ITEMS)
    assert (
        sink.apply_changes(
            t, pa.table({"code": ["a"], "qty": [1], "price": [None], "blob": [None], "at": [None], META_OP: ["-D"]}), 1
        )
        is False
    )
    assert _state(pg, sink, ITEMS) == expected

    sink.write_changes(ITEMS, _changes(spark, ITEMS, [("-D", _row("a", 10)), ("+I", _row("h", 8))]), 2)
    expected.pop("a")
    expected["h"] = (8, None, None, None)
    assert _state(pg, sink, ITEMS) == expected
    sink.reset_progress(ITEMS)
    assert sink.last_batch_id(ITEMS) is None


def test_table_without_unique_key_uses_all_columns(spark, pg, sink):
    """Row identity = every column, some nullable: UNIQUE NULLS NOT DISTINCT, NULL-safe deletes."""
    logs = TableSchema(
        TableId("shop", "log"),
        (_col("k", "int", "int(11)", 1), _col("v", "varchar", "varchar(5)", 2, charset="utf8mb4")),
        (),
        ("k",),
        ("k", "v"),
    )
    sink.write_changes(
        logs,
        _changes(
            spark, logs, [("+I", {"k": 1, "v": None}), ("+I", {"k": 1, "v": "x"}), ("+I", {"k": None, "v": None})]
        ),
        0,
    )
    sink.write_changes(logs, _changes(spark, logs, [("-D", {"k": 1, "v": None}), ("+I", {"k": None, "v": None})]), 1)
    assert sorted(pg_rows(pg, sink.table(logs)), key=str) == sorted([(1, "x"), (None, None)], key=str)


# --- configuration ------------------------------------------------------------------------------


def test_prepare_rejects_incompatible_table_and_long_names(pg, sink):
    t = sink.table(ITEMS)
    pg.execute(
        f"CREATE TABLE {t.qualified} (code text PRIMARY KEY, qty text, price numeric(10,2), "
        f"blob bytea, at timestamptz, {qi(BATCH_COLUMN)} integer)"
    )
    with pytest.raises(ConfigError, match=r"column 'qty' is text, want integer"):
        sink.prepare([ITEMS])
    pg.execute(f"ALTER TABLE {t.qualified} ALTER COLUMN qty TYPE integer USING qty::integer")
    sink.prepare([ITEMS])  # now it fits
    long_sink = PostgresSink(pg.dsn, schema=sink.schema, table_name_format="{database}_" + "x" * 70)
    with pytest.raises(ConfigError, match="longer than 63 bytes"):
        long_sink.prepare([ITEMS])


def test_password_never_in_conninfo_or_repr(pg, tmp_dir, monkeypatch):
    c = PgConnection.resolve(pg.dsn + f" password={pg.password}")
    assert pg.password not in c.conninfo and pg.password not in repr(c) and c.password == pg.password
    pw = tmp_dir / "pw"
    pw.write_text(pg.password + "\n")
    s = PostgresSink({"host": "127.0.0.1", "port": pg.port, "dbname": "mysqlcdc", "user": "mysqlcdc"}, password_file=pw)
    assert pg.password not in repr(s)
    s.prepare([ITEMS])
    s.close()
    monkeypatch.setenv("PGPASSWORD", pg.password)
    s2 = PostgresSink(pg.dsn)
    assert s2.conn_info.password == pg.password and pg.password not in repr(s2)
    s2.prepare([ITEMS])
    s2.close()


def test_empty_snapshot_batch_takes_back_its_earlier_rows(spark, pg, sink):
    schema = struct_type(map_table(ITEMS, "UTC"))
    rows = [("a", 1, Decimal("1.00"), b"\x01", None), ("B", 2, None, None, None)]
    first = sink.write_snapshot(ITEMS, spark.createDataFrame(rows, schema), [], "b#0-0")
    other = sink.write_snapshot(ITEMS, spark.createDataFrame([("z", 9, None, None, None)], schema), [], "b#1-1")
    assert first.rows_written == 2 and other.rows_written == 1 and first.details["deleted_previous"] == 0
    again = sink.write_snapshot(ITEMS, spark.createDataFrame([], schema), [], "b#0-0")
    assert again.rows_written == 0 and again.details["deleted_previous"] == 2
    assert list(pg_rows(pg, sink.table(ITEMS))) == [("z",)]


def test_two_tables_into_one_name_is_refused(pg, sink):
    other = TableSchema(TableId("shop2", "items"), ITEMS.columns, ("code",), ("code",), ("code",))
    s = PostgresSink(pg.dsn, schema=sink.schema, password=pg.password, table_name_format="{table}")
    with pytest.raises(ConfigError, match="would both be written"):
        s.prepare([ITEMS, other])


def test_text_holding_nul_has_a_named_fate_in_snapshot_and_stream(spark, pg):
    """PostgreSQL text cannot store U+0000. 'fail' (default): an error naming table, key and column,
    nothing of the batch written; 'replace': U+FFFD in its place, snapshot and stream alike."""
    from airflow_provider_mysqlcdc.cdc.chunks import KeyRange

    rows = [("+I", _row("a\x00b", 1)), ("+I", _row("plain", 2))]
    frame = spark.createDataFrame(
        [tuple(r[c.name] for c in ITEMS.columns) for _, r in rows], struct_type(map_table(ITEMS, "UTC"))
    )
    everything = [KeyRange(ITEMS.table_id, None, None, True)]
    for policy in ("fail", "replace"):
        schema = pg.fresh_schema("nul_")
        sink = PostgresSink(
            pg.dsn, schema=schema, password=pg.password, **({} if policy == "fail" else {"nul_in_text": policy})
        )
        try:
            sink.prepare([ITEMS])
            if policy == "fail":
                with pytest.raises(Exception, match=r"shop.items: column 'code' of the row with key .*holds U\+0000"):
                    sink.write_snapshot(ITEMS, frame, everything, "batch-0000")
                with pytest.raises(ConfigError, match=r"column 'code' .*U\+0000.*Fix: set sink_options.nul_in_text"):
                    sink.write_changes(ITEMS, _changes(spark, ITEMS, rows), 0)
                assert _state(pg, sink, ITEMS) == {} and sink.last_batch_id(ITEMS) is None
            else:
                sink.write_snapshot(ITEMS, frame, everything, "batch-0000")
                assert set(_state(pg, sink, ITEMS)) == {"a\ufffdb", "plain"}
                seen: list = []
                sink.observe_replaced_values(lambda *a: seen.append(a))
                changes = [("+U", _row("a\x00b", 7)), ("+I", _row("c\x00", 3))]
                sink.write_changes(ITEMS, _changes(spark, ITEMS, changes), 0)
                got = _state(pg, sink, ITEMS)
                assert got["a\ufffdb"][0] == 7 and got["c\ufffd"][0] == 3 and len(got) == 3
                # counted for stream/status.json once, at the commit: a replay adds nothing
                sink.write_changes(ITEMS, _changes(spark, ITEMS, changes), 0)
                assert seen == [("shop.items", "nul_in_text", 2)]
        finally:
            sink.close()
            pg.execute(f"DROP SCHEMA {qi(schema)} CASCADE")
    with pytest.raises(ConfigError, match="nul_in_text: found 'drop'.*Fix"):
        PostgresSink(pg.dsn, nul_in_text="drop")
