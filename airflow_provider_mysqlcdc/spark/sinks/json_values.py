"""The changelog-json encoding of values as Python values, and back (``json_values``, ``row_decoder``).

Shared by the changelog sink (its reference encoding, and reading its files back in tests and tools)
and the console sink (which prints changes the changelog's way). The encoding is described in
``changelog/sink.py``; ``json_text.py`` builds the same texts with Arrow compute, column by column.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from typing import Any, Callable, Sequence

import pyarrow as pa

from ...cdc.model import TableSchema
from .files.arrow import table_arrow_schema

_EPOCH = dt.datetime(1970, 1, 1)


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
