"""The docs' table of errors (docs/troubleshooting.md, "Errors you may meet, and what to do") as data.

The table lived in README.md until the docs became a site; the module keeps its name.

The bad-input catalogue (tests/integration/test_bad_input_catalogue.py) keeps, per case, the
message pattern of its row -- text that appears in that row's first cell -- and checks
both ways that they agree: the pattern is in the table, and the message the code gives matches
the pattern. A changed message or a changed row then fails a test instead of drifting apart.

A pattern is literal text except for the table's placeholders:

* ``...`` -- anything (also across lines: the validate task lists several problems);
* ``<name>`` -- one or more characters (``<file>``, ``<host>``);
* ``N`` and ``M`` on their own -- a number (``N batch(es)``);
* ``db.t`` -- a table's name, ``host:port`` -- a server's address (the table's own shorthands).
"""

from __future__ import annotations

import re
from pathlib import Path

SECTION = "## Errors you may meet, and what to do"


ERRORS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"


def error_table_first_cells(page: Path = ERRORS_PAGE) -> list[str]:
    """The first cell of every row of the section's table (the header row left out)."""
    text = page.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    rows = [
        line.strip() for line in text[start : end if end != -1 else None].splitlines() if line.strip().startswith("|")
    ]
    cells = []
    for row in rows:
        body = row[1:-1] if row.endswith("|") else row[1:]
        if not body.strip() or set(body) <= set("-| :"):
            continue  # the separator row
        cells.append(body.rsplit(" | ", 1)[0].strip())
    return cells[1:]


_PLACEHOLDER = re.compile(r"\.\.\.|<[^<>\s][^<>]*>|\bdb\.t\b|\bhost:port\b|(?<![\w'])[NM](?![\w'])")


def message_regex(pattern: str) -> re.Pattern[str]:
    """The regular expression a message must match (``search``) for the table's pattern."""
    out: list[str] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(pattern):
        out.append(re.escape(pattern[pos : m.start()]))
        token = m.group(0)
        if token == "...":
            out.append(".*?")
        elif token in ("N", "M"):
            out.append(r"\d+")
        elif token == "db.t":
            out.append(r"\S+?\.\S+?")
        elif token == "host:port":
            out.append(r"\S+?:\d+")
        else:
            out.append(".+?")
        pos = m.end()
    out.append(re.escape(pattern[pos:]))
    return re.compile("".join(out), re.DOTALL)
