"""MySQL's binary JSON (column type JSON on MySQL 5.7+; MariaDB stores JSON as text).

The canonical value of a JSON column (``cdc/types.py``) is the JSON text that
``row_normalizer`` makes of python-mysql-replication's decoded value: ``_json_text`` of
it. So this module parses the binary form into exactly the Python values the library
produces -- keys and strings as ``bytes``, DECIMAL as ``Decimal``, the same handling of
the opaque types, including its oddities (a negative TIME inside a document loses its
sign; a zero DATETIME is the string '0000-00-00 00:00:00'; other opaque values are their
bytes decoded leniently) -- and hands it to the very same ``_json_text``. The unit tests
compare both on random documents.

Layout (MySQL ``json_binary.h``): a type byte, then the value. Objects and arrays
("small" with 2-byte, "large" with 4-byte counts and offsets) hold an element count and
their byte size, then key entries (offset, length) for objects, then value entries
(type, then an offset relative to the container -- or the value itself when it fits:
literals and 16-bit integers, and 32-bit integers in large containers), then the keys and
values. Strings carry a variable-length size (7 bits per byte, low bits first).
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any

from ...types import _json_text
from . import constants as C
from . import values as V

_SMALL_OBJECT, _LARGE_OBJECT, _SMALL_ARRAY, _LARGE_ARRAY = 0, 1, 2, 3
_LITERAL, _INT16, _UINT16, _INT32, _UINT32, _INT64, _UINT64, _DOUBLE, _STRING = 4, 5, 6, 7, 8, 9, 10, 11, 12
_OPAQUE = 15
_SCALARS = {
    _INT16: struct.Struct("<h"),
    _UINT16: struct.Struct("<H"),
    _INT32: struct.Struct("<i"),
    _UINT32: struct.Struct("<I"),
    _INT64: struct.Struct("<q"),
    _UINT64: struct.Struct("<Q"),
    _DOUBLE: struct.Struct("<d"),
}


class JsonbError(ValueError):
    """Malformed binary JSON."""


def jsonb_text(data: bytes) -> str | None:
    """The canonical text of a binary JSON value (None for the empty value, as the library)."""
    if not data:
        return None
    return _json_text(parse(data[0], memoryview(data)[1:]))


def parse(typ: int, data: memoryview) -> Any:
    """One value of type ``typ`` whose bytes start ``data`` (library-equal Python values)."""
    if typ in (_SMALL_OBJECT, _LARGE_OBJECT, _SMALL_ARRAY, _LARGE_ARRAY):
        return _container(data, typ in (_SMALL_OBJECT, _SMALL_ARRAY), typ in (_SMALL_OBJECT, _LARGE_OBJECT))
    if typ == _LITERAL:
        lit = data[0]
        if lit > 2:
            raise JsonbError(f"binary JSON literal {lit}")
        return (None, True, False)[lit]
    s = _SCALARS.get(typ)
    if s is not None:
        return s.unpack_from(data, 0)[0]
    if typ == _STRING:
        n, k = _varlen(data)
        return bytes(data[k : k + n])
    if typ == _OPAQUE:
        return _opaque(data)
    raise JsonbError(f"binary JSON value type {typ}")


def _varlen(data: memoryview) -> tuple[int, int]:
    """A variable-length size: (value, bytes it took); up to 5 bytes, 7 bits each, low first."""
    n = 0
    for i in range(min(5, len(data))):
        b = data[i]
        n |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return n, i + 1
    return 0, 0  # (as the library: a size that does not end reads as empty)


def _container(data: memoryview, small: bool, is_object: bool) -> Any:
    w = 2 if small else 4
    u = "<H" if small else "<I"
    count, size = struct.unpack_from(u + u[1], data, 0)
    if len(data) < size:
        raise JsonbError("binary JSON container larger than its value")
    key_entry, value_entry = w + 2, 1 + w
    header = 2 * w + count * value_entry + (count * key_entry if is_object else 0)
    if header > size:
        raise JsonbError("binary JSON container header larger than the container")
    keys = []
    if is_object:
        for i in range(count):
            e = 2 * w + key_entry * i
            off = struct.unpack_from(u, data, e)[0]
            klen = struct.unpack_from("<H", data, e + w)[0] if len(data) - (e + w) >= 2 else 0
            keys.append(bytes(data[off : off + klen]))
    out = []
    base = 2 * w + (key_entry * count if is_object else 0)
    for i in range(count):
        e = base + value_entry * i
        t = data[e]
        if t in (_LITERAL, _INT16, _UINT16) or (not small and t in (_INT32, _UINT32)):
            out.append(parse(t, data[e + 1 : e + value_entry]))
            continue
        off = struct.unpack_from(u, data, e + 1)[0]
        if len(data) < off:
            return None  # (the library's answer to an offset past the end)
        out.append(parse(t, data[off:]))
    return dict(zip(keys, out)) if is_object else out


def _opaque(data: memoryview) -> Any:
    if len(data) < 1:
        return None
    ftype = data[0]
    n, k = _varlen(data[1:])
    raw = bytes(data[1 + k : 1 + k + n])
    if ftype in (C.T_NEWDECIMAL, C.T_DECIMAL):
        precision, scale = raw[0], raw[1]
        unscaled = V.decimal_reader(precision, scale)(raw, 2)
        with decimal.localcontext() as ctx:
            ctx.prec = 100
            return decimal.Decimal(unscaled).scaleb(-scale)
    if ftype in (C.T_TIME, C.T_TIME2):
        v = abs(struct.unpack_from("<q", raw, 0)[0])
        hms = v >> 24
        return dt.time((hms >> 12) % 1024, (hms >> 6) % 64, hms % 64, v % (1 << 24))
    if ftype in (C.T_DATE, C.T_DATETIME, C.T_DATETIME2):
        v = struct.unpack_from("<q", raw, 0)[0]
        if v == 0:
            return "0000-00-00 00:00:00"
        v = abs(v)
        ymdhms = v >> 24
        ymd, hms = ymdhms >> 17, ymdhms % (1 << 17)
        ym = ymd >> 5
        return dt.datetime(ym // 13, ym % 13, ymd % 32, hms >> 12, (hms >> 6) % 64, hms % 64, v % (1 << 24))
    return raw.decode(errors="ignore")
