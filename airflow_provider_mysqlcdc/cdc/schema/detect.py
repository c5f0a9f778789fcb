"""What a binlog QUERY event is, for the readers: transaction control, a DDL on captured tables, or neither.

The readers see every QUERY event of the server, most of them about tables the pipeline does
not capture, so the order of checks is by cost: the first keyword (transaction control
needs nothing more), then ``ddl.might_touch`` (a substring test: a statement that cannot name
a captured table is dropped there), and only then the parser, which says which tables the
statement changes. A statement the parser cannot read but that might touch a captured table
is reported with the captured tables whose names it contains: the stream's behaviour decides
what to do with it, never a silent skip.
"""

from __future__ import annotations

from typing import Callable, Collection

from ..model import TableId
from .ddl import might_touch, parse_ddl
from .ddl_tokens import DdlParseError
from .events import DropDatabase

BEGIN = "begin"
END = "end"  # a bare COMMIT / ROLLBACK
CONTROL = "control"  # XA, SAVEPOINT, ROLLBACK TO ...: transaction control that ends nothing here
OTHER = "other"  # anything else: DDL, DCL, SET, statement-logged DML ...

_NOT_DDL_FIRST = {
    "XA",
    "SAVEPOINT",
    "RELEASE",
    "INSERT",
    "UPDATE",
    "DELETE",
    "REPLACE",
    "LOAD",
    "SET",
    "GRANT",
    "REVOKE",
    "FLUSH",
    "ANALYZE",
    "OPTIMIZE",
    "CHECK",
    "REPAIR",
    "CALL",
    "DO",
    "SELECT",
    "WITH",
    "USE",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
}


def first_word(sql: str) -> str:
    """The statement's first keyword, upper case, after blanks and ``/* */`` / ``#`` / ``--`` comments
    (an executable comment ``/*!...*/`` counts as a comment here: the server logs DDL outside them)."""
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c == "#" or sql.startswith("-- ", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        else:
            break
    j = i
    while j < n and (sql[j].isalpha() or sql[j] == "_"):
        j += 1
    return sql[i:j].upper()


def statement_kind(sql: str) -> str:
    """``begin``; ``end`` (a bare COMMIT / ROLLBACK); ``control`` (other COMMIT / ROLLBACK forms, XA,
    SAVEPOINT, RELEASE SAVEPOINT, a comment only): none of them starts a statement of its own;
    ``other``: a statement that is its own transaction when logged outside BEGIN (DDL, DCL, SET ...)."""
    word = first_word(sql)
    if word == "BEGIN":
        return BEGIN
    if word in ("COMMIT", "ROLLBACK"):
        return END if len(sql.split()) == 1 else CONTROL
    if word in ("XA", "SAVEPOINT", "RELEASE") or not word:
        return CONTROL
    return OTHER


def may_be_ddl(sql: str) -> bool:
    """False for statements that are certainly not DDL (transaction control, DML, SET ...)."""
    return first_word(sql) not in _NOT_DDL_FIRST


def captured_ddl_tables(
    sql: str, database: str, captured: Collection[TableId] | None, new_tables: Callable[[TableId], bool] | None = None
) -> list[TableId] | None:
    """The captured tables a DDL changes, in the order it names them; None when it changes none.

    ``captured`` None means every table (tests and tools): then the tables the statement names.
    ``new_tables``: whether a table not captured yet would be (the pipeline's patterns); a
    CREATE TABLE or a RENAME into such a name then counts too, so the stream can take it up.
    """
    if not may_be_ddl(sql):
        return None
    if captured is not None and not might_touch(sql, captured):
        if new_tables is None or not _may_bring_a_table(sql):
            return None
        try:
            named: list[TableId] = [t for e in parse_ddl(sql, database) for t in _brought(e)]
        except DdlParseError:
            return None
        found = [t for t in dict.fromkeys(named) if t not in captured and new_tables(t)]
        return found or None
    brought: list[TableId] = []
    try:
        events = parse_ddl(sql, database)
        named = []
        for e in events:
            for t in e.tables:
                if t not in named:
                    named.append(t)
            brought += _brought(e)
        drops_database = [e.database for e in events if isinstance(e, DropDatabase)]
    except DdlParseError as e:
        named = list(getattr(e, "tables", None) or ())
        drops_database = []
        if captured is not None and not named:
            low = sql.lower()
            named = [t for t in captured if t.table.lower() in low]
    if captured is None:
        return named or None
    hit = [t for t in named if t in captured or (new_tables is not None and t in brought and new_tables(t))]
    hit += [t for t in captured if t.database in drops_database and t not in hit]
    return hit or None


def _may_bring_a_table(sql: str) -> bool:
    """Cheap: the statement could create a table or rename one into a new name."""
    low = sql.lower()
    return "table" in low and ("create" in low or "rename" in low)


def _brought(event: object) -> list[TableId]:
    """The table names a CREATE TABLE or a RENAME brings into being."""
    from .events import CreateTable, RenameTable

    if isinstance(event, CreateTable):
        return [event.table]
    if isinstance(event, RenameTable):
        return [event.new]
    return []
