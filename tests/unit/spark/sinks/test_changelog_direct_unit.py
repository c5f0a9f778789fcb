"""The changelog's Python line encoder and direct write, without Spark or a server."""

from __future__ import annotations

import datetime as dt
import json
import random
import struct
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.events import RowChange
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.spark.runtime.stream_status import note_rows_written, rows_written
from airflow_provider_mysqlcdc.spark.sinks.changelog.direct import _TablePart, batch_tmp_dir
from airflow_provider_mysqlcdc.spark.sinks.changelog.sink import ChangelogSink
from airflow_provider_mysqlcdc.spark.sinks.files.arrow import FsSpec
from airflow_provider_mysqlcdc.spark.sinks.json_text import (
    ChangeLines,
    java_double,
    joined_bytes,
    json_string,
    json_texts,
    text_buffer,
)
from airflow_provider_mysqlcdc.spark.sinks.json_values import format_micros
from airflow_provider_mysqlcdc.spark.stream.reading.change_rows import SourceLayout

# What Java 17's Double.toString prints (checked against the JVM in tests/integration/test_changelog_lines.py).
JAVA = [
    (1e7, "1.0E7"),
    (9999999.0, "9999999.0"),
    (1e-3, "0.001"),
    (0.00099, "9.9E-4"),
    (1234567.0, "1234567.0"),
    (12345678.0, "1.2345678E7"),
    (-0.0, "-0.0"),
    (0.0, "0.0"),
    (1.7976931348623157e308, "1.7976931348623157E308"),
    (2.2250738585072014e-308, "2.2250738585072014E-308"),
    (100.0, "100.0"),
    (0.1 + 0.2, "0.30000000000000004"),
    (123456789012345680.0, "1.2345678901234568E17"),
    (1e16, "1.0E16"),
    (4.35, "4.35"),
    (1e-5, "1.0E-5"),
    (-123456.789, "-123456.789"),
    (0.5, "0.5"),
]


def test_java_double_layout():
    for value, text in JAVA:
        assert java_double(value) == text, value
    # Java 17 prints these with more digits than needed (5.6843418860808015E-14, 4.9E-324,
    # 1.9999999999999998E23): the changelog has the shortest digits of the same double
    assert [java_double(v) for v in (2.0**-44, 5e-324, 2e23)] == ["5.684341886080802E-14", "5.0E-324", "2.0E23"]


def test_java_double_round_trips_random_doubles():
    rnd = random.Random(3)
    for _ in range(20_000):
        v = struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
        if v != v or v in (float("inf"), float("-inf")):
            continue
        text = java_double(v)
        assert float(text) == v and ("E" in text) == (not 1e-3 <= abs(v) < 1e7 and v != 0), text
        mantissa = text.lstrip("-").split("E")[0]
        assert "." in mantissa and mantissa.split(".")[1], text


def test_json_strings_escape_as_jackson_does():
    assert json_string('a"b\\c') == '"a\\"b\\\\c"'
    assert json_string("\x00\x01\b\t\n\x0b\f\r\x1f\x7f") == '"\\u0000\\u0001\\b\\t\\n\\u000B\\f\\r\\u001F\x7f"'
    assert json_string("é€\U0001f600\u2028/") == '"é€\U0001f600\u2028/"'
    texts = json_texts(pa.array(["plain", 'q"', "tab\there", None, ""]))
    assert texts.to_pylist() == ['"plain"', '"q\\""', '"tab\\there"', "null", '""']
    for t in texts.to_pylist()[:3]:
        json.loads(t)


def test_timestamps_are_formatted_like_format_micros():
    rnd = random.Random(5)
    lo, hi = -30610224000 * 10**6, 253402300799 * 10**6 + 999999  # 1000-01-01 .. 9999-12-31
    micros = [rnd.randint(lo, hi) for _ in range(5000)] + [lo, hi, 0, -1, 1]
    for tz in (None, "UTC"):
        arr = pa.array(micros + [None], pa.int64()).cast(pa.timestamp("us", tz=tz))
        got = json_texts(arr).to_pylist()
        assert got[:-1] == ['"' + format_micros(m, tz is not None) + '"' for m in micros]
        assert got[-1] == "null"
    # beyond four-digit years the encoder uses Arrow's formatter instead
    far = pa.array([253402300800 * 10**6], pa.int64()).cast(pa.timestamp("us"))
    assert json_texts(far).to_pylist() == ['"10000-01-01T00:00:00.000000"']


def test_decimals_never_in_exponent_form():
    arr = pa.array([Decimal("0E-10"), Decimal("1E-10"), Decimal("-5.5000000000"), None], pa.decimal128(20, 10))
    assert json_texts(arr).to_pylist() == ['"0.0000000000"', '"0.0000000001"', '"-5.5000000000"', "null"]


SCHEMA = TableSchema(
    TableId("shop", "orders"),
    (
        Column("id", 1, "int", "int(11)", False),
        Column("amount", 2, "decimal", "decimal(5,2)", True, numeric_precision=5, numeric_scale=2),
        Column("at", 3, "timestamp", "timestamp(6)", True, datetime_precision=6),
    ),
    ("id",),
    ("id",),
    ("id",),
)


def test_change_lines_follow_the_change_row_rules():
    layout = SourceLayout([SCHEMA])
    at = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone.utc)
    img = {"id": 1, "amount": Decimal("1.50"), "at": at}
    changes = [
        RowChange("insert", SCHEMA.table_id, None, img, BinlogOffset("b.000002", 100), "0-1-7", 1_700_000_000),
        RowChange("update", SCHEMA.table_id, img, {**img, "amount": None}, BinlogOffset("b.000002", 200, None, 1)),
        RowChange("delete", SCHEMA.table_id, img, None, BinlogOffset("b.000003", 50)),
    ]
    (batch,) = layout.from_changes(changes, first_file_index=2)
    lines, seq = ChangeLines("shop", "orders", "t0", SCHEMA.column_names).lines(batch, 9)
    got = [json.loads(x) for x in lines.to_pylist()]
    assert [g["op"] for g in got] == ["+I", "-U", "+U", "-D"]
    assert [g["data"]["amount"] for g in got] == ["1.50", "1.50", None, "1.50"]
    assert got[0]["data"] == {"id": 1, "amount": "1.50", "at": "2024-05-06T07:08:09.123456Z"}
    assert got[0]["meta"] == {
        "database": "shop",
        "table": "orders",
        "binlog_file": "b.000002",
        "binlog_pos": 100,
        "binlog_row": 0,
        "gtid": "0-1-7",
        "event_time": "2023-11-14T22:13:20.000000Z",
        "seq": 2 * (100 << 20),
        "batch": 9,
    }
    assert [g["meta"]["seq"] for g in got] == seq.tolist()
    assert seq.tolist() == [2 * (100 << 20), 2 * (200 << 20 | 1), 2 * (200 << 20 | 1) + 1, 2 * (1 << 52 | 50 << 20)]
    assert got[1]["meta"]["gtid"] is None and got[1]["meta"]["binlog_row"] == 1
    tagged, _ = ChangeLines("shop", "orders", "t0", SCHEMA.column_names, schema_id="0a1b2c3d4e5f").lines(batch, 9)
    tagged_meta = [json.loads(x)["meta"] for x in tagged.to_pylist()]
    assert [list(m)[-2:] for m in tagged_meta] == [["batch", "schema_id"]] * 4
    assert {m.pop("schema_id") for m in tagged_meta} == {"0a1b2c3d4e5f"}
    assert tagged_meta == [g["meta"] for g in got]
    # for a part file: the same lines, each with its newline, and the buffer is the file's text
    ended, ended_seq = ChangeLines("shop", "orders", "t0", SCHEMA.column_names).lines(batch.slice(1), 9, newline=True)
    assert ended.to_pylist() == [x + "\n" for x in lines.to_pylist()[1:]] and ended_seq.tolist() == seq.tolist()[1:]
    assert text_buffer(ended).to_pybytes() == "".join(ended.to_pylist()).encode()
    assert text_buffer(ended.slice(1, 2)).to_pybytes() == "".join(ended.to_pylist()[1:3]).encode()


def test_a_layout_id_changes_with_names_types_and_nullability_only(tmp_path):
    from dataclasses import replace

    from airflow_provider_mysqlcdc.cdc.schema.fingerprint import schema_id
    from airflow_provider_mysqlcdc.spark.sinks.changelog.schemas import read_schema, register

    cols = list(SCHEMA.columns)
    base = schema_id(cols)
    assert len(base) == 12 and schema_id([replace(c) for c in cols]) == base
    assert schema_id([replace(cols[0], ordinal=9, charset="x")] + cols[1:]) == base  # not part of the layout
    assert schema_id([replace(cols[0], name="id2")] + cols[1:]) != base
    assert (
        schema_id([replace(cols[1], column_type="decimal(20,2)") if i == 1 else c for i, c in enumerate(cols)]) != base
    )
    assert (
        schema_id([replace(cols[1], nullable=not cols[1].nullable) if i == 1 else c for i, c in enumerate(cols)])
        != base
    )
    assert schema_id(cols[::-1]) != base
    fs, prefix = FsSpec("uri", str(tmp_path)).open()
    assert register(fs, prefix, str(tmp_path), SCHEMA.table_id, cols) == base
    assert register(fs, prefix, str(tmp_path), SCHEMA.table_id, cols) == base  # idempotent
    doc = read_schema(fs, prefix, SCHEMA.table_id, base)
    assert [c["name"] for c in doc["columns"]] == list(SCHEMA.column_names)
    assert sorted(p.name for p in (tmp_path / "shop" / "orders" / "_schemas").iterdir()) == [f"{base}.json"]


def _part(tmp_path: Path) -> _TablePart:
    fs, prefix = FsSpec("uri", str(tmp_path)).open()
    return _TablePart(fs, prefix, "db/t/stream/.tmp-000000001/part-0000-x-a0.jsonl")


def _lines(seqs: list[int], newline: bool = True) -> tuple[pa.Array, np.ndarray]:
    """Lines as the encoder gives a table part: each with its newline (``lines(..., newline=True)``)."""
    end = "\n" if newline else ""
    return pa.array([f'{{"seq":{s}}}{end}' for s in seqs]), np.array(seqs, np.int64)


def test_table_part_streams_ordered_input_and_sorts_the_rest(tmp_path):
    part = _part(tmp_path)
    part.add(*_lines([1, 2, 5]), 3)
    part.add(*_lines([8, 9]), 2)
    rec = part.close()
    text = (tmp_path / rec["path"]).read_text()
    assert [json.loads(x)["seq"] for x in text.splitlines()] == [1, 2, 5, 8, 9]
    assert rec == {"path": rec["path"], "size": len(text), "lines": 5, "changes": 5, "first_seq": 1, "last_seq": 9}

    part = _part(tmp_path)
    part.add(*_lines([10, 20, 30]), 3)
    part.add(*_lines([15, 25]), 2)  # e.g. rows python-mysql-replication read, after the rest
    part.add(*_lines([40]), 1)
    rec = part.close()
    text = (tmp_path / rec["path"]).read_text()
    assert [json.loads(x)["seq"] for x in text.splitlines()] == [10, 15, 20, 25, 30, 40]
    assert (rec["lines"], rec["first_seq"], rec["last_seq"], rec["size"]) == (6, 10, 40, len(text))


def test_empty_table_part_writes_nothing(tmp_path):
    part = _part(tmp_path)
    part.add(*_lines([]), 0)
    assert part.close() is None and not list(tmp_path.rglob("*.jsonl"))


def _write_part(root: Path, t: TableId, batch_id: int, name: str, seqs: list[int]) -> dict:
    path = f"{batch_tmp_dir(t, batch_id)}/{name}"
    data = joined_bytes(_lines(seqs, newline=False)[0])
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_bytes(data)
    return {
        "database": t.database,
        "table": t.table,
        "path": path,
        "size": len(data),
        "lines": len(seqs),
        "changes": len(seqs),
        "first_seq": seqs[0],
        "last_seq": seqs[-1],
    }


def _rows_step(*records: dict):
    from airflow_provider_mysqlcdc.cdc.schema.steps import RowsStep

    return RowsStep(tuple(records), SCHEMA, SCHEMA)


def test_publish_joins_parts_in_seq_order_and_removes_the_batch_tmp_dir(tmp_path):
    sink = ChangelogSink(str(tmp_path))
    t = SCHEMA.table_id
    later = _write_part(tmp_path, t, 4, "part-0001-a-a0.jsonl", [50, 60])
    first = _write_part(tmp_path, t, 4, "part-0000-a-a0.jsonl", [10, 20])
    _write_part(tmp_path, t, 4, "part-0000-b-a1.jsonl", [10])  # a failed attempt's leftover
    assert sink.publish_steps(t, [_rows_step(later, first)], 4) == 4
    final = tmp_path / sink.stream_file(t, 4)
    assert [json.loads(x)["seq"] for x in final.read_text().splitlines()] == [10, 20, 50, 60]
    assert not (tmp_path / batch_tmp_dir(t, 4)).exists()


def test_publish_refuses_overlapping_parts_and_publishes_nothing(tmp_path):
    sink = ChangelogSink(str(tmp_path))
    t = SCHEMA.table_id
    a = _write_part(tmp_path, t, 5, "part-0000-a-a0.jsonl", [10, 30])
    b = _write_part(tmp_path, t, 5, "part-0001-a-a0.jsonl", [20, 40])
    with pytest.raises(RuntimeError, match="overlap"):
        sink.publish_steps(t, [_rows_step(a, b)], 5)
    assert not (tmp_path / sink.stream_file(t, 5)).exists()


def test_publish_refuses_a_truncated_part(tmp_path):
    sink = ChangelogSink(str(tmp_path))
    t = SCHEMA.table_id
    a = _write_part(tmp_path, t, 6, "part-0000-a-a0.jsonl", [10, 30])
    with pytest.raises(Exception, match="not as the job reported"):
        sink.publish_steps(t, [_rows_step({**a, "size": a["size"] + 1})], 6)
    assert not (tmp_path / sink.stream_file(t, 6)).exists()


def test_rows_written_are_reported_once_per_batch():
    note_rows_written("q1", 3, 1234)
    note_rows_written(None, 4, 1)  # no query id: nothing noted
    assert rows_written("q1", 3) == 1234
    assert rows_written("q1", 3) is None and rows_written("q1", 4) is None


def test_only_json_changelogs_write_directly(tmp_path):
    assert ChangelogSink(str(tmp_path)).direct_write().root == str(tmp_path)
    assert ChangelogSink(str(tmp_path), format="parquet").direct_write() is None
