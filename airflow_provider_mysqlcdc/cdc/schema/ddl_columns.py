"""The second and third layers of the DDL reader (``ddl.py``): a column definition as a ``Column``.

Data types are read from tokens here (``read_type``): sqlglot's MySQL dialect maps some synonyms
to a different type than the server does (``INT8`` is BIGINT, not TINYINT; ``REAL`` is DOUBLE;
``LONG`` is MEDIUMTEXT; ``FLOAT(30)`` is DOUBLE) and rejects others (``MIDDLEINT``,
``NATIONAL VARCHAR``, ``LONG VARCHAR``, ``FLOAT UNSIGNED``, ``POINT``, ``INET6``). The attributes
(NOT NULL, DEFAULT expressions, generated columns, keys, CHARACTER SET / COLLATE) are parsed by
sqlglot (``CREATE TABLE _t (_c TEXT <attributes>)``), after the few it rejects and that do not
change the row shape (``PERSISTENT``, ``COMPRESSED``, ``COLUMN_FORMAT``, ``SRID`` ...) are taken
off the token list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..source.version import ServerVersion
from .ddl_tokens import Cursor, DdlParseError, Tok, join_tokens, matching_paren, split_top_level
from .events import (
    TEXT_TYPES,
    ColumnDef,
    charset_max_bytes,
    charset_of_collation,
    normalize_charset,
    normalize_collation,
    text_type_bytes,
    text_type_for_bytes,
)

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


def _read_params(cur: Cursor) -> list[Any]:
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


def read_charset_name(cur: Cursor) -> str:
    cur.accept_type("EQ")
    return cur.next().text.lower()


def _read_type(cur: Cursor) -> _TypeSpec:
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


def _read_type_attributes(cur: Cursor, spec: _TypeSpec) -> None:
    """SIGNED/UNSIGNED/ZEROFILL and the character set spellings that follow a type."""
    while True:
        if cur.accept("UNSIGNED"):
            spec.unsigned = True
        elif cur.accept("SIGNED"):
            pass
        elif cur.accept("ZEROFILL"):
            spec.zerofill = spec.unsigned = True
        elif cur.accept("CHARACTER", "SET") or cur.accept("CHARSET") or cur.accept("CHAR", "SET"):
            spec.charset = read_charset_name(cur)
        elif cur.accept("COLLATE"):
            spec.collation = read_charset_name(cur)
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


@dataclass
class ColumnParse:
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

    tokens: list[Tok] = field(default_factory=list)
    invisible: bool = False
    serial_default: bool = False
    default: str | None = None
    generated: str | None = None


def _prefilter_attributes(toks: Sequence[Tok]) -> _Attributes:
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
            out.tokens.append(Tok("VAR", "STORED", "STORED"))
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
            out.default = join_tokens(toks[i + 1 : end])
            i = end
            continue
        else:
            out.tokens.append(t)
        i += 1
    return out


def _row_period(toks: Sequence[Tok], i: int) -> str | None:
    """START/END of ``[GENERATED ALWAYS] AS ROW START|END`` at ``i``, else None."""
    words = [t.word for t in toks[i : i + 5]]
    if words[:1] == ["GENERATED"]:
        words = words[2:] if words[1:2] == ["ALWAYS"] else []
    if words[:2] == ["AS", "ROW"] and words[2:3] in (["START"], ["END"]):
        return words[2]
    return None


def _balanced(toks: Sequence[Tok]) -> bool:
    depth = 0
    for t in toks:
        depth += (t.type == "L_PAREN") - (t.type == "R_PAREN")
        if depth < 0:
            return False
    return depth == 0


def _strip_position(toks: list[Tok]) -> tuple[list[Tok], bool, str | None]:
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
    toks: Sequence[Tok], sql: str, server: ServerVersion | None, with_position: bool = True
) -> ColumnParse:
    """A column definition (``name type attributes [FIRST | AFTER col]``) from its tokens."""
    toks = list(toks)
    first, after = False, None
    if with_position:
        toks, first, after = _strip_position(toks)
    cur = Cursor(toks, sql)
    name = cur.name()
    spec = _read_type(cur)
    pre = _prefilter_attributes(cur.rest())
    if not _balanced(pre.tokens):
        raise DdlParseError(sql, f"unbalanced parentheses in the definition of column {name!r}")
    attrs = _read_constraints(_sqlglot_constraints(join_tokens(pre.tokens), sql) if pre.tokens else [])
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
    return ColumnParse(column, attrs.primary_key, attrs.unique or serial, first, after)


def default_text(toks: Sequence[Tok], sql: str) -> str:
    """The SQL text of a DEFAULT value, normalized the way column definitions have it."""
    kinds = _sqlglot_constraints("DEFAULT " + join_tokens(toks), sql)
    return _read_constraints(kinds).default or "NULL"


def key_columns(toks: Sequence[Tok], sql: str) -> tuple[str, ...] | None:
    """Column names of the first parenthesised key part list; None if a part is an expression."""
    start = next((i for i, t in enumerate(toks) if t.type == "L_PAREN"), None)
    if start is None:
        raise DdlParseError(sql, f"key definition {join_tokens(toks)!r} lists no columns")
    names: list[str] = []
    for part in split_top_level(toks[start + 1 : matching_paren(toks, start)]):
        if not part or not part[0].is_name:
            return None  # a functional key part ((expr)): not a column
        names.append(part[0].text)
    return tuple(names)
