"""Canonical values as lossless JSON and back, for the test sink's files (``memory_sink.py``).

    canonical Python value         JSON
    -----------------------------  ---------------------------------------------------
    None, int, str                 as is (ints of any size: JSON numbers are exact here)
    float                          number (``repr`` round-trips every double)
    decimal.Decimal                string ('-1.50', exactly the scale the value has)
    bytes                          base64 string
    datetime with tzinfo (TIMESTAMP)  int: microseconds since the epoch (UTC instant)
    naive datetime (DATETIME)      int: microseconds since 1970-01-01 wall clock
    datetime.date                  'YYYY-MM-DD'

Decoding is driven by the column's type mapping, so values come back with their types.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.errors import SchemaMismatchError
from airflow_provider_mysqlcdc.cdc.types import ColumnMapping

_UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1)
_US = 1_000_000


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
                    "changed since the stream started. Fix: restart the stream job so it reads the new schema."
                )
            v = image[name]
            out[name] = None if v is None else dec(v)
        return out

    return decode
