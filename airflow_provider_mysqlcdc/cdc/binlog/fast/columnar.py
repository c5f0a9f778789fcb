"""Columnar decoding: many rows events of one table at once, column by column, with numpy.

Why: the generated row decoder (``decoder.py``) spends a few microseconds of interpreter
time per row image; a busy stream of small transactions is mostly that. Here the events a
batch holds are joined into one buffer, and the images are decoded in *rounds*: round
``r`` reads the r-th image of every event at once -- the null bitmaps of all of them, then
column 0 of all of them, column 1 ..., each column a handful of vectorized numpy
operations producing one Arrow array. An UPDATE event with one row is two rounds (before,
after image). Positions advance per image by the widths just read, so variable-length
columns and NULLs need no special path.

Multi-row events take one round per image. A round pays a fixed numpy cost, so once fewer
than ``MIN_ACTIVE`` events are still active (a lone 1000-row INSERT would need 1000
rounds over one event), the rest of their images go through the row decoder instead, and
the two are merged back into binlog order with one ``take``.

Values are the same Arrow storage values the row decoder makes (microseconds, days,
unscaled decimals ...), so both paths produce identical batches; the differential tests
run both. Tables with a column this module cannot vectorize (DECIMAL wider than 8 bytes,
i.e. more than 18 digits) use the row path; non-UTF-8 text and MySQL's binary JSON are
sliced column-wise and decoded per value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence, cast

import numpy as np
import pyarrow as pa

from ...errors import RESTART_OR_REPORT
from . import constants as C
from . import values as V
from .decoder import ColumnPlan, TableDecoder, _SetNames
from .errors import ProtocolError
from .jsonb import jsonb_text

MIN_ACTIVE = 16  # vectorized rounds while at least this many events are still active
PAD = 16  # zero bytes after the joined buffer: gathers for NULL images stay in bounds

_DIM = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)
_FIXED = {
    C.T_TINY: 1,
    C.T_SHORT: 2,
    C.T_INT24: 3,
    C.T_LONG: 4,
    C.T_LONGLONG: 8,
    C.T_FLOAT: 4,
    C.T_DOUBLE: 8,
    C.T_YEAR: 1,
    C.T_DATE: 3,
    C.T_NEWDATE: 3,
}
_VARLEN = {
    C.T_VARCHAR,
    C.T_VAR_STRING,
    C.T_STRING,
    C.T_BLOB,
    C.T_TINY_BLOB,
    C.T_MEDIUM_BLOB,
    C.T_LONG_BLOB,
    C.T_GEOMETRY,
    C.T_JSON,
}


def columnar_reason(dec: TableDecoder) -> str | None:
    """Why ``dec``'s table cannot be decoded column by column, or None if it can."""
    for cp in dec.columns:
        c = cp.column
        if c.type == C.T_NEWDECIMAL and V.decimal_size(c.precision, c.scale) > 8:
            return f"column {cp.name!r}: DECIMAL({c.precision},{c.scale}) is wider than 64 bits"
        if c.type == C.T_FLOAT and c.length not in (0, 4) or c.type == C.T_DOUBLE and c.length not in (0, 8):
            return f"column {cp.name!r}: odd float width"
        if not (
            c.type in _FIXED
            or c.type in _VARLEN
            or c.type in (C.T_NEWDECIMAL, C.T_DATETIME2, C.T_TIMESTAMP2, C.T_TIME2, C.T_BIT, C.T_ENUM, C.T_SET)
        ):
            return f"column {cp.name!r}: type {c.type}"
    return None


# --- vectorized primitives ------------------------------------------------------------------


def _le(B: np.ndarray, p: np.ndarray, k: int) -> np.ndarray:
    """k-byte little-endian unsigned integers at positions p (uint64)."""
    v = B[p].astype(np.uint64)
    for i in range(1, k):
        v |= B[p + i].astype(np.uint64) << np.uint64(8 * i)
    return v


def _be(B: np.ndarray, p: np.ndarray, k: int) -> np.ndarray:
    """k-byte big-endian unsigned integers at positions p (uint64)."""
    v = B[p].astype(np.uint64)
    for i in range(1, k):
        v = (v << np.uint64(8)) | B[p + i].astype(np.uint64)
    return v


def days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Vectorized ``values.days_from_civil`` (int64)."""
    y = y - (m <= 2)
    era = y // 400
    yoe = y - era * 400
    mp = (m + 9) % 12
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def valid_dates(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Vectorized ``values.valid_date``."""
    ok = (y >= 1) & (y <= 9999) & (m >= 1) & (m <= 12) & (d >= 1)
    dim = _DIM[np.clip(m, 0, 12)]
    leap = (y % 4 == 0) & ((y % 100 != 0) | (y % 400 == 0))
    dim = dim + ((m == 2) & leap)
    return ok & (d <= dim)


def civil_from_days(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorized inverse of ``days_from_civil`` (days since 1970-01-01 -> year, month, day)."""
    z = z + 719468
    era = np.floor_divide(z, 146097)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = np.where(mp < 10, mp + 3, mp - 9)
    return yoe + era * 400 + (m <= 2), m, d


def date_texts(parts: list[np.ndarray], fsp: int | None, mask: np.ndarray | None) -> pa.Array:
    """Fixed-width text of dates (``parts`` year, month, day) or date-times (plus hour, minute,
    second, microseconds; ``fsp`` fraction digits), built as one byte matrix: the text form of
    zero_dates 'text' (cdc/types.py), zero and invalid dates printed as stored."""
    n = len(parts[0])
    widths = (4, 2, 2) if fsp is None else (4, 2, 2, 2, 2, 2)
    seps = b"--" if fsp is None else b"-- ::"
    width = sum(widths) + len(seps) + (1 + fsp if fsp else 0)
    out = np.empty((n, width), dtype=np.uint8)
    col = 0
    for i, w in enumerate(widths):
        v = np.clip(parts[i].astype(np.int64), 0, 10**w - 1)
        for k in range(w - 1, -1, -1):
            out[:, col + k] = 48 + v % 10
            v = v // 10
        col += w
        if i < len(seps):
            out[:, col] = seps[i]
            col += 1
    if fsp:
        out[:, col] = ord(".")
        v = parts[6].astype(np.int64) // 10 ** (6 - fsp)
        for k in range(fsp, 0, -1):
            out[:, col + k] = 48 + v % 10
            v = v // 10
    offsets = np.arange(n + 1, dtype=np.int32) * width
    k = int(mask.sum()) if mask is not None else 0
    return pa.Array.from_buffers(
        pa.string(), n, [_validity(mask) if k else None, pa.py_buffer(offsets), pa.py_buffer(out)], null_count=k
    )


def _frac(B: np.ndarray, p: np.ndarray, fsp: int) -> tuple[np.ndarray, int]:
    n = V.frac_bytes(fsp)
    if not n:
        return np.zeros(len(p), dtype=np.int64), 0
    return _be(B, p, n).astype(np.int64) * V.frac_unit(fsp), n


def _validity(mask: np.ndarray | None) -> pa.Buffer | None:
    if mask is None or not mask.any():
        return None
    return pa.py_buffer(np.packbits(~mask, bitorder="little"))


def _decimal128(v: np.ndarray, typ: pa.DataType, nulls: np.ndarray | None, unsigned: bool = False) -> pa.Array:
    n = len(v)
    data = np.empty((n, 2), dtype=np.int64)
    data[:, 0] = v.view(np.int64) if v.dtype == np.uint64 else v
    data[:, 1] = 0 if unsigned else data[:, 0] >> 63
    k = int(nulls.sum()) if nulls is not None else 0
    return pa.Array.from_buffers(typ, n, [_validity(nulls) if k else None, pa.py_buffer(data)], null_count=k)


_GATHER_CHUNK = 1 << 18  # bytes per index gather: its int64 index (8 bytes a byte) stays in cache


def gather_slices(B: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The bytes ``B[starts[i]:starts[i] + lengths[i]]`` for every i, back to back (B: uint8).

    Slices in order that do not overlap (what the decoder has: the events of a stretch, a
    column's values) are read as the even values of an Arrow binary array laid over ``B``
    without a copy -- its offsets alternate between slice starts and ends, so the odd values
    are the gaps -- and Arrow's ``take`` copies the even ones out: one memcpy per slice in
    C++. Measured here, 2-5x less than an index per byte (``np.repeat`` + ``arange`` + a
    gather, ~2 ns a byte while its int64 index fits in cache, several times that beyond)
    for column values, and ~10x less than joining memoryview slices (a Python step per
    slice) for whole events. Anything else takes the index per byte, in chunks.
    """
    total = int(lengths.sum())
    n = len(starts)
    if total == 0:
        return np.zeros(0, dtype=np.uint8)
    ends = starts + lengths
    if int(starts[0]) >= 0 and int(ends[-1]) <= len(B) and bool((starts[1:] >= ends[:-1]).all()):
        bounds = np.empty(2 * n, dtype=np.int64)
        bounds[0::2] = starts
        bounds[1::2] = ends
        laid = pa.Array.from_buffers(pa.large_binary(), 2 * n - 1, [None, pa.py_buffer(bounds), pa.py_buffer(B)])
        taken = laid.take(pa.array(np.arange(0, 2 * n - 1, 2, dtype=np.int64)))
        offsets = np.frombuffer(taken.buffers()[1], dtype=np.int64)[taken.offset : taken.offset + n + 1]
        return np.frombuffer(taken.buffers()[2], dtype=np.uint8)[int(offsets[0]) : int(offsets[-1])]
    offsets = np.cumsum(lengths) - lengths
    if total <= _GATHER_CHUNK:
        return B[np.repeat(starts - offsets, lengths) + np.arange(total, dtype=np.int64)]
    out = np.empty(total, dtype=np.uint8)
    cuts = np.unique(np.searchsorted(offsets, np.arange(0, total, _GATHER_CHUNK), side="right") - 1).tolist()
    for i0, i1 in zip(cuts, cuts[1:] + [n]):
        o0 = int(offsets[i0])
        o1 = int(offsets[i1]) if i1 < n else total
        out[o0:o1] = B[
            np.repeat(starts[i0:i1] - (offsets[i0:i1] - o0), lengths[i0:i1]) + np.arange(o1 - o0, dtype=np.int64)
        ]
    return out


def _binary(
    B: np.ndarray, start: np.ndarray, length: np.ndarray, nulls: np.ndarray | None, pad_to: int = 0
) -> pa.Array:
    """A binary array of the slices B[start:start+length] (padded with 0x00 to ``pad_to``)."""
    n = len(start)
    if nulls is not None:
        length = np.where(nulls, 0, length)
    out_len = np.maximum(length, pad_to) if pad_to else length
    if nulls is not None and pad_to:
        out_len = np.where(nulls, 0, out_len)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(out_len, out=offsets[1:])
    total = int(offsets[-1])
    if total and not pad_to:
        data = gather_slices(B, start, out_len)
    elif total:
        rel = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1], out_len)
        src = np.where(
            rel < np.repeat(length, out_len), np.repeat(start, out_len) + rel, len(B) - 1
        )  # the last byte is a pad 0
        data = B[src]
    else:
        data = np.zeros(0, dtype=np.uint8)
    typ = pa.binary() if total < (1 << 31) else pa.large_binary()
    off = offsets.astype(np.int32 if typ == pa.binary() else np.int64)
    k = int(nulls.sum()) if nulls is not None else 0
    arr = pa.Array.from_buffers(
        typ, n, [_validity(nulls) if k else None, pa.py_buffer(off), pa.py_buffer(data)], null_count=k
    )
    return arr.cast(pa.binary()) if typ != pa.binary() else arr


# --- one column over one round ----------------------------------------------------------------


_TEMPORAL = (C.T_DATE, C.T_NEWDATE, C.T_DATETIME2, C.T_TIMESTAMP2, C.T_TIME2)


def _column(cp: ColumnPlan, B: np.ndarray, p: np.ndarray, nulls: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
    """(Arrow array of this column for every image of the round, the widths read)."""
    c = cp.column
    t = c.type
    n = len(p)
    mask = nulls if nulls is not None and nulls.any() else None

    def width(w: int | np.ndarray) -> np.ndarray:
        w = np.full(n, w, dtype=np.int64) if np.isscalar(w) else cast(np.ndarray, w).astype(np.int64)
        return np.where(mask, 0, w) if mask is not None else w

    if t in (C.T_TINY, C.T_SHORT, C.T_INT24, C.T_LONG, C.T_LONGLONG):
        k = _FIXED[t]
        raw = _le(B, p, k)
        if cp.kind == "uint64":
            return _decimal128(raw, cp.arrow_type, mask, unsigned=True), width(k)
        if c.unsigned:
            v = raw.astype(np.int64)
        elif k == 8:
            v = raw.view(np.int64)
        else:
            sign = np.int64(1 << (8 * k - 1))
            v = (raw.astype(np.int64) ^ sign) - sign
        return pa.array(v.astype(cp.arrow_type.to_pandas_dtype()), cp.arrow_type, mask=mask), width(k)
    if t == C.T_FLOAT:
        return pa.array(_le(B, p, 4).astype(np.uint32).view(np.float32), pa.float32(), mask=mask), width(4)
    if t == C.T_DOUBLE:
        return pa.array(_le(B, p, 8).view(np.float64), pa.float64(), mask=mask), width(8)
    if t == C.T_YEAR:
        v = B[p].astype(np.int16)
        return pa.array(np.where(v == 0, 0, v + 1900).astype(np.int16), pa.int16(), mask=mask), width(1)
    if t in _TEMPORAL:
        return _temporal_column(cp, B, p, mask, width)
    if t == C.T_NEWDECIMAL:
        groups = V.decimal_groups(c.precision, c.scale)
        size = sum(b for b, _ in groups)
        raw = _be(B, p, size)
        sign_bit = np.uint64(1 << (8 * size - 1))
        positive = (raw & sign_bit) != 0
        raw = raw ^ sign_bit
        ones = np.uint64((1 << (8 * size)) - 1)
        raw = np.where(positive, raw, raw ^ ones)
        v = np.zeros(n, dtype=np.int64)
        shift = 8 * size
        for nbytes, digits in groups:
            shift -= 8 * nbytes
            g = ((raw >> np.uint64(shift)) & np.uint64((1 << (8 * nbytes)) - 1)).astype(np.int64)
            v = v * (10**digits) + g
        v = np.where(positive, v, -v)  # (DECIMAL wider than 38 digits never fits in 8 bytes)
        return _decimal128(v, cp.arrow_type, mask), width(size)
    if t == C.T_BIT:
        v = _be(B, p, c.length)
        if cp.kind == "bit64":
            return _decimal128(v, cp.arrow_type, mask, unsigned=True), width(c.length)
        return pa.array(v.astype(np.int64), pa.int64(), mask=mask), width(c.length)
    if t in (C.T_ENUM, C.T_SET):
        return _member_column(cp, B, p, mask, width)
    return _bytes_column(cp, B, p, mask, width)


def _temporal_column(
    cp: ColumnPlan, B: np.ndarray, p: np.ndarray, mask: np.ndarray | None, width: Callable[[Any], np.ndarray]
) -> tuple[pa.Array, np.ndarray]:
    """DATE, DATETIME, TIMESTAMP (as values, or as text with ``zero_dates: text``) and TIME."""
    c = cp.column
    t = c.type
    if t in (C.T_DATE, C.T_NEWDATE) and cp.kind == "date_text":
        v = _le(B, p, 3).astype(np.int64)
        return date_texts([v >> 9, (v >> 5) & 15, v & 31], None, mask), width(3)
    if t == C.T_DATETIME2 and cp.kind == "datetime_text":
        frac, nf = _frac(B, p + 5, c.fsp)
        v = _be(B, p, 5).astype(np.int64) - V.DATETIMEF_INT_OFS
        ymd, hms = v >> 17, v & 0x1FFFF
        return date_texts(
            [(ymd >> 5) // 13, (ymd >> 5) % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63, frac], c.fsp, mask
        ), width(5 + nf)
    if t == C.T_TIMESTAMP2 and cp.kind == "timestamp_text":
        frac, nf = _frac(B, p + 4, c.fsp)
        sec = _be(B, p, 4).astype(np.int64)
        y, m, d = civil_from_days(sec // 86400)
        rem = sec % 86400
        parts = [y, m, d, rem // 3600, rem // 60 % 60, rem % 60, frac]
        zero = (sec == 0) & (frac == 0)  # the zero TIMESTAMP is stored as epoch 0
        if zero.any():
            parts = [np.where(zero, 0, x) for x in parts]
        return date_texts(parts, c.fsp, mask), width(4 + nf)
    if t in (C.T_DATE, C.T_NEWDATE):
        v = _le(B, p, 3).astype(np.int64)
        y, m, d = v >> 9, (v >> 5) & 15, v & 31
        bad = ~valid_dates(y, m, d)
        days = days_from_civil(np.where(bad, 1970, y), np.where(bad, 1, m), np.where(bad, 1, d))
        null = bad if mask is None else (bad | mask)
        return pa.array(days.astype(np.int32), pa.date32(), mask=null), width(3)
    if t == C.T_DATETIME2:
        frac, nf = _frac(B, p + 5, c.fsp)
        v = _be(B, p, 5).astype(np.int64) - V.DATETIMEF_INT_OFS
        ymd = v >> 17
        ym = ymd >> 5
        y, m, d = ym // 13, ym % 13, ymd & 31
        hms = v & 0x1FFFF
        h, mi, s = hms >> 12, (hms >> 6) & 63, hms & 63
        bad = ~valid_dates(y, m, d) | (h > 23) | (mi > 59) | (s > 59)
        days = days_from_civil(np.where(bad, 1970, y), np.where(bad, 1, m), np.where(bad, 1, d))
        us = (days * 86400 + h * 3600 + mi * 60 + s) * 1_000_000 + frac
        null = bad if mask is None else (bad | mask)
        return pa.array(us, cp.arrow_type, mask=null), width(5 + nf)
    if t == C.T_TIMESTAMP2:
        frac, nf = _frac(B, p + 4, c.fsp)
        sec = _be(B, p, 4).astype(np.int64)
        zero = (sec == 0) & (frac == 0)
        null = zero if mask is None else (zero | mask)
        return pa.array(sec * 1_000_000 + frac, cp.arrow_type, mask=null), width(4 + nf)
    if t == C.T_TIME2:
        fsp = c.fsp
        if fsp >= 5:
            packed = _be(B, p, 6).astype(np.int64) - V.TIMEF_OFS
            nb = 6
        else:
            intpart = _be(B, p, 3).astype(np.int64) - V.TIMEF_INT_OFS
            if fsp == 0:
                packed = intpart << 24
                nb = 3
            else:
                fb = 1 if fsp <= 2 else 2
                frac = _be(B, p + 3, fb).astype(np.int64)
                borrow = (intpart < 0) & (frac != 0)
                intpart = intpart + borrow
                frac = frac - borrow * (1 << (8 * fb))
                packed = (intpart << 24) + frac * (10000 if fb == 1 else 100)
                nb = 3 + fb
        neg = packed < 0
        a = np.abs(packed)
        hms = a >> 24
        us = (((hms >> 12) & 0x3FF) * 3600 + ((hms >> 6) & 63) * 60 + (hms & 63)) * 1_000_000 + (a & 0xFFFFFF)
        return pa.array(np.where(neg, -us, us), pa.int64(), mask=mask), width(nb)
    raise ProtocolError(f"column {cp.name!r}: unexpected temporal type {t}. {RESTART_OR_REPORT}")


def _member_column(
    cp: ColumnPlan, B: np.ndarray, p: np.ndarray, mask: np.ndarray | None, width: Callable[[Any], np.ndarray]
) -> tuple[pa.Array, np.ndarray]:
    """ENUM (its member by index) and SET (its members by bit)."""
    c = cp.column
    t = c.type
    if t == C.T_ENUM:
        idx = _le(B, p, c.length).astype(np.int64)
        members = cp.extra
        live = idx if mask is None else idx[~mask]
        if len(live) and int(live.max()) >= len(members):
            raise ProtocolError(
                f"ENUM column {cp.name!r}: index {int(live.max())} beyond its {len(members) - 1} members. "
                f"{RESTART_OR_REPORT}"
            )
        arr = pa.array(list(members), pa.string()).take(pa.array(idx, mask=mask))  # null index -> null
        return arr, width(c.length)
    if t == C.T_SET:
        bits = _le(B, p, c.length)
        names: _SetNames = cp.extra
        vals = (
            [names[int(x)] for x in bits.tolist()]
            if mask is None
            else [None if m else names[int(x)] for x, m in zip(bits.tolist(), mask.tolist())]
        )
        return pa.array(vals, pa.string()), width(c.length)
    raise ProtocolError(f"column {cp.name!r}: unexpected member type {t}. {RESTART_OR_REPORT}")


def _bytes_column(
    cp: ColumnPlan, B: np.ndarray, p: np.ndarray, mask: np.ndarray | None, width: Callable[[Any], np.ndarray]
) -> tuple[pa.Array, np.ndarray]:
    """Length-prefixed values: strings in their charset, binary (padded back for BINARY(n)), JSON."""
    c = cp.column
    t = c.type
    # length-prefixed
    if t in (C.T_STRING, C.T_VARCHAR, C.T_VAR_STRING):
        lp = 2 if c.length > 255 else 1
    else:
        lp = c.length
    length = _le(B, p, lp).astype(np.int64)
    pad = cp.extra if (cp.kind == "binary" and isinstance(cp.extra, int)) else 0
    arr = _binary(B, p + lp, length, mask, pad)
    if cp.kind == "text_utf8":
        arr = arr.cast(pa.string())
    elif cp.kind == "text":
        arr = pa.array([None if v is None else v.decode(cp.codec) for v in arr.to_pylist()], pa.string())
    elif cp.kind == "json":
        arr = pa.array([None if v is None else jsonb_text(v) for v in arr.to_pylist()], pa.string())
    return arr, width(lp + length)


# --- many events ------------------------------------------------------------------------------


@dataclass
class DecodedImages:
    """Every image of a set of events, column by column, in (event, image) order."""

    columns: list[pa.Array]
    event: np.ndarray  # event index of each image
    image: np.ndarray  # image index inside its event


def decode_events(dec: TableDecoder, blob: bytes, starts: np.ndarray, ends: np.ndarray) -> DecodedImages:
    """Decode every image between ``starts[i]`` and ``ends[i]`` of ``blob`` (one range per event)."""
    B = np.frombuffer(blob + bytes(PAD), dtype=np.uint8)
    ncols = len(dec.columns)
    nb = (ncols + 7) // 8
    P = starts.astype(np.int64).copy()
    E = ends.astype(np.int64)
    parts: list[list[pa.Array]] = []
    ev_idx: list[np.ndarray] = []
    im_idx: list[np.ndarray] = []
    r = 0
    active = np.nonzero(P < E)[0]
    while len(active) and (r == 0 or len(active) >= MIN_ACTIVE):
        p = P[active]
        bitmap = _le(B, p, nb) if nb <= 8 else None
        p = p + nb
        cols = []
        for j, cp in enumerate(dec.columns):
            if bitmap is not None:
                nulls = ((bitmap >> np.uint64(j)) & np.uint64(1)).astype(bool)
            else:
                nulls = ((B[p - nb + (j >> 3)] >> (j & 7)) & 1).astype(bool)
            arr, w = _column(cp, B, p, nulls)
            cols.append(arr)
            p = p + w
        if (p > E[active]).any():
            bad = active[np.argmax(p > E[active])]
            raise ProtocolError(
                f"row image of {dec.table_id} runs past the end of its event (event #{bad}). {RESTART_OR_REPORT}"
            )
        P[active] = p
        parts.append(cols)
        ev_idx.append(active)
        im_idx.append(np.full(len(active), r, dtype=np.int64))
        r += 1
        active = active[P[active] < E[active]]
    if len(active):  # the long tail of multi-row events: the row decoder
        rest_images: list[tuple] = []
        for e in active.tolist():
            images, end = dec.decode_rows(blob, int(P[e]), int(E[e]))
            if end != E[e]:
                raise ProtocolError(
                    f"row data of {dec.table_id} ends at {end}, its event at {int(E[e])}. {RESTART_OR_REPORT}"
                )
            rest_images.extend(images)
            ev_idx.append(np.full(len(images), e, dtype=np.int64))
            im_idx.append(np.arange(r, r + len(images), dtype=np.int64))
        parts.append(dec.image_arrays(rest_images))
    if not parts:
        return DecodedImages(
            [pa.array([], cp.arrow_type) for cp in dec.columns], np.zeros(0, np.int64), np.zeros(0, np.int64)
        )
    event = np.concatenate(ev_idx)
    image = np.concatenate(im_idx)
    columns = [pa.concat_arrays([part[j] for part in parts]) if len(parts) > 1 else parts[0][j] for j in range(ncols)]
    if len(parts) > 1:
        order = np.lexsort((image, event))
        if not (np.diff(order) == 1).all():
            idx = pa.array(order)
            columns = [col.take(idx) for col in columns]
            event, image = event[order], image[order]
    return DecodedImages(columns, event, image)


def select(columns: Sequence[pa.Array], idx: np.ndarray, fields: Sequence[pa.Field]) -> pa.StructArray:
    """The struct of rows ``idx`` of ``columns``; -1 = no image: a null struct with null children
    (as the row path makes it)."""
    missing = idx < 0
    take = pa.array(idx, mask=missing) if missing.any() else pa.array(idx)
    children = [col.take(take) for col in columns]
    return pa.StructArray.from_arrays(children, fields=list(fields), mask=pa.array(missing) if missing.any() else None)
