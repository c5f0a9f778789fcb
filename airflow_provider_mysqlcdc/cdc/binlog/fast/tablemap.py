"""TABLE_MAP events: the column types, metadata and (binlog_row_metadata=FULL) names of a table.

A rows event carries no schema; the TABLE_MAP event before it (same transaction) does:
column types, per-type metadata (lengths, precision, fsp ...), nullability and, with
``binlog_row_metadata=FULL``, optional metadata in type-length-value blocks: column names,
signedness, character sets, ENUM/SET member strings, primary key.

Why the parsed map is keyed by its raw bytes (``TableMap.key``): table ids are in-memory
numbers of the server. After a restart, or when a table is evicted from the table cache,
one id can name another table or the same table with another structure. The bytes from
the database name to the end of the optional metadata are the structure itself, so two
maps with equal bytes decode rows identically whatever their ids, and a changed table
never reuses a stale decoder.

From the map we also synthesize ``model.Column`` objects as information_schema would
describe the columns, so that ``cdc.types.map_column`` -- the one place that decides a
column's canonical Arrow type -- decides it for the fast path too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ...errors import RESTART_OR_REPORT
from ...model import Column, TableId, TableSchema
from . import constants as C
from .errors import ProtocolError

# Columns with a bit in the SIGNEDNESS field. YEAR counts (verified on MariaDB 10.11: its
# field is an unsigned TINY underneath); leaving it out shifts the sign of every later
# integer column.
_NUMERIC_TYPES = frozenset(
    {C.T_TINY, C.T_SHORT, C.T_INT24, C.T_LONG, C.T_LONGLONG, C.T_NEWDECIMAL, C.T_FLOAT, C.T_DOUBLE, C.T_YEAR}
)
_CHARACTER_TYPES = frozenset(
    {C.T_STRING, C.T_VAR_STRING, C.T_VARCHAR, C.T_BLOB, C.T_TINY_BLOB, C.T_MEDIUM_BLOB, C.T_LONG_BLOB}
)


def read_lenenc(buf: bytes, pos: int) -> tuple[int, int]:
    """A length-encoded integer at ``pos``: (value, next position)."""
    b = buf[pos]
    if b < 0xFB:
        return b, pos + 1
    if b == 0xFC:
        return int.from_bytes(buf[pos + 1 : pos + 3], "little"), pos + 3
    if b == 0xFD:
        return int.from_bytes(buf[pos + 1 : pos + 4], "little"), pos + 4
    if b == 0xFE:
        return int.from_bytes(buf[pos + 1 : pos + 9], "little"), pos + 9
    raise ProtocolError(f"invalid length-encoded integer prefix {b:#x} at {pos}. {RESTART_OR_REPORT}")


@dataclass
class MapColumn:
    """One column as the table map describes it.

    ``type`` is the binlog type, with STRING's real type (ENUM, SET) resolved. ``length``
    is the byte length for CHAR/BINARY/VARCHAR, the length-prefix size for BLOB-likes,
    the pack length for ENUM/SET and FLOAT/DOUBLE. ``collation_id`` is None where the map
    has no charset for the column (no FULL metadata, or a non-character column).
    """

    index: int
    type: int
    nullable: bool
    length: int = 0
    precision: int = 0
    scale: int = 0
    fsp: int = 0
    bits: int = 0
    name: str | None = None
    unsigned: bool = False
    collation_id: int | None = None
    members: tuple[str, ...] | None = None  # ENUM/SET members, definition order
    geometry_type: int | None = None


@dataclass
class TableMap:
    """A parsed TABLE_MAP event."""

    table_id: int
    database: str
    table: str
    columns: list[MapColumn]
    key: bytes  # the structure bytes (see the module docstring)
    has_names: bool = False
    has_signedness: bool = False
    has_charsets: bool = False
    primary_key: tuple[int, ...] = ()
    unknown_metadata: tuple[int, ...] = ()
    raw_member_bytes: dict[int, tuple[bytes, ...]] = field(default_factory=dict)

    @property
    def table_key(self) -> TableId:
        return TableId(self.database, self.table)


def _parse_type_meta(types: bytes, meta: bytes, null_bits: bytes) -> list[MapColumn]:
    cols: list[MapColumn] = []
    p = 0
    for i, t in enumerate(types):
        c = MapColumn(index=i, type=t, nullable=bool(null_bits[i >> 3] & (1 << (i & 7))))
        n = C.META_LEN.get(t, 0)
        m = meta[p : p + n]
        if len(m) != n:
            raise ProtocolError(f"table map metadata ends early at column {i} (type {t}). {RESTART_OR_REPORT}")
        p += n
        if t in (C.T_VARCHAR, C.T_VAR_STRING):
            c.length = m[0] | (m[1] << 8)
        elif t == C.T_STRING:
            b0, b1 = m[0], m[1]
            if (b0 & 0x30) != 0x30:  # length > 255: two length bits hidden in the type byte
                c.length = b1 | (((b0 & 0x30) ^ 0x30) << 4)
                b0 |= 0x30
            else:
                c.length = b1
            if b0 in (C.T_ENUM, C.T_SET):
                c.type = b0
                c.length = b1
            elif b0 != C.T_STRING:
                c.type = b0  # another real type in STRING clothing: left to the decoder to refuse
        elif t in (C.T_ENUM, C.T_SET):
            c.length = m[1]
        elif t in (C.T_FLOAT, C.T_DOUBLE):
            c.length = m[0]
        elif t in (
            C.T_BLOB,
            C.T_TINY_BLOB,
            C.T_MEDIUM_BLOB,
            C.T_LONG_BLOB,
            C.T_GEOMETRY,
            C.T_JSON,
            C.T_VECTOR,
            C.T_TYPED_ARRAY,
        ):
            c.length = m[0]
        elif t == C.T_NEWDECIMAL:
            c.precision, c.scale = m[0], m[1]
        elif t == C.T_BIT:
            c.bits = m[1] * 8 + m[0]
            c.length = m[1] + (1 if m[0] else 0)
        elif t in (C.T_TIMESTAMP2, C.T_DATETIME2, C.T_TIME2):
            c.fsp = m[0]
        cols.append(c)
    if p != len(meta):
        raise ProtocolError(
            f"table map metadata has {len(meta) - p} unread bytes: unknown column type layout. {RESTART_OR_REPORT}"
        )
    return cols


def _bool_list(data: bytes, count: int) -> list[bool]:
    """A bitmap of ``count`` flags, most significant bit first (the optional-metadata layout)."""
    return [bool(data[i >> 3] & (0x80 >> (i & 7))) for i in range(count)]


def _strings(data: bytes) -> list[bytes]:
    out = []
    p = 0
    while p < len(data):
        n, p = read_lenenc(data, p)
        out.append(bytes(data[p : p + n]))
        p += n
    return out


def _ints(data: bytes) -> list[int]:
    out = []
    p = 0
    while p < len(data):
        v, p = read_lenenc(data, p)
        out.append(v)
    return out


def _charsets(data: bytes, default: bool) -> tuple[int | None, dict[int, int] | list[int]]:
    if default:
        ints = _ints(data)
        return ints[0], {ints[i]: ints[i + 1] for i in range(1, len(ints) - 1, 2)}
    return None, _ints(data)


def _member_lists(data: bytes) -> list[tuple[bytes, ...]]:
    out = []
    p = 0
    while p < len(data):
        count, p = read_lenenc(data, p)
        members = []
        for _ in range(count):
            n, p = read_lenenc(data, p)
            members.append(bytes(data[p : p + n]))
            p += n
        out.append(tuple(members))
    return out


def _assign_charsets(which: list[MapColumn], default: int | None, per_col: dict[int, int] | list[int]) -> None:
    """Collation ids of the columns a charset field covers: a default plus exceptions, or one each."""
    for k, c in enumerate(which):
        if isinstance(per_col, dict):
            c.collation_id = per_col.get(k, default)
        elif k < len(per_col):
            c.collation_id = per_col[k]


def parse_table_map(
    event: bytes, table_id_len: int = 6, post_header_len: int = 8, checksum_len: int = 4, is_mariadb: bool = True
) -> TableMap:
    """Parse one TABLE_MAP event (header, body and checksum, as the dump delivers it)."""
    h = C.EVENT_HEADER_LEN
    end = len(event) - checksum_len
    table_id = int.from_bytes(event[h : h + table_id_len], "little")
    p = h + post_header_len
    key_start = p
    db_len = event[p]
    database = bytes(event[p + 1 : p + 1 + db_len]).decode("utf-8")
    p += 1 + db_len + 1
    t_len = event[p]
    table = bytes(event[p + 1 : p + 1 + t_len]).decode("utf-8")
    p += 1 + t_len + 1
    ncols, p = read_lenenc(event, p)
    types = bytes(event[p : p + ncols])
    p += ncols
    meta_len, p = read_lenenc(event, p)
    meta = bytes(event[p : p + meta_len])
    p += meta_len
    nb = (ncols + 7) // 8
    null_bits = bytes(event[p : p + nb])
    p += nb
    cols = _parse_type_meta(types, meta, null_bits)
    tm = TableMap(table_id, database, table, cols, bytes(event[key_start:end]))

    numeric = [c for c in cols if c.type in _NUMERIC_TYPES]
    # MariaDB counts GEOMETRY among the character columns (it derives from BLOB), MySQL does not.
    character = [c for c in cols if c.type in _CHARACTER_TYPES or (is_mariadb and c.type == C.T_GEOMETRY)]
    enum_set = [c for c in cols if c.type in (C.T_ENUM, C.T_SET)]
    unknown: list[int] = []
    enum_members: list[tuple[bytes, ...]] = []
    set_members: list[tuple[bytes, ...]] = []
    while p < end:
        kind = event[p]
        length, p = read_lenenc(event, p + 1)
        data = bytes(event[p : p + length])
        if len(data) != length:
            raise ProtocolError(
                f"table map of {database}.{table}: optional metadata field {kind} is cut short. {RESTART_OR_REPORT}"
            )
        p += length
        if kind == C.OM_SIGNEDNESS:
            for c, u in zip(numeric, _bool_list(data, len(numeric))):
                c.unsigned = u
            tm.has_signedness = True
        elif kind in (C.OM_DEFAULT_CHARSET, C.OM_COLUMN_CHARSET):
            default, per = _charsets(data, kind == C.OM_DEFAULT_CHARSET)
            _assign_charsets(character, default, per)
            tm.has_charsets = True
        elif kind in (C.OM_ENUM_AND_SET_DEFAULT_CHARSET, C.OM_ENUM_AND_SET_COLUMN_CHARSET):
            default, per = _charsets(data, kind == C.OM_ENUM_AND_SET_DEFAULT_CHARSET)
            _assign_charsets(enum_set, default, per)
        elif kind == C.OM_COLUMN_NAME:
            names = _strings(data)
            if len(names) != ncols:
                raise ProtocolError(
                    f"table map of {database}.{table}: {len(names)} names for {ncols} columns. {RESTART_OR_REPORT}"
                )
            for c, n in zip(cols, names):
                c.name = n.decode("utf-8")
            tm.has_names = True
        elif kind == C.OM_SET_STR_VALUE:
            set_members = _member_lists(data)
        elif kind == C.OM_ENUM_STR_VALUE:
            enum_members = _member_lists(data)
        elif kind == C.OM_GEOMETRY_TYPE:
            for c, g in zip([c for c in cols if c.type == C.T_GEOMETRY], _ints(data)):
                c.geometry_type = g
        elif kind == C.OM_SIMPLE_PRIMARY_KEY:
            tm.primary_key = tuple(_ints(data))
        elif kind == C.OM_PRIMARY_KEY_WITH_PREFIX:
            tm.primary_key = tuple(_ints(data)[0::2])
        else:  # COLUMN_VISIBILITY and future fields: not needed to decode rows
            unknown.append(kind)
    tm.unknown_metadata = tuple(unknown)
    for c, m in zip([c for c in cols if c.type == C.T_ENUM], enum_members):
        tm.raw_member_bytes[c.index] = m
    for c, m in zip([c for c in cols if c.type == C.T_SET], set_members):
        tm.raw_member_bytes[c.index] = m
    return tm


def table_map_table_id(event: bytes, table_id_len: int = 6) -> int:
    h = C.EVENT_HEADER_LEN
    return int.from_bytes(event[h : h + table_id_len], "little")


def table_map_names(event: bytes, post_header_len: int = 8) -> tuple[str, str]:
    """(database, table) of a TABLE_MAP event without parsing the rest: the capture filter."""
    p = C.EVENT_HEADER_LEN + post_header_len
    db_len = event[p]
    database = bytes(event[p + 1 : p + 1 + db_len]).decode("utf-8")
    p += 1 + db_len + 1
    t_len = event[p]
    return database, bytes(event[p + 1 : p + 1 + t_len]).decode("utf-8")


# --- synthesized information_schema columns ----------------------------------------------

_INT_NAMES = {
    C.T_TINY: "tinyint",
    C.T_SHORT: "smallint",
    C.T_INT24: "mediumint",
    C.T_LONG: "int",
    C.T_LONGLONG: "bigint",
}
_BLOB_NAMES = {
    1: ("tinyblob", "tinytext"),
    2: ("blob", "text"),
    3: ("mediumblob", "mediumtext"),
    4: ("longblob", "longtext"),
}


def _quote_member(m: str) -> str:
    return "'" + m.replace("\\", "\\\\").replace("'", "''") + "'"


def synthesize_column(c: MapColumn, charset: str | None) -> Column | None:
    """The information_schema view of one map column, or None if the type has no such view.

    Only what ``cdc.types.map_column`` reads is filled in. ``charset`` is the column's
    character set name (``binary`` for binary strings), None if unknown.
    """
    name = c.name if c.name is not None else f"@{c.index + 1}"
    t = c.type
    kw: dict = dict(name=name, ordinal=c.index + 1, nullable=c.nullable)
    if t in _INT_NAMES:
        dt = _INT_NAMES[t]
        return Column(data_type=dt, column_type=dt + (" unsigned" if c.unsigned else ""), **kw)
    if t == C.T_NEWDECIMAL:
        return Column(
            data_type="decimal",
            column_type=f"decimal({c.precision},{c.scale})",
            numeric_precision=c.precision,
            numeric_scale=c.scale,
            **kw,
        )
    if t == C.T_FLOAT:
        return Column(data_type="float", column_type="float", **kw)
    if t == C.T_DOUBLE:
        return Column(data_type="double", column_type="double", **kw)
    if t == C.T_YEAR:
        return Column(data_type="year", column_type="year(4)", **kw)
    if t in (C.T_DATE, C.T_NEWDATE):
        return Column(data_type="date", column_type="date", **kw)
    if t in (C.T_TIME, C.T_TIME2):
        return Column(data_type="time", column_type="time", datetime_precision=c.fsp, **kw)
    if t in (C.T_DATETIME, C.T_DATETIME2):
        return Column(data_type="datetime", column_type="datetime", datetime_precision=c.fsp, **kw)
    if t in (C.T_TIMESTAMP, C.T_TIMESTAMP2):
        return Column(data_type="timestamp", column_type="timestamp", datetime_precision=c.fsp, **kw)
    if t == C.T_BIT:
        return Column(data_type="bit", column_type=f"bit({c.bits})", numeric_precision=c.bits, **kw)
    if t in (C.T_ENUM, C.T_SET):
        dt = "enum" if t == C.T_ENUM else "set"
        members = ",".join(_quote_member(m) for m in (c.members or ()))
        return Column(data_type=dt, column_type=f"{dt}({members})", charset=charset, **kw)
    if t in (C.T_VARCHAR, C.T_VAR_STRING):
        dt = "varbinary" if charset == "binary" else "varchar"
        return Column(data_type=dt, column_type=dt, charset=charset, char_max_length=c.length, **kw)
    if t == C.T_STRING:
        dt = "binary" if charset == "binary" else "char"
        # information_schema counts characters; for BINARY (the only user of it here) bytes.
        return Column(data_type=dt, column_type=dt, charset=charset, char_max_length=c.length, **kw)
    if t == C.T_JSON:  # MySQL's binary JSON (MariaDB's JSON is a LONGTEXT)
        return Column(data_type="json", column_type="json", **kw)
    if t in (C.T_BLOB, C.T_TINY_BLOB, C.T_MEDIUM_BLOB, C.T_LONG_BLOB) and c.length in _BLOB_NAMES:
        dt = _BLOB_NAMES[c.length][0 if charset == "binary" else 1]
        return Column(data_type=dt, column_type=dt, charset=charset, **kw)
    return None


def synthesize_schema(tm: TableMap, charsets: Mapping[int, str]) -> TableSchema:
    """A ``TableSchema`` as information_schema would give it (names, types, keys) for ``tm``.

    Columns whose type has no information_schema equivalent here (GEOMETRY, VECTOR) are
    left out; the decoder reports them separately.
    """
    cols = []
    for c in tm.columns:
        charset = charsets.get(c.collation_id) if c.collation_id is not None else None
        col = synthesize_column(c, charset)
        if col is not None:
            cols.append(col)
    names = tuple(c.name for c in cols)
    pk = tuple(tm.columns[i].name or f"@{i + 1}" for i in tm.primary_key)
    return TableSchema(tm.table_key, tuple(cols), pk, pk, pk or names)
