"""Per-table row decoders generated from a TABLE_MAP, and the Arrow arrays they fill.

Why generated code: a generic decoder dispatches on the column type for every value of
every row; for a table it is the same sequence each time. Generating one Python function
per table structure -- consecutive fixed-width columns read by one precompiled ``struct``
call, variable-length columns sliced inline, no type tests at all -- is several times
faster than python-mysql-replication's generic reader (bench/decoder_throughput.py). A row
whose null bitmap is all zero (the common case) takes a straight-line path with no
per-column NULL test. The columnar decoder (``columnar.py``) is faster still where it
applies; this one is its fallback for the rest and for long multi-row events.

Values are decoded to their Arrow storage form (microseconds, days, unscaled decimals,
UTF-8 bytes) and turned into Arrow arrays per column in bulk; ``to_pylist()`` of those
arrays gives exactly the canonical Python values of ``cdc/types.py`` (what
``row_normalizer`` makes of the library's values), which is what the differential tests
check.

"Fall back rather than guess": ``plan_table`` returns an ``Unsupported`` (with the column
and the reason) for anything it cannot decode exactly -- a type, a character set without a
trusted codec, missing metadata -- so the caller reads that table through
python-mysql-replication instead.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Callable, Mapping, Sequence, cast

import numpy as np
import pyarrow as pa

from ...errors import ConfigError
from ...model import TableId, TableSchema
from ...sql import python_codec
from ...types import map_column
from . import constants as C
from . import values as V
from .jsonb import jsonb_text
from .tablemap import MapColumn, TableMap, synthesize_column, synthesize_schema

_STRUCT_CODES = {
    (C.T_TINY, False): "b",
    (C.T_TINY, True): "B",
    (C.T_SHORT, False): "h",
    (C.T_SHORT, True): "H",
    (C.T_LONG, False): "i",
    (C.T_LONG, True): "I",
    (C.T_LONGLONG, False): "q",
    (C.T_LONGLONG, True): "Q",
    (C.T_FLOAT, False): "f",
    (C.T_FLOAT, True): "f",
    (C.T_DOUBLE, False): "d",
    (C.T_DOUBLE, True): "d",
}
_OLD_TEMPORAL = {C.T_TIME: "TIME", C.T_DATETIME: "DATETIME", C.T_TIMESTAMP: "TIMESTAMP"}


@dataclass(frozen=True)
class Unsupported:
    """Why a table cannot be decoded by the fast path (the caller falls back for it)."""

    table_id: TableId
    reason: str

    def __str__(self) -> str:
        return f"{self.table_id}: {self.reason}"


@dataclass
class ColumnPlan:
    """How one column is read from the row image and which Arrow array it becomes."""

    name: str
    kind: str  # storage kind, see _to_arrow
    arrow_type: pa.DataType
    column: MapColumn
    codec: str | None = None
    extra: Any = None  # ENUM members, SET name table, BINARY length, decimal scale ...


@dataclass
class TableDecoder:
    """Everything needed to turn rows events of one table structure into Arrow arrays.

    ``decode_rows(buf, pos, end)`` decodes every row image from ``pos`` to ``end`` into a
    list of tuples (one value per column, Arrow storage form, None for NULL) and returns
    ``(images, end)``. ``schema`` is the table as information_schema would describe it
    (for comparing with the discovered schema), ``image_type`` the Arrow struct of one
    row image.
    """

    table_id: TableId
    table_map: TableMap
    schema: TableSchema
    columns: list[ColumnPlan]
    image_type: pa.StructType
    decode_rows: Callable[[bytes, int, int], tuple[list[tuple], int]]
    full_bitmap: bytes
    source: str = field(repr=False, default="")
    columnar_reason: str | None = "not checked"  # None: columnar.py can decode this table

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def image_arrays(self, images: Sequence[tuple | None]) -> list[pa.Array]:
        """One Arrow array per column from row images (None = no image: all children null)."""
        if not images:
            return [pa.array([], c.arrow_type) for c in self.columns]
        null_row = (None,) * len(self.columns)
        if None in images:
            images = [null_row if img is None else img for img in images]
        rows = cast("Sequence[tuple]", images)  # no None left
        # map(itemgetter) per column: zip(*images) is quadratic-ish with 10^5 rows
        return [_to_arrow(c, list(map(itemgetter(j), rows))) for j, c in enumerate(self.columns)]

    def image_struct(self, images: Sequence[tuple | None]) -> pa.StructArray:
        """The images as one struct array; rows without an image are null structs."""
        arrays = self.image_arrays(images)
        mask = None
        if None in images:
            mask = pa.array([img is None for img in images], pa.bool_())
        return pa.StructArray.from_arrays(arrays, fields=list(self.image_type), mask=mask)


# --- planning -----------------------------------------------------------------------------


def _charset_name(c: MapColumn, charsets: Mapping[int, str]) -> str | None:
    if c.collation_id is None:
        return None
    return charsets.get(c.collation_id)


def _decode_members(tm: TableMap, c: MapColumn, codec: str) -> tuple[str, ...] | None:
    raw = tm.raw_member_bytes.get(c.index)
    if raw is None:
        return None
    try:
        return tuple(m.decode(codec) for m in raw)
    except UnicodeDecodeError:
        return None


class _SetNames(dict):
    """bitmask -> 'a,c' (members in definition order), computed once per mask."""

    def __init__(self, members: tuple[str, ...]) -> None:
        super().__init__()
        self.members = members

    def __missing__(self, mask: int) -> str:
        if mask >> len(self.members):
            raise ValueError(f"SET value {mask:#x} has bits beyond its {len(self.members)} members")
        s = ",".join(m for i, m in enumerate(self.members) if mask >> i & 1)
        self[mask] = s
        return s


def plan_table(tm: TableMap, charsets: Mapping[int, str], text_dates: bool = False) -> TableDecoder | Unsupported:
    """The decoder for ``tm``'s structure, or why there is none.

    ``charsets`` maps collation ids to character set names (the server's
    information_schema.COLLATIONS, or pymysql's table). ``text_dates``: the source's
    zero_dates is "text" (DATE/DATETIME/TIMESTAMP decoded to their text, cdc/types.py).
    """
    tid = tm.table_key
    if not tm.has_names:
        return Unsupported(tid, "the table map has no column names (binlog_row_metadata is not FULL)")
    plans: list[ColumnPlan] = []
    for c in tm.columns:
        p = _plan_column(tm, c, charsets, text_dates)
        if isinstance(p, str):
            return Unsupported(tid, f"column {c.name!r}: {p}")
        plans.append(p)
    schema = synthesize_schema(tm, charsets)
    if text_dates:
        schema = dataclasses.replace(schema, zero_dates="text")
    image_type = pa.struct([pa.field(p.name, p.arrow_type, nullable=True) for p in plans])
    try:
        fn, source = _generate(tm, plans)
    except _CannotGenerate as e:
        return Unsupported(tid, str(e))
    nbytes = (len(tm.columns) + 7) // 8
    full = bytearray(b"\xff" * nbytes)
    if len(tm.columns) % 8:
        full[-1] = (1 << (len(tm.columns) % 8)) - 1
    return TableDecoder(tid, tm, schema, plans, image_type, fn, bytes(full), source)


def _plan_column(tm: TableMap, c: MapColumn, charsets: Mapping[int, str], text_dates: bool = False) -> ColumnPlan | str:
    t = c.type
    name = c.name or f"@{c.index + 1}"
    if t in _OLD_TEMPORAL:
        return (
            f"{_OLD_TEMPORAL[t]} in the pre-MySQL-5.6 storage format (MariaDB logs its own "
            "TIME(n)/DATETIME(n)/TIMESTAMP(n) of mysql56_temporal_format=OFF under the same type "
            "code with another width, so it cannot be decoded safely). Fix: ALTER TABLE ... FORCE "
            "with mysql56_temporal_format=ON"
        )
    if t == C.T_JSON:
        if c.length not in (1, 2, 3, 4):
            return f"JSON with a {c.length}-byte length prefix"
        return ColumnPlan(name, "json", pa.string(), c)
    if t == C.T_GEOMETRY:
        if c.length not in (1, 2, 3, 4):
            return f"GEOMETRY with a {c.length}-byte length prefix"
        return ColumnPlan(name, "binary", pa.binary(), c)
    if t in (C.T_TINY, C.T_SHORT, C.T_INT24, C.T_LONG, C.T_LONGLONG) and not tm.has_signedness:
        return "the table map has no signedness metadata (binlog_row_metadata=FULL)"
    charset = _charset_name(c, charsets)
    is_char = t in (
        C.T_STRING,
        C.T_VARCHAR,
        C.T_VAR_STRING,
        C.T_BLOB,
        C.T_TINY_BLOB,
        C.T_MEDIUM_BLOB,
        C.T_LONG_BLOB,
        C.T_ENUM,
        C.T_SET,
    )
    if is_char and charset is None:
        if c.collation_id is None:
            return "the table map has no character set for it (binlog_row_metadata=FULL)"
        return f"unknown collation id {c.collation_id}"
    codec = None
    if is_char and charset != "binary":
        codec = python_codec(charset)
        if codec is None:
            return f"character set {charset!r} has no trusted Python codec"
    if t in (C.T_ENUM, C.T_SET):
        members = _decode_members(tm, c, codec or "utf-8")
        if members is None:
            return "ENUM/SET member strings are missing or not decodable"
        c.members = members
        if t == C.T_ENUM and c.length not in (1, 2):
            return f"ENUM with a {c.length}-byte index"
        if t == C.T_SET and not 1 <= c.length <= 8:
            return f"SET with a {c.length}-byte mask"
    if t == C.T_NEWDECIMAL and not (0 < c.precision <= 65 and 0 <= c.scale <= 30 and c.scale <= c.precision):
        return f"DECIMAL({c.precision},{c.scale}) is out of range"
    if t == C.T_BIT and not 1 <= c.bits <= 64:
        return f"BIT({c.bits}) is out of range"
    if t in (C.T_BLOB, C.T_TINY_BLOB, C.T_MEDIUM_BLOB, C.T_LONG_BLOB) and c.length not in (1, 2, 3, 4):
        return f"BLOB with a {c.length}-byte length prefix"
    if t in (C.T_TIME2, C.T_DATETIME2, C.T_TIMESTAMP2) and not 0 <= c.fsp <= 6:
        return f"fractional seconds precision {c.fsp}"
    col = synthesize_column(c, charset)
    if col is None:
        return f"column type {t} is not supported by the fast path"
    try:
        mp = map_column(col, "UTC", str(tm.table_key), text_dates)
    except ConfigError as e:
        return str(e)
    kind = mp.kind
    extra: Any = None
    if kind in ("text", "enum", "set"):
        if t == C.T_ENUM:
            extra = ("",) + tuple(c.members or ())
        elif t == C.T_SET:
            extra = _SetNames(tuple(c.members or ()))
        kind = "text_utf8" if codec == "utf-8" and t not in (C.T_ENUM, C.T_SET) else "text"
    elif kind == "binary":
        if t == C.T_STRING:
            extra = c.length  # BINARY(n): the binlog drops trailing 0x00, the value has n bytes
    elif kind in ("decimal", "decimal_text"):
        extra = c.scale
    elif kind == "bit":
        kind = "bit64" if pa.types.is_decimal(mp.arrow_type) else "bit"
    return ColumnPlan(name, kind, mp.arrow_type, c, codec, extra)


# --- code generation ------------------------------------------------------------------------


class _CannotGenerate(Exception):
    pass


def _length_expr(nbytes: int) -> str:
    if nbytes == 1:
        return "buf[p]"
    if nbytes == 2:
        return "(buf[p] | (buf[p + 1] << 8))"
    return f"int.from_bytes(buf[p:p + {nbytes}], 'little')"


def _decimal_expr(precision: int, scale: int, var: str) -> tuple[list[str], int]:
    """Statements reading DECIMAL(p,s) at ``p`` into ``var`` (unscaled int), and its size."""
    groups = V.decimal_groups(precision, scale)
    size = sum(b for b, _ in groups)
    bits = 8 * size
    sign = 1 << (bits - 1)
    ones = (1 << bits) - 1
    expr = ""
    shift = bits
    for nbytes, digits in groups:
        shift -= 8 * nbytes
        g = f"((r >> {shift}) & {(1 << 8 * nbytes) - 1})" if shift else f"(r & {(1 << 8 * nbytes) - 1})"
        expr = g if not expr else f"({expr}) * {10**digits} + {g}"
    expr = expr or "0"
    lines = [
        f"r = int.from_bytes(buf[p:p + {size}], 'big')",
        f"if r & {sign}:",
        f"    r ^= {sign}",
        f"    {var} = {expr}",
        "else:",
        f"    r ^= {sign ^ ones}",
        f"    {var} = -({expr})",
        f"p += {size}",
    ]
    return lines, size


def _frac_lines(fsp: int, at: int) -> tuple[str, int]:
    """Expression of the fraction (in microseconds) stored at ``p + at``, and its byte count."""
    n = V.frac_bytes(fsp)
    unit = V.frac_unit(fsp)
    if n == 0:
        return "0", 0
    if n == 1:
        e = f"buf[p + {at}]"
    elif n == 2:
        e = f"((buf[p + {at}] << 8) | buf[p + {at + 1}])"
    else:
        e = f"int.from_bytes(buf[p + {at}:p + {at + n}], 'big')"
    return (f"{e} * {unit}" if unit != 1 else e), n


def _column_lines(j: int, cp: ColumnPlan, g: dict[str, Any]) -> list[str]:
    """Statements that read column ``j`` at ``p`` into ``v{j}`` and advance ``p`` (non-NULL)."""
    c = cp.column
    t = c.type
    v = f"v{j}"
    if t == C.T_INT24:
        if c.unsigned:
            return [f"{v} = buf[p] | (buf[p + 1] << 8) | (buf[p + 2] << 16)", "p += 3"]
        return [f"{v} = int.from_bytes(buf[p:p + 3], 'little', signed=True)", "p += 3"]
    if (t, c.unsigned) in _STRUCT_CODES:
        code = _STRUCT_CODES[(t, c.unsigned)]
        if code == "f" and c.length not in (0, 4) or code == "d" and c.length not in (0, 8):
            raise _CannotGenerate(f"column {cp.name!r}: float of {c.length} bytes")
        s = struct.Struct("<" + code)
        g[f"U{j}"] = s.unpack_from
        return [f"{v}, = U{j}(buf, p)", f"p += {s.size}"]
    if t == C.T_YEAR:
        return [f"{v} = buf[p]", f"{v} = {v} + 1900 if {v} else 0", "p += 1"]
    if t == C.T_NEWDECIMAL:
        lines, _ = _decimal_expr(c.precision, c.scale, v)
        if cp.kind == "decimal_text":
            g["DTEXT"] = V.decimal_text
            lines.append(f"{v} = DTEXT({v}, {c.scale})")
        return lines
    if cp.kind == "date_text":
        g["RDATET"] = V.read_date_text
        return [f"{v} = RDATET(buf, p)", "p += 3"]
    if cp.kind == "datetime_text":
        g["RDTT"] = V.read_datetime2_text
        return [f"{v} = RDTT(buf, p, {c.fsp})", f"p += {5 + V.frac_bytes(c.fsp)}"]
    if cp.kind == "timestamp_text":
        g["RTST"] = V.read_timestamp2_text
        return [f"{v} = RTST(buf, p, {c.fsp})", f"p += {4 + V.frac_bytes(c.fsp)}"]
    if t in (C.T_DATE, C.T_NEWDATE):
        g["RDATE"] = V.read_date
        return [f"{v} = RDATE(buf, p)", "p += 3"]
    if t == C.T_DATETIME2:
        g["DAYS"] = V.DAYS
        g["SECS"] = V.SECONDS
        frac, n = _frac_lines(c.fsp, 5)
        return [
            f"r = int.from_bytes(buf[p:p + 5], 'big') - {V.DATETIMEF_INT_OFS}",
            "d_ = DAYS[r >> 17]",
            "s_ = SECS[r & 131071]",
            f"{v} = None if d_ is None or s_ is None else (d_ * 86400 + s_) * 1000000 + {frac}",
            f"p += {5 + n}",
        ]
    if t == C.T_TIMESTAMP2:
        frac, n = _frac_lines(c.fsp, 4)
        return [
            "s_ = int.from_bytes(buf[p:p + 4], 'big')",
            f"f_ = {frac}",
            f"{v} = s_ * 1000000 + f_ if s_ or f_ else None",
            f"p += {4 + n}",
        ]
    if t == C.T_TIME2:
        g["RTIME2"] = V.read_time2
        return [f"{v} = RTIME2(buf, p, {c.fsp})", f"p += {3 + V.frac_bytes(c.fsp)}"]
    if t == C.T_BIT:
        return [f"{v} = int.from_bytes(buf[p:p + {c.length}], 'big')", f"p += {c.length}"]
    if t == C.T_ENUM:
        g[f"E{j}"] = cp.extra
        return [f"{v} = E{j}[{_length_expr(c.length)}]", f"p += {c.length}"]
    if t == C.T_SET:
        g[f"S{j}"] = cp.extra
        return [f"{v} = S{j}[int.from_bytes(buf[p:p + {c.length}], 'little')]", f"p += {c.length}"]
    # length-prefixed: CHAR/BINARY, VARCHAR/VARBINARY, BLOB/TEXT, GEOMETRY
    if t in (C.T_STRING, C.T_VARCHAR, C.T_VAR_STRING):
        lp = 2 if c.length > 255 else 1
    elif t in (C.T_BLOB, C.T_TINY_BLOB, C.T_MEDIUM_BLOB, C.T_LONG_BLOB, C.T_GEOMETRY, C.T_JSON):
        lp = c.length
    else:
        raise _CannotGenerate(f"column {cp.name!r}: no reader for column type {t}")
    lines = [f"n_ = {_length_expr(lp)}", f"{v} = buf[p + {lp}:p + {lp} + n_]", f"p += {lp} + n_"]
    if cp.kind == "json":
        g["JSONB"] = jsonb_text
        lines.insert(2, f"{v} = JSONB({v})")
    elif cp.kind == "text":
        lines.insert(2, f"{v} = {v}.decode({cp.codec!r})")
    elif cp.kind == "binary" and cp.extra:
        lines.insert(2, f"if n_ < {cp.extra}: {v} = {v}.ljust({cp.extra}, b'\\x00')")
    return lines


def _generate(tm: TableMap, plans: list[ColumnPlan]) -> tuple[Callable, str]:
    """Source and function ``decode_rows(buf, p, end) -> (images, end)`` for this structure."""
    g: dict[str, Any] = {}
    n = len(plans)
    nb = (n + 7) // 8
    per_col = [_column_lines(j, cp, g) for j, cp in enumerate(plans)]

    # Fast path (no NULL): merge runs of single struct reads into one precompiled struct.
    fast: list[str] = []
    run: list[tuple[int, str]] = []

    def flush_run() -> None:
        if not run:
            return
        if len(run) == 1:
            j, code = run[0]
            fast.extend(per_col[j])
        else:
            s = struct.Struct("<" + "".join(code for _, code in run))
            key = f"R{run[0][0]}"
            g[key] = s.unpack_from
            fast.append(", ".join(f"v{j}" for j, _ in run) + f", = {key}(buf, p)")
            fast.append(f"p += {s.size}")
        run.clear()

    for j, cp in enumerate(plans):
        code = _STRUCT_CODES.get((cp.column.type, cp.column.unsigned)) if cp.column.type != C.T_INT24 else None
        if code is not None and per_col[j][0].startswith(f"v{j}, = U{j}"):
            run.append((j, code))
        else:
            flush_run()
            fast.extend(per_col[j])
    flush_run()

    slow: list[str] = []
    for j in range(n):
        slow.append(f"if nb & {1 << j}:")
        slow.append(f"    v{j} = None")
        slow.append("else:")
        slow.extend("    " + line for line in per_col[j])

    row = "(" + "".join(f"v{j}, " for j in range(n)) + ")"
    src = ["def decode_rows(buf, p, end):", "    out = []", "    append = out.append", "    while p < end:"]
    if nb == 1:
        src.append("        nb = buf[p]")
    else:
        src.append(f"        nb = int.from_bytes(buf[p:p + {nb}], 'little')")
    src.append(f"        p += {nb}")
    src.append("        if not nb:")
    src.extend("            " + line for line in fast)
    src.append("        else:")
    src.extend("            " + line for line in slow)
    src.append(f"        append({row})")
    src.append("    return out, p")
    source = "\n".join(src) + "\n"
    compiled = compile(source, f"<fastbinlog decoder {tm.database}.{tm.table}>", "exec")
    exec(compiled, g)
    return g["decode_rows"], source


# --- Arrow ----------------------------------------------------------------------------------


def _validity(vals: list) -> tuple[pa.Buffer | None, int, np.ndarray | None]:
    nulls = [v is None for v in vals]
    k = sum(nulls)
    if not k:
        return None, 0, None
    mask = np.array(nulls, dtype=bool)
    return pa.py_buffer(np.packbits(~mask, bitorder="little")), k, mask


def _decimal128(vals: list, typ: pa.DataType) -> pa.Array:
    """decimal128 from unscaled Python ints (None = NULL), built from buffers: no Decimal objects."""
    n = len(vals)
    validity, k, mask = _validity(vals)
    filled = [0 if v is None else v for v in vals] if k else vals
    try:
        lo = np.array(filled, dtype=np.int64)
        data = np.empty((n, 2), dtype=np.int64)
        data[:, 0] = lo
        data[:, 1] = lo >> 63
        buf = pa.py_buffer(data)
    except OverflowError:
        buf = pa.py_buffer(b"".join(v.to_bytes(16, "little", signed=True) for v in filled))
    return pa.Array.from_buffers(typ, n, [validity, buf], null_count=k)


def _to_arrow(cp: ColumnPlan, vals: list) -> pa.Array:
    k = cp.kind
    t = cp.arrow_type
    if k in (
        "int",
        "float",
        "double",
        "datetime",
        "timestamp",
        "date",
        "time",
        "year",
        "bit",
        "text",
        "binary",
        "date_text",
        "datetime_text",
        "timestamp_text",
    ):
        return pa.array(vals, t)
    if k in ("decimal", "uint64", "bit64"):
        return _decimal128(vals, t)
    if k == "text_utf8":
        return pa.array(vals, pa.binary()).cast(pa.string())
    if k in ("decimal_text", "json"):
        return pa.array(vals, pa.string())
    raise AssertionError(f"no Arrow conversion for kind {k!r}")
