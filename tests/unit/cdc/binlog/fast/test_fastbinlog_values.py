"""Value layouts of the fast binlog decoder, pinned on byte fixtures.

The fixtures are row-image bytes MariaDB 10.11 wrote for single-column tables (captured
once with a binlog dump; the DECIMAL(14,4) pair is also the example in MySQL's
``decimal2bin`` documentation). Expected values are the canonical ones of cdc/types.py.
"""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_mysqlcdc.cdc.binlog.fast import values as V
from airflow_provider_mysqlcdc.cdc.types import format_decimal

US = 1_000_000
EPOCH = dt.datetime(1970, 1, 1)


def micros(d: dt.datetime) -> int:
    delta = d - EPOCH
    return (delta.days * 86400 + delta.seconds) * US + delta.microseconds


TIME_FIXTURES = [  # (fsp, stored bytes, signed microseconds)
    (6, "4b9105000000", -(838 * 3600 + 59 * 60 + 59) * US),
    (6, "7ffffef85ee0", -1_500_000),
    (1, "7ffffece", -1_500_000),
    (3, "7f3ffffff6", -(12 * 3600 * US + 1000)),
    (0, "b46efb", (838 * 3600 + 59 * 60 + 59) * US),
    (2, "80108304", (3600 + 2 * 60 + 3) * US + 40_000),
]


@pytest.mark.parametrize("fsp,hexbytes,expected", TIME_FIXTURES)
def test_time2(fsp, hexbytes, expected):
    assert V.read_time2(bytes.fromhex(hexbytes), 0, fsp) == expected


DATETIME_FIXTURES = [
    (6, "99b950278001e240", micros(dt.datetime(2026, 3, 8, 2, 30, 0, 123456))),
    (0, "fef3ff7efb", micros(dt.datetime(9999, 12, 31, 23, 59, 59))),
    (3, "8cb2420000000a", micros(dt.datetime(1000, 1, 1, 0, 0, 0, 1000))),
    (1, "99a51e000000", None),  # '2020-00-15': month 0 -> NULL, as the library and the snapshot SELECT
]


@pytest.mark.parametrize("fsp,hexbytes,expected", DATETIME_FIXTURES)
def test_datetime2(fsp, hexbytes, expected):
    assert V.read_datetime2(bytes.fromhex(hexbytes), 0, fsp) == expected


def test_datetime2_caches_agree_with_the_plain_decoder():
    for fsp, hexbytes, expected in DATETIME_FIXTURES:
        b = bytes.fromhex(hexbytes)
        r = int.from_bytes(b[:5], "big") - V.DATETIMEF_INT_OFS
        days, secs = V.DAYS[r >> 17], V.SECONDS[r & 0x1FFFF]
        if expected is None:
            assert days is None or secs is None
        else:
            frac = int.from_bytes(b[5:], "big") * V.frac_unit(fsp) if len(b) > 5 else 0
            assert (days * 86400 + secs) * US + frac == expected


@pytest.mark.parametrize(
    "fsp,hexbytes,expected",
    [
        (3, "7fffffff2706", 2147483647 * US + 999_000),
        (0, "00000001", 1 * US),
        (0, "00000000", None),  # TIMESTAMP '0000-00-00 00:00:00' is epoch 0 -> NULL
    ],
)
def test_timestamp2(fsp, hexbytes, expected):
    assert V.read_timestamp2(bytes.fromhex(hexbytes), 0, fsp) == expected


@pytest.mark.parametrize(
    "hexbytes,expected",
    [
        ("5dd00f", (dt.date(2024, 2, 29) - EPOCH.date()).days),
        ("000000", None),
        ("21d007", (dt.date(1000, 1, 1) - EPOCH.date()).days),
    ],
)
def test_date(hexbytes, expected):
    assert V.read_date(bytes.fromhex(hexbytes), 0) == expected


def test_year():
    assert V.year_value(0) == 0  # the library says 1900; the normalizer maps that back to 0
    assert V.year_value(255) == 2155
    assert V.year_value(1) == 1901


DECIMAL_FIXTURES = [
    (
        65,
        30,
        "7f439eb1ca484078caf1cb3fd0f8a086f8a432eaff439eb1ca484078fc84",
        "-12345678901234567890123456789012345.123456789012345678901234567891",
    ),
    (14, 4, "810dfb38d204d2", "1234567890.1234"),
    (14, 4, "7ef204c72dfb2d", "-1234567890.1234"),
    (5, 5, "7ffffe", "-0.00001"),
    (1, 0, "76", "-9"),
    (20, 10, "80000000000000000000", "0.0000000000"),
]


@pytest.mark.parametrize("p,s,hexbytes,text", DECIMAL_FIXTURES)
def test_decimal(p, s, hexbytes, text):
    b = bytes.fromhex(hexbytes)
    assert V.decimal_size(p, s) == len(b)
    unscaled = V.decimal_reader(p, s)(b, 0)
    assert decimal.Decimal(unscaled).scaleb(-s, decimal.Context(prec=100)) == decimal.Decimal(text)
    assert V.decimal_text(unscaled, s) == text


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _encode_decimal(value: decimal.Decimal, p: int, s: int) -> bytes:
    """MySQL's decimal2bin, written from its documentation (an independent encoder for the round trip).

    Digits are grouped by 9 away from the decimal point (a partial group leads the integer
    part and trails the fraction), each group big endian in as few bytes as its digits
    need; a negative value has every byte inverted; the first byte's top bit is flipped.
    """
    sign, digits, _ = value.quantize(decimal.Decimal(1).scaleb(-s), context=decimal.Context(prec=100)).as_tuple()
    text = "".join(map(str, digits)).rjust(p, "0")[-p:] if p else ""
    intg = p - s
    sizes = ([intg % 9] if intg % 9 else []) + [9] * (intg // 9) + [9] * (s // 9) + ([s % 9] if s % 9 else [])
    out = bytearray()
    pos = 0
    for ndig in sizes:
        out += int(text[pos : pos + ndig]).to_bytes(_DIG2BYTES[ndig], "big")
        pos += ndig
    if sign:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_decimal_round_trip(data):
    p = data.draw(st.integers(1, 65))
    s = data.draw(st.integers(0, min(p, 30)))
    unscaled = data.draw(st.integers(-(10**p - 1), 10**p - 1))
    value = decimal.Decimal(unscaled).scaleb(-s, decimal.Context(prec=100))
    b = _encode_decimal(value, p, s)
    assert len(b) == V.decimal_size(p, s)
    assert V.decimal_reader(p, s)(b, 0) == unscaled
    assert V.decimal_text(unscaled, s) == format_decimal(value, s)


@settings(max_examples=300, deadline=None)
@given(st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(9999, 12, 31)))
def test_days_from_civil(d):
    assert V.days_from_civil(d.year, d.month, d.day) == (d - dt.date(1970, 1, 1)).days
    assert V.valid_date(d.year, d.month, d.day)


def test_invalid_dates():
    assert not V.valid_date(2023, 2, 29)
    assert not V.valid_date(2020, 4, 31)
    assert not V.valid_date(0, 1, 1)
    assert not V.valid_date(2020, 13, 1)
    assert V.valid_date(2000, 2, 29)
    assert not V.valid_date(1900, 2, 29)


def _c_rem(x: int, m: int) -> int:
    """C's ``%``: the remainder takes the dividend's sign."""
    return -((-x) % m) if x < 0 else x % m


def _c_div(x: int, m: int) -> int:
    """C's ``/`` on integers: truncation toward zero."""
    return -((-x) // m) if x < 0 else x // m


def _encode_time2(us: int, fsp: int) -> bytes:
    """MySQL's my_time_packed_to_binary, written from its source documentation.

    packed = (hour << 12 | minute << 6 | second) << 24 | microseconds, negated for negative
    values; the integer part is ``packed >> 24`` (arithmetic), the fraction ``packed %
    2^24`` (C remainder) scaled to 1/100 s (fsp 1-2, one signed byte) or 1/10000 s (fsp 3-4,
    two bytes); fsp 5-6 store the whole packed value in 6 bytes.
    """
    neg = us < 0
    secs, frac = divmod(-us if neg else us, US)
    h, rest = divmod(secs, 3600)
    m, s = divmod(rest, 60)
    packed = ((h << 12 | m << 6 | s) << 24) + frac
    if neg:
        packed = -packed
    intpart = (packed >> 24) + V.TIMEF_INT_OFS
    if fsp == 0:
        return intpart.to_bytes(3, "big")
    if fsp <= 2:
        return intpart.to_bytes(3, "big") + (_c_div(_c_rem(packed, 1 << 24), 10000) & 0xFF).to_bytes(1, "big")
    if fsp <= 4:
        return intpart.to_bytes(3, "big") + (_c_div(_c_rem(packed, 1 << 24), 100) & 0xFFFF).to_bytes(2, "big")
    return (packed + V.TIMEF_OFS).to_bytes(6, "big")


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 6), st.integers(-(838 * 3600 + 3599) * US - 999_999, (838 * 3600 + 3599) * US + 999_999))
def test_time2_round_trip(fsp, us):
    unit = 10 ** (6 - fsp)
    us = _c_div(us, unit) * unit  # a value with fsp fractional digits
    assert V.read_time2(_encode_time2(us, fsp), 0, fsp) == us


def test_time2_fixtures_round_trip_through_the_encoder():
    for fsp, hexbytes, us in TIME_FIXTURES:
        assert _encode_time2(us, fsp).hex() == hexbytes


def test_bit():
    assert V.bit_value(bytes.fromhex("0201"), 0, 2) == 0b1000000001
    assert V.bit_value(b"\xff" * 8, 0, 8) == 2**64 - 1
