"""A table's schema after a schema change event: pure functions over ``TableSchema``.

The result is what ``discovery.read_table_schema`` would read from the server after the
statement, as far as a statement alone tells: column names and order (ordinals 1..n),
types, nullability, charsets, and the keys.

Keys follow the server:

* PRIMARY KEY columns are NOT NULL (ADD PRIMARY KEY makes them so; MODIFY cannot undo it).
* Dropping a column drops it from the primary key (MySQL 8 does so for a multi-column key;
  MariaDB refuses that statement, so it never reaches the binlog); dropping the only
  key column drops the key.
* Renames rename key columns. Column names match case-insensitively, as on the server.

``chunk_key`` follows the primary key when it was the primary key (or when a table without
one gets one), else keeps its columns while they exist. ``row_identity`` is the primary key, else the unique
key it was (while its columns exist and are NOT NULL), else every column: unique keys
added by ALTER TABLE are not tracked (index changes have no events).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from ..errors import CdcError
from ..model import Column, TableId, TableSchema
from .events import (
    TEXT_TYPES,
    AddColumn,
    AlterColumnType,
    AlterKey,
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
    text_type_bytes,
    text_type_for_bytes,
)

# TableSchema.extra keys: the table's default charset and collation, when known.
DEFAULT_CHARSET_KEY = "default_charset"
DEFAULT_COLLATION_KEY = "default_collation"


class SchemaChangeError(CdcError):
    """An event does not fit the schema it is applied to: the tracked schema has drifted
    from the server's (or the event needs something the caller did not give)."""


# --- public API ------------------------------------------------------------------------------


def apply_change(
    schema: TableSchema | None,
    change: SchemaChange,
    table_charset: str | None = None,
    *,
    like: TableSchema | None = None,
) -> TableSchema | None:
    """The schema of the changed table after ``change`` (None once it is dropped).

    ``schema`` is the table's schema before (None if it does not exist yet; for a
    RenameTable the schema of ``change.old``; the result is then under ``change.new``).
    ``table_charset`` is the table's default character set, given to character columns
    declared without one (else the one a CreateTable/SetDefaultCharset recorded in
    ``schema.extra``). ``like`` is the schema of the source table of CREATE TABLE ... LIKE.
    """
    if isinstance(change, CreateTable):
        return _create(schema, change, table_charset, like)
    if isinstance(change, DropDatabase):
        return None if schema is None or schema.table_id.database == change.database else schema
    if isinstance(change, DropTable):
        return None
    if schema is None:
        if isinstance(change, TruncateTable):
            return None
        raise SchemaChangeError(f"{_event_name(change)} on {change.tables[0]}, whose schema is not known")
    _check_table(schema, change)
    handler = _HANDLERS.get(type(change))
    if handler is None:
        raise TypeError(f"not a schema change: {change!r}")
    return handler(schema, change, table_charset)


def apply_to_tables(
    schemas: Mapping[TableId, TableSchema], change: SchemaChange, table_charset: str | None = None
) -> dict[TableId, TableSchema]:
    """``schemas`` (the tracked tables) after ``change``, as a new dict.

    Events on untracked tables leave it as it is, except that a rename onto a tracked name
    (or DROP DATABASE) removes that entry: the name now holds a table nobody tracked.
    CREATE TABLE ... LIKE a tracked table adds the new table.
    """
    out = dict(schemas)
    if isinstance(change, DropDatabase):
        return {t: s for t, s in out.items() if t.database != change.database}
    if isinstance(change, RenameTable):
        old = out.pop(change.old, None)
        out.pop(change.new, None)
        if old is not None:
            out[change.new] = dataclasses.replace(old, table_id=change.new)
        return out
    if isinstance(change, CreateTable):
        like = out.get(change.like) if change.like is not None else None
        if change.like is not None and like is None:
            if change.table in out and not change.if_not_exists:
                del out[change.table]
            return out
        out[change.table] = _create(out.get(change.table), change, table_charset, like)
        return out
    table = change.tables[0]
    if table not in out:
        return out
    changed = apply_change(out[table], change, table_charset)
    if changed is None:
        del out[table]
    else:
        out[table] = changed
    return out


# --- helpers ---------------------------------------------------------------------------------


def _event_name(change: SchemaChange) -> str:
    return type(change).__name__


def _check_table(schema: TableSchema, change: SchemaChange) -> None:
    expected = change.old if isinstance(change, RenameTable) else change.tables[0]
    same = (schema.table_id.database.lower(), schema.table_id.table.lower()) == (
        expected.database.lower(),
        expected.table.lower(),
    )
    if not same:
        raise SchemaChangeError(f"{_event_name(change)} for {expected} applied to the schema of {schema.table_id}")


def _index(schema: TableSchema, name: str) -> int | None:
    low = name.lower()
    return next((i for i, c in enumerate(schema.columns) if c.name.lower() == low), None)


def _require(schema: TableSchema, name: str, change: SchemaChange) -> int:
    i = _index(schema, name)
    if i is None:
        raise SchemaChangeError(
            f"{_event_name(change)}: {schema.table_id} has no column {name!r} "
            f"(it has {', '.join(schema.column_names)}); the tracked schema differs from the server's"
        )
    return i


def _default_charset(schema: TableSchema | None, table_charset: str | None) -> str | None:
    if table_charset:
        return table_charset
    return (schema.extra or {}).get(DEFAULT_CHARSET_KEY) if schema is not None else None


def _default_collation(schema: TableSchema | None, table_charset: str | None) -> str | None:
    """The table's default collation, if recorded and of the charset in force."""
    extra = (schema.extra or {}) if schema is not None else {}
    if table_charset and table_charset != extra.get(DEFAULT_CHARSET_KEY):
        return None
    return extra.get(DEFAULT_COLLATION_KEY)


def _with_defaults(schema: TableSchema, charset: str | None, collation: str | None) -> dict:
    extra = dict(schema.extra or {})
    extra.update({DEFAULT_CHARSET_KEY: charset, DEFAULT_COLLATION_KEY: collation})
    return extra


def _with_columns(
    schema: TableSchema,
    columns: list[Column],
    primary_key: tuple[str, ...],
    rename: Callable[[str], str | None] = lambda n: n,
    **extra_changes,
) -> TableSchema:
    """``schema`` with new columns and primary key: ordinals renumbered, PK columns NOT
    NULL, chunk key and row identity carried over (see the module docstring)."""
    pk_low = {n.lower() for n in primary_key}
    columns = [
        dataclasses.replace(c, ordinal=i + 1, nullable=c.nullable and c.name.lower() not in pk_low)
        for i, c in enumerate(columns)
    ]
    names = [c.name for c in columns]

    def carried(key: tuple[str, ...]) -> tuple[str, ...] | None:
        mapped = [rename(n) for n in key]
        return tuple(m for m in mapped if m is not None) if all(m is not None for m in mapped) else None

    old = schema
    if primary_key and (old.chunk_key == old.primary_key or not old.primary_key):
        chunk_key = primary_key  # it was the primary key, or a primary key appeared
    else:
        chunk_key = carried(old.chunk_key) or primary_key
    if primary_key:
        identity = primary_key
    elif old.row_identity and old.row_identity != old.primary_key and old.row_identity != old.column_names:
        kept = carried(old.row_identity)
        nullable = {c.name for c in columns if c.nullable}
        identity = kept if kept and not nullable.intersection(kept) else tuple(names)
    else:
        identity = tuple(names)
    return dataclasses.replace(
        schema,
        columns=tuple(columns),
        primary_key=primary_key,
        chunk_key=chunk_key,
        row_identity=identity,
        **extra_changes,
    )


def _renamed(old: str, new: str) -> Callable[[str], str | None]:
    low = old.lower()
    return lambda n: new if n.lower() == low else n


def _dropped(name: str) -> Callable[[str], str | None]:
    low = name.lower()
    return lambda n: None if n.lower() == low else n


def _position(schema: TableSchema, columns: list[Column], first: bool, after: str | None, change: SchemaChange) -> int:
    """Insert index for a column placed FIRST / AFTER ``after`` / at the end of ``columns``."""
    if first:
        return 0
    if after is None:
        return len(columns)
    low = after.lower()
    i = next((k for k, c in enumerate(columns) if c.name.lower() == low), None)
    if i is None:
        raise SchemaChangeError(
            f"{_event_name(change)}: {schema.table_id} has no column {after!r} to put a column after"
        )
    return i + 1


# --- per event -------------------------------------------------------------------------------


def _create(
    schema: TableSchema | None, change: CreateTable, table_charset: str | None, like: TableSchema | None
) -> TableSchema:
    if schema is not None and change.if_not_exists:
        return schema  # the server kept the existing table
    if change.columns_unknown:
        raise SchemaChangeError(
            f"CREATE TABLE {change.table} ... SELECT: its columns come from the query; read them from the "
            "server (or the table map of its first row event)"
        )
    if change.like is not None:
        if like is None:
            raise SchemaChangeError(
                f"CREATE TABLE {change.table} LIKE {change.like}: the schema of {change.like} is needed"
            )
        return dataclasses.replace(like, table_id=change.table, approx_rows=0)
    charset = change.charset or table_charset
    collation = change.collation if change.charset or change.collation else None
    columns = tuple(c.to_column(i + 1, charset, collation) for i, c in enumerate(change.columns))
    nullable = {c.name for c in columns if c.nullable}
    unique = sorted((k for k in change.unique_keys if not nullable.intersection(k)), key=len)
    identity = change.primary_key or (unique[0] if unique else tuple(c.name for c in columns))
    return TableSchema(
        table_id=change.table,
        columns=columns,
        primary_key=change.primary_key,
        chunk_key=change.primary_key,
        row_identity=identity,
        extra={DEFAULT_CHARSET_KEY: charset, DEFAULT_COLLATION_KEY: collation} if charset else {},
    )


def _add_column(schema: TableSchema, change: AddColumn, table_charset: str | None) -> TableSchema:
    if _index(schema, change.column.name) is not None:
        if change.if_not_exists:
            return schema
        raise SchemaChangeError(f"ADD COLUMN: {schema.table_id} already has a column {change.column.name!r}")
    columns = list(schema.columns)
    new = change.column.to_column(0, _default_charset(schema, table_charset), _default_collation(schema, table_charset))
    columns.insert(_position(schema, columns, change.first, change.after, change), new)
    return _with_columns(schema, columns, schema.primary_key)


def _drop_column(schema: TableSchema, change: DropColumn, table_charset: str | None) -> TableSchema:
    i = _index(schema, change.name)
    if i is None:
        if change.if_exists:
            return schema
        i = _require(schema, change.name, change)  # raises: no such column
    name = schema.columns[i].name
    columns = [c for c in schema.columns if c.name != name]
    pk = tuple(n for n in schema.primary_key if n.lower() != name.lower())
    return _with_columns(schema, columns, pk, _dropped(name))


def _rename_column(schema: TableSchema, change: RenameColumn, table_charset: str | None) -> TableSchema:
    i = _index(schema, change.old)
    if i is None:
        if change.if_exists:
            return schema
        i = _require(schema, change.old, change)  # raises: no such column
    j = _index(schema, change.new)
    if j is not None and j != i:
        raise SchemaChangeError(
            f"RENAME COLUMN {change.old} TO {change.new}: {schema.table_id} already has {change.new!r}"
        )
    old = schema.columns[i].name
    columns = list(schema.columns)
    columns[i] = dataclasses.replace(columns[i], name=change.new)
    rename = _renamed(old, change.new)
    return _with_columns(schema, columns, tuple(rename(n) or n for n in schema.primary_key), rename)


def _alter_column_type(schema: TableSchema, change: AlterColumnType, table_charset: str | None) -> TableSchema:
    i = _index(schema, change.name)
    if i is None:
        if change.if_exists:
            return schema
        i = _require(schema, change.name, change)  # raises: no such column
    before = schema.columns[i]
    charset = _default_charset(schema, table_charset)
    if charset is None and change.column.is_text and before.data_type in TEXT_TYPES:
        charset = before.charset  # best guess when the table default is unknown
    new = change.column.to_column(0, charset, _default_collation(schema, table_charset))
    columns = [c for k, c in enumerate(schema.columns) if k != i]
    at = i if not (change.first or change.after) else _position(schema, columns, change.first, change.after, change)
    columns.insert(at, new)
    rename = _renamed(before.name, new.name)
    return _with_columns(schema, columns, tuple(rename(n) or n for n in schema.primary_key), rename)


def _set_column_default(schema: TableSchema, change: SetColumnDefault, table_charset: str | None) -> TableSchema:
    _require(schema, change.name, change)
    return schema  # Column has no default: the row shape is unchanged


def _alter_key(schema: TableSchema, change: AlterKey, table_charset: str | None) -> TableSchema:
    pk = tuple(schema.columns[_require(schema, n, change)].name for n in change.primary_key)
    return _with_columns(schema, list(schema.columns), pk)


_TEXT_ORDER = ["tinytext", "text", "mediumtext", "longtext"]
_BLOBS = {"tinytext": "tinyblob", "text": "blob", "mediumtext": "mediumblob", "longtext": "longblob"}


def _converted(column: Column, charset: str, collation: str | None) -> Column:
    """A character column after CONVERT TO CHARACTER SET ``charset``."""
    t = column.data_type
    if t in _TEXT_ORDER and column.charset:
        chars = (text_type_bytes(t) or 0) // charset_max_bytes(column.charset)
        needed = text_type_for_bytes(chars * charset_max_bytes(charset))
        t = max(t, needed, key=_TEXT_ORDER.index)
    if charset == "binary":
        if t in _TEXT_ORDER:
            t = _BLOBS[t]
            return dataclasses.replace(
                column, data_type=t, column_type=t, charset=None, collation=None, char_max_length=text_type_bytes(t)
            )
        if t in ("char", "varchar"):
            t = {"char": "binary", "varchar": "varbinary"}[t]
            return dataclasses.replace(
                column, data_type=t, column_type=f"{t}({column.char_max_length})", charset=None, collation=None
            )
        return dataclasses.replace(column, charset="binary", collation="binary")
    column_type = t if t in _TEXT_ORDER else column.column_type
    return dataclasses.replace(
        column,
        data_type=t,
        column_type=column_type,
        charset=charset,
        collation=collation,
        char_max_length=text_type_bytes(t) if t in _TEXT_ORDER else column.char_max_length,
    )


def _convert_charset(schema: TableSchema, change: ConvertCharset, table_charset: str | None) -> TableSchema:
    charset = change.charset or _default_charset(schema, table_charset)
    if charset is None:
        raise SchemaChangeError(f"CONVERT TO CHARACTER SET DEFAULT on {schema.table_id}: the default is not known")
    columns = [_converted(c, charset, change.collation) if c.data_type in TEXT_TYPES else c for c in schema.columns]
    return _with_columns(schema, columns, schema.primary_key, extra=_with_defaults(schema, charset, change.collation))


def _set_default_charset(schema: TableSchema, change: SetDefaultCharset, table_charset: str | None) -> TableSchema:
    if change.charset is None:
        return schema
    return dataclasses.replace(schema, extra=_with_defaults(schema, change.charset, change.collation))


def _rename_table(schema: TableSchema, change: RenameTable, table_charset: str | None) -> TableSchema:
    return dataclasses.replace(schema, table_id=change.new)


def _truncate(schema: TableSchema, change: TruncateTable, table_charset: str | None) -> TableSchema:
    return schema


# each handler takes the event type it is registered under (looked up by type(change))
_HANDLERS: dict[type, Callable[[TableSchema, Any, str | None], TableSchema]] = {
    AddColumn: _add_column,
    DropColumn: _drop_column,
    RenameColumn: _rename_column,
    AlterColumnType: _alter_column_type,
    SetColumnDefault: _set_column_default,
    AlterKey: _alter_key,
    ConvertCharset: _convert_charset,
    SetDefaultCharset: _set_default_charset,
    RenameTable: _rename_table,
    TruncateTable: _truncate,
}
