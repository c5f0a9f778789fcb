"""Change events <-> the payload column of the stream, and payload -> typed change rows.

The binlog stream is one Spark source for many tables, so its schema cannot hold every
table's columns. Each source row carries a change's before/after images as ``payload``,
a JSON text that is *lossless* for the canonical values of ``cdc/types.py`` (the values
the snapshot path yields too):

    canonical Python value         JSON
    -----------------------------  ---------------------------------------------------
    None, int, str                 as is (ints of any size: JSON numbers are exact here)
    float                          number (``repr`` round-trips every double; a float32
                                   value is a double exactly)
    decimal.Decimal                string ('-1.50', exactly the scale the value has)
    bytes                          base64 string
    datetime with tzinfo (TIMESTAMP)  int: microseconds since the epoch (UTC instant)
    naive datetime (DATETIME)      int: microseconds since 1970-01-01 wall clock
    datetime.date                  'YYYY-MM-DD'

Decoding is driven by the column's type mapping (not by tags in the JSON), so a table's
change rows get exactly ``struct_type(map_table(schema))`` -- the snapshot's row type -- plus
the ``META_*`` columns of ``sinks/base.py``. One change event becomes one change row per op:
insert -> ``+I`` (after), delete -> ``-D`` (before), update -> ``-U`` (before) then ``+U``
(after). ``_seq = 2 * source seq (+1 for +U)`` orders them totally inside a micro-batch.

Pure functions (``encode_payload``, ``decode_image``, ``change_records``) are unit-tested
without Spark; ``typed_changes`` runs them on executors with ``mapInArrow``, so nothing is
collected onto the driver.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from typing import Any, Callable, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    IntegerType, LongType, StringType, StructField, StructType, TimestampType,
)

from ..cdc.errors import SchemaMismatchError
from ..cdc.events import OP_DELETE, OP_INSERT, OP_UPDATE_AFTER, OP_UPDATE_BEFORE, RowChange
from ..cdc.model import TableSchema
from ..cdc.types import ColumnMapping, map_table
from .sinks.base import (
    META_COLUMNS, META_DATABASE, META_FILE, META_GTID, META_OP, META_POS, META_ROW, META_SEQ,
    META_TABLE, META_TS,
)
from .types import struct_type

_UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
_US = 1_000_000

# Columns of the stream source (binlog_source.SOURCE_SCHEMA), by name, so both modules agree.
SRC_DATABASE = "database"
SRC_TABLE = "table"
SRC_OP = "op"            # insert | update | delete (the RowChange kind)
SRC_FILE = "binlog_file"
SRC_POS = "binlog_pos"
SRC_ROW = "binlog_row"
SRC_GTID = "gtid"
SRC_TS = "event_time"
SRC_SEQ = "seq"
SRC_PAYLOAD = "payload"

META_SPARK_FIELDS = {
    META_OP: StringType(), META_DATABASE: StringType(), META_TABLE: StringType(),
    META_FILE: StringType(), META_POS: LongType(), META_ROW: IntegerType(), META_GTID: StringType(),
    META_TS: TimestampType(), META_SEQ: LongType(),
}
META_ARROW_FIELDS = {
    META_OP: pa.string(), META_DATABASE: pa.string(), META_TABLE: pa.string(),
    META_FILE: pa.string(), META_POS: pa.int64(), META_ROW: pa.int32(), META_GTID: pa.string(),
    META_TS: pa.timestamp("us", tz="UTC"), META_SEQ: pa.int64(),
}


# --- encoding (executor side of the source) ----------------------------------------------


def _micros(value: dt.datetime) -> int:
    """Microseconds since the epoch; aware values as instants, naive ones as wall clock."""
    if value.tzinfo is not None:
        value = value.astimezone(_UTC).replace(tzinfo=None)
    d = value - _EPOCH
    return (d.days * 86400 + d.seconds) * _US + d.microseconds


def encode_value(v: Any) -> Any:
    """One canonical value as JSON-safe data (see the module table)."""
    if v is None or isinstance(v, (bool, int, str, float)):
        return v
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, dt.datetime):
        return _micros(v)
    if isinstance(v, dt.date):
        return v.isoformat()
    raise TypeError(f"cannot encode {type(v).__name__} value {v!r} into a change payload")


def encode_image(image: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if image is None else {k: encode_value(v) for k, v in image.items()}


def encode_payload(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str:
    """The ``payload`` of one change: ``{"before": {...}|null, "after": {...}|null}``."""
    return json.dumps({"before": encode_image(before), "after": encode_image(after)},
                      ensure_ascii=False, separators=(",", ":"))


def source_row(change: RowChange, seq: int) -> tuple:
    """The stream source's row for one (normalized, handoff-filtered) change."""
    t = change.table_id
    ts = dt.datetime.fromtimestamp(change.timestamp, _UTC) if change.timestamp else None
    return (t.database, t.table, change.kind, change.offset.file, change.offset.position,
            change.offset.row, change.gtid, ts, seq, encode_payload(change.before, change.after))


# --- decoding (per table) -------------------------------------------------------------------


def _decoder(mp: ColumnMapping) -> Callable[[Any], Any]:
    """JSON value -> canonical value of this column (inverse of ``encode_value``)."""
    t = mp.arrow_type
    if pa.types.is_decimal(t):
        return decimal.Decimal
    if pa.types.is_timestamp(t):
        if t.tz:
            return lambda v: (_EPOCH + dt.timedelta(microseconds=int(v))).replace(tzinfo=_UTC)
        return lambda v: _EPOCH + dt.timedelta(microseconds=int(v))
    if pa.types.is_date(t):
        return dt.date.fromisoformat
    if pa.types.is_binary(t):
        return base64.b64decode
    if pa.types.is_floating(t):
        return float
    if pa.types.is_integer(t):
        return int
    return lambda v: v  # strings


def image_decoder(mappings: Sequence[ColumnMapping]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A function decoding one JSON image into canonical values, in table column order."""
    decoders = [(mp.name, _decoder(mp)) for mp in mappings]

    def decode(image: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, dec in decoders:
            if name not in image:
                raise SchemaMismatchError(
                    f"change image lacks column {name!r} (has {sorted(image)}): the table's schema "
                    "changed since the stream started. Fix: restart the stream job so it reads the new schema.")
            v = image[name]
            out[name] = None if v is None else dec(v)
        return out

    return decode


def decode_image(image: Mapping[str, Any], mappings: Sequence[ColumnMapping]) -> dict[str, Any]:
    return image_decoder(mappings)(image)


def change_records(src: Mapping[str, Any], decode: Callable[[Mapping[str, Any]], dict[str, Any]]
                   ) -> list[dict[str, Any]]:
    """The change rows (table columns + META_*) of one source row, in op order."""
    payload = json.loads(src[SRC_PAYLOAD])
    kind = src[SRC_OP]
    if kind == "insert":
        ops = [(OP_INSERT, payload["after"], 0)]
    elif kind == "delete":
        ops = [(OP_DELETE, payload["before"], 0)]
    elif kind == "update":
        ops = [(OP_UPDATE_BEFORE, payload["before"], 0), (OP_UPDATE_AFTER, payload["after"], 1)]
    else:
        raise ValueError(f"unknown change kind {kind!r}")
    meta = {
        META_DATABASE: src[SRC_DATABASE], META_TABLE: src[SRC_TABLE], META_FILE: src[SRC_FILE],
        META_POS: src[SRC_POS], META_ROW: src[SRC_ROW], META_GTID: src[SRC_GTID], META_TS: src[SRC_TS],
    }
    out = []
    for op, image, half in ops:
        row = decode(image)
        row.update(meta)
        row[META_OP] = op
        row[META_SEQ] = int(src[SRC_SEQ]) * 2 + half
        out.append(row)
    return out


# --- Spark ------------------------------------------------------------------------------------


def change_schema(mappings: Sequence[ColumnMapping]) -> StructType:
    """The change-row type of a table: the snapshot's row type plus the META_* columns."""
    clash = [mp.name for mp in mappings if mp.name in META_SPARK_FIELDS]
    if clash:
        raise SchemaMismatchError(f"columns {clash} clash with the change-row metadata columns {META_COLUMNS}")
    base = struct_type(mappings)
    return StructType(list(base.fields) + [StructField(n, META_SPARK_FIELDS[n], True) for n in META_COLUMNS])


def _arrow_change_schema(mappings: Sequence[ColumnMapping]) -> pa.Schema:
    fields = [pa.field(mp.name, mp.arrow_type, nullable=True) for mp in mappings]
    fields += [pa.field(n, META_ARROW_FIELDS[n], nullable=True) for n in META_COLUMNS]
    return pa.schema(fields)


def _to_change_batches(mappings: Sequence[ColumnMapping]
                       ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function: source batches of one table -> typed change-row batches."""
    schema = _arrow_change_schema(mappings)
    names = schema.names

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        decode = image_decoder(mappings)
        for b in batches:
            rows: list[dict[str, Any]] = []
            for src in b.to_pylist():
                rows.extend(change_records(src, decode))
            if rows:
                cols = [[r[n] for r in rows] for n in names]
                yield pa.RecordBatch.from_arrays(
                    [pa.array(c, type=f.type) for c, f in zip(cols, schema)], schema=schema)

    return convert


def typed_changes(source_rows: DataFrame, schema: TableSchema, server_time_zone: str = "UTC") -> DataFrame:
    """One table's change rows (typed columns + META_*) from the stream's source rows.

    ``source_rows`` may hold many tables; only ``schema``'s rows are kept. Runs on the
    executors (``mapInArrow``); ordering inside the result is by ``_seq``.
    """
    mappings = map_table(schema, server_time_zone)
    t = schema.table_id
    mine = source_rows.filter((F.col(SRC_DATABASE) == t.database) & (F.col(SRC_TABLE) == t.table))
    return mine.mapInArrow(_to_change_batches(mappings), change_schema(mappings))
