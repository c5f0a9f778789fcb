"""SQL text for chunk boundaries: literals and ``[start, end)`` key-range predicates.

Spark's JDBC reader takes one *literal* SQL predicate per partition (no bind parameters),
so boundary values must be rendered as literals that (a) cannot break out of the SQL,
whatever bytes a string holds, and (b) compare exactly like the stored value would:

* strings are ``_<charset> X'<hex>'``: a hex literal has no quoting to get wrong, and a
  literal with an introducer is *coercible*, so in ``col >= literal`` the column's
  collation decides (the same collation the planner's ``ORDER BY`` used, and the index
  stays usable);
* numbers are rendered exactly (``repr`` for floats round-trips to the same double);
* temporal values use the ANSI ``DATE'..'`` / ``TIMESTAMP'..'`` / ``TIME'..'`` forms.

Composite keys compare as row values. ``(a, b) >= (x, y)`` written as a row comparison
is not reliably turned into an index range by every server version, so it is expanded
into the disjunctive form ``a > x OR (a = x AND b >= y)``, which both MySQL's and
MariaDB's range optimizers turn into index ranges.
"""

from __future__ import annotations

import codecs
import datetime as dt
import decimal
import math
from typing import Any, Mapping, Sequence

from .model import Column, TableSchema, quote_ident

# MySQL character set -> Python codec, for rendering string literals in the column's own
# character set. MySQL's ``latin1`` is really cp1252 (plus five bytes mapped to C1
# controls, which cp1252 cannot encode: those fall back to a CONVERT, see below).
_PY_CODECS = {
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf8": "utf-8",
    "ascii": "ascii",
    "latin1": "cp1252",
    "latin2": "iso8859-2",
    "latin5": "iso8859-9",
    "latin7": "iso8859-13",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "greek": "iso8859-7",
    "hebrew": "iso8859-8",
    "koi8r": "koi8-r",
    "koi8u": "koi8-u",
    "gbk": "gbk",
    "gb2312": "gb2312",
    "gb18030": "gb18030",
    "big5": "big5",
    "sjis": "shift_jis",
    "cp932": "cp932",
    "ujis": "euc-jp",
    "eucjpms": "euc-jp",
    "euckr": "euc-kr",
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "tis620": "tis-620",
}


def python_codec(charset: str | None) -> str | None:
    """The Python codec for a MySQL character set, or None if there is none we trust."""
    if not charset:
        return None
    name = _PY_CODECS.get(charset.lower())
    if name is None:
        return None
    try:
        codecs.lookup(name)
    except LookupError:
        return None
    return name


def sql_literal(value: Any, column: Column) -> str:
    """A SQL literal for ``value`` that compares with ``column`` as the stored value would.

    Raises ValueError for values that have no exact literal (NaN, infinities).
    """
    if value is None:
        return "NULL"
    dtype = column.data_type.lower()
    if isinstance(value, bool):
        return "1" if value else "0"
    if dtype == "bit":
        return str(_bit_to_int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ValueError(f"{column.name}: {value} has no SQL literal")
        return format(value, "f")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{column.name}: {value} has no SQL literal")
        return repr(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _hex_literal(bytes(value))
    if isinstance(value, str):
        return _string_literal(value, column)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:  # engine sessions run in UTC
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return f"TIMESTAMP'{value.isoformat(sep=' ', timespec='microseconds')}'"
    if isinstance(value, dt.date):
        return f"DATE'{value.isoformat()}'"
    if isinstance(value, dt.timedelta):
        return f"TIME'{_time_text(value)}'"
    if isinstance(value, dt.time):
        return f"TIME'{value.isoformat(timespec='microseconds')}'"
    raise TypeError(f"{column.name}: no SQL literal for {type(value).__name__} value {value!r}")


def _bit_to_int(value: Any) -> int:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return int.from_bytes(bytes(value), "big")
    if isinstance(value, str):
        return int(value, 2)
    return int(value)


def _hex_literal(data: bytes) -> str:
    return f"X'{data.hex().upper()}'"


def _string_literal(value: str, column: Column) -> str:
    """``_<charset> X'..'`` in the column's character set, so the column's collation wins.

    When Python cannot encode the text in that character set, the UTF-8 text is converted
    by the server and given the column's collation explicitly (same comparison, still
    sargable because the collation is the column's).
    """
    charset = (column.charset or "utf8mb4").lower()
    if charset == "binary":
        return _hex_literal(value.encode("utf-8"))
    codec = python_codec(charset)
    if codec is not None:
        try:
            return f"_{charset} {_hex_literal(value.encode(codec))}"
        except UnicodeEncodeError:
            pass
    text = f"_utf8mb4 {_hex_literal(value.encode('utf-8', 'surrogatepass'))}"
    conv = f"CONVERT({text} USING {charset})"
    return f"{conv} COLLATE {column.collation}" if column.collation else conv


def _time_text(value: dt.timedelta) -> str:
    """``[-]HHH:MM:SS.ffffff`` for a TIME value (MySQL TIME spans -838:59:59..838:59:59)."""
    us = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if us < 0 else ""
    us = abs(us)
    secs, frac = divmod(us, 1_000_000)
    hours, rest = divmod(secs, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}.{frac:06d}"


# --- key-range predicates ------------------------------------------------------------------


def key_columns(schema_or_columns: TableSchema | Sequence[Column]) -> tuple[Column, ...]:
    """The chunk-key columns of a schema (or the columns as given)."""
    if isinstance(schema_or_columns, TableSchema):
        return tuple(schema_or_columns.column(n) for n in schema_or_columns.chunk_key)
    return tuple(schema_or_columns)


def range_predicate(
    schema_or_columns: TableSchema | Sequence[Column],
    start: Sequence[Any] | None,
    end: Sequence[Any] | None,
    includes_null: bool = False,
    column_sql: Mapping[str, str] | None = None,
) -> str:
    """``start <= key < end`` (row-value order) as an index-friendly SQL condition.

    ``None`` bounds are open. With ``includes_null`` the rows whose key is NULL are added
    (they belong to the first chunk). The result is safe to combine with AND/OR as is.
    ``column_sql`` maps a key column name to the SQL
    that names it (e.g. an alias in a derived table); default: the quoted column name.
    """
    cols = key_columns(schema_or_columns)
    if not cols:
        raise ValueError("range_predicate needs at least one key column")
    names = [(column_sql or {}).get(c.name) or quote_ident(c.name) for c in cols]
    parts = []
    if start is not None:
        parts.append(_row_compare(cols, names, start, ">="))
    if end is not None:
        parts.append(_row_compare(cols, names, end, "<"))
    cond = " AND ".join(f"({p})" for p in parts) if parts else "1=1"
    if includes_null:
        nulls = " OR ".join(f"{n} IS NULL" for n in names)
        cond = f"(({cond}) OR {nulls})" if parts else cond
    return cond


def key_compare(
    schema_or_columns: TableSchema | Sequence[Column],
    key: Sequence[Any],
    op: str,
    column_sql: Mapping[str, str] | None = None,
) -> str:
    """``key_columns op key`` in row-value order, ``op`` one of ``>= > < <=``."""
    if op not in (">=", ">", "<", "<="):
        raise ValueError(f"unsupported operator {op!r}")
    cols = key_columns(schema_or_columns)
    names = [(column_sql or {}).get(c.name) or quote_ident(c.name) for c in cols]
    return _row_compare(cols, names, key, op)


def _row_compare(cols: Sequence[Column], names: Sequence[str], key: Sequence[Any], op: str) -> str:
    """``(c1..cn) op (v1..vn)`` for op in >=, >, <, <= as a disjunction of prefix equalities.

    ``(a,b,c) >= (x,y,z)`` -> ``a > x OR (a = x AND b > y) OR (a = x AND b = y AND c >= z)``.
    """
    if len(key) != len(cols):
        raise ValueError(f"key {tuple(key)!r} has {len(key)} values, the chunk key has {len(cols)} columns")
    strict = op[0]  # '>' or '<'
    lits = [sql_literal(v, c) for v, c in zip(key, cols)]
    terms = []
    for i in range(len(cols)):
        eqs = [f"{names[j]} = {lits[j]}" for j in range(i)]
        last_op = op if i == len(cols) - 1 else strict
        eqs.append(f"{names[i]} {last_op} {lits[i]}")
        terms.append(eqs[0] if len(eqs) == 1 else "(" + " AND ".join(eqs) + ")")
    return " OR ".join(terms)
