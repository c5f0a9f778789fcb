"""Type mapping MySQL/MariaDB -> Arrow -> Spark, identical on the snapshot and binlog paths.

A row reaches the sink either through Spark's JDBC reader (snapshot chunks: MariaDB
Connector/J, text protocol) or through python-mysql-replication's row events (backfill
corrections and the stream). Both must yield the same values, so every column gets one
``ColumnMapping`` that fixes (1) the SQL expression the snapshot SELECT uses, (2) the type
Spark's JDBC reader reads that expression as (``jdbc_read_type``), (3) the Spark SQL that
turns it into the final type (``finalize_sql``), (4) the final Arrow type (the Spark type
follows from it), and (5) how :func:`row_normalizer` turns the library's raw value into
the canonical Python value.

Why the SELECT often wraps the column: the JDBC driver builds ``java.sql.Timestamp`` /
``Date`` in the JVM's default zone (a DATETIME inside a DST gap moves by an hour), and the
server prints FLOAT with 6 significant digits (``1.23457``), losing bits. So temporal
values travel as zone-free numbers or ISO text and FLOAT travels as the exact DOUBLE.

Canonical value per type (what ``row_normalizer`` returns; ``collect()`` of the final
DataFrame gives the same values except where noted)::

    MySQL type                       Arrow / Spark              canonical Python value
    -------------------------------  -------------------------  ------------------------------------
    TINYINT                          int8 / ByteType            int (TINYINT(1) too: 5 stays 5)
    TINYINT UNSIGNED, SMALLINT       int16 / ShortType          int
    SMALLINT UNSIGNED, MEDIUMINT(U)  int32 / IntegerType        int
    INT                              int32 / IntegerType        int
    INT UNSIGNED, BIGINT             int64 / LongType           int
    BIGINT UNSIGNED                  decimal(20,0) / Decimal    decimal.Decimal, scale 0 (no wrap)
    DECIMAL(p,s), p <= 38            decimal(p,s) / Decimal     decimal.Decimal with exactly s digits
    DECIMAL(p,s), p > 38             string / StringType        str as the server prints it
                                                                (e.g. '-1.500', '0.000001', '12')
    FLOAT                            float32 / FloatType        float (the exact float32 value)
    DOUBLE                           float64 / DoubleType       float
    DATETIME(fsp)                    timestamp[us] / TIMESTAMP_NTZ  naive datetime (wall clock)
    TIMESTAMP(fsp)                   timestamp[us, UTC] / TIMESTAMP datetime with tzinfo=UTC
                                                                (collect() gives the same instant
                                                                as a naive local-time datetime)
    DATE                             date32 / DateType          datetime.date
    TIME(fsp)                        int64 / LongType           int microseconds, signed
                                                                (-838:59:59 -> -3020399000000)
    YEAR                             int16 / ShortType          int (YEAR '0000' -> 0)
    BIT(n), n <= 63                  int64 / LongType           int
    BIT(64)                          decimal(20,0) / Decimal    decimal.Decimal, scale 0
    CHAR/VARCHAR/*TEXT, JSON         string / StringType        str (CHAR without trailing spaces,
                                                                as the server returns it)
    ENUM                             string / StringType        str ('' for the invalid value)
    SET                              string / StringType        str, members comma-joined in
                                                                definition order ('' = empty set)
    BINARY(n)                        binary / BinaryType        bytes, padded with 0x00 to n
    VARBINARY, *BLOB                 binary / BinaryType        bytes

NULL stays NULL (``None``) everywhere. Zero and invalid dates ('0000-00-00',
'2020-00-15 ...', TIMESTAMP '0000-00-00 00:00:00') become NULL on both paths: the
library returns None for them (TIMESTAMP: epoch 0) and the SELECT expressions yield NULL
for them, so both paths agree (Debezium and Flink CDC do the same for nullable columns).
Spark fields are therefore all nullable.

With the source option ``zero_dates: text`` (a table's ``TableSchema.zero_dates``) DATE,
DATETIME and TIMESTAMP columns are captured as text instead, so nothing is lost:
``YYYY-MM-DD``, ``YYYY-MM-DD HH:MM:SS`` plus ``.`` and the column's fsp digits, TIMESTAMP in
UTC; a zero or invalid date keeps its literal (``0000-00-00 00:00:00``, ``2020-00-15``).
Fixed width, so text order is time order. The snapshot reads the server's own text (CAST AS
CHAR; TIMESTAMP from its epoch), the binlog decoders format the stored fields the same way.

JSON: MariaDB stores JSON as LONGTEXT (information_schema says ``longtext``), so it is
exact text on both paths. MySQL's binary JSON is decoded by the library into Python
objects; we serialize them the way MySQL prints JSON (``", "`` and ``": "`` separators,
non-ASCII kept) -- best effort: doubles and the key order of objects may print
differently from the server.

Library quirks compensated here (python-mysql-replication 1.0.17):

* TIME(fsp>0) negative values with a fraction decode wrongly ('-12:00:00.000001' comes
  back as -43200.999999 s): the stored integer part borrows one second, which the library
  does not undo. We undo it.
* YEAR '0000' decodes as 1900 (it adds 1900 to the stored 0). We map 1900 back to 0
  (1900 is not a valid YEAR value).
* BIT decodes as a '0'/'1' string; SET as a Python set, and the empty set as None
  (indistinguishable from NULL unless the row's ``none_sources`` is passed in).
* BINARY(n) arrives with trailing 0x00 stripped, and empty binary values arrive as ''.
* TIMESTAMP arrives as a naive UTC datetime (``utcfromtimestamp``), independent of the
  process zone; it needs no server zone (binlog and ``UNIX_TIMESTAMP()`` are both epoch).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
import zoneinfo
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import pyarrow as pa

from .errors import RESTART_OR_REPORT, ConfigError, SchemaMismatchError
from .model import Column, TableSchema, quote_ident
from .sql import python_codec

# Spark's DecimalType holds at most 38 digits.
MAX_EXACT_DECIMAL_PRECISION = 38
_UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1)
_US = 1_000_000

_TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json"}
_BINARY_TYPES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_INT_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}


@dataclass(frozen=True)
class ColumnMapping:
    """How one column travels: snapshot SELECT expression, JDBC read type, final type.

    ``kind`` names the conversion rule (``int``, ``uint64``, ``decimal``, ``decimal_text``,
    ``float``, ``double``, ``datetime``, ``timestamp``, ``date``, ``time``, ``year``,
    ``bit``, ``text``, ``enum``, ``set``, ``binary``). ``jdbc_read_type`` is the Spark DDL
    type the ``customSchema`` option reads ``select_sql`` as; ``finalize_sql`` (Spark SQL,
    ``{c}`` stands for the quoted column) turns that into ``arrow_type``'s Spark
    equivalent, or is None when the read type already is the final type.
    """

    column: Column
    kind: str
    arrow_type: pa.DataType
    select_sql: str
    jdbc_read_type: str
    finalize_sql: str | None = None
    server_time_zone: str = "UTC"
    set_members: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.column.name


# --- mapping ------------------------------------------------------------------------------


def _unsupported(table: str, column: Column, why: str = "") -> ConfigError:
    extra = f" ({why})" if why else ""
    return ConfigError(
        f"table {table}, column {column.name!r}: type {column.column_type!r} is not supported"
        f"{extra}. Fix: leave the table out (exclude: ['{table}']), or change the column's type to a "
        "supported one (integers, DECIMAL, FLOAT/DOUBLE, DATE/DATETIME/TIMESTAMP/TIME/YEAR, "
        "BIT, CHAR/VARCHAR/TEXT/JSON, ENUM/SET, BINARY/VARBINARY/BLOB)."
    )


def _check_time_zone(server_time_zone: str) -> str:
    """Accept an IANA name, 'UTC'/'SYSTEM'-free offsets like '+00:00'; fail clearly otherwise."""
    tz = (server_time_zone or "").strip()
    if re.fullmatch(r"[+-](0\d|1[0-4]):[0-5]\d", tz):
        return tz
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"server_time_zone: found {server_time_zone!r}, need an IANA zone name (e.g. 'UTC', "
            "'Europe/Berlin') or an offset like '+00:00'. Fix: set it to the server's time_zone."
        ) from None
    return tz


def _set_members(column_type: str) -> tuple[str, ...]:
    """Members of ``enum('a','b')`` / ``set('a','b')`` in definition order ('' quotes undone)."""
    inner = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    return tuple(m.replace("''", "'").replace("\\\\", "\\") for m in re.findall(r"'((?:[^']|'')*)'", inner))


def _has_zero_parts(q: str) -> str:
    """SQL condition true only for real dates: zero/invalid dates must read as NULL (as in binlog)."""
    return f"YEAR({q}) > 0 AND MONTH({q}) > 0 AND DAYOFMONTH({q}) > 0"


def text_date_sql(q: str, data_type: str, fsp: int) -> str:
    """The SELECT expression of a DATE/DATETIME/TIMESTAMP column captured as text (zero_dates: text)."""
    if data_type != "timestamp":
        return f"CAST({q} AS CHAR)"  # the server's own literal, zero and invalid dates included
    # From the stored epoch (no session or JVM zone), formatted in UTC; epoch 0 is the zero value.
    width = 19 if fsp == 0 else 20 + fsp
    zero = "0000-00-00 00:00:00" + ("." + "0" * fsp if fsp else "")
    return (
        f"IF(UNIX_TIMESTAMP({q}) = 0, '{zero}', LEFT(DATE_FORMAT(DATE_ADD(TIMESTAMP '1970-01-01 00:00:00', "
        f"INTERVAL CAST(UNIX_TIMESTAMP({q}) * 1000000 AS SIGNED) MICROSECOND), '%Y-%m-%d %H:%i:%s.%f'), {width}))"
    )


def map_column(column: Column, server_time_zone: str, table: str = "?", text_dates: bool = False) -> ColumnMapping:
    """The mapping of one column; ConfigError naming table, column and type if unsupported.
    ``text_dates``: the table's ``zero_dates`` is "text" (DATE/DATETIME/TIMESTAMP as text)."""
    tz = _check_time_zone(server_time_zone)
    t = (column.data_type or "").lower()
    q = quote_ident(column.name)

    def m(
        kind: str, arrow: pa.DataType, read: str, select: str = q, fin: str | None = None, members: tuple[str, ...] = ()
    ) -> ColumnMapping:
        return ColumnMapping(column, kind, arrow, select, read, fin, tz, members)

    if t in _INT_BITS:
        bits = _INT_BITS[t] + (1 if column.unsigned else 0)
        if bits > 64:
            return m("uint64", pa.decimal128(20, 0), "DECIMAL(20,0)")
        for width, arrow, read in (
            (8, pa.int8(), "BYTE"),
            (16, pa.int16(), "SHORT"),
            (32, pa.int32(), "INT"),
            (64, pa.int64(), "BIGINT"),
        ):
            if bits <= width:
                return m("int", arrow, read)
    if t in ("decimal", "numeric"):
        p, s = column.numeric_precision, column.numeric_scale
        if p is None or s is None:
            raise _unsupported(table, column, "DECIMAL without numeric_precision/numeric_scale")
        if p <= MAX_EXACT_DECIMAL_PRECISION:
            return m("decimal", pa.decimal128(p, s), f"DECIMAL({p},{s})")
        # As text from the server: the driver's getString() would print BigDecimal ('-1E-30').
        return m("decimal_text", pa.string(), "STRING", f"CAST({q} AS CHAR)")
    if t == "float":
        return m("float", pa.float32(), "DOUBLE", f"CAST({q} AS DOUBLE)", "CAST({c} AS FLOAT)")
    if t in ("double", "real", "double precision"):
        return m("double", pa.float64(), "DOUBLE")
    if text_dates and t in ("date", "datetime", "timestamp"):
        return m(f"{t}_text", pa.string(), "STRING", text_date_sql(q, t, column.datetime_precision or 0))
    if t == "datetime":
        sel = f"CASE WHEN {_has_zero_parts(q)} THEN DATE_FORMAT({q}, '%Y-%m-%d %H:%i:%s.%f') END"
        return m("datetime", pa.timestamp("us"), "STRING", sel, "CAST({c} AS TIMESTAMP_NTZ)")
    if t == "timestamp":
        # UNIX_TIMESTAMP() of a TIMESTAMP column is its stored epoch: no session/JVM zone.
        sel = f"NULLIF(CAST(UNIX_TIMESTAMP({q}) * 1000000 AS SIGNED), 0)"
        return m("timestamp", pa.timestamp("us", tz="UTC"), "BIGINT", sel, "timestamp_micros({c})")
    if t == "date":
        sel = f"CASE WHEN {_has_zero_parts(q)} THEN DATE_FORMAT({q}, '%Y-%m-%d') END"
        return m("date", pa.date32(), "STRING", sel, "CAST({c} AS DATE)")
    if t == "time":
        return m("time", pa.int64(), "BIGINT", f"CAST(TIME_TO_SEC({q}) * 1000000 AS SIGNED)")
    if t == "year":
        return m("year", pa.int16(), "SHORT", f"({q} + 0)")
    if t == "bit":
        n = column.numeric_precision or _display_width(column.column_type) or 1
        if n >= 64:
            return m("bit", pa.decimal128(20, 0), "DECIMAL(20,0)", f"CAST({q} AS UNSIGNED)")
        return m("bit", pa.int64(), "BIGINT", f"CAST({q} AS UNSIGNED)")
    if t in _TEXT_TYPES:
        if column.charset in ("binary",):
            return m("binary", pa.binary(), "BINARY")
        if t == "char":
            # Spark 4 pads CHAR(n) result columns back to n (spark.sql.readSideCharPadding),
            # even with customSchema STRING; a VARCHAR expression is returned as the server has it.
            return m("text", pa.string(), "STRING", f"CAST({q} AS CHAR)")
        return m("text", pa.string(), "STRING")
    if t in ("enum", "set"):
        # The driver reports ENUM/SET as CHAR(n), so Spark pads them too ('a,c  '); as a
        # VARCHAR expression it does not (members never end in spaces: the server strips them).
        return m(t, pa.string(), "STRING", f"CAST({q} AS CHAR)", members=_set_members(column.column_type))
    if t in _BINARY_TYPES:
        return m("binary", pa.binary(), "BINARY")
    if t == "boolean":  # never a source column (MySQL's BOOL is TINYINT(1)): a transform's computed one
        return m("bool", pa.bool_(), "BOOLEAN")
    raise _unsupported(table, column)


def _display_width(column_type: str) -> int | None:
    mt = re.search(r"\((\d+)\)", column_type)
    return int(mt.group(1)) if mt else None


def map_table(schema: TableSchema, server_time_zone: str) -> list[ColumnMapping]:
    """Mappings of every column, in table order; fails on the first unsupported column."""
    text = schema.zero_dates == "text"
    return [map_column(c, server_time_zone, str(schema.table_id), text) for c in schema.columns]


def map_column_in(schema: TableSchema, column: Column) -> ColumnMapping:
    """``column``'s mapping as a column of ``schema`` would have it (its ``zero_dates``); the sink
    types of a column a DDL adds. The zone changes no kind or type."""
    return map_column(column, "UTC", str(schema.table_id), schema.zero_dates == "text")


def arrow_schema(mappings: list[ColumnMapping]) -> pa.Schema:
    """The final row schema as Arrow; every field nullable (zero dates read as NULL)."""
    return pa.schema([pa.field(mp.name, mp.arrow_type, nullable=True) for mp in mappings])


def select_list(mappings: list[ColumnMapping]) -> str:
    """``<select_sql> AS `col`, ...`` -- the snapshot SELECT's column list."""
    return ", ".join(f"{mp.select_sql} AS {quote_ident(mp.name)}" for mp in mappings)


# --- binlog values -> canonical ------------------------------------------------------------


def format_decimal(value: decimal.Decimal, scale: int) -> str:
    """Print a DECIMAL like the server: exactly ``scale`` fraction digits, no exponent."""
    with decimal.localcontext() as ctx:
        ctx.prec = 100
        q = value.quantize(decimal.Decimal(1).scaleb(-scale)) if scale else value.to_integral_value()
    text = format(q, "f")
    return text[1:] if text.startswith("-") and q.is_zero() else text


def _fix_decimal(value: Any, scale: int) -> decimal.Decimal:
    with decimal.localcontext() as ctx:
        ctx.prec = 100
        return decimal.Decimal(value).quantize(decimal.Decimal(1).scaleb(-scale))


def time_micros(value: dt.timedelta | int, fsp: int) -> int:
    """A binlog TIME as signed microseconds, undoing the library's negative-fraction bug.

    MySQL stores a negative TIME with a fraction as (integer part - 1 s, 1 - fraction);
    python-mysql-replication 1.0.17 reads both parts as if unrelated, giving
    ``-(|int| + 1) s + fraction``. For such values (negative, not whole seconds, fsp > 0)
    the true value is ``-(|int| s + fraction)``.
    """
    us = value if isinstance(value, int) else (value.days * 86400 + value.seconds) * _US + value.microseconds
    if fsp > 0 and us < 0 and us % _US:
        frac = us % _US  # the stored (positive) fraction
        whole = (us - frac) // _US  # -(|int| + 1)
        us = (whole + 1) * _US - frac
    return us


def _to_text(value: Any, mp: ColumnMapping) -> str:
    if isinstance(value, (bytes, bytearray)):
        codec = python_codec(mp.column.charset or "utf8mb4")
        if codec is None:
            raise SchemaMismatchError(
                f"column {mp.name!r}: cannot decode charset {mp.column.charset!r} from binlog bytes. Fix: report "
                "this message (this Python has no codec for the charset), and leave the table out meanwhile."
            )
        return bytes(value).decode(codec)
    if isinstance(value, str):
        return value
    return _json_text(value)  # MySQL binary JSON decoded to Python objects


def _json_key(k: Any) -> str:
    return k.decode("utf-8") if isinstance(k, (bytes, bytearray)) else str(k)


def _json_plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {_json_key(k): _json_plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_plain(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8")
    if isinstance(v, decimal.Decimal):
        return float(v) if v != v.to_integral_value() else int(v)
    if isinstance(v, (dt.date, dt.datetime, dt.time)):
        return v.isoformat(sep=" ") if isinstance(v, dt.datetime) else v.isoformat()
    return v


def _json_text(value: Any) -> str:
    """MySQL-style JSON text (``{"a": 1, "b": [1, 2]}``) of a decoded binary JSON value."""
    return json.dumps(_json_plain(value), ensure_ascii=False, separators=(", ", ": "))


def _to_bytes(value: Any, mp: ColumnMapping) -> bytes:
    if isinstance(value, str):
        if value:
            raise SchemaMismatchError(
                f"column {mp.name!r} is binary but the binlog gave text {value[:20]!r}: the table "
                "map lacks charset metadata. Fix: set binlog_row_metadata=FULL."
            )
        value = b""
    b = bytes(value)
    if mp.column.data_type.lower() == "binary" and mp.column.char_max_length:
        b = b.ljust(mp.column.char_max_length, b"\x00")
    return b


def _to_set(value: Any, mp: ColumnMapping) -> str:
    if isinstance(value, str):
        return value
    chosen = set(value)
    return ",".join(m for m in mp.set_members if m in chosen)


def _to_bit(value: Any, mp: ColumnMapping) -> int | decimal.Decimal:
    if isinstance(value, str):
        n = int(value, 2) if value else 0
    elif isinstance(value, (bytes, bytearray)):
        n = int.from_bytes(value, "big")
    else:
        n = int(value)
    return decimal.Decimal(n) if isinstance(mp.arrow_type, pa.Decimal128Type) else n


def _to_timestamp(value: Any) -> dt.datetime | None:
    if isinstance(value, (int, float)):
        value = _EPOCH + dt.timedelta(microseconds=round(value * _US))
    if value.tzinfo is not None:
        value = value.astimezone(_UTC).replace(tzinfo=None)
    if value == _EPOCH:  # TIMESTAMP '0000-00-00 00:00:00' is stored as epoch 0
        return None
    return value.replace(tzinfo=_UTC)


def _to_datetime(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    raise SchemaMismatchError(f"expected a datetime, got {value!r}. {RESTART_OR_REPORT}")


def _to_date(value: Any) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    return value


def date_text(y: int, m: int, d: int) -> str:
    return f"{y:04d}-{m:02d}-{d:02d}"


def datetime_text(y: int, m: int, d: int, h: int, mi: int, s: int, us: int, fsp: int) -> str:
    """``YYYY-MM-DD HH:MM:SS`` and, for fsp > 0, ``.`` + fsp digits (as the server prints it)."""
    text = f"{y:04d}-{m:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}"
    return text + "." + f"{us:06d}"[:fsp] if fsp else text


def _text_date_converter(kind: str, fsp: int) -> Callable[[Any], Any]:
    """The library's values (refused tables only) as text; it gives None for zero dates."""

    def conv(v: Any) -> str | None:
        if kind == "timestamp_text":
            v = _to_timestamp(v)
            if v is None:
                return datetime_text(0, 0, 0, 0, 0, 0, 0, fsp)
        if kind == "date_text":
            v = _to_date(v)
            return date_text(v.year, v.month, v.day)
        return datetime_text(v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, fsp)

    return conv


def _converter(mp: ColumnMapping) -> Callable[[Any], Any]:
    """The function that turns one non-NULL raw value of this column into its canonical form."""
    k = mp.kind
    if k == "int":
        return int
    if k == "uint64":
        return lambda v: decimal.Decimal(int(v))
    if k == "decimal":
        scale = mp.column.numeric_scale or 0
        return lambda v: _fix_decimal(v, scale)
    if k == "decimal_text":
        scale = mp.column.numeric_scale or 0
        return lambda v: format_decimal(decimal.Decimal(v), scale)
    if k in ("float", "double"):
        return float
    if k == "datetime":
        return _to_datetime
    if k == "timestamp":
        return _to_timestamp
    if k == "date":
        return _to_date
    if k == "time":
        fsp = mp.column.datetime_precision or 0
        return lambda v: time_micros(v, fsp)
    if k in ("date_text", "datetime_text", "timestamp_text"):
        return _text_date_converter(k, mp.column.datetime_precision or 0)
    if k == "year":
        return lambda v: 0 if int(v) in (0, 1900) else int(v)
    if k == "bit":
        return lambda v: _to_bit(v, mp)
    if k in ("text", "enum"):
        return lambda v: _to_text(v, mp)
    if k == "set":
        return lambda v: _to_set(v, mp)
    if k == "binary":
        return lambda v: _to_bytes(v, mp)
    raise AssertionError(f"no converter for kind {k!r}")


def _empty_set_value(mp: ColumnMapping, none_source: str | None) -> str | None:
    """The library reports the empty SET as None; NOT NULL columns or its none_sources tell."""
    if mp.kind == "set" and (not mp.column.nullable or none_source == "empty set"):
        return ""
    return None


def row_normalizer(schema: TableSchema, server_time_zone: str) -> Callable[..., dict[str, Any]]:
    """A function ``normalize(values, none_sources=None) -> dict`` for one table's binlog rows.

    ``values`` is a python-mysql-replication row image (``row["values"]``,
    ``row["before_values"]`` ...). Pass the matching ``none_sources`` too where available:
    it is the only way to tell a nullable SET's empty set from NULL. Every column of the
    schema must be present (``binlog_row_image=FULL``), else SchemaMismatchError.
    """
    mappings = map_table(schema, server_time_zone)
    converters = [(mp, _converter(mp)) for mp in mappings]

    def normalize(values: Mapping[str, Any], none_sources: Mapping[str, str] | None = None) -> dict[str, Any]:
        missing = [mp.name for mp in mappings if mp.name not in values]
        if missing:
            raise SchemaMismatchError(
                f"{schema.table_id}: binlog row lacks columns {missing} (has {sorted(values)}); "
                "the table changed or binlog_row_image/binlog_row_metadata is not FULL. Fix: SET GLOBAL "
                "binlog_row_image = FULL and binlog_row_metadata = FULL (and in my.cnf), then start the stream "
                "again; if the table changed, load it again (trigger the pipeline with reset=true)."
            )
        out: dict[str, Any] = {}
        for mp, conv in converters:
            v = values[mp.name]
            if v is None:
                out[mp.name] = _empty_set_value(mp, (none_sources or {}).get(mp.name))
            else:
                try:
                    out[mp.name] = conv(v)
                except SchemaMismatchError:
                    raise
                except (TypeError, ValueError, ArithmeticError, AttributeError) as e:
                    raise SchemaMismatchError(
                        f"{schema.table_id}.{mp.name} ({mp.column.column_type}): cannot normalize "
                        f"binlog value {v!r}: {e}. {RESTART_OR_REPORT}"
                    ) from None
        return out

    return normalize
