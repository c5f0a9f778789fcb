"""ChangelogSink (JSON lines and Parquet) and ConsoleSink on real Spark and a real MariaDB table.

Snapshot rows of a table with decimals, unsigned bigints, binary, DATETIME, TIMESTAMP, TIME
and DATE come back exactly from the JSON lines; a rerun of the batch replaces its files; a
replayed micro-batch rewrites the same file (no duplicate lines); lines are in binlog order.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from airflow_provider_mysqlcdc.cdc.chunks import Batch, Chunk
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.spark.sinks.changelog.sink import ChangelogSink
from airflow_provider_mysqlcdc.spark.sinks.console.sink import ConsoleSink
from airflow_provider_mysqlcdc.spark.sinks.json_values import read_json_lines, row_decoder
from airflow_provider_mysqlcdc.spark.snapshot.batch_reader import ConsistentBatchReader
from mysqlcdc_harness.pipeline import plan_table
from tests.integration.test_sink_delta import change_rows, change_struct, row, sink_struct, small_schema

pytestmark = [pytest.mark.integration, pytest.mark.spark]

UTC = dt.timezone.utc

DDL = (
    "CREATE TABLE t (id INT PRIMARY KEY, amount DECIMAL(12,2), bu BIGINT UNSIGNED, dec65 DECIMAL(65,30),"
    " raw VARBINARY(8), wall DATETIME(6), at TIMESTAMP(6) NULL, tm TIME(6), da DATE, f FLOAT, s VARCHAR(20))"
)
ROWS = [
    "(1, -12345.67, 18446744073709551615, '-1.000000000000000000000000000001', x'00ff10',"
    " '1000-01-01 00:00:00.000001', '2038-01-19 03:14:07.999999', '-838:59:59', '1000-01-01', 1.2345678,"
    " 'h\U0001f600llo')",
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(3, 0.10, 0, '0.5', x'', '2026-03-08 02:30:00', '1970-01-01 00:00:01.5', '12:00:00.5', '9999-12-31', -0.0, '')",
]


@pytest.fixture
def typed_table(mariadb, fresh_db, spark):
    mariadb.execute(DDL, f"INSERT INTO t VALUES {', '.join(ROWS)}", database=fresh_db)
    source = mariadb.source_config()
    plan = plan_table(source, TableId(fresh_db, "t"), chunk_size=100, chunks_per_batch=1)
    schema = plan.schema
    whole = Batch("shop#0-0", (Chunk(schema.table_id, 0, None, None, True),))
    got = ConsistentBatchReader(spark, source, {schema.table_id: schema}).read(whole)
    yield schema, got.frame(schema.table_id), whole
    got.unpersist()


def lines_under(directory: Path) -> list[dict]:
    out = []
    for p in sorted(directory.rglob("*.jsonl")):
        out += read_json_lines(str(p))
    return out


def test_json_snapshot_round_trips_exact_values_and_rerun_replaces(typed_table, tmp_dir):
    schema, frame, batch = typed_table
    sink = ChangelogSink(str(tmp_dir / "log"))
    sink.prepare([schema])
    res = sink.write_snapshot(schema, frame, batch.ranges(), batch.batch_id)
    assert res.rows_written == 3
    snap = tmp_dir / "log" / sink.snapshot_dir(schema.table_id, batch.batch_id)
    lines = lines_under(snap)
    assert {line["op"] for line in lines} == {"+I"}
    assert all(
        list(line) == ["data", "op", "meta"] and list(line["data"]) == list(schema.column_names) for line in lines
    )
    decode = row_decoder(schema)
    got = {line["data"]["id"]: decode(line["data"]) for line in lines}
    expected = {r["id"]: r for r in frame.toArrow().to_pylist()}
    assert got == expected
    one = {line["data"]["id"]: line["data"] for line in lines}[1]
    assert one["amount"] == "-12345.67" and one["bu"] == "18446744073709551615"
    assert one["dec65"] == "-1.000000000000000000000000000001" and one["raw"] == "AP8Q"
    assert one["wall"] == "1000-01-01T00:00:00.000001" and one["at"] == "2038-01-19T03:14:07.999999Z"
    assert one["tm"] == -3020399000000 and one["da"] == "1000-01-01"
    # the snapshot's lines name their layout, registered beside them
    from airflow_provider_mysqlcdc.cdc.schema.fingerprint import schema_id

    assert {line["meta"]["schema_id"] for line in lines} == {schema_id(schema.columns)}
    doc = json.loads(
        (
            tmp_dir / "log" / sink.table_dir(schema.table_id) / "_schemas" / f"{schema_id(schema.columns)}.json"
        ).read_text()
    )
    assert [c["name"] for c in doc["columns"]] == list(schema.column_names)

    before = sorted(p.name for p in snap.rglob("*.jsonl"))
    sink.write_snapshot(schema, frame, batch.ranges(), batch.batch_id)
    after = sorted(p.name for p in snap.rglob("*.jsonl"))
    assert len(lines_under(snap)) == 3 and not set(before) & set(after)
    leftovers = [p.name for p in snap.parent.iterdir() if p.name.startswith(".")]
    assert not leftovers, leftovers


def test_json_stream_batches_are_ordered_and_replay_gives_no_duplicates(spark, tmp_dir, caplog):
    schema = small_schema()
    sink = ChangelogSink(str(tmp_dir / "log"))
    sink.prepare([schema])
    changes = [("+I", row(1)), ("-U", row(1)), ("+U", row(1, "b")), ("+I", row(2)), ("-D", row(1, "b"))] * 20
    rows = change_rows(schema, changes)
    df = spark.createDataFrame(list(reversed(rows)), change_struct(schema)).repartition(4)
    with caplog.at_level("INFO", logger="airflow_provider_mysqlcdc"):
        sink.write_changes(schema, df, 123)
    assert "spans overlap" in caplog.text  # round-robin partitions: one sorted rewrite
    path = tmp_dir / "log" / sink.stream_file(schema.table_id, 123)
    assert path.name == "batch-000000123.jsonl"
    content = path.read_bytes()
    lines = [json.loads(x) for x in content.decode().splitlines()]
    assert [x["meta"]["seq"] for x in lines] == list(range(len(changes)))
    assert [x["op"] for x in lines] == [op for op, _ in changes]
    assert lines[0]["meta"]["binlog_file"] == "mariadb-bin.000001" and lines[0]["meta"]["batch"] == 123
    assert lines[0]["data"]["at"] == "2038-01-19T03:14:07.123456Z"

    sink.write_changes(schema, df, 123)  # replay
    assert path.read_bytes() == content
    sink.write_changes(schema, df.limit(0), 124)  # an empty batch writes nothing
    stream_dir = path.parent
    assert sorted(p.name for p in stream_dir.iterdir()) == ["batch-000000123.jsonl"]

    # partitions holding disjoint _seq spans (binlog ranges), each out of order and the
    # partitions themselves in reverse: written in parallel, joined into the same bytes
    spans = [rows[i : i + 25] for i in range(0, len(rows), 25)]
    parts = spark.sparkContext.parallelize([r for span in reversed(spans) for r in reversed(span)], len(spans))
    caplog.clear()
    with caplog.at_level("INFO", logger="airflow_provider_mysqlcdc"):
        sink.write_changes(schema, spark.createDataFrame(parts, change_struct(schema)), 123)
    assert "spans overlap" not in caplog.text and "micro-batch 123: 100 rows" in caplog.text
    assert path.read_bytes() == content
    assert sorted(p.name for p in stream_dir.iterdir()) == ["batch-000000123.jsonl"]


def test_parquet_variant(typed_table, spark, tmp_dir):
    schema, frame, batch = typed_table
    sink = ChangelogSink(str(tmp_dir / "pq"), format="parquet")
    sink.prepare([schema])
    sink.write_snapshot(schema, frame, batch.ranges(), batch.batch_id)
    snap = tmp_dir / "pq" / sink.snapshot_dir(schema.table_id, batch.batch_id)
    table = pq.read_table([str(p) for p in snap.glob("*.parquet")])
    assert table.column_names == list(schema.column_names) + ["_op", "_database", "_table"]
    expected = {r["id"]: r for r in frame.toArrow().to_pylist()}
    got = {r["id"]: {k: r[k] for k in schema.column_names} for r in table.to_pylist()}
    assert got == expected and set(table.column("_op").to_pylist()) == {"+I"}

    small = small_schema()
    sink.prepare([small])
    df = spark.createDataFrame(change_rows(small, [("+I", row(5)), ("-D", row(5))]), change_struct(small))
    sink.write_changes(small, df, 7)
    sink.write_changes(small, df, 7)
    path = tmp_dir / "pq" / sink.stream_file(small.table_id, 7)
    t = pq.read_table(str(path))
    assert t.column("_op").to_pylist() == ["+I", "-D"] and t.column("_seq").to_pylist() == [0, 1]
    assert t.column("big").to_pylist() == [Decimal(18446744073709551615)] * 2
    assert t.schema.field("wall").type.tz is None and t.schema.field("at").type.tz == "UTC"
    assert sorted(os.listdir(path.parent)) == [path.name]


def test_console_prints_each_event(spark):
    schema = small_schema()
    out = io.StringIO()
    sink = ConsoleSink(out)
    snap = spark.createDataFrame([row(2), row(1)], sink_struct(schema))
    assert sink.write_snapshot(schema, snap, (), "b").rows_written == 2
    changes = [("-U", row(1)), ("+U", row(1, "z")), ("-D", row(2))]
    sink.write_changes(
        schema,
        spark.createDataFrame(list(reversed(change_rows(schema, changes))), change_struct(schema)).repartition(2),
        1,
    )
    lines = out.getvalue().splitlines()
    assert [line.split(" ", 2)[:2] for line in lines] == [
        ["+I", "shop.items"],
        ["+I", "shop.items"],
        ["-U", "shop.items"],
        ["+U", "shop.items"],
        ["-D", "shop.items"],
    ]
    assert json.loads(lines[3].split(" ", 2)[2])["Name"] == "z"
    assert (
        lines[0]
        .split(" ", 2)[2]
        .startswith(
            '{"id":2,"amount":"1.00","big":"18446744073709551615",'
            '"wall":"1999-12-31T23:59:59.999999",'
            '"at":"2038-01-19T03:14:07.123456Z","raw":"AP8C"'
        )
    )


ENCODING_CASES = [
    # (Spark type, values, the JSON values the changelog must hold)
    ("decimal(12,2)", [Decimal("1.50"), Decimal("-0.01"), None], ["1.50", "-0.01", None]),
    ("decimal(20,0)", [Decimal("18446744073709551615"), Decimal(0)], ["18446744073709551615", "0"]),
    (
        "decimal(38,30)",
        [Decimal("1E-30"), Decimal(0)],  # never exponent form
        ["0.000000000000000000000000000001", "0.000000000000000000000000000000"],
    ),
    ("binary", [b"\x00\xff", b"", None], ["AP8=", "", None]),
    (
        "timestamp_ntz",
        [dt.datetime(1000, 1, 1, 0, 0, 0, 1), dt.datetime(2026, 3, 8, 2, 30)],
        ["1000-01-01T00:00:00.000001", "2026-03-08T02:30:00.000000"],
    ),
    (
        "timestamp",
        [dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC), dt.datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC)],
        ["1969-12-31T23:59:59.500000Z", "2038-01-19T03:14:07.000000Z"],
    ),
    ("date", [dt.date(1000, 1, 1), dt.date(9999, 12, 31)], ["1000-01-01", "9999-12-31"]),
    ("bigint", [-3020399000000, 0, None], [-3020399000000, 0, None]),
    ("float", [1.2345678, -0.0], [float(np.float32(1.2345678)), -0.0]),
    ("double", [float("nan"), float("inf"), float("-inf"), 1e300, 0.1], ["NaN", "Infinity", "-Infinity", 1e300, 0.1]),
    ("string", ['h\U0001f600llo "q" \\ \n\t\x01\x1f', "", None], ['h\U0001f600llo "q" \\ \n\t\x01\x1f', "", None]),
]


def test_lines_built_in_the_jvm_have_the_changelog_encoding(spark):
    """Every type's encoding, whatever the session's time zone; NULLs are kept as null."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType
    from pyspark.sql.types import _parse_datatype_string as parse

    from airflow_provider_mysqlcdc.spark.sinks.changelog.lines import json_line_column

    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        for type_text, values, expected in ENCODING_CASES:
            struct = StructType([StructField("id", parse("int")), StructField("v", parse(type_text))])
            frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], struct)
            meta = [("batch", F.lit(7)), ("seq", "id")]
            lines = [
                r[0]
                for r in frame.orderBy("id").select(json_line_column(frame, ["id", "v"], F.lit("+I"), meta)).collect()
            ]
            got = [json.loads(line) for line in lines]
            assert [list(g) for g in got] == [["data", "op", "meta"]] * len(values)
            assert [list(g["data"]) for g in got] == [["id", "v"]] * len(values)
            assert [g["meta"] for g in got] == [{"batch": 7, "seq": i} for i in range(len(values))]
            vals = [g["data"]["v"] for g in got]
            if type_text in ("float", "double"):
                assert [repr(v) for v in vals] == [repr(e) for e in expected], type_text
            else:
                assert vals == expected, type_text
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
