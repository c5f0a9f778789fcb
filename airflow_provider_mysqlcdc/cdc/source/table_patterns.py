"""Which tables an entry of a pipeline's table list means: one parser for every door
(trigger form, operators, pipeline files), so ``shop\\.orders`` means the same everywhere.

An entry is one of:

* ``db.table`` -- an exact name, split at the first dot;
* ``table`` -- an exact name without a dot: it takes the connection's Default database;
* `` `db`.`table` `` or ``"db"."table"`` -- quoted identifiers (MySQL's backticks, ANSI
  quotes): exact, and may hold dots, blanks or regex characters (`` `my.db`.`t$1` ``);
* a regular expression (it holds one of ``\\ ^ $ * + ? { } [ ] ( ) |``) matched against the
  whole ``db.table`` name, as Flink CDC does: ``shop\\.order_.*``. A regex is never given a
  database: write ``shop\\.order_.*``, not ``order_.*``.

``qualify`` turns entries into canonical pattern texts that ``TablePattern`` reads back:
exact names as ``db.table``, exact names with regex characters as an escaped regex, regexes
as given.
"""

from __future__ import annotations

import re
from typing import Iterable

from ..errors import ConfigError
from ..model import TableId

_REGEX_META = set("\\^$*+?{}[]()|")


def is_regex(text: str) -> bool:
    return bool(set(text) & _REGEX_META)


class TablePattern:
    """One canonical include/exclude pattern: an exact ``db.table`` or a full-match regex."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.exact = not is_regex(text)
        if not self.exact:
            try:
                self._regex = re.compile(text)
            except re.error as e:
                raise ConfigError(
                    f"table pattern {text!r} is not a valid regular expression ({e}). Fix: write 'db.table', "
                    "`db`.`table` for names with special characters, or a regex over 'db.table' such as "
                    "'shop\\.order_.*'."
                ) from None

    def matches(self, table_id: TableId) -> bool:
        name = str(table_id)
        if self.exact:
            return name == self.text
        return self._regex.fullmatch(name) is not None

    @property
    def table_id(self) -> TableId | None:
        """The table an exact pattern names (None for a regex, or a name without a database)."""
        if not self.exact or "." not in self.text.strip("."):
            return None
        return TableId.parse(self.text)

    def __repr__(self) -> str:
        return f"TablePattern({self.text!r})"


def _quoted_parts(text: str) -> list[str] | None:
    """``\\`a\\`.\\`b\\``` / ``"a"."b"`` / ``a.\\`b\\``` -> [a, b]; None when nothing is quoted."""
    if "`" not in text and '"' not in text:
        return None
    parts: list[str] = []
    i, n = 0, len(text)
    while i < n:
        q = text[i]
        if q in '`"':
            j, buf = i + 1, []
            while True:
                k = text.find(q, j)
                if k < 0:
                    raise ConfigError(
                        f"table {text!r}: the quote {q} opened at character {i + 1} is never closed. "
                        f"Fix: write {q}db{q}.{q}table{q}."
                    )
                if k + 1 < n and text[k + 1] == q:  # a doubled quote is a literal one
                    buf.append(text[j : k + 1])
                    j = k + 2
                    continue
                buf.append(text[j:k])
                i = k + 1
                break
            parts.append("".join(buf))
        else:
            k = text.find(".", i)
            end = n if k < 0 else k
            plain = text[i:end].strip()
            if any(c in plain for c in '`"'):
                raise ConfigError(
                    f"table {text!r}: a quote inside a name. Fix: quote each whole name, like `db`.`table`."
                )
            parts.append(plain)
            i = end
        if i < n:
            if text[i] != ".":
                raise ConfigError(
                    f"table {text!r}: expected a dot after a quoted name at character {i + 1}. Fix: write `db`.`table`."
                )
            i += 1
            if i == n:
                parts.append("")
    if len(parts) > 2 or any(p == "" for p in parts):
        raise ConfigError(
            f"table {text!r} is not `db`.`table` or `table`. Fix: quote each name once, e.g. `my db`.`my table`."
        )
    return parts


def matches(table_id: TableId, include: Iterable[str], exclude: Iterable[str] = ()) -> bool:
    """Whether a table list (``qualify``-ed entries) captures ``table_id``."""
    return any(TablePattern(e).matches(table_id) for e in include) and not any(
        TablePattern(e).matches(table_id) for e in exclude
    )


def exact_pattern(table_id: TableId) -> str:
    """The canonical pattern text of one exact table name."""
    name = str(table_id)
    return re.escape(name) if is_regex(name) else name


def qualify(entry: str, default_database: str | None) -> str:
    """The canonical pattern text of one table-list entry (see the module docstring)."""
    text = str(entry).strip()
    if not text:
        raise ConfigError("tables: an empty entry. Fix: remove the empty line.")
    quoted = _quoted_parts(text)
    if quoted is not None:
        if len(quoted) == 1:
            if not default_database:
                raise _no_database(text)
            return exact_pattern(TableId(default_database, quoted[0]))
        return exact_pattern(TableId(quoted[0], quoted[1]))
    if is_regex(text):
        TablePattern(text)  # fails now, naming the entry, if it does not compile
        return text
    if "." not in text:
        if not default_database:
            raise _no_database(text)
        return f"{default_database}.{text}"
    return text


def qualify_all(entries: Iterable[str], default_database: str | None) -> list[str]:
    return [qualify(e, default_database) for e in entries if str(e).strip()]


def _no_database(text: str) -> ConfigError:
    return ConfigError(
        f"table {text!r} has no database. Fix: write 'database.{text}', or set the connection's "
        "schema (Default database)."
    )
