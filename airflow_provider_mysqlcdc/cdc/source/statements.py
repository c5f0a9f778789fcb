"""What a QUERY event's statement is, for the readers that must not let a change slip by.

With ``binlog_format=ROW`` a QUERY event holds transaction control (BEGIN, COMMIT, XA,
SAVEPOINT) or DDL. A data change (INSERT, UPDATE, DELETE, REPLACE, LOAD DATA) in a QUERY
event means the server logged it as a statement (``binlog_format`` STATEMENT or MIXED, set
for a session or globally): its rows are not in the binlog, so no reader can apply it
exactly. Such a statement on a captured table must stop the stream, not be skipped as DDL.

Statements are read with sqlglot's MySQL tokenizer (comments, quoting and string literals
handled by it, no regular expressions). Which tables a statement touches is decided
conservatively: a name token equal to a captured table's name counts, so an unparseable or
multi-table statement stops the stream rather than slipping through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

from ..errors import NOT_EXACT_MARKER, CdcError
from ..model import TableId

__all__ = ["NOT_EXACT_MARKER", "StatementGuard", "StatementLoggedChangeError", "is_data_change", "touched_tables"]

_DML_FIRST = {"INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD"}
_NOT_NAMES = {"STRING", "NUMBER", "NATIONAL_STRING", "HEX_STRING", "BIT_STRING", "BYTE_STRING", "RAW_STRING"}


def _tokens(sql: str) -> list:
    import sqlglot

    try:
        return sqlglot.tokenize(sql, read="mysql")
    except Exception:  # a statement the tokenizer cannot read: fall back to whitespace words
        return []


def is_data_change(sql: str) -> bool:
    """True when the statement changes rows (a statement-logged DML)."""
    tokens = _tokens(sql)
    if not tokens:
        words = sql.split()
        return bool(words) and words[0].upper() in _DML_FIRST
    first = tokens[0].token_type.name
    if first in _DML_FIRST or tokens[0].text.upper() in _DML_FIRST:
        return True
    if first == "WITH":  # WITH ... UPDATE / DELETE / INSERT
        return any(t.token_type.name in ("UPDATE", "DELETE", "INSERT") for t in tokens[1:])
    return False


def _names(sql: str) -> set[str]:
    text = sql.strip()
    if text[:7].upper() == "REPLACE":  # tokenized as a command with the rest as one string
        text = "INSERT" + text[7:]
    return {t.text.lower() for t in _tokens(text) if t.token_type.name not in _NOT_NAMES}


def touched_tables(sql: str, default_database: str, captured: Collection[TableId] | None) -> list[str]:
    """The captured tables a data change may touch, by name (``db.*`` when ``captured`` is None:
    every table is captured)."""
    if captured is None:
        return [f"{default_database or '?'}.*"]
    names = _names(sql)
    return sorted(str(t) for t in captured if t.table.lower() in names)


class StatementLoggedChangeError(CdcError):
    """A captured table was changed by a statement-logged DML: the binlog has no rows for it."""

    def __init__(self, where: str, tables: Collection[str], sql: str) -> None:
        self.where = where
        self.tables = list(tables)
        short = " ".join(sql.split())
        short = short if len(short) <= 160 else short[:157] + "..."
        names = ", ".join(self.tables)
        super().__init__(
            f"the binlog at {where} holds a change of {names} logged as a statement, not as rows "
            f"(binlog_format STATEMENT or MIXED): {short!r}. Its rows are not in the binlog, so "
            f"{NOT_EXACT_MARKER} and stopped before it; every change before it is in the sink. "
            "Fix: SET GLOBAL binlog_format = 'ROW' (and binlog_format=ROW under [mysqld]), make sure no "
            "session sets it otherwise, then load the affected tables again (trigger the pipeline with "
            "reset=true) and restart the stream."
        )


@dataclass(frozen=True)
class StatementGuard:
    """The check both binlog readers run on every QUERY event at or after their start."""

    captured: Collection[TableId] | None

    def check(self, sql: str, database: str, where: str) -> None:
        if not is_data_change(sql):
            return
        tables = touched_tables(sql, database, self.captured)
        if tables:
            raise StatementLoggedChangeError(where, tables, sql)
