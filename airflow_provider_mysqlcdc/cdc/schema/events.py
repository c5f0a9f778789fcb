"""Schema change events: what a DDL statement does to the shape of captured rows.

One event is one step a table's schema takes; :func:`..evolve.apply_change` applies it.
A statement may give several (``ALTER TABLE t ADD a INT, DROP b`` gives two, in clause
order; ``RENAME TABLE a TO b, c TO d`` gives two renames). Events are frozen dataclasses
with a JSON-safe ``to_dict()`` (``kind`` names the class) so the stream can keep them in its
schema history, and a ``tables`` property naming every table they mention, so the stream
can tell without a schema whether an event concerns a captured table.

Index-only and storage-only changes (ADD INDEX, ENGINE=, partitioning ...) have no event:
they do not change what a row image looks like.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Union, cast

from ..model import Column, TableId
from ..source.version import ServerVersion

# Types whose values are characters, so a column of them has a character set. JSON is
# not here: MySQL stores it as binary JSON; MariaDB's JSON is a LONGTEXT (ColumnDef says so).
TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"})

# Bytes per character (mbmaxlen) of the server's character sets: sizes TEXT(n) and decides
# whether CONVERT TO CHARACTER SET must move a TEXT column to a larger TEXT type.
_CHARSET_MAX_BYTES = {
    "big5": 2,
    "sjis": 2,
    "euckr": 2,
    "gb2312": 2,
    "gbk": 2,
    "cp932": 2,
    "ucs2": 2,
    "ujis": 3,
    "eucjpms": 3,
    "utf8mb3": 3,
    "utf8": 3,
    "utf8mb4": 4,
    "utf16": 4,
    "utf16le": 4,
    "utf32": 4,
    "gb18030": 4,
}
_TEXT_SIZES = (("tinytext", 255), ("text", 65535), ("mediumtext", 16777215), ("longtext", 4294967295))


def charset_max_bytes(charset: str | None) -> int:
    """Bytes per character of ``charset`` (1 for the single-byte ones and unknown names)."""
    return _CHARSET_MAX_BYTES.get((charset or "").lower(), 1)


def text_type_for_bytes(n: int) -> str:
    """The smallest TEXT type that holds ``n`` bytes, as the server picks it for TEXT(n)."""
    return next((name for name, size in _TEXT_SIZES if n <= size), "longtext")


def text_type_bytes(data_type: str) -> int | None:
    """The byte capacity of a TEXT/BLOB type (None for other types)."""
    sizes = dict(_TEXT_SIZES)
    blob = {"tinyblob": "tinytext", "blob": "text", "mediumblob": "mediumtext", "longblob": "longtext"}
    return sizes.get(blob.get(data_type, data_type))


def _utf8_is_utf8mb3(server: ServerVersion | None) -> bool:
    """Whether information_schema says utf8mb3 for utf8 (MySQL 8.0.30+, MariaDB 10.6+)."""
    if server is None:
        return True
    return server.at_least(10, 6) if server.is_mariadb else server.at_least(8, 0, 30)


def normalize_charset(name: str | None, server: ServerVersion | None = None) -> str | None:
    """A character set name as information_schema spells it (lower case, utf8 resolved)."""
    if name is None:
        return None
    name = name.lower()
    if name in ("utf8", "utf8mb3"):
        return "utf8mb3" if _utf8_is_utf8mb3(server) else "utf8"
    return name


def normalize_collation(name: str | None, server: ServerVersion | None = None) -> str | None:
    if name is None:
        return None
    name = name.lower()
    for prefix in ("utf8mb3_", "utf8_"):
        if name.startswith(prefix):
            return normalize_charset("utf8", server) + "_" + name[len(prefix) :]  # type: ignore[operator]
    return name


def charset_of_collation(collation: str) -> str | None:
    """The character set a collation belongs to: its name up to the first underscore
    (no character set name has one); None for MariaDB's charset-less ``uca1400_*`` names."""
    prefix = collation.lower().split("_", 1)[0]
    return None if prefix.startswith("uca") else prefix


@dataclass(frozen=True)
class ColumnDef:
    """A column as a DDL statement declares it, in information_schema.COLUMNS terms.

    ``data_type`` is the base type as DATA_TYPE has it (synonyms resolved: INTEGER is
    ``int``, BOOL ``tinyint``, REAL ``double``, VARCHAR CHARACTER SET binary ``varbinary``);
    ``column_type`` the declaration as COLUMN_TYPE has it (``bigint(20) unsigned``,
    ``enum('a','b')``), without display widths the statement did not give.

    ``charset`` is None for a character column declared without one: it then gets the
    table's default, which only the caller knows (``to_column(table_charset=...)``).
    ``collation`` is None unless the statement names it (or implies it, e.g. JSON on
    MariaDB). ``default`` is the SQL text of the DEFAULT clause (``'0'``, ``NULL``,
    ``CURRENT_TIMESTAMP()``), None without one. ``generated`` is ``virtual`` or ``stored``
    for generated columns (both are in FULL row images, so they are ordinary columns here),
    ``row_start``/``row_end`` for MariaDB's system-versioning period columns.
    ``binary_collation`` is the BINARY attribute of a column without charset (``VARCHAR(5)
    BINARY``): the ``_bin`` collation of whatever charset the column gets.
    """

    name: str
    data_type: str
    column_type: str
    nullable: bool = True
    charset: str | None = None
    collation: str | None = None
    char_max_length: int | None = None
    numeric_precision: int | None = None
    numeric_scale: int | None = None
    datetime_precision: int | None = None
    default: str | None = None
    has_default: bool = False
    generated: str | None = None
    auto_increment: bool = False
    invisible: bool = False
    binary_collation: bool = False

    @property
    def is_text(self) -> bool:
        return self.data_type in TEXT_TYPES

    def to_column(self, ordinal: int, table_charset: str | None = None, table_collation: str | None = None) -> Column:
        """The ``model.Column`` this declaration gives at position ``ordinal`` (1-based).

        A character column declared without charset and collation gets the table's
        (``table_collation`` only applies then: a column naming just a charset gets that
        charset's default collation, which is left None here).
        """
        charset, collation = self.charset, self.collation
        if charset is None and self.is_text:
            charset = table_charset
            if collation is None and charset and self.binary_collation:
                collation = f"{charset}_bin"
            elif collation is None and table_collation and charset_of_collation(table_collation) == charset:
                collation = table_collation
        return Column(
            name=self.name,
            ordinal=ordinal,
            data_type=self.data_type,
            column_type=self.column_type,
            nullable=self.nullable,
            charset=charset,
            collation=collation if charset else None,
            char_max_length=self.char_max_length,
            numeric_precision=self.numeric_precision,
            numeric_scale=self.numeric_scale,
            datetime_precision=self.datetime_precision,
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ColumnDef":
        return cls(**d)


class _Event:
    """Shared behaviour of the events: ``to_dict`` / ``from_dict`` driven by the field types."""

    kind: ClassVar[str]

    @property
    def tables(self) -> tuple[TableId, ...]:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            out[f.name] = _encode(getattr(self, f.name))
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]):
        if d.get("kind") != cls.kind:
            raise ValueError(f"not a {cls.kind} event: {d.get('kind')!r}")
        hints = _hints(cast(type, cls))  # mypy checks type[_Event] against Hashable by the instances' __hash__
        kwargs = {f.name: _decode(hints[f.name], d[f.name]) for f in dataclasses.fields(cls) if f.name in d}  # type: ignore[arg-type]
        return cls(**kwargs)


@dataclass(frozen=True)
class CreateTable(_Event):
    """CREATE TABLE. ``like`` is set for CREATE TABLE ... LIKE (the columns are then those of
    ``like``). ``columns_unknown`` is set for CREATE TABLE ... SELECT, whose columns come
    from the query: only the server knows them (a row-format binlog normally logs such a
    statement as a plain CREATE TABLE, so this is rare). ``charset``/``collation`` are the
    table's defaults, when given. With ``if_not_exists`` an existing table stays as it was.
    """

    kind: ClassVar[str] = "create_table"
    table: TableId
    columns: tuple[ColumnDef, ...] = ()
    primary_key: tuple[str, ...] = ()
    unique_keys: tuple[tuple[str, ...], ...] = ()
    like: TableId | None = None
    charset: str | None = None
    collation: str | None = None
    if_not_exists: bool = False
    columns_unknown: bool = False

    @property
    def tables(self) -> tuple[TableId, ...]:
        return (self.table,) if self.like is None else (self.table, self.like)


@dataclass(frozen=True)
class AddColumn(_Event):
    """ADD COLUMN, at the end unless ``first`` or ``after`` says otherwise."""

    kind: ClassVar[str] = "add_column"
    table: TableId
    column: ColumnDef
    first: bool = False
    after: str | None = None
    if_not_exists: bool = False

    @property
    def tables(self) -> tuple[TableId, ...]:
        return (self.table,)


@dataclass(frozen=True)
class DropColumn(_Event):
    kind: ClassVar[str] = "drop_column"
    table: TableId
    name: str
    if_exists: bool = False

    @property
    def tables(self) -> tuple[TableId, ...]:
        return (self.table,)


@dataclass(frozen=True)
class RenameColumn(_Event):
    kind: ClassVar[str] = "rename_column"
    table: TableId
    old: str
    new: str
    if_exists: bool = False

    @property
    def tables(self) -> tuple[TableId, ...]:
        return (self.table,)


@dataclass(frozen=True)
class AlterColumnType(_Event):
    """MODIFY (or the definition part of CHANGE): column ``name`` gets definition ``column``
    (whose name is the one the statement spells; MODIFY may change its letter case), and
    moves if ``first``/``after`` say so."""

    kind: ClassVar[str] = "alter_column_type"
    table: TableId
    name: str
    column: ColumnDef
    first: bool = False
    after: str | None = None
    if_exists: bool = False

    @property
    def tables(self) -> tuple[TableId, ...]:
        return (self.table,)


@dataclass(frozen=True)
class SetColumnDefault(_Event):
    """ALTER COLUMN ... SET DEFAULT / DROP DEFAULT: no change to the row shape."""

    kind: ClassVar[str] = "set_column_default"
    table: TableId
    name: str
    default: str | None = None

    @property
    def tables(self) -> tuple[TableId, ...]:
        return (self.table,)


@dataclass(frozen=True)
class AlterKey(_Event):
    """ADD PRIMARY KEY (``primary_key`` its columns) or DROP PRIMARY KEY (empty)."""

    kind: ClassVar[str] = "alter_key"
    table: TableId
    primary_key: tuple[str, ...] = ()

    @property
    def tables(self) -> tuple[TableId, ...]:
        return (self.table,)


@dataclass(frozen=True)
class ConvertCharset(_Event):
    """CONVERT TO CHARACTER SET: every character column gets ``charset`` (and ``collation``,
    None = the charset's default); TEXT columns may grow to a larger TEXT type."""

    kind: ClassVar[str] = "convert_charset"
    table: TableId
    charset: str | None
    collation: str | None = None

    @property
    def tables(self) -> tuple[TableId, ...]:
        return (self.table,)


@dataclass(frozen=True)
class SetDefaultCharset(_Event):
    """ALTER TABLE ... [DEFAULT] CHARACTER SET / COLLATE: existing columns keep theirs; the
    columns added or redefined later without one get it."""

    kind: ClassVar[str] = "set_default_charset"
    table: TableId
    charset: str | None
    collation: str | None = None

    @property
    def tables(self) -> tuple[TableId, ...]:
        return (self.table,)


@dataclass(frozen=True)
class RenameTable(_Event):
    kind: ClassVar[str] = "rename_table"
    old: TableId
    new: TableId

    @property
    def tables(self) -> tuple[TableId, ...]:
        return (self.old, self.new)


@dataclass(frozen=True)
class TruncateTable(_Event):
    kind: ClassVar[str] = "truncate_table"
    table: TableId

    @property
    def tables(self) -> tuple[TableId, ...]:
        return (self.table,)


@dataclass(frozen=True)
class DropTable(_Event):
    kind: ClassVar[str] = "drop_table"
    table: TableId
    if_exists: bool = False

    @property
    def tables(self) -> tuple[TableId, ...]:
        return (self.table,)


@dataclass(frozen=True)
class DropDatabase(_Event):
    """DROP DATABASE: every table of ``database`` is gone (``tables`` cannot list them)."""

    kind: ClassVar[str] = "drop_database"
    database: str

    @property
    def tables(self) -> tuple[TableId, ...]:
        return ()


SchemaChange = Union[
    CreateTable,
    AddColumn,
    DropColumn,
    RenameColumn,
    AlterColumnType,
    SetColumnDefault,
    AlterKey,
    ConvertCharset,
    SetDefaultCharset,
    RenameTable,
    TruncateTable,
    DropTable,
    DropDatabase,
]

EVENT_TYPES: dict[str, type[_Event]] = {c.kind: c for c in typing.get_args(SchemaChange)}


def change_from_dict(d: Mapping[str, Any]) -> SchemaChange:
    """The event a ``to_dict()`` gave (its ``kind`` picks the class)."""
    cls = EVENT_TYPES.get(d.get("kind"))  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown schema change kind {d.get('kind')!r}")
    return cls.from_dict(d)


# --- JSON codec ------------------------------------------------------------------------------
# The events hold only TableIds, ColumnDefs, strings, bools and (nested) tuples of those;
# encoding follows the value, decoding the field's declared type.


def _encode(value: Any) -> Any:
    if isinstance(value, TableId):
        return {"database": value.database, "table": value.table}
    if isinstance(value, ColumnDef):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, globalns={**globals(), "TableId": TableId})


def _decode(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return _decode(inner, value)
    if origin is tuple:
        inner = typing.get_args(hint)[0]
        return tuple(_decode(inner, v) for v in value)
    if hint is TableId:
        return TableId(value["database"], value["table"])
    if hint is ColumnDef:
        return ColumnDef.from_dict(value)
    return value
