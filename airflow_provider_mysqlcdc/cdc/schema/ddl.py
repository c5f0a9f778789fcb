"""DDL statements of binlog QUERY events, read as schema change events.

The server writes a DDL statement into the binlog exactly as the client sent it (comments
included), with the session's current database as the event's schema. This module turns
such a statement into :mod:`.events` for the tables it changes; everything else (BEGIN,
GRANT, CREATE VIEW, SET ...) gives no event.

How it reads SQL, and why not with sqlglot's parser alone
---------------------------------------------------------
Lexing is sqlglot's MySQL tokenizer (quoting, escapes, comments). Parsing is in three
layers:

1. *Statement skeleton* (this module, over tokens): which statement it is, which tables it
   names, and the list of its clauses (ALTER TABLE specifications, CREATE TABLE elements),
   split at top-level commas. sqlglot's MySQL parser falls back to an opaque
   ``exp.Command`` for much of the ALTER grammar the servers accept (``ALTER ONLINE``,
   ``ALTER IGNORE``, ``ADD COLUMN (a INT, b INT)``, ``CONVERT TO CHARACTER SET``,
   partitioning, ``RENAME TABLE a TO b, c TO d``), and one clause it does not know hides
   all the others. Reading the skeleton from tokens handles every statement the same way.
2. *Column definitions* are parsed by sqlglot (``CREATE TABLE _t (_c TEXT <attributes>)``):
   NOT NULL, DEFAULT expressions, generated columns, keys, CHARACTER SET / COLLATE. A few
   attributes sqlglot rejects and that do not change the row shape (``PERSISTENT``,
   ``COMPRESSED``, ``COLUMN_FORMAT``, ``SRID`` ...) are taken off the token list first.
3. *Data types* are read from tokens here: sqlglot's MySQL dialect maps some synonyms to a
   different type than the server does (``INT8`` is BIGINT, not TINYINT; ``REAL`` is
   DOUBLE; ``LONG`` is MEDIUMTEXT; ``FLOAT(30)`` is DOUBLE) and rejects others (``MIDDLEINT``,
   ``NATIONAL VARCHAR``, ``LONG VARCHAR``, ``FLOAT UNSIGNED``, ``POINT``, ``INET6``).

Executable comments (``/*!50100 ... */``, MariaDB's ``/*M!100301 ... */``) are code to the
server but comments to the tokenizer, so :func:`unwrap_executable_comments` first turns
those the server executes into plain text, with a small scanner that knows MySQL's quoting
and comment rules (not a regular expression).

Semantics follow the server where it matters for row images: PRIMARY KEY columns are NOT
NULL; RENAME/CHANGE/DROP in one ALTER refer to the columns as they were before it (a swap
``RENAME COLUMN a TO b, RENAME COLUMN b TO a`` goes through a temporary name); ``RENAME`` of
a table to an unqualified name puts it in the statement's default database; MariaDB
ignores ``/*!50700``..``/*!99999`` comments and executes ``/*M!``, MySQL the reverse.

Known gaps: TIMESTAMP columns are nullable unless declared NOT NULL (servers with
``explicit_defaults_for_timestamp=OFF`` make the first one NOT NULL); ``TEXT(n)`` of a column
without explicit charset is sized for utf8mb4; REAL with sql_mode REAL_AS_FLOAT is read as
DOUBLE; with NO_BACKSLASH_ESCAPES a backslash before a quote ends a string for the server.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..errors import CdcError
from ..model import TableId
from ..version import ServerVersion
from .events import (
    TEXT_TYPES,
    AddColumn,
    AlterColumnType,
    AlterKey,
    ColumnDef,
    ConvertCharset,
    CreateTable,
    DropColumn,
    DropDatabase,
    DropTable,
    RenameColumn,
    RenameTable,
    SchemaChange,
    SetColumnDefault,
    SetDefaultCharset,
    TruncateTable,
    charset_max_bytes,
    charset_of_collation,
    normalize_charset,
    normalize_collation,
    text_type_bytes,
    text_type_for_bytes,
)


class DdlParseError(CdcError):
    """A DDL statement that may change a captured table could not be read.

    Raised rather than guessed: a wrong schema would mis-decode every later row.
    ``tables`` lists the tables read before the failure (the ALTER's table, say), so a
    caller can tell whether the statement concerns a captured table at all.
    """

    def __init__(self, sql: str, reason: str) -> None:
        self.statement = sql
        self.reason = reason
        self.tables: tuple[TableId, ...] = ()  # the tables the statement was found to name before it failed
        short = " ".join(sql.split())
        short = short if len(short) <= 200 else short[:197] + "..."
        super().__init__(
            f"cannot read the DDL statement {short!r}: {reason}. Fix: if the server accepted it, the DDL "
            "reader lacks this form; report the statement. To go on, load the affected tables again "
            "(trigger the pipeline with reset=true), which reads their schema from the server."
        )


# --- executable comments ---------------------------------------------------------------------

_SPACE = " \t\r\n\f\v"


def _version_number(server: ServerVersion) -> int:
    return server.major * 10000 + server.minor * 100 + server.patch


def _comment_executes(digits: str, mariadb_only: bool, server: ServerVersion | None) -> bool:
    """Whether the server runs ``/*!<digits> ...*/`` (or ``/*M!<digits>``)."""
    if server is None:  # unknown server: assume the statement meant what it says
        return True
    version = int(digits) if digits else 0
    if mariadb_only:
        return server.is_mariadb and _version_number(server) >= version
    if server.is_mariadb and len(digits) == 5 and 50700 <= version <= 99999:
        return False  # MariaDB skips MySQL 5.7+/8.0 features it does not have
    return _version_number(server) >= version


def _end_of_quoted(sql: str, i: int) -> int:
    """Index just after the quoted string/identifier starting at ``i``."""
    quote, j, n = sql[i], i + 1, len(sql)
    while j < n:
        c = sql[j]
        if c == "\\" and quote != "`":
            j += 2
        elif c == quote:
            if j + 1 < n and sql[j + 1] == quote:
                j += 2
            else:
                return j + 1
        else:
            j += 1
    return n


def _line_comment_at(sql: str, i: int) -> bool:
    if sql[i] == "#":
        return True
    return sql.startswith("--", i) and (i + 2 == len(sql) or sql[i + 2] in _SPACE or ord(sql[i + 2]) < 32)


def unwrap_executable_comments(sql: str, server: ServerVersion | None = None) -> str:
    """``sql`` with the executable comments the server runs turned into plain text.

    Their markers become spaces, so positions in the result are those of ``sql``. Comments
    the server would not run stay comments. With ``server=None`` every ``/*!`` and ``/*M!``
    comment counts as executed.
    """
    out = list(sql)
    i, n, in_exec = 0, len(sql), False
    while i < n:
        c = sql[i]
        if c in "'\"`":
            i = _end_of_quoted(sql, i)
        elif _line_comment_at(sql, i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*!", i) or sql.startswith("/*M!", i):
            mariadb_only = sql[i + 2] == "M"
            start = i + (4 if mariadb_only else 3)
            k = start
            while k < n and k - start < 6 and sql[k].isdigit():
                k += 1
            digits = sql[start:k] if k - start >= 5 else ""
            k = start + len(digits)
            if _comment_executes(digits, mariadb_only, server):
                out[i:k] = " " * (k - i)
                in_exec, i = True, k
            else:
                j = sql.find("*/", k)
                i = n if j < 0 else j + 2
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif in_exec and sql.startswith("*/", i):
            out[i : i + 2] = "  "
            in_exec, i = False, i + 2
        else:
            i += 1
    return "".join(out)


# --- tokens ----------------------------------------------------------------------------------

_LITERALS = {
    "STRING",
    "NUMBER",
    "NATIONAL_STRING",
    "HEX_STRING",
    "BIT_STRING",
    "BYTE_STRING",
    "RAW_STRING",
    "INTRODUCER",
    "IDENTIFIER",
    "UNICODE_STRING",
}


@dataclass(frozen=True)
class _Tok:
    """One token: sqlglot's type name, its text (unquoted, unescaped) and its source text."""

    type: str
    text: str
    raw: str

    @property
    def word(self) -> str | None:
        """The upper-cased keyword/bare word, None for quoted names, literals and punctuation."""
        if self.type in _LITERALS or not self.raw:
            return None
        c = self.raw[0]
        if c.isalnum() or c in "_$" or ord(c) > 127:
            return self.raw.upper()
        return None

    @property
    def is_name(self) -> bool:
        """A bare word, a `backquoted` name or (ANSI_QUOTES) a "double-quoted" one."""
        return self.word is not None or self.type == "IDENTIFIER" or (self.type == "STRING" and self.raw[:1] == '"')


def _tokenize(sql: str) -> list[_Tok]:
    import sqlglot

    try:
        tokens = sqlglot.tokenize(sql, read="mysql")
    except Exception as e:  # sqlglot raises TokenError, ValueError ... for unterminated input
        raise DdlParseError(sql, f"it cannot be tokenized ({e})") from None
    out: list[_Tok] = []
    previous = None
    for t in tokens:
        if t.token_type.name == "STRING" and previous in _command_token_types():
            # After "command" words (RENAME, REPLACE, OPTIMIZE ...) the tokenizer returns the
            # rest of the statement as one string (its offsets unusable): tokenize that text too.
            out.extend(_tokenize(t.text))
        else:
            raw = sql[t.start : t.end + 1]
            words = raw.split()
            if len(words) > 1 and t.token_type.name not in _LITERALS:
                # A multi-word keyword token (PRIMARY KEY, DOUBLE PRECISION, ORDER BY ...):
                # one token per word, so the grammar here sees the words it expects.
                out.extend(_Tok("VAR", w, w) for w in words)
            else:
                out.append(_Tok(t.token_type.name, t.text, raw))
        previous = t.token_type.name
    return out


@functools.lru_cache(maxsize=1)
def _command_token_types() -> frozenset[str]:
    from sqlglot.dialects.mysql import MySQL

    return frozenset(t.name for t in MySQL.Tokenizer.COMMANDS)


def _matching_paren(toks: Sequence[_Tok], i: int) -> int:
    """Index of the R_PAREN closing the L_PAREN at ``i`` (len(toks) if unclosed)."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].type == "L_PAREN":
            depth += 1
        elif toks[j].type == "R_PAREN":
            depth -= 1
            if depth == 0:
                return j
    return len(toks)


def _split(toks: Sequence[_Tok], sep: str = "COMMA") -> list[list[_Tok]]:
    """``toks`` split at top-level (parenthesis depth 0) ``sep`` tokens."""
    parts: list[list[_Tok]] = [[]]
    depth = 0
    for t in toks:
        if t.type == "L_PAREN":
            depth += 1
        elif t.type == "R_PAREN":
            depth -= 1
        if t.type == sep and depth == 0:
            parts.append([])
        else:
            parts[-1].append(t)
    return parts


def _join(toks: Iterable[_Tok]) -> str:
    """Source text of tokens, one space apart (none around the dot of ``db.name``)."""
    out: list[str] = []
    for t in toks:
        if out and t.type != "DOT" and not out[-1].endswith("."):
            out.append(" ")
        out.append(t.raw)
    return "".join(out)


class _Cursor:
    """Reads a token list front to back; ``sql`` is the statement, for error messages."""

    def __init__(self, toks: Sequence[_Tok], sql: str) -> None:
        self.toks = list(toks)
        self.i = 0
        self.sql = sql

    def peek(self, k: int = 0) -> _Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def word(self, k: int = 0) -> str | None:
        t = self.peek(k)
        return t.word if t else None

    def at(self, *words: str) -> bool:
        return all(self.word(k) == w for k, w in enumerate(words))

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.i += len(words)
            return True
        return False

    def accept_type(self, type_name: str) -> bool:
        t = self.peek()
        if t is not None and t.type == type_name:
            self.i += 1
            return True
        return False

    def fail(self, why: str) -> DdlParseError:
        return DdlParseError(self.sql, why)

    def next(self) -> _Tok:
        t = self.peek()
        if t is None:
            raise self.fail("it ends too early")
        self.i += 1
        return t

    @property
    def done(self) -> bool:
        return self.i >= len(self.toks)

    def rest(self) -> list[_Tok]:
        out, self.i = self.toks[self.i :], len(self.toks)
        return out

    def name(self) -> str:
        t = self.next()
        if not t.is_name:
            raise self.fail(f"expected a name, found {t.raw!r}")
        return t.text

    def table(self, default_database: str) -> TableId:
        first = self.name()
        if self.accept_type("DOT"):
            return TableId(first, self.name())
        return TableId(default_database, first)

    def skip_wait(self) -> None:
        """MariaDB's ``WAIT n`` / ``NOWAIT`` after a table name."""
        if self.accept("WAIT"):
            self.next()
        else:
            self.accept("NOWAIT")


# --- data types ------------------------------------------------------------------------------

# Type words as the server reads them, to the base type they stand for.
_TYPE_WORDS = {
    "TINYINT": "tinyint",
    "INT1": "tinyint",
    "BOOL": "bool",
    "BOOLEAN": "bool",
    "SMALLINT": "smallint",
    "INT2": "smallint",
    "MEDIUMINT": "mediumint",
    "MIDDLEINT": "mediumint",
    "INT3": "mediumint",
    "INT": "int",
    "INTEGER": "int",
    "INT4": "int",
    "BIGINT": "bigint",
    "INT8": "bigint",
    "SERIAL": "serial",
    "DECIMAL": "decimal",
    "DEC": "decimal",
    "NUMERIC": "decimal",
    "FIXED": "decimal",
    "FLOAT": "float",
    "FLOAT4": "float",
    "DOUBLE": "double",
    "FLOAT8": "double",
    "REAL": "double",
    "BIT": "bit",
    "CHAR": "char",
    "CHARACTER": "char",
    "VARCHAR": "varchar",
    "VARCHARACTER": "varchar",
    "NCHAR": "nchar",
    "NVARCHAR": "nvarchar",
    "BINARY": "binary",
    "VARBINARY": "varbinary",
    "TINYTEXT": "tinytext",
    "TEXT": "text",
    "MEDIUMTEXT": "mediumtext",
    "LONGTEXT": "longtext",
    "TINYBLOB": "tinyblob",
    "BLOB": "blob",
    "MEDIUMBLOB": "mediumblob",
    "LONGBLOB": "longblob",
    "LONG": "mediumtext",
    "ENUM": "enum",
    "SET": "set",
    "DATE": "date",
    "TIME": "time",
    "DATETIME": "datetime",
    "TIMESTAMP": "timestamp",
    "YEAR": "year",
    "JSON": "json",
    "GEOMETRY": "geometry",
    "POINT": "point",
    "LINESTRING": "linestring",
    "POLYGON": "polygon",
    "MULTIPOINT": "multipoint",
    "MULTILINESTRING": "multilinestring",
    "MULTIPOLYGON": "multipolygon",
    "GEOMETRYCOLLECTION": "geometrycollection",
    "GEOMCOLLECTION": "geomcollection",
    "UUID": "uuid",
    "INET4": "inet4",
    "INET6": "inet6",
    "VECTOR": "vector",
}
_INT_PRECISION = {"tinyint": (3, 3), "smallint": (5, 5), "mediumint": (7, 8), "int": (10, 10), "bigint": (19, 20)}
_TEXT_BLOB = {"tinytext": "tinyblob", "text": "blob", "mediumtext": "mediumblob", "longtext": "longblob"}
_BLOB_TEXT = {v: k for k, v in _TEXT_BLOB.items()}
_TEXT_LENGTH = {"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295}
_TEMPORAL = {"time", "datetime", "timestamp"}


@dataclass
class _TypeSpec:
    """A data type as written: its base, parameters and the attributes that belong to it."""

    base: str
    word: str
    params: list[Any] = field(default_factory=list)
    unsigned: bool = False
    zerofill: bool = False
    charset: str | None = None
    collation: str | None = None
    binary_collation: bool = False


def _read_params(cur: _Cursor) -> list[Any]:
    """``(10)``, ``(10, 2)`` or ``('a', 'b')``: ints and (unescaped) strings."""
    if not cur.accept_type("L_PAREN"):
        return []
    out: list[Any] = []
    while True:
        t = cur.next()
        if t.type == "R_PAREN":
            return out
        if t.type in ("COMMA", "INTRODUCER"):
            continue
        if t.type == "NUMBER" and t.text.isdigit():
            out.append(int(t.text))
        elif t.type in ("STRING", "NATIONAL_STRING"):
            out.append(mysql_string_value(t.raw))
        else:
            raise cur.fail(f"unexpected {t.raw!r} in a type's parameters")


def _read_charset_name(cur: _Cursor) -> str:
    cur.accept_type("EQ")
    return cur.next().text.lower()


def _read_type(cur: _Cursor) -> _TypeSpec:
    """The data type at the cursor, up to (not including) the column attributes."""
    t = cur.next()
    word = t.word
    if word is None:
        raise cur.fail(f"expected a data type, found {t.raw!r}")
    base = _TYPE_WORDS.get(word, word.lower())
    charset = None
    if word == "NATIONAL":
        word = cur.next().word or ""
        national = {"CHAR": "nchar", "CHARACTER": "nchar", "VARCHAR": "nvarchar", "VARCHARACTER": "nvarchar"}.get(word)
        if national is None:
            raise cur.fail(f"NATIONAL {word} is not a type")
        base = national
    if base in ("char", "nchar") and cur.accept("VARYING") or base == "nchar" and cur.accept("VARCHAR"):
        base = "nvarchar" if base == "nchar" else "varchar"
    elif word == "DOUBLE":
        cur.accept("PRECISION")
    elif word == "LONG" and cur.accept("VARBINARY"):
        base = "mediumblob"
    elif word == "LONG":  # LONG, LONG VARCHAR, LONG CHAR VARYING: all MEDIUMTEXT
        for spelling in (("VARCHAR",), ("CHAR", "VARYING"), ("CHARACTER", "VARYING")):
            if cur.accept(*spelling):
                break
    if base in ("nchar", "nvarchar"):
        base, charset = base[1:], "utf8mb3"
    spec = _TypeSpec(base, word, _read_params(cur), charset=charset)
    _read_type_attributes(cur, spec)
    return spec


def _read_type_attributes(cur: _Cursor, spec: _TypeSpec) -> None:
    """SIGNED/UNSIGNED/ZEROFILL and the character set spellings that follow a type."""
    while True:
        if cur.accept("UNSIGNED"):
            spec.unsigned = True
        elif cur.accept("SIGNED"):
            pass
        elif cur.accept("ZEROFILL"):
            spec.zerofill = spec.unsigned = True
        elif cur.accept("CHARACTER", "SET") or cur.accept("CHARSET") or cur.accept("CHAR", "SET"):
            spec.charset = _read_charset_name(cur)
        elif cur.accept("COLLATE"):
            spec.collation = _read_charset_name(cur)
        elif cur.accept("BINARY"):
            spec.binary_collation = True
        elif cur.accept("ASCII"):
            spec.charset = "latin1"
        elif cur.accept("UNICODE"):
            spec.charset = "ucs2"
        elif cur.accept("BYTE"):
            spec.charset = "binary"
        else:
            return


def mysql_string_value(raw: str) -> str:
    """The value of a MySQL string literal as written (quotes included), escapes undone."""
    quote, body = raw[0], raw[1:-1]
    escapes = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(escapes.get(nxt, "\\" + nxt if nxt in "%_" else nxt))
            i += 2
        elif c == quote and i + 1 < len(body) and body[i + 1] == quote:
            out.append(quote)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _quote_member(value: str) -> str:
    """A member as information_schema's COLUMN_TYPE prints it."""
    escaped = {"\\": "\\\\", "'": "''", "\0": "\\0", "\n": "\\n", "\r": "\\r", "\x1a": "\\Z"}
    return "'" + "".join(escaped.get(c, c) for c in value) + "'"


def _suffix(spec: _TypeSpec) -> str:
    return (" unsigned" if spec.unsigned else "") + (" zerofill" if spec.zerofill else "")


def _int_param(spec: _TypeSpec, i: int, default: int | None, sql: str) -> int | None:
    if len(spec.params) <= i:
        return default
    v = spec.params[i]
    if not isinstance(v, int):
        raise DdlParseError(sql, f"{spec.word} takes numbers, not {v!r}")
    return v


def _numeric_fields(spec: _TypeSpec, sql: str) -> dict[str, Any]:
    b = spec.base
    if b in _INT_PRECISION or b in ("bool", "serial"):
        if b == "bool":
            return dict(data_type="tinyint", column_type="tinyint(1)", numeric_precision=3, numeric_scale=0)
        if b == "serial":
            return dict(data_type="bigint", column_type="bigint unsigned", numeric_precision=20, numeric_scale=0)
        width = _int_param(spec, 0, None, sql)
        ctype = b + (f"({width})" if width else "") + _suffix(spec)
        return dict(data_type=b, column_type=ctype, numeric_precision=_INT_PRECISION[b][spec.unsigned], numeric_scale=0)
    if b == "decimal":
        p, s = _int_param(spec, 0, 10, sql), _int_param(spec, 1, 0, sql)
        return dict(data_type=b, column_type=f"decimal({p},{s}){_suffix(spec)}", numeric_precision=p, numeric_scale=s)
    if b in ("float", "double"):
        if len(spec.params) == 2:
            m, d = _int_param(spec, 0, None, sql), _int_param(spec, 1, None, sql)
            return dict(data_type=b, column_type=f"{b}({m},{d}){_suffix(spec)}", numeric_precision=m, numeric_scale=d)
        if b == "float" and len(spec.params) == 1 and (_int_param(spec, 0, 0, sql) or 0) > 24:
            b = "double"
        return dict(data_type=b, column_type=b + _suffix(spec), numeric_precision=12 if b == "float" else 22)
    if b == "bit":
        n = _int_param(spec, 0, 1, sql)
        return dict(data_type=b, column_type=f"bit({n})", numeric_precision=n)
    return {}


def _text_fields(spec: _TypeSpec, charset: str | None, sql: str) -> dict[str, Any]:
    b, binary = spec.base, charset == "binary"
    if b in ("char", "binary", "varchar", "varbinary"):
        n = _int_param(spec, 0, 1 if b in ("char", "binary") else None, sql)
        if n is None:
            raise DdlParseError(sql, f"{spec.word} needs a length")
        if binary:
            b = {"char": "binary", "varchar": "varbinary"}.get(b, b)
        return dict(data_type=b, column_type=f"{b}({n})", char_max_length=n)
    if b in _TEXT_LENGTH:  # TEXT(n) holds n characters: the server picks the type
        if spec.params:
            b = text_type_for_bytes((_int_param(spec, 0, 0, sql) or 0) * charset_max_bytes(charset or "utf8mb4"))
        if binary:
            b = _TEXT_BLOB[b]
    elif b in _BLOB_TEXT and spec.params:  # BLOB(n) holds n bytes
        b = _TEXT_BLOB[text_type_for_bytes(_int_param(spec, 0, 0, sql) or 0)]
    if b in _TEXT_LENGTH or b in _BLOB_TEXT:
        return dict(data_type=b, column_type=b, char_max_length=text_type_bytes(b))
    if b in ("enum", "set"):
        members = tuple(str(m).rstrip(" ") for m in spec.params)
        if not members:
            raise DdlParseError(sql, f"{b.upper()} needs members")
        longest = max(len(m) for m in members) if b == "enum" else sum(map(len, members)) + len(members) - 1
        ctype = f"{b}({','.join(_quote_member(m) for m in members)})"
        return dict(data_type=b, column_type=ctype, char_max_length=longest)
    return {}


def _type_fields(
    spec: _TypeSpec, charset: str | None, collation: str | None, mariadb: bool, sql: str
) -> dict[str, Any]:
    """information_schema-style fields of a type, charset and collation included."""
    fields = _numeric_fields(spec, sql) or _text_fields(spec, charset, sql)
    b = spec.base
    if not fields:
        if b in _TEMPORAL:
            fsp = _int_param(spec, 0, 0, sql)
            fields = dict(data_type=b, column_type=f"{b}({fsp})" if fsp else b, datetime_precision=fsp)
        elif b == "year":
            fields = dict(data_type=b, column_type="year(4)" if mariadb else "year")
        elif b == "json" and mariadb:  # MariaDB's JSON is LONGTEXT with a JSON_VALID check
            return dict(
                data_type="longtext",
                column_type="longtext",
                char_max_length=_TEXT_LENGTH["longtext"],
                charset="utf8mb4",
                collation="utf8mb4_bin",
            )
        else:
            params = ",".join(str(p) for p in spec.params)
            fields = dict(data_type=b, column_type=f"{b}({params})" if params else b)
    if fields["data_type"] in TEXT_TYPES:
        fields["charset"], fields["collation"] = charset, collation
    return fields


# --- column definitions (sqlglot) ------------------------------------------------------------


@dataclass
class _ColumnParse:
    """A parsed column definition and what it says beyond the column itself."""

    column: ColumnDef
    primary_key: bool = False
    unique: bool = False
    first: bool = False
    after: str | None = None


# Column attributes that do not change the row shape and that sqlglot does not read:
# word -> number of tokens to drop (an optional "=" after the word is dropped too).
_DROPPED_ATTRIBUTES = {
    "VISIBLE": 1,
    "COLUMN_FORMAT": 2,
    "STORAGE": 2,
    "SRID": 2,
    "REF_SYSTEM_ID": 2,
    "ENGINE_ATTRIBUTE": 2,
    "SECONDARY_ENGINE_ATTRIBUTE": 2,
}


@dataclass
class _Attributes:
    """Column attributes this module reads itself, and the tokens left for sqlglot."""

    tokens: list[_Tok] = field(default_factory=list)
    invisible: bool = False
    serial_default: bool = False
    default: str | None = None
    generated: str | None = None


def _prefilter_attributes(toks: Sequence[_Tok]) -> _Attributes:
    out = _Attributes()
    i, depth = 0, 0
    while i < len(toks):
        t = toks[i]
        w = t.word if depth == 0 else None
        nxt = [x.word for x in toks[i + 1 : i + 4]]
        if t.type == "L_PAREN":
            depth += 1
        elif t.type == "R_PAREN":
            depth -= 1
        if w in _DROPPED_ATTRIBUTES:
            skip = _DROPPED_ATTRIBUTES[w]
            if skip > 1 and i + 1 < len(toks) and toks[i + 1].type == "EQ":
                skip += 1
            i += skip
            continue
        if w == "INVISIBLE":
            out.invisible = True
        elif w == "PERSISTENT":
            out.tokens.append(_Tok("VAR", "STORED", "STORED"))
        elif w == "COMPRESSED":
            i += 3 if i + 1 < len(toks) and toks[i + 1].type == "EQ" else 1
            continue
        elif w in ("WITH", "WITHOUT") and nxt[:2] == ["SYSTEM", "VERSIONING"]:
            i += 3
            continue
        elif w in ("GENERATED", "AS") and (period := _row_period(toks, i)):  # MariaDB: AS ROW START / END
            out.generated = "row_" + period.lower()
            i += 5 if w == "GENERATED" else 3
            continue
        elif w == "SERIAL" and nxt[:2] == ["DEFAULT", "VALUE"]:
            out.serial_default = True
            i += 3
            continue
        elif w == "NOT" and nxt[:1] == ["SECONDARY"]:
            i += 2
            continue
        elif w == "DEFAULT" and nxt[:2] in (["NEXT", "VALUE"], ["PREVIOUS", "VALUE"]):
            end = i + 5  # DEFAULT NEXT VALUE FOR [db.]seq
            if end + 1 < len(toks) and toks[end].type == "DOT":
                end += 2
            out.default = _join(toks[i + 1 : end])
            i = end
            continue
        else:
            out.tokens.append(t)
        i += 1
    return out


def _row_period(toks: Sequence[_Tok], i: int) -> str | None:
    """START/END of ``[GENERATED ALWAYS] AS ROW START|END`` at ``i``, else None."""
    words = [t.word for t in toks[i : i + 5]]
    if words[:1] == ["GENERATED"]:
        words = words[2:] if words[1:2] == ["ALWAYS"] else []
    if words[:2] == ["AS", "ROW"] and words[2:3] in (["START"], ["END"]):
        return words[2]
    return None


def _balanced(toks: Sequence[_Tok]) -> bool:
    depth = 0
    for t in toks:
        depth += (t.type == "L_PAREN") - (t.type == "R_PAREN")
        if depth < 0:
            return False
    return depth == 0


def _strip_position(toks: list[_Tok]) -> tuple[list[_Tok], bool, str | None]:
    """Split off a trailing ``FIRST`` or ``AFTER col``."""
    if toks and toks[-1].word == "FIRST":
        return toks[:-1], True, None
    if len(toks) >= 2 and toks[-2].word == "AFTER" and toks[-1].is_name:
        return toks[:-2], False, toks[-1].text
    return toks, False, None


def _sqlglot_constraints(attr_text: str, sql: str) -> list:
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(f"CREATE TABLE _t (_c TEXT {attr_text})", read="mysql")
    except Exception as e:
        why = str(e).splitlines()[0]
        raise DdlParseError(sql, f"column attributes {attr_text!r} cannot be parsed ({why})") from None
    schema = tree.this if isinstance(tree, exp.Create) else None
    defs = schema.expressions if isinstance(schema, exp.Schema) else []
    if len(defs) != 1 or not isinstance(defs[0], exp.ColumnDef):
        raise DdlParseError(sql, f"column attributes {attr_text!r} are not one column definition")
    return [c.args.get("kind") for c in defs[0].args.get("constraints") or []]


@dataclass
class _ReadAttributes:
    nullable: bool | None = None
    default: str | None = None
    primary_key: bool = False
    unique: bool = False
    auto_increment: bool = False
    generated: str | None = None
    charset: str | None = None
    collation: str | None = None


def _read_constraints(kinds: list) -> _ReadAttributes:
    from sqlglot import exp

    out = _ReadAttributes()
    for kind in kinds:
        name = type(kind).__name__
        if isinstance(kind, exp.NotNullColumnConstraint):
            out.nullable = bool(kind.args.get("allow_null"))
        elif isinstance(kind, exp.DefaultColumnConstraint):
            value = kind.this
            if isinstance(value, exp.Collate):  # DEFAULT 'a' COLLATE x: the column's collation
                out.collation = value.expression.name.lower()
                value = value.this
            out.default = value.sql(dialect="mysql")
        elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
            out.primary_key = True
        elif isinstance(kind, exp.UniqueColumnConstraint):
            out.unique = True
        elif isinstance(kind, exp.AutoIncrementColumnConstraint):
            out.auto_increment = True
        elif isinstance(kind, exp.CharacterSetColumnConstraint):
            out.charset = kind.this.name.lower()
        elif isinstance(kind, exp.CollateColumnConstraint):
            out.collation = kind.this.name.lower()
        elif name in ("ComputedColumnConstraint", "GeneratedAsIdentityColumnConstraint"):
            out.generated = "stored" if kind.args.get("persisted") else "virtual"
    return out


def _resolve_charset(
    spec: _TypeSpec, attrs: _ReadAttributes, server: ServerVersion | None
) -> tuple[str | None, str | None]:
    charset = normalize_charset(spec.charset or attrs.charset, server)
    collation = normalize_collation(spec.collation or attrs.collation, server)
    if charset is None and collation:
        charset = charset_of_collation(collation)
    if spec.binary_collation and collation is None and charset not in (None, "binary"):
        collation = f"{charset}_bin"
    if charset == "binary":
        collation = "binary"
    return charset, collation


def parse_column(
    toks: Sequence[_Tok], sql: str, server: ServerVersion | None, with_position: bool = True
) -> _ColumnParse:
    """A column definition (``name type attributes [FIRST | AFTER col]``) from its tokens."""
    toks = list(toks)
    first, after = False, None
    if with_position:
        toks, first, after = _strip_position(toks)
    cur = _Cursor(toks, sql)
    name = cur.name()
    spec = _read_type(cur)
    pre = _prefilter_attributes(cur.rest())
    if not _balanced(pre.tokens):
        raise DdlParseError(sql, f"unbalanced parentheses in the definition of column {name!r}")
    attrs = _read_constraints(_sqlglot_constraints(_join(pre.tokens), sql) if pre.tokens else [])
    charset, collation = _resolve_charset(spec, attrs, server)
    fields = _type_fields(spec, charset, collation, bool(server and server.is_mariadb), sql)
    serial = spec.base == "serial" or pre.serial_default
    nullable = attrs.nullable if attrs.nullable is not None else True
    if attrs.primary_key or serial:
        nullable = False
    default = pre.default if pre.default is not None else attrs.default
    column = ColumnDef(
        name=name,
        nullable=nullable,
        default=default,
        has_default=default is not None,
        generated=pre.generated or attrs.generated,
        auto_increment=attrs.auto_increment or serial,
        invisible=pre.invisible,
        binary_collation=spec.binary_collation and charset is None and fields["data_type"] in TEXT_TYPES,
        **fields,
    )
    return _ColumnParse(column, attrs.primary_key, attrs.unique or serial, first, after)


def _default_text(toks: Sequence[_Tok], sql: str) -> str:
    """The SQL text of a DEFAULT value, normalized the way column definitions have it."""
    kinds = _sqlglot_constraints("DEFAULT " + _join(toks), sql)
    return _read_constraints(kinds).default or "NULL"


# --- keys ------------------------------------------------------------------------------------


def _key_columns(toks: Sequence[_Tok], sql: str) -> tuple[str, ...] | None:
    """Column names of the first parenthesised key part list; None if a part is an expression."""
    start = next((i for i, t in enumerate(toks) if t.type == "L_PAREN"), None)
    if start is None:
        raise DdlParseError(sql, f"key definition {_join(toks)!r} lists no columns")
    names: list[str] = []
    for part in _split(toks[start + 1 : _matching_paren(toks, start)]):
        if not part or not part[0].is_name:
            return None  # a functional key part ((expr)): not a column
        names.append(part[0].text)
    return tuple(names)


# --- statements ------------------------------------------------------------------------------


@dataclass
class _Context:
    sql: str
    database: str
    server: ServerVersion | None
    tables: list[TableId] = field(default_factory=list)  # named so far, for DdlParseError.tables

    def table(self, cur: _Cursor) -> TableId:
        """A table name at the cursor (recorded for error reports)."""
        t = cur.table(self.database)
        self.tables.append(t)
        return t

    def fail(self, why: str) -> DdlParseError:
        return DdlParseError(self.sql, why)


def _charset_options(toks: Sequence[_Tok], ctx: _Context) -> tuple[str | None, str | None, bool]:
    """Table-level ``[DEFAULT] CHARACTER SET [=] x`` / ``COLLATE [=] y`` among table options."""
    cur = _Cursor([t for t in _top_level(toks)], ctx.sql)
    charset = collation = None
    found = False
    while not cur.done:
        if cur.accept("CHARACTER", "SET") or cur.accept("CHARSET"):
            charset, found = _read_charset_name(cur), True
        elif cur.accept("COLLATE"):
            collation, found = _read_charset_name(cur), True
        else:
            cur.next()
    collation = normalize_collation(collation, ctx.server)
    charset = normalize_charset(charset, ctx.server) or (charset_of_collation(collation) if collation else None)
    if charset == "default":
        charset = None
    return charset, collation, found


def _top_level(toks: Sequence[_Tok]) -> list[_Tok]:
    """The tokens outside any parentheses."""
    out, depth = [], 0
    for t in toks:
        if t.type == "L_PAREN":
            depth += 1
        elif t.type == "R_PAREN":
            depth -= 1
        elif depth == 0:
            out.append(t)
    return out


def _create_table(cur: _Cursor, ctx: _Context) -> list[SchemaChange]:
    or_replace = cur.accept("OR", "REPLACE")
    if cur.accept("TEMPORARY"):
        return []  # temporary tables have no rows in a row-format binlog
    if not cur.accept("TABLE"):
        return []  # CREATE INDEX / VIEW / DATABASE / USER / TRIGGER ...: no table changes
    if_not_exists = cur.accept("IF", "NOT", "EXISTS") and not or_replace
    table = ctx.table(cur)
    if cur.accept("LIKE"):
        return [CreateTable(table, like=ctx.table(cur), if_not_exists=if_not_exists)]
    body: list[_Tok] = []
    if (head := cur.peek()) is not None and head.type == "L_PAREN":
        end = _matching_paren(cur.toks, cur.i)
        body = cur.toks[cur.i + 1 : end]
        cur.i = end + 1
    rest = cur.rest()
    if body and body[0].word == "LIKE":
        like = ctx.table(_Cursor(body[1:], ctx.sql))
        return [CreateTable(table, like=like, if_not_exists=if_not_exists)]
    if body and (body[0].word in ("SELECT", "WITH", "VALUES", "TABLE") or body[0].type == "L_PAREN"):
        body, rest = [], body + rest  # CREATE TABLE t (SELECT ...)
    options, query = _split_query(rest)
    charset, collation, _ = _charset_options(options, ctx)
    columns, pk, uniques = _table_elements(body, ctx) if body else ((), (), ())
    if not columns and not query:
        raise ctx.fail("CREATE TABLE without columns")
    return [CreateTable(table, columns, pk, uniques, None, charset, collation, if_not_exists, columns_unknown=query)]


_QUERY_START = {"SELECT", "WITH", "VALUES", "TABLE", "AS", "IGNORE", "REPLACE"}


def _split_query(toks: list[_Tok]) -> tuple[list[_Tok], bool]:
    """Table options, and whether a query (CREATE TABLE ... SELECT) follows them."""
    depth = 0
    for i, t in enumerate(toks):
        if t.type == "L_PAREN":
            if (
                depth == 0
                and i + 1 < len(toks)
                and toks[i + 1].word in ("SELECT", "WITH")
                and (i == 0 or toks[i - 1].word in _QUERY_START)
            ):
                return toks[:i], True
            depth += 1
        elif t.type == "R_PAREN":
            depth -= 1
        elif depth == 0 and t.word in _QUERY_START:
            if t.word == "WITH" and i + 1 < len(toks) and toks[i + 1].word == "SYSTEM":
                continue  # WITH SYSTEM VERSIONING, a table option
            return toks[:i], True
    return toks, False


def _table_elements(
    body: list[_Tok], ctx: _Context
) -> tuple[tuple[ColumnDef, ...], tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Columns, primary key and unique keys of a CREATE TABLE body."""
    columns: list[ColumnDef] = []
    pk: tuple[str, ...] = ()
    uniques: list[tuple[str, ...]] = []
    for element in _split(body):
        if not element:
            raise ctx.fail("empty element in CREATE TABLE")
        kind, key = _key_element(element, ctx)
        if kind == "primary":
            pk = key or ()
        elif kind == "unique":
            if key:
                uniques.append(key)
        elif kind is None:
            parsed = parse_column(element, ctx.sql, ctx.server, with_position=False)
            columns.append(parsed.column)
            if parsed.primary_key:
                pk = (parsed.column.name,)
            if parsed.unique:
                uniques.append((parsed.column.name,))
    by_lower = {c.name.lower(): c.name for c in columns}

    def resolve(names: tuple[str, ...]) -> tuple[str, ...]:
        missing = [n for n in names if n.lower() not in by_lower]
        if missing:
            raise ctx.fail(f"key on unknown column(s) {missing}")
        return tuple(by_lower[n.lower()] for n in names)

    pk = resolve(pk)
    pk_lower = {n.lower() for n in pk}
    columns = [dataclasses.replace(c, nullable=False) if c.name.lower() in pk_lower else c for c in columns]
    return tuple(columns), pk, tuple(resolve(u) for u in uniques)


_INDEX_WORDS = {"INDEX", "KEY", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK"}


def _key_element(toks: list[_Tok], ctx: _Context) -> tuple[str | None, tuple[str, ...] | None]:
    """('primary'|'unique'|'other', key columns) for an index/constraint element, (None, None)
    for a column definition."""
    cur = _Cursor(toks, ctx.sql)
    if cur.accept("CONSTRAINT"):
        cur.accept("IF", "NOT", "EXISTS")
        if cur.word() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            cur.next()  # the constraint's name
    if cur.accept("PRIMARY", "KEY"):
        return "primary", _key_columns(cur.rest(), ctx.sql)
    if cur.accept("UNIQUE"):
        return "unique", _key_columns(cur.rest(), ctx.sql)
    w = cur.word()
    if w in _INDEX_WORDS or (w in ("PERIOD", "VECTOR") and cur.word(1) in ("FOR", "INDEX", "KEY")):
        return "other", None
    if cur.i > 0:
        raise ctx.fail(f"unknown constraint {_join(toks)!r}")
    return None, None


def _at_pair(cur: _Cursor, pairs: dict[str, Any]) -> bool:
    """Whether the cursor is at one of the two-word phrases ``{first: second(s)}``."""
    second = pairs.get(cur.word() or "")
    return second is not None and cur.word(1) in ((second,) if isinstance(second, str) else second)


def _drops_no_column(cur: _Cursor) -> bool:
    """After DROP: whether what is dropped is an index, constraint, partition ... (not a column)."""
    return cur.word() in ("INDEX", "KEY", "FOREIGN", "CHECK", "PARTITION") or _at_pair(
        cur, {"SYSTEM": "VERSIONING", "PERIOD": "FOR"}
    )


# --- ALTER TABLE -----------------------------------------------------------------------------

# First words of ALTER TABLE specifications that never change the row shape (table options,
# index and partition maintenance ...). CHARACTER SET / COLLATE among them are looked for.
_NO_SHAPE_CLAUSES = {
    "ALGORITHM",
    "LOCK",
    "ENGINE",
    "TYPE",
    "AUTO_INCREMENT",
    "AVG_ROW_LENGTH",
    "CHECKSUM",
    "TABLE_CHECKSUM",
    "COMMENT",
    "COMPRESSION",
    "CONNECTION",
    "DATA",
    "INDEX",
    "DELAY_KEY_WRITE",
    "ENCRYPTION",
    "ENCRYPTED",
    "ENCRYPTION_KEY_ID",
    "ENGINE_ATTRIBUTE",
    "SECONDARY_ENGINE_ATTRIBUTE",
    "SECONDARY_ENGINE",
    "SECONDARY_LOAD",
    "SECONDARY_UNLOAD",
    "INSERT_METHOD",
    "KEY_BLOCK_SIZE",
    "MAX_ROWS",
    "MIN_ROWS",
    "PACK_KEYS",
    "PASSWORD",
    "ROW_FORMAT",
    "STATS_AUTO_RECALC",
    "STATS_PERSISTENT",
    "STATS_SAMPLE_PAGES",
    "TABLESPACE",
    "UNION",
    "FORCE",
    "ORDER",
    "DISABLE",
    "ENABLE",
    "DISCARD",
    "IMPORT",
    "PARTITION",
    "PARTITIONS",
    "REMOVE",
    "COALESCE",
    "REORGANIZE",
    "EXCHANGE",
    "ANALYZE",
    "CHECK",
    "OPTIMIZE",
    "REBUILD",
    "REPAIR",
    "TRUNCATE",
    "WITH",
    "WITHOUT",
    "PAGE_CHECKSUM",
    "PAGE_COMPRESSED",
    "PAGE_COMPRESSION_LEVEL",
    "IETF_QUOTES",
    "TRANSACTIONAL",
    "SEQUENCE",
    "AUTOEXTEND_SIZE",
    "STORAGE",
    "DEFAULT",
    "CHARACTER",
    "CHARSET",
    "COLLATE",
    "UPGRADE",
    "START",
    "SUBPARTITION",
}


_CLAUSE_WORDS = _NO_SHAPE_CLAUSES | {"ADD", "DROP", "MODIFY", "CHANGE", "RENAME", "ALTER", "CONVERT"}


def _split_clauses(toks: list[_Tok]) -> list[list[_Tok]]:
    """ALTER specifications: split at top-level commas, and before trailing partition options
    (``PARTITION BY`` / ``REMOVE PARTITIONING``, which follow the last one without a comma)."""
    clauses: list[list[_Tok]] = []
    for part in _split(toks):
        depth, start = 0, 0
        for i, t in enumerate(part):
            if t.type == "L_PAREN":
                depth += 1
            elif t.type == "R_PAREN":
                depth -= 1
            elif (
                depth == 0
                and i > start
                and (
                    t.word == "PARTITION"
                    and i + 1 < len(part)
                    and part[i + 1].word == "BY"
                    or t.word == "REMOVE"
                    and i + 1 < len(part)
                    and part[i + 1].word == "PARTITIONING"
                )
            ):
                clauses.append(part[start:i])
                start = i
        clauses.append(part[start:])
    return [c for c in clauses if c]


@dataclass
class _Alter:
    """Translates the specifications of one ALTER TABLE into events, in clause order."""

    ctx: _Context
    table: TableId
    clauses: list[list[_Tok]]
    events: list[SchemaChange] = field(default_factory=list)
    in_partition_list: bool = False  # after DROP/TRUNCATE ... PARTITION p0: "p1" is a clause too
    deferred: list[SchemaChange] = field(default_factory=list)  # renames off temporary names
    table_renames: list[SchemaChange] = field(default_factory=list)  # the server renames last
    referenced_later: list[set[str]] = field(default_factory=list)

    def run(self) -> list[SchemaChange]:
        refs = [self._referenced(c) for c in self.clauses]
        self.referenced_later = [set().union(*refs[k + 1 :]) for k in range(len(refs))]
        for k, clause in enumerate(self.clauses):
            self._clause(k, clause)
        return self.events + self.deferred + self.table_renames

    # Which existing columns a clause names: in one ALTER they mean the columns as they
    # were before it, so a rename onto such a name must wait until the end.
    def _referenced(self, clause: list[_Tok]) -> set[str]:
        cur = _Cursor(clause, self.ctx.sql)
        try:
            if cur.accept("DROP"):
                if _drops_no_column(cur):
                    return set()
            elif cur.accept("RENAME"):
                if not cur.accept("COLUMN"):
                    return set()
            elif cur.accept("ALTER"):
                if cur.word() in ("INDEX", "KEY", "CHECK", "CONSTRAINT"):
                    return set()
            elif not (cur.accept("MODIFY") or cur.accept("CHANGE")):
                return set()
            cur.accept("COLUMN")
            cur.accept("IF", "EXISTS")
            return {cur.name().lower()} if (head := cur.peek()) is not None and head.is_name else set()
        except DdlParseError:
            return set()

    def _emit_rename(self, k: int, old: str, new: str) -> str:
        """Rename ``old`` to ``new``; returns the name the column has right after this clause."""
        if new.lower() in self.referenced_later[k] and new.lower() != old.lower():
            temp = f"#mysqlcdc-rename-{k}"
            self.events.append(RenameColumn(self.table, old, temp))
            self.deferred.append(RenameColumn(self.table, temp, new))
            return temp
        self.events.append(RenameColumn(self.table, old, new))
        return new

    def _clause(self, k: int, clause: list[_Tok]) -> None:
        cur = _Cursor(clause, self.ctx.sql)
        w = cur.word()
        if self.in_partition_list and w not in _CLAUSE_WORDS and clause[0].is_name:
            return  # the next partition name of a partition operation
        self.in_partition_list = cur.word(1) == "PARTITION" and w != "ADD"
        if cur.accept("ADD"):
            self._add(cur)
        elif cur.accept("DROP"):
            self._drop(cur)
        elif cur.accept("MODIFY"):
            cur.accept("COLUMN")
            if_exists = cur.accept("IF", "EXISTS")
            parsed = parse_column(cur.rest(), self.ctx.sql, self.ctx.server)
            self.events.append(
                AlterColumnType(self.table, parsed.column.name, parsed.column, parsed.first, parsed.after, if_exists)
            )
            self._column_keys(parsed)
        elif cur.accept("CHANGE"):
            self._change(k, cur)
        elif cur.accept("RENAME"):
            self._rename(k, cur)
        elif cur.accept("ALTER"):
            self._alter_column(cur)
        elif cur.accept("CONVERT", "TO"):
            charset, collation, found = _charset_options(cur.rest(), self.ctx)
            if not found:
                raise self.ctx.fail("CONVERT TO without a character set")
            self.events.append(ConvertCharset(self.table, charset, collation))
        elif w in _NO_SHAPE_CLAUSES:
            charset, collation, found = _charset_options(clause, self.ctx)
            if found:
                self.events.append(SetDefaultCharset(self.table, charset, collation))
        else:
            raise self.ctx.fail(f"unknown ALTER TABLE clause {_join(clause)[:60]!r}")

    def _column_keys(self, parsed: _ColumnParse) -> None:
        if parsed.primary_key:
            self.events.append(AlterKey(self.table, (parsed.column.name,)))

    def _add(self, cur: _Cursor) -> None:
        w = cur.word()
        if w in ("PRIMARY", "CONSTRAINT", "UNIQUE") or w in _INDEX_WORDS:
            kind, key = _key_element(cur.rest(), self.ctx)
            if kind == "primary":
                self.events.append(AlterKey(self.table, key or ()))
            return
        if w == "PARTITION" or _at_pair(cur, {"PERIOD": "FOR", "SYSTEM": "VERSIONING", "VECTOR": ("INDEX", "KEY")}):
            return
        cur.accept("COLUMN")
        if_not_exists = cur.accept("IF", "NOT", "EXISTS")
        t = cur.peek()
        if t is not None and t.type == "L_PAREN":  # ADD COLUMN (a INT, b INT)
            end = _matching_paren(cur.toks, cur.i)
            for element in _split(cur.toks[cur.i + 1 : end]):
                kind, key = _key_element(element, self.ctx)
                if kind == "primary":
                    self.events.append(AlterKey(self.table, key or ()))
                elif kind is None:
                    parsed = parse_column(element, self.ctx.sql, self.ctx.server, with_position=False)
                    self.events.append(AddColumn(self.table, parsed.column, if_not_exists=if_not_exists))
                    self._column_keys(parsed)
            return
        parsed = parse_column(cur.rest(), self.ctx.sql, self.ctx.server)
        self.events.append(AddColumn(self.table, parsed.column, parsed.first, parsed.after, if_not_exists))
        self._column_keys(parsed)

    def _drop(self, cur: _Cursor) -> None:
        if cur.accept("PRIMARY", "KEY"):
            self.events.append(AlterKey(self.table, ()))
            return
        if cur.accept("CONSTRAINT"):
            cur.accept("IF", "EXISTS")
            if (head := cur.peek()) is not None and head.is_name and head.text.upper() == "PRIMARY":
                self.events.append(AlterKey(self.table, ()))
            return
        if _drops_no_column(cur):
            return
        cur.accept("COLUMN")
        if_exists = cur.accept("IF", "EXISTS")
        self.events.append(DropColumn(self.table, cur.name(), if_exists))

    def _change(self, k: int, cur: _Cursor) -> None:
        cur.accept("COLUMN")
        if_exists = cur.accept("IF", "EXISTS")
        old = cur.name()
        parsed = parse_column(cur.rest(), self.ctx.sql, self.ctx.server)
        name = parsed.column.name
        if name != old:
            name = self._emit_rename(k, old, name)
        column = dataclasses.replace(parsed.column, name=name)
        self.events.append(AlterColumnType(self.table, name, column, parsed.first, parsed.after, if_exists))
        self._column_keys(dataclasses.replace(parsed, column=column))

    def _rename(self, k: int, cur: _Cursor) -> None:
        if cur.accept("COLUMN"):
            if_exists = cur.accept("IF", "EXISTS")
            old = cur.name()
            if not cur.accept("TO"):
                raise self.ctx.fail("RENAME COLUMN without TO")
            new = cur.name()
            if if_exists:
                self.events.append(RenameColumn(self.table, old, new, if_exists=True))
            else:
                self._emit_rename(k, old, new)
            return
        if cur.word() in ("INDEX", "KEY"):
            return
        cur.accept("TO") or cur.accept("AS") or cur.accept_type("EQ")
        self.table_renames.append(RenameTable(self.table, self.ctx.table(cur)))

    def _alter_column(self, cur: _Cursor) -> None:
        if cur.word() in ("INDEX", "KEY", "CHECK", "CONSTRAINT"):
            return
        cur.accept("COLUMN")
        cur.accept("IF", "EXISTS")
        name = cur.name()
        if cur.accept("SET", "DEFAULT"):
            self.events.append(SetColumnDefault(self.table, name, _default_text(cur.rest(), self.ctx.sql)))
        elif cur.accept("DROP", "DEFAULT"):
            self.events.append(SetColumnDefault(self.table, name, None))
        elif not (cur.accept("SET", "VISIBLE") or cur.accept("SET", "INVISIBLE")):
            raise self.ctx.fail(f"unknown ALTER COLUMN action {_join(cur.rest())[:40]!r}")


def _alter(cur: _Cursor, ctx: _Context) -> list[SchemaChange]:
    cur.accept("ONLINE") or cur.accept("OFFLINE")
    cur.accept("IGNORE")
    if not cur.accept("TABLE"):
        return []  # ALTER DATABASE / VIEW / USER / EVENT / SEQUENCE ...
    cur.accept("IF", "EXISTS")
    table = ctx.table(cur)
    cur.skip_wait()
    return _Alter(ctx, table, _split_clauses(cur.rest())).run()


def _drop(cur: _Cursor, ctx: _Context) -> list[SchemaChange]:
    if cur.accept("DATABASE") or cur.accept("SCHEMA"):
        cur.accept("IF", "EXISTS")
        return [DropDatabase(cur.name())]
    if cur.accept("TEMPORARY"):
        return []
    if not (cur.accept("TABLE") or cur.accept("TABLES")):
        return []  # DROP INDEX / VIEW / USER / TRIGGER ...
    if_exists = cur.accept("IF", "EXISTS")
    out: list[SchemaChange] = []
    for part in _split(cur.rest()):
        part = [
            t for t in part if t.word not in ("WAIT", "NOWAIT", "RESTRICT", "CASCADE", "FORCE") and t.type != "NUMBER"
        ]
        out.append(DropTable(ctx.table(_Cursor(part, ctx.sql)), if_exists))
    return out


def _rename(cur: _Cursor, ctx: _Context) -> list[SchemaChange]:
    if not (cur.accept("TABLE") or cur.accept("TABLES")):
        return []  # RENAME USER
    cur.accept("IF", "EXISTS")
    out: list[SchemaChange] = []
    for part in _split(cur.rest()):
        pc = _Cursor(part, ctx.sql)
        old = ctx.table(pc)
        pc.skip_wait()
        if not pc.accept("TO"):
            raise ctx.fail("RENAME TABLE without TO")
        out.append(RenameTable(old, ctx.table(pc)))
    return out


def _truncate(cur: _Cursor, ctx: _Context) -> list[SchemaChange]:
    cur.accept("TABLE")
    return [TruncateTable(ctx.table(cur))]


_STATEMENTS: dict[str, Callable[[_Cursor, _Context], list[SchemaChange]]] = {
    "CREATE": _create_table,
    "ALTER": _alter,
    "DROP": _drop,
    "RENAME": _rename,
    "TRUNCATE": _truncate,
}
# CREATE statements whose bodies may hold other statements (and semicolons).
_COMPOUND = {"PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "DEFINER", "AGGREGATE", "PACKAGE"}


def _statements(toks: list[_Tok]) -> list[list[_Tok]]:
    """Statements at top-level semicolons; a routine/trigger definition ends the list."""
    out = []
    for stmt in _split(toks, "SEMICOLON"):
        if not stmt:
            continue
        out.append(stmt)
        words = [t.word for t in stmt[:4]]
        if words[0] == "CREATE" and _COMPOUND.intersection(w for w in words[1:] if w):
            break
    return out


def parse_ddl(sql: str, default_database: str, *, server: ServerVersion | None = None) -> list[SchemaChange]:
    """The schema changes ``sql`` makes, in order; [] for statements that change no table.

    ``default_database`` is the QUERY event's schema (the session's current database),
    used for unqualified table names. ``server`` decides which executable comments run
    and MariaDB-specific types (JSON is LONGTEXT there); None: every executable comment
    runs, MySQL types. Raises DdlParseError for DDL it cannot read.
    """
    text = unwrap_executable_comments(sql, server)
    ctx = _Context(sql, default_database or "", server)
    out: list[SchemaChange] = []
    for stmt in _statements(_tokenize(text)):
        cur = _Cursor(stmt, sql)
        handler = _STATEMENTS.get(cur.word() or "")
        if handler is not None:
            cur.next()
            try:
                out.extend(handler(cur, ctx))
            except DdlParseError as e:
                e.tables = tuple(dict.fromkeys(ctx.tables))
                raise
    return out


# --- prefilter -------------------------------------------------------------------------------


def might_touch(sql: str, captured_table_names: Iterable[str | TableId]) -> bool:
    """False only if ``sql`` certainly changes none of the captured tables (by bare name).

    A lower-case substring test, so it is cheap and errs towards True: a statement that
    names a captured table in any spelling (backquoted with doubled backquotes, double-quoted,
    in a comment) contains the name. DROP DATABASE names no table, so it counts too.
    """
    low = sql.lower()
    for entry in captured_table_names:
        name = (entry.table if isinstance(entry, TableId) else entry).lower()
        if name in low or name.replace("`", "``") in low or name.replace('"', '""') in low:
            return True
    if "database" in low or "schema" in low:
        return _is_drop_database(sql)
    return False


def _is_drop_database(sql: str) -> bool:
    try:
        toks = _tokenize(unwrap_executable_comments(sql))
    except DdlParseError:
        return True
    words = [t.word for t in toks[:2]]
    return words[0] == "DROP" and words[1] in ("DATABASE", "SCHEMA")
