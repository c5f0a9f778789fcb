"""Append-only changelog sink: every change as a line (changelog-json) or a Parquet row.

Layout under ``<root>/<database>/<table>/`` (a local path or a pyarrow-supported URI)::

    snapshot/<batch>/part-<run>-<partition>-a<attempt>.jsonl   the batch's rows as +I
    stream/batch-000000123.jsonl                                one file per micro-batch

JSON lines follow Flink's changelog-json (``data`` and ``op`` as Flink has them) plus a
``meta`` object::

    {"data":{"id":1,"amount":"9.99"},"op":"+I","meta":{"database":"shop","table":"orders",
     "binlog_file":"mariadb-bin.000003","binlog_pos":1234,"binlog_row":0,"gtid":"0-1-42",
     "event_time":"2024-01-01T00:00:00.000000Z","seq":17,"batch":123}}

Value encoding is stable (same input, same bytes) and lossless: DECIMAL as a plain string
with its scale ("1.50"), binary as base64, TIMESTAMP as ISO-8601 UTC with microseconds and
"Z", DATETIME the same without a zone, DATE as "YYYY-MM-DD", TIME as signed microseconds
(the mapping's int), integers as JSON numbers (BIGINT UNSIGNED is a decimal, so a string).

Parquet files hold the table columns plus the ``_op`` and offset columns of base.py.

Idempotency: a micro-batch is written to a temporary name and renamed onto its final name,
which depends only on the batch id, so a replayed batch rewrites the same file with the
same content (rows sorted by ``_seq``): no duplicate lines. A snapshot batch is written
into a temporary directory that then replaces the batch's directory (two renames: a
reader may briefly see the batch missing, never twice; a crash in between is repaired by
rerunning the batch).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import logging
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ...cdc.chunks import KeyRange
from ...cdc.model import TableId, TableSchema
from .arrow_files import (
    FileRecord, FileWriteSpec, FsSpec, check_files, local_or_uri, new_run_tag, safe_name, spark_col,
    table_arrow_schema, write_files,
)
from .base import (
    META_COLUMNS, META_DATABASE, META_FILE, META_GTID, META_OP, META_POS, META_ROW, META_SEQ, META_TABLE,
    META_TS, Sink, SnapshotWrite,
)

log = logging.getLogger(__name__)

_EPOCH = dt.datetime(1970, 1, 1)

# Types of the metadata columns in Parquet changelog files.
META_ARROW_TYPES = {
    META_OP: pa.string(), META_DATABASE: pa.string(), META_TABLE: pa.string(), META_FILE: pa.string(),
    META_POS: pa.int64(), META_ROW: pa.int64(), META_GTID: pa.string(),
    META_TS: pa.timestamp("us", tz="UTC"), META_SEQ: pa.int64(),
}
# JSON "meta" keys of the metadata columns (op is top-level, as in changelog-json).
META_JSON_KEYS = {
    META_DATABASE: "database", META_TABLE: "table", META_FILE: "binlog_file", META_POS: "binlog_pos",
    META_ROW: "binlog_row", META_GTID: "gtid", META_TS: "event_time", META_SEQ: "seq",
}


# --- value encoding (pure; unit-tested) ---------------------------------------------------------


def format_micros(micros: int, utc: bool) -> str:
    """Epoch microseconds as ISO-8601 with 6 fraction digits; 'Z' for instants (TIMESTAMP)."""
    text = (_EPOCH + dt.timedelta(microseconds=micros)).isoformat(timespec="microseconds")
    return text + "Z" if utc else text


def _float(v: float) -> Any:
    """Floats as numbers (repr is exact); non-finite ones as strings, which JSON lacks."""
    if math.isfinite(v):
        return v
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


def json_values(array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """A column's values in the changelog's JSON encoding (None for NULL)."""
    t = array.type
    if pa.types.is_timestamp(t):
        utc = t.tz is not None
        return [None if v is None else format_micros(v, utc) for v in array.cast(pa.int64()).to_pylist()]
    values = array.to_pylist()
    if pa.types.is_decimal(t):
        return [None if v is None else format(v, "f") for v in values]
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return [None if v is None else base64.b64encode(v).decode("ascii") for v in values]
    if pa.types.is_date(t):
        return [None if v is None else v.isoformat() for v in values]
    if pa.types.is_floating(t):
        return [None if v is None else _float(v) for v in values]
    return values


def dumps(obj: Any) -> str:
    """Compact JSON, UTF-8 text kept (not \\u-escaped), keys in insertion order: stable."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def data_dicts(batch: pa.RecordBatch, columns: Sequence[str]) -> list[dict[str, Any]]:
    """Each row's table columns, JSON-encoded, in table order."""
    encoded = [json_values(batch.column(c)) for c in columns]
    return [dict(zip(columns, vals)) for vals in zip(*encoded)] if encoded else [{} for _ in range(batch.num_rows)]


def _quoted(texts: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise('"', texts, '"', "")


def _json_strings(array: pa.Array) -> pa.Array:
    """JSON string literals (null for NULL), escaped as ``dumps`` would (UTF-8 kept)."""
    texts = array.cast(pa.string())
    esc = pc.replace_substring(pc.replace_substring(texts, "\\", "\\\\"), '"', '\\"')
    ctrl = pc.match_substring_regex(texts, "[\\x00-\\x1f]")
    if pc.any(ctrl).as_py():  # rare: control characters get their JSON escapes from json.dumps
        values = texts.to_pylist()
        flags = ctrl.to_pylist()
        fixed = [dumps(v)[1:-1] if f else None for v, f in zip(values, flags)]
        esc = pc.if_else(ctrl, pa.array(fixed, pa.string()), esc)
    return _quoted(esc)


def json_texts(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column's values as JSON texts, vectorized (``null`` for NULL): what ``dumps`` writes for
    ``json_values(array)``, value for value (floats may print shorter, same number)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    t = array.type
    if pa.types.is_integer(t):
        out = array.cast(pa.string())
    elif pa.types.is_floating(t):
        d = array.cast(pa.float64())
        text = d.cast(pa.string())
        text = pc.if_else(pc.match_substring_regex(text, "[.en]"), text, pc.binary_join_element_wise(text, ".0", ""))
        odd = pc.if_else(pc.is_nan(d), '"NaN"', pc.if_else(pc.greater(d, 0), '"Infinity"', '"-Infinity"'))
        out = pc.if_else(pc.is_finite(d), text, odd)
    elif pa.types.is_timestamp(t):
        text = pc.strftime(array.cast(pa.timestamp("us", tz=t.tz)), format="%Y-%m-%dT%H:%M:%S")
        out = _quoted(pc.binary_join_element_wise(text, "Z", "") if t.tz is not None else text)
    elif pa.types.is_decimal(t):
        text = array.cast(pa.string())
        sci = pc.match_substring(text, "E")
        if pc.any(sci).as_py():  # Arrow prints tiny values as 1E-30; the changelog has plain digits
            fixed = [None if v is None else format(v, "f") for v in array.filter(sci).to_pylist()]
            text = pc.replace_with_mask(text, sci, pa.array(fixed, pa.string()))
        out = _quoted(text)
    elif pa.types.is_date(t):
        out = _quoted(array.cast(pa.string()))
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        out = _json_strings(array)
    else:  # binary and anything else: per value
        out = pa.array([None if v is None else dumps(v) for v in json_values(array)], pa.string())
    return out.fill_null("null")


@dataclass(frozen=True)
class LineEncoder:
    """Turns an Arrow batch into changelog-json lines; picklable, runs on executors.

    ``snapshot_batch`` set: the rows are snapshot rows (+I, meta names the batch); else the
    batch carries the metadata columns and ``stream_batch`` is the micro-batch id. Lines are
    built column by column with Arrow compute (``json_texts``), not row by row in Python:
    the changelog sink's throughput is this function's.
    """

    columns: tuple[str, ...]
    database: str
    table: str
    snapshot_batch: str | None = None
    stream_batch: int | None = None

    def pieces(self, batch: pa.RecordBatch) -> list[Any]:
        """The parts of every line, in order: constant texts and per-row JSON texts."""
        parts: list[Any] = ['{"data":{']
        for i, c in enumerate(self.columns):
            parts += [("," if i else "") + dumps(c) + ":", json_texts(batch.column(c))]
        if self.snapshot_batch is not None:
            meta = {"database": self.database, "table": self.table, "snapshot_batch": self.snapshot_batch}
            parts.append('},"op":"+I","meta":' + dumps(meta) + "}\n")
            return parts
        parts += ['},"op":', json_texts(batch.column(META_OP)), ',"meta":{']
        first = True
        for col, key in META_JSON_KEYS.items():
            if col in batch.schema.names:
                parts += [("" if first else ",") + dumps(key) + ":", json_texts(batch.column(col))]
                first = False
        if self.stream_batch is not None:
            parts.append(("" if first else ",") + '"batch":' + str(int(self.stream_batch)))
        parts.append("}}\n")
        return parts

    def lines(self, batch: pa.RecordBatch) -> list[str]:
        return [line[:-1] for line in self._joined(batch).to_pylist()]

    def _joined(self, batch: pa.RecordBatch) -> pa.Array:
        parts = self.pieces(batch)
        if batch.num_rows == 0:
            return pa.array([], pa.string())
        return pc.binary_join_element_wise(
            *[p if isinstance(p, (pa.Array, pa.ChunkedArray)) else pa.scalar(p, pa.string()) for p in parts], "")

    def __call__(self, batch: pa.RecordBatch) -> bytes:
        joined = self._joined(batch)
        if len(joined) == 0:
            return b""
        offsets = joined.buffers()[1]
        o = np.frombuffer(offsets, dtype=np.int32)[joined.offset: joined.offset + len(joined) + 1]
        return joined.buffers()[2].to_pybytes()[int(o[0]):int(o[-1])]


# --- the sink -----------------------------------------------------------------------------------


def change_arrow_schema(schema: TableSchema, with_meta_of: Sequence[str] = META_COLUMNS) -> pa.Schema:
    """Table columns plus the metadata columns present (in base.py's order)."""
    fields = list(table_arrow_schema(schema))
    fields += [pa.field(m, META_ARROW_TYPES[m]) for m in META_COLUMNS if m in with_meta_of]
    return pa.schema(fields)


class ChangelogSink(Sink):
    """Append-only changelog files per table; see the module docstring for layout and encoding."""

    name = "changelog"

    def __init__(self, root: str, format: str = "json") -> None:  # noqa: A002 - the option's name
        if format not in ("json", "parquet"):
            raise ValueError(f"changelog format must be 'json' or 'parquet', not {format!r}")
        self.root = local_or_uri(root).rstrip("/")
        self.format = format
        self.fs_spec = FsSpec("uri", self.root)

    @property
    def suffix(self) -> str:
        return ".jsonl" if self.format == "json" else ".parquet"

    def table_dir(self, table_id: TableId) -> str:
        """Relative to the root."""
        return f"{table_id.database}/{table_id.table}"

    def snapshot_dir(self, table_id: TableId, batch_id: str) -> str:
        return f"{self.table_dir(table_id)}/snapshot/{safe_name(batch_id)}"

    def stream_file(self, table_id: TableId, batch_id: int) -> str:
        return f"{self.table_dir(table_id)}/stream/batch-{int(batch_id):09d}{self.suffix}"

    def prepare(self, schemas: Sequence[TableSchema]) -> None:
        """Directories per table; also checks every column maps (fails before any write)."""
        fs, prefix = self.fs_spec.open()
        for s in schemas:
            table_arrow_schema(s)
            for sub in ("snapshot", "stream"):
                fs.create_dir(f"{prefix}{self.table_dir(s.table_id)}/{sub}", recursive=True)

    # --- writing files ------------------------------------------------------------------------

    def _spec(self, schema: TableSchema, directory: str, file_schema: pa.Schema,
              encoder: LineEncoder) -> FileWriteSpec:
        if self.format == "json":
            return FileWriteSpec(self.fs_spec, directory, f"part-{new_run_tag()}", file_schema, fmt="text",
                                 suffix=self.suffix, encoder=encoder)
        return FileWriteSpec(self.fs_spec, directory, f"part-{new_run_tag()}", file_schema, fmt="parquet",
                             suffix=self.suffix)

    def write_snapshot(self, schema: TableSchema, frame: DataFrame, ranges: Sequence[KeyRange],
                       batch_id: str) -> SnapshotWrite:
        t = schema.table_id
        final = self.snapshot_dir(t, batch_id)
        tmp = f"{self.table_dir(t)}/snapshot/.tmp-{safe_name(batch_id)}-{new_run_tag()}"
        encoder = LineEncoder(schema.column_names, t.database, t.table, snapshot_batch=str(batch_id))
        if self.format == "parquet":
            frame = frame.select(*[spark_col(c) for c in schema.column_names],
                                 F.lit("+I").alias(META_OP), F.lit(t.database).alias(META_DATABASE),
                                 F.lit(t.table).alias(META_TABLE))
            file_schema = change_arrow_schema(schema, (META_OP, META_DATABASE, META_TABLE))
        else:
            file_schema = table_arrow_schema(schema)
        records = write_files(frame, self._spec(schema, tmp, file_schema, encoder))
        check_files(self.fs_spec, records)
        self._replace_dir(tmp, final)
        rows = sum(r.num_rows for r in records)
        log.info("changelog %s snapshot batch %s: %d rows in %d files", t, batch_id, rows, len(records))
        return SnapshotWrite(rows, {"directory": final, "files": len(records)})

    def _replace_dir(self, tmp: str, final: str) -> None:
        """Move ``tmp`` onto ``final``; an earlier ``final`` is moved aside first, then deleted."""
        fs, prefix = self.fs_spec.open()
        fs.create_dir(prefix + tmp, recursive=True)  # an empty batch still gets its (empty) directory
        old = None
        if fs.get_file_info(prefix + final).type != pafs.FileType.NotFound:
            old = f"{final.rsplit('/', 1)[0]}/.old-{final.rsplit('/', 1)[1]}-{new_run_tag()}"
            fs.move(prefix + final, prefix + old)
        fs.move(prefix + tmp, prefix + final)
        if old is not None:
            fs.delete_dir(prefix + old)

    def write_changes(self, schema: TableSchema, changes: DataFrame, batch_id: int) -> None:
        t = schema.table_id
        present = [m for m in META_COLUMNS if m in changes.columns]
        selected = changes.select(*[spark_col(c) for c in schema.column_names], *present)
        # one input partition (one binlog range): no shuffle, just the sort (rows the library
        # read for refused events come after the range's other rows)
        single = selected.rdd.getNumPartitions() <= 1
        ordered = (selected.coalesce(1) if single else selected.repartition(1)).sortWithinPartitions(META_SEQ)
        tmp_dir = f"{self.table_dir(t)}/stream/.tmp-{int(batch_id):09d}-{new_run_tag()}"
        encoder = LineEncoder(schema.column_names, t.database, t.table, stream_batch=int(batch_id))
        records = write_files(ordered, self._spec(schema, tmp_dir, change_arrow_schema(schema, present), encoder))
        check_files(self.fs_spec, records)
        fs, prefix = self.fs_spec.open()
        if records:
            (rec,) = records  # one partition -> at most one file
            fs.move(prefix + rec.path, prefix + self.stream_file(t, batch_id))
        if fs.get_file_info(prefix + tmp_dir).type != pafs.FileType.NotFound:
            fs.delete_dir(prefix + tmp_dir)
        log.info("changelog %s micro-batch %d: %d rows", t, batch_id, sum(r.num_rows for r in records))


def read_json_lines(path: str) -> list[dict[str, Any]]:
    """Parse a changelog-json file (tests and tools); decimals stay strings, as written."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def decode_value(value: Any, arrow_type: pa.DataType) -> Any:
    """Inverse of the JSON encoding for one value: what the mapping's canonical value was."""
    if value is None:
        return None
    if pa.types.is_decimal(arrow_type):
        return decimal.Decimal(value)
    if pa.types.is_binary(arrow_type):
        return base64.b64decode(value)
    if pa.types.is_timestamp(arrow_type):
        if arrow_type.tz is not None:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        return dt.datetime.fromisoformat(value)
    if pa.types.is_date(arrow_type):
        return dt.date.fromisoformat(value)
    if pa.types.is_floating(arrow_type) and isinstance(value, str):
        return float(value.replace("Infinity", "inf"))
    return value


Decoder = Callable[[dict[str, Any]], dict[str, Any]]


def row_decoder(schema: TableSchema) -> Decoder:
    """A function turning a line's ``data`` back into the mapping's canonical Python values."""
    types = {f.name: f.type for f in table_arrow_schema(schema)}
    return lambda data: {k: decode_value(v, types[k]) for k, v in data.items()}


__all__ = ["ChangelogSink", "LineEncoder", "FileRecord", "json_values", "format_micros", "dumps",
           "read_json_lines", "decode_value", "row_decoder"]
