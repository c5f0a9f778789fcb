"""A JSON form for column values that keeps their Python type.

Chunk boundaries and keys travel through plan files, XCom and result files as JSON.
Plain JSON would turn ``Decimal('1.10')`` into a float and ``bytes`` into nothing, and a
boundary that comes back with another type compares differently, so every non-JSON type
is tagged.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from typing import Any


def encode_value(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return {"$f": repr(v)}
    if isinstance(v, decimal.Decimal):
        return {"$dec": str(v)}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"$b64": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            return {"$ts": v.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat()}
        return {"$dt": v.isoformat()}
    if isinstance(v, dt.date):
        return {"$date": v.isoformat()}
    if isinstance(v, dt.timedelta):
        return {"$td_us": (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds}
    if isinstance(v, (list, tuple)):
        return [encode_value(x) for x in v]
    raise TypeError(f"cannot encode value of type {type(v).__name__}: {v!r}")


def decode_value(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(decode_value(x) for x in v)
    if not isinstance(v, dict):
        return v
    ((tag, payload),) = v.items()
    if tag == "$f":
        return float(payload)
    if tag == "$dec":
        return decimal.Decimal(payload)
    if tag == "$b64":
        return base64.b64decode(payload)
    if tag == "$dt":
        return dt.datetime.fromisoformat(payload)
    if tag == "$ts":
        return dt.datetime.fromisoformat(payload).replace(tzinfo=dt.timezone.utc)
    if tag == "$date":
        return dt.date.fromisoformat(payload)
    if tag == "$td_us":
        return dt.timedelta(microseconds=payload)
    raise ValueError(f"unknown value tag {tag!r}")


def encode_key(key: tuple[Any, ...] | None) -> list[Any] | None:
    return None if key is None else [encode_value(x) for x in key]


def decode_key(key: list[Any] | None) -> tuple[Any, ...] | None:
    return None if key is None else tuple(decode_value(x) for x in key)
