"""Binary layouts of column values in row events, decoded to Arrow-native numbers.

Every decoder here returns the *storage* form of the canonical value (see
``cdc/types.py``), which is what an Arrow array holds: microseconds for DATETIME /
TIMESTAMP / TIME, days since 1970-01-01 for DATE, the unscaled integer for DECIMAL.
``decoder.py`` inlines the simple ones into generated per-table code and calls these
for the rest; the unit tests pin them on byte fixtures.

Where python-mysql-replication's result (the reference) is odd, the canonical value is
what ``cdc.types.row_normalizer`` makes of it, e.g. YEAR 0 -> 0 (library: 1900), a
negative TIME with a fraction decoded correctly (the library borrows a second), zero and
invalid dates -> None.
"""

from __future__ import annotations

from typing import Callable

from ...types import date_text, datetime_text

US = 1_000_000
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)

TIMEF_INT_OFS = 0x800000
TIMEF_OFS = 0x800000000000
DATETIMEF_INT_OFS = 0x8000000000


# --- calendar -------------------------------------------------------------------------------


def days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def valid_date(y: int, m: int, d: int) -> bool:
    """What ``datetime.date`` accepts: the library returns None (DATETIME) for anything else."""
    if not (1 <= y <= 9999 and 1 <= m <= 12 and d >= 1):
        return False
    if m == 2 and d == 29:
        return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    return d <= _DAYS_IN_MONTH[m]


# --- fractional seconds -----------------------------------------------------------------------


def frac_bytes(fsp: int) -> int:
    """Bytes of the fractional part of TIME2/DATETIME2/TIMESTAMP2 with ``fsp`` digits."""
    return (fsp + 1) // 2


def frac_unit(fsp: int) -> int:
    """Microseconds per unit of the stored fraction: 1/100 s, 1/10000 s or 1 us."""
    return (0, 10000, 10000, 100, 100, 1, 1)[fsp]


# --- temporal ---------------------------------------------------------------------------------


def datetime2_micros(raw: int, frac_us: int) -> int | None:
    """DATETIME2: ``raw`` is the 5-byte big-endian integer part; None for zero/invalid dates."""
    v = raw - DATETIMEF_INT_OFS
    ymd = v >> 17
    ym = ymd >> 5
    y, m, d = ym // 13, ym % 13, ymd & 31
    hms = v & 0x1FFFF
    h, mi, s = hms >> 12, (hms >> 6) & 63, hms & 63
    if not valid_date(y, m, d) or h > 23 or mi > 59 or s > 59:
        return None
    return (days_from_civil(y, m, d) * 86400 + h * 3600 + mi * 60 + s) * US + frac_us


class DayCache(dict):
    """DATETIME2 date part (``year*13+month << 5 | day``) -> days since the epoch, None if invalid.

    Dates repeat a lot in real data, so a dict hit replaces the calendar arithmetic; the
    cache stops growing at ``limit`` entries (pathological data stays correct, just slower).
    """

    def __init__(self, limit: int = 200_000) -> None:
        super().__init__()
        self.limit = limit

    def __missing__(self, ymd: int) -> int | None:
        ym = ymd >> 5
        y, m, d = ym // 13, ym % 13, ymd & 31
        days = days_from_civil(y, m, d) if valid_date(y, m, d) else None
        if len(self) < self.limit:
            self[ymd] = days
        return days


class SecondCache(dict):
    """DATETIME2 time part (``hour << 12 | minute << 6 | second``) -> seconds of the day, None if invalid."""

    def __missing__(self, hms: int) -> int | None:
        h, mi, s = hms >> 12, (hms >> 6) & 63, hms & 63
        secs = h * 3600 + mi * 60 + s if h <= 23 and mi <= 59 and s <= 59 else None
        self[hms] = secs
        return secs


DAYS = DayCache()
SECONDS = SecondCache()


def read_datetime2(buf: bytes, pos: int, fsp: int) -> int | None:
    n = frac_bytes(fsp)
    raw = int.from_bytes(buf[pos : pos + 5], "big")
    frac = int.from_bytes(buf[pos + 5 : pos + 5 + n], "big") * frac_unit(fsp) if n else 0
    return datetime2_micros(raw, frac)


def read_timestamp2(buf: bytes, pos: int, fsp: int) -> int | None:
    """TIMESTAMP2: big-endian seconds + fraction; the zero timestamp (epoch 0) is None."""
    n = frac_bytes(fsp)
    sec = int.from_bytes(buf[pos : pos + 4], "big")
    frac = int.from_bytes(buf[pos + 4 : pos + 4 + n], "big") * frac_unit(fsp) if n else 0
    if sec == 0 and frac == 0:
        return None
    return sec * US + frac


def read_date_text(buf: bytes, pos: int) -> str:
    """DATE as text (zero_dates 'text'): zero and invalid dates printed as stored."""
    v = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
    return date_text(v >> 9, (v >> 5) & 15, v & 31)


def read_datetime2_text(buf: bytes, pos: int, fsp: int) -> str:
    n = frac_bytes(fsp)
    v = int.from_bytes(buf[pos : pos + 5], "big") - DATETIMEF_INT_OFS
    frac = int.from_bytes(buf[pos + 5 : pos + 5 + n], "big") * frac_unit(fsp) if n else 0
    ymd, hms = v >> 17, v & 0x1FFFF
    return datetime_text((ymd >> 5) // 13, (ymd >> 5) % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63, frac, fsp)


def read_timestamp2_text(buf: bytes, pos: int, fsp: int) -> str:
    """TIMESTAMP2 as UTC text; the zero TIMESTAMP (epoch 0) as '0000-00-00 00:00:00'."""
    import datetime as dt

    n = frac_bytes(fsp)
    sec = int.from_bytes(buf[pos : pos + 4], "big")
    frac = int.from_bytes(buf[pos + 4 : pos + 4 + n], "big") * frac_unit(fsp) if n else 0
    if sec == 0 and frac == 0:
        return datetime_text(0, 0, 0, 0, 0, 0, 0, fsp)
    t = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=sec)
    return datetime_text(t.year, t.month, t.day, t.hour, t.minute, t.second, frac, fsp)


def read_time2(buf: bytes, pos: int, fsp: int) -> int:
    """TIME2 as signed microseconds (MySQL's ``my_time_packed_from_binary``).

    For fsp 1-4 a negative value with a fraction stores (integer part - 1, fraction
    complement); undoing that borrow is what python-mysql-replication misses.
    """
    if fsp >= 5:
        packed = int.from_bytes(buf[pos : pos + 6], "big") - TIMEF_OFS
    else:
        intpart = int.from_bytes(buf[pos : pos + 3], "big") - TIMEF_INT_OFS
        if fsp == 0:
            packed = intpart << 24
        elif fsp <= 2:
            frac = buf[pos + 3]
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x100
            packed = (intpart << 24) + frac * 10000
        else:
            frac = (buf[pos + 3] << 8) | buf[pos + 4]
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x10000
            packed = (intpart << 24) + frac * 100
    return time_packed_micros(packed)


def time_packed_micros(packed: int) -> int:
    """MySQL's packed TIME (hms << 24 | microseconds, signed) as signed microseconds."""
    neg = packed < 0
    a = -packed if neg else packed
    hms = a >> 24
    us = ((((hms >> 12) & 0x3FF) * 3600 + ((hms >> 6) & 63) * 60 + (hms & 63)) * US) + (a & 0xFFFFFF)
    return -us if neg else us


def read_date(buf: bytes, pos: int) -> int | None:
    """DATE (3 bytes little endian: day 5 bits, month 4, year 15) as days; zero/invalid -> None."""
    v = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
    y, m, d = v >> 9, (v >> 5) & 15, v & 31
    if not valid_date(y, m, d):
        return None
    return days_from_civil(y, m, d)


def year_value(stored: int) -> int:
    """YEAR: 0 stays 0 (the library's 1900, which the normalizer maps back), else 1900 + stored."""
    return stored + 1900 if stored else 0


# --- DECIMAL ----------------------------------------------------------------------------------


def decimal_groups(precision: int, scale: int) -> list[tuple[int, int]]:
    """(bytes, digits) of each group of MySQL's binary DECIMAL, most significant first."""
    intg = precision - scale
    groups: list[tuple[int, int]] = []
    if intg % 9:
        groups.append((_DIG2BYTES[intg % 9], intg % 9))
    groups += [(4, 9)] * (intg // 9)
    groups += [(4, 9)] * (scale // 9)
    if scale % 9:
        groups.append((_DIG2BYTES[scale % 9], scale % 9))
    return groups


def decimal_size(precision: int, scale: int) -> int:
    return sum(b for b, _ in decimal_groups(precision, scale))


def decimal_reader(precision: int, scale: int) -> Callable[[bytes, int], int]:
    """A function ``(buf, pos) -> unscaled int`` for DECIMAL(precision, scale).

    Layout: groups of up to 9 decimal digits in 4 bytes (fewer digits, fewer bytes),
    big endian; a negative value has every byte inverted; the top bit of the first byte
    is flipped so that the bytes sort like the numbers.
    """
    groups = decimal_groups(precision, scale)
    size = sum(b for b, _ in groups)
    bits = 8 * size
    sign_bit = 1 << (bits - 1)
    all_ones = (1 << bits) - 1
    steps = []
    shift = bits
    for nbytes, digits in groups:
        shift -= 8 * nbytes
        steps.append((shift, (1 << (8 * nbytes)) - 1, 10**digits))

    def read(buf: bytes, pos: int) -> int:
        raw = int.from_bytes(buf[pos : pos + size], "big")
        neg = not raw & sign_bit
        raw ^= sign_bit
        if neg:
            raw ^= all_ones
        v = 0
        for sh, mask, mul in steps:
            v = v * mul + ((raw >> sh) & mask)
        return -v if neg else v

    return read


def decimal_text(unscaled: int, scale: int) -> str:
    """The server's text of a DECIMAL (``format_decimal`` in cdc/types.py): exactly ``scale`` digits, no '-0'."""
    neg = unscaled < 0
    t = str(-unscaled if neg else unscaled)
    if scale:
        t = t.rjust(scale + 1, "0")
        t = t[:-scale] + "." + t[-scale:]
    return "-" + t if neg and unscaled else t


def bit_value(buf: bytes, pos: int, nbytes: int) -> int:
    return int.from_bytes(buf[pos : pos + nbytes], "big")
