"""MySQL binary JSON: the fast decoder against python-mysql-replication on random documents.

There is no MySQL server here (the test server is MariaDB, whose JSON is text), so the
documents are encoded by an encoder written in this test from MySQL's json_binary format
description, then decoded by both: the library's ``parse_json`` turned into text by the
engine's normalizer (``cdc.types._json_text``, the reference) and ``jsonb.jsonb_text``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pymysqlreplication.json_binary import parse_json

from airflow_provider_mysqlcdc.cdc.binlog.fast import constants as C
from airflow_provider_mysqlcdc.cdc.binlog.fast.jsonb import jsonb_text
from airflow_provider_mysqlcdc.cdc.types import _json_text
from tests.unit.cdc.binlog.fast.test_fastbinlog_values import _encode_decimal

LITERAL, INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING, OPAQUE = 4, 5, 6, 7, 8, 9, 10, 11, 12, 15


def varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def packed_datetime(d: dt.datetime) -> int:
    ymd = ((d.year * 13 + d.month) << 5) | d.day
    hms = (d.hour << 12) | (d.minute << 6) | d.second
    return (((ymd << 17) | hms) << 24) + d.microsecond


def scalar(v) -> tuple[int, bytes]:
    """(type, bytes) of a non-container value."""
    if v is None or isinstance(v, bool):
        return LITERAL, bytes([0 if v is None else (1 if v else 2)])
    if isinstance(v, int):
        for t, fmt, lo, hi in (
            (INT16, "<h", -(2**15), 2**15 - 1),
            (UINT16, "<H", 0, 2**16 - 1),
            (INT32, "<i", -(2**31), 2**31 - 1),
            (UINT32, "<I", 0, 2**32 - 1),
            (INT64, "<q", -(2**63), 2**63 - 1),
            (UINT64, "<Q", 0, 2**64 - 1),
        ):
            if lo <= v <= hi:
                return t, struct.pack(fmt, v)
        raise ValueError(v)
    if isinstance(v, float):
        return DOUBLE, struct.pack("<d", v)
    if isinstance(v, str):
        b = v.encode()
        return STRING, varlen(len(b)) + b
    if isinstance(v, decimal.Decimal):
        p = max(1, len(v.as_tuple().digits))
        s = max(0, -v.as_tuple().exponent)
        p = max(p, s)
        payload = bytes([p, s]) + _encode_decimal(v, p, s)
        return OPAQUE, bytes([C.T_NEWDECIMAL]) + varlen(len(payload)) + payload
    if isinstance(v, dt.datetime):
        return OPAQUE, bytes([C.T_DATETIME]) + varlen(8) + struct.pack("<q", packed_datetime(v))
    if isinstance(v, dt.time):
        packed = (((v.hour << 12) | (v.minute << 6) | v.second) << 24) + v.microsecond
        return OPAQUE, bytes([C.T_TIME]) + varlen(8) + struct.pack("<q", packed)
    if isinstance(v, bytes):  # an opaque value of some other type (e.g. a BLOB cast to JSON)
        return OPAQUE, bytes([C.T_BLOB]) + varlen(len(v)) + v
    raise TypeError(v)


def encode(v, large: bool = False) -> tuple[int, bytes]:
    """(type, bytes) of any value; containers in the small or the large layout."""
    if not isinstance(v, (list, dict)):
        return scalar(v)
    w = 4 if large else 2
    fmt = "<I" if large else "<H"
    items = list(v.items()) if isinstance(v, dict) else [(None, x) for x in v]
    is_object = isinstance(v, dict)
    n = len(items)
    header = 2 * w + (n * (w + 2) if is_object else 0) + n * (1 + w)
    tail = bytearray()
    key_entries = bytearray()
    if is_object:
        for k, _ in items:
            kb = k.encode()
            key_entries += struct.pack(fmt, header + len(tail)) + struct.pack("<H", len(kb))
            tail += kb
    value_entries = bytearray()
    for _, x in items:
        t, data = encode(x, large)
        if t in (LITERAL, INT16, UINT16) or (large and t in (INT32, UINT32)):
            value_entries += bytes([t]) + data.ljust(w, b"\x00")
        else:
            value_entries += bytes([t]) + struct.pack(fmt, header + len(tail))
            tail += data
    size = header + len(tail)
    body = struct.pack(fmt, n) + struct.pack(fmt, size) + bytes(key_entries) + bytes(value_entries) + bytes(tail)
    t = (1 if large else 0) if is_object else (3 if large else 2)
    return t, body


def document(v, large=False) -> bytes:
    t, data = encode(v, large)
    return bytes([t]) + data


def reference(doc: bytes):
    try:
        return _json_text(parse_json(doc[0], doc[1:]))
    except Exception as e:  # the library raises: so must we
        return type(e)


def fast(doc: bytes):
    try:
        return jsonb_text(doc)
    except Exception as e:
        return type(e)


scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**20), max_value=10**20)
    | st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31))
    | st.times()
    | st.binary(max_size=6)
)
json_values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=4), c, max_size=4), max_leaves=12
)


@settings(max_examples=400, deadline=None)
@given(json_values, st.booleans())
def test_random_documents_decode_like_the_library(value, large):
    doc = document(value, large)
    assert fast(doc) == reference(doc)


@pytest.mark.parametrize(
    "value,text",
    [
        ({"b": [1, 2.5], "a": None}, '{"b": [1, 2.5], "a": null}'),
        ([], "[]"),
        ("caf\u00e9", '"caf\u00e9"'),
        (decimal.Decimal("-1.50"), "-1.5"),
        (dt.datetime(2024, 2, 29, 12, 0, 0, 5), '"2024-02-29 12:00:00.000005"'),
        (2**64 - 1, "18446744073709551615"),
    ],
)
def test_known_documents(value, text):
    doc = document(value)
    assert jsonb_text(doc) == text == reference(doc)


def test_empty_value_is_null_as_in_the_library():
    assert jsonb_text(b"") is None
