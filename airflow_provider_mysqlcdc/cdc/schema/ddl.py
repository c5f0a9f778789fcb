"""DDL statements of binlog QUERY events, read as schema change events.

The server writes a DDL statement into the binlog exactly as the client sent it (comments
included), with the session's current database as the event's schema. This module turns
such a statement into :mod:`.events` for the tables it changes; everything else (BEGIN,
GRANT, CREATE VIEW, SET ...) gives no event.

How it reads SQL, and why not with sqlglot's parser alone
---------------------------------------------------------
Lexing is sqlglot's MySQL tokenizer (quoting, escapes, comments; ``ddl_tokens.py``). Parsing is
in three layers:

1. *Statement skeleton* (this module, over tokens): which statement it is, which tables it
   names, and the list of its clauses (ALTER TABLE specifications, CREATE TABLE elements),
   split at top-level commas. sqlglot's MySQL parser falls back to an opaque
   ``exp.Command`` for much of the ALTER grammar the servers accept (``ALTER ONLINE``,
   ``ALTER IGNORE``, ``ADD COLUMN (a INT, b INT)``, ``CONVERT TO CHARACTER SET``,
   partitioning, ``RENAME TABLE a TO b, c TO d``), and one clause it does not know hides
   all the others. Reading the skeleton from tokens handles every statement the same way.
2. *Column definitions* (``ddl_columns.py``) are parsed by sqlglot (``CREATE TABLE _t (_c TEXT <attributes>)``):
   NOT NULL, DEFAULT expressions, generated columns, keys, CHARACTER SET / COLLATE. A few
   attributes sqlglot rejects and that do not change the row shape (``PERSISTENT``,
   ``COMPRESSED``, ``COLUMN_FORMAT``, ``SRID`` ...) are taken off the token list first.
3. *Data types* are read from tokens (``ddl_columns.py``): sqlglot's MySQL dialect maps some synonyms to a
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
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..model import TableId
from ..source.version import ServerVersion
from .ddl_columns import ColumnParse, default_text, key_columns, parse_column, read_charset_name
from .ddl_tokens import (
    Cursor,
    DdlParseError,
    Tok,
    join_tokens,
    matching_paren,
    split_top_level,
    tokenize,
    unwrap_executable_comments,
)
from .events import (
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
    charset_of_collation,
    normalize_charset,
    normalize_collation,
)


@dataclass
class _Context:
    sql: str
    database: str
    server: ServerVersion | None
    tables: list[TableId] = field(default_factory=list)  # named so far, for DdlParseError.tables

    def table(self, cur: Cursor) -> TableId:
        """A table name at the cursor (recorded for error reports)."""
        t = cur.table(self.database)
        self.tables.append(t)
        return t

    def fail(self, why: str) -> DdlParseError:
        return DdlParseError(self.sql, why)


def _charset_options(toks: Sequence[Tok], ctx: _Context) -> tuple[str | None, str | None, bool]:
    """Table-level ``[DEFAULT] CHARACTER SET [=] x`` / ``COLLATE [=] y`` among table options."""
    cur = Cursor([t for t in _top_level(toks)], ctx.sql)
    charset = collation = None
    found = False
    while not cur.done:
        if cur.accept("CHARACTER", "SET") or cur.accept("CHARSET"):
            charset, found = read_charset_name(cur), True
        elif cur.accept("COLLATE"):
            collation, found = read_charset_name(cur), True
        else:
            cur.next()
    collation = normalize_collation(collation, ctx.server)
    charset = normalize_charset(charset, ctx.server) or (charset_of_collation(collation) if collation else None)
    if charset == "default":
        charset = None
    return charset, collation, found


def _top_level(toks: Sequence[Tok]) -> list[Tok]:
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


def _create_table(cur: Cursor, ctx: _Context) -> list[SchemaChange]:
    or_replace = cur.accept("OR", "REPLACE")
    if cur.accept("TEMPORARY"):
        return []  # temporary tables have no rows in a row-format binlog
    if not cur.accept("TABLE"):
        return []  # CREATE INDEX / VIEW / DATABASE / USER / TRIGGER ...: no table changes
    if_not_exists = cur.accept("IF", "NOT", "EXISTS") and not or_replace
    table = ctx.table(cur)
    if cur.accept("LIKE"):
        return [CreateTable(table, like=ctx.table(cur), if_not_exists=if_not_exists)]
    body: list[Tok] = []
    if (head := cur.peek()) is not None and head.type == "L_PAREN":
        end = matching_paren(cur.toks, cur.i)
        body = cur.toks[cur.i + 1 : end]
        cur.i = end + 1
    rest = cur.rest()
    if body and body[0].word == "LIKE":
        like = ctx.table(Cursor(body[1:], ctx.sql))
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


def _split_query(toks: list[Tok]) -> tuple[list[Tok], bool]:
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
    body: list[Tok], ctx: _Context
) -> tuple[tuple[ColumnDef, ...], tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Columns, primary key and unique keys of a CREATE TABLE body."""
    columns: list[ColumnDef] = []
    pk: tuple[str, ...] = ()
    uniques: list[tuple[str, ...]] = []
    for element in split_top_level(body):
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


def _key_element(toks: list[Tok], ctx: _Context) -> tuple[str | None, tuple[str, ...] | None]:
    """('primary'|'unique'|'other', key columns) for an index/constraint element, (None, None)
    for a column definition."""
    cur = Cursor(toks, ctx.sql)
    if cur.accept("CONSTRAINT"):
        cur.accept("IF", "NOT", "EXISTS")
        if cur.word() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            cur.next()  # the constraint's name
    if cur.accept("PRIMARY", "KEY"):
        return "primary", key_columns(cur.rest(), ctx.sql)
    if cur.accept("UNIQUE"):
        return "unique", key_columns(cur.rest(), ctx.sql)
    w = cur.word()
    if w in _INDEX_WORDS or (w in ("PERIOD", "VECTOR") and cur.word(1) in ("FOR", "INDEX", "KEY")):
        return "other", None
    if cur.i > 0:
        raise ctx.fail(f"unknown constraint {join_tokens(toks)!r}")
    return None, None


def _at_pair(cur: Cursor, pairs: dict[str, Any]) -> bool:
    """Whether the cursor is at one of the two-word phrases ``{first: second(s)}``."""
    second = pairs.get(cur.word() or "")
    return second is not None and cur.word(1) in ((second,) if isinstance(second, str) else second)


def _drops_no_column(cur: Cursor) -> bool:
    """After DROP: whether what is dropped is an index, constraint, partition ... (not a column)."""
    return cur.word() in ("INDEX", "KEY", "FOREIGN", "CHECK", "PARTITION") or _at_pair(
        cur, {"SYSTEM": "VERSIONING", "PERIOD": "FOR"}
    )


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


def _split_clauses(toks: list[Tok]) -> list[list[Tok]]:
    """ALTER specifications: split at top-level commas, and before trailing partition options
    (``PARTITION BY`` / ``REMOVE PARTITIONING``, which follow the last one without a comma)."""
    clauses: list[list[Tok]] = []
    for part in split_top_level(toks):
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
    clauses: list[list[Tok]]
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
    def _referenced(self, clause: list[Tok]) -> set[str]:
        cur = Cursor(clause, self.ctx.sql)
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

    def _clause(self, k: int, clause: list[Tok]) -> None:
        cur = Cursor(clause, self.ctx.sql)
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
            raise self.ctx.fail(f"unknown ALTER TABLE clause {join_tokens(clause)[:60]!r}")

    def _column_keys(self, parsed: ColumnParse) -> None:
        if parsed.primary_key:
            self.events.append(AlterKey(self.table, (parsed.column.name,)))

    def _add(self, cur: Cursor) -> None:
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
            end = matching_paren(cur.toks, cur.i)
            for element in split_top_level(cur.toks[cur.i + 1 : end]):
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

    def _drop(self, cur: Cursor) -> None:
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

    def _change(self, k: int, cur: Cursor) -> None:
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

    def _rename(self, k: int, cur: Cursor) -> None:
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

    def _alter_column(self, cur: Cursor) -> None:
        if cur.word() in ("INDEX", "KEY", "CHECK", "CONSTRAINT"):
            return
        cur.accept("COLUMN")
        cur.accept("IF", "EXISTS")
        name = cur.name()
        if cur.accept("SET", "DEFAULT"):
            self.events.append(SetColumnDefault(self.table, name, default_text(cur.rest(), self.ctx.sql)))
        elif cur.accept("DROP", "DEFAULT"):
            self.events.append(SetColumnDefault(self.table, name, None))
        elif not (cur.accept("SET", "VISIBLE") or cur.accept("SET", "INVISIBLE")):
            raise self.ctx.fail(f"unknown ALTER COLUMN action {join_tokens(cur.rest())[:40]!r}")


def _alter(cur: Cursor, ctx: _Context) -> list[SchemaChange]:
    cur.accept("ONLINE") or cur.accept("OFFLINE")
    cur.accept("IGNORE")
    if not cur.accept("TABLE"):
        return []  # ALTER DATABASE / VIEW / USER / EVENT / SEQUENCE ...
    cur.accept("IF", "EXISTS")
    table = ctx.table(cur)
    cur.skip_wait()
    return _Alter(ctx, table, _split_clauses(cur.rest())).run()


def _drop(cur: Cursor, ctx: _Context) -> list[SchemaChange]:
    if cur.accept("DATABASE") or cur.accept("SCHEMA"):
        cur.accept("IF", "EXISTS")
        return [DropDatabase(cur.name())]
    if cur.accept("TEMPORARY"):
        return []
    if not (cur.accept("TABLE") or cur.accept("TABLES")):
        return []  # DROP INDEX / VIEW / USER / TRIGGER ...
    if_exists = cur.accept("IF", "EXISTS")
    out: list[SchemaChange] = []
    for part in split_top_level(cur.rest()):
        part = [
            t for t in part if t.word not in ("WAIT", "NOWAIT", "RESTRICT", "CASCADE", "FORCE") and t.type != "NUMBER"
        ]
        out.append(DropTable(ctx.table(Cursor(part, ctx.sql)), if_exists))
    return out


def _rename(cur: Cursor, ctx: _Context) -> list[SchemaChange]:
    if not (cur.accept("TABLE") or cur.accept("TABLES")):
        return []  # RENAME USER
    cur.accept("IF", "EXISTS")
    out: list[SchemaChange] = []
    for part in split_top_level(cur.rest()):
        pc = Cursor(part, ctx.sql)
        old = ctx.table(pc)
        pc.skip_wait()
        if not pc.accept("TO"):
            raise ctx.fail("RENAME TABLE without TO")
        out.append(RenameTable(old, ctx.table(pc)))
    return out


def _truncate(cur: Cursor, ctx: _Context) -> list[SchemaChange]:
    cur.accept("TABLE")
    return [TruncateTable(ctx.table(cur))]


_STATEMENTS: dict[str, Callable[[Cursor, _Context], list[SchemaChange]]] = {
    "CREATE": _create_table,
    "ALTER": _alter,
    "DROP": _drop,
    "RENAME": _rename,
    "TRUNCATE": _truncate,
}
# CREATE statements whose bodies may hold other statements (and semicolons).
_COMPOUND = {"PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "DEFINER", "AGGREGATE", "PACKAGE"}


def _statements(toks: list[Tok]) -> list[list[Tok]]:
    """Statements at top-level semicolons; a routine/trigger definition ends the list."""
    out = []
    for stmt in split_top_level(toks, "SEMICOLON"):
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
    for stmt in _statements(tokenize(text)):
        cur = Cursor(stmt, sql)
        handler = _STATEMENTS.get(cur.word() or "")
        if handler is not None:
            cur.next()
            try:
                out.extend(handler(cur, ctx))
            except DdlParseError as e:
                e.tables = tuple(dict.fromkeys(ctx.tables))
                raise
    return out


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
        toks = tokenize(unwrap_executable_comments(sql))
    except DdlParseError:
        return True
    words = [t.word for t in toks[:2]]
    return words[0] == "DROP" and words[1] in ("DATABASE", "SCHEMA")
