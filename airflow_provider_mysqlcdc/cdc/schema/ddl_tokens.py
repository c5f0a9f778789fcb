"""The first layer of the DDL reader (``ddl.py``): SQL text as tokens.

Executable comments (``/*!50100 ... */``, MariaDB's ``/*M!100301 ... */``) are code to the server
but comments to the tokenizer, so ``unwrap_executable_comments`` first turns those the server
executes into plain text, with a small scanner that knows MySQL's quoting and comment rules (not a
regular expression). Then sqlglot's MySQL tokenizer lexes (quoting, escapes, comments), and a
cursor over the tokens (``Cursor``) with the helpers that split a list at top-level commas and
find matching parentheses serves the column and statement layers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..errors import CdcError
from ..model import TableId
from ..source.version import ServerVersion


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
class Tok:
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


def tokenize(sql: str) -> list[Tok]:
    import sqlglot

    try:
        tokens = sqlglot.tokenize(sql, read="mysql")
    except Exception as e:  # sqlglot raises TokenError, ValueError ... for unterminated input
        raise DdlParseError(sql, f"it cannot be tokenized ({e})") from None
    out: list[Tok] = []
    previous = None
    for t in tokens:
        if t.token_type.name == "STRING" and previous in _command_token_types():
            # After "command" words (RENAME, REPLACE, OPTIMIZE ...) the tokenizer returns the
            # rest of the statement as one string (its offsets unusable): tokenize that text too.
            out.extend(tokenize(t.text))
        else:
            raw = sql[t.start : t.end + 1]
            words = raw.split()
            if len(words) > 1 and t.token_type.name not in _LITERALS:
                # A multi-word keyword token (PRIMARY KEY, DOUBLE PRECISION, ORDER BY ...):
                # one token per word, so the grammar here sees the words it expects.
                out.extend(Tok("VAR", w, w) for w in words)
            else:
                out.append(Tok(t.token_type.name, t.text, raw))
        previous = t.token_type.name
    return out


@functools.lru_cache(maxsize=1)
def _command_token_types() -> frozenset[str]:
    from sqlglot.dialects.mysql import MySQL

    return frozenset(t.name for t in MySQL.Tokenizer.COMMANDS)


def matching_paren(toks: Sequence[Tok], i: int) -> int:
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


def split_top_level(toks: Sequence[Tok], sep: str = "COMMA") -> list[list[Tok]]:
    """``toks`` split at top-level (parenthesis depth 0) ``sep`` tokens."""
    parts: list[list[Tok]] = [[]]
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


def join_tokens(toks: Iterable[Tok]) -> str:
    """Source text of tokens, one space apart (none around the dot of ``db.name``)."""
    out: list[str] = []
    for t in toks:
        if out and t.type != "DOT" and not out[-1].endswith("."):
            out.append(" ")
        out.append(t.raw)
    return "".join(out)


class Cursor:
    """Reads a token list front to back; ``sql`` is the statement, for error messages."""

    def __init__(self, toks: Sequence[Tok], sql: str) -> None:
        self.toks = list(toks)
        self.i = 0
        self.sql = sql

    def peek(self, k: int = 0) -> Tok | None:
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

    def next(self) -> Tok:
        t = self.peek()
        if t is None:
            raise self.fail("it ends too early")
        self.i += 1
        return t

    @property
    def done(self) -> bool:
        return self.i >= len(self.toks)

    def rest(self) -> list[Tok]:
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
