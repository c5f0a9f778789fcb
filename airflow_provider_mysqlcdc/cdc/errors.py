"""Exceptions the engine raises; every message says what the user should change."""

from __future__ import annotations

import re

# In every error after which a restart would only fail again the same way: the watchdog
# reports it instead of relaunching the stream.
NOT_EXACT_MARKER = "the stream cannot stay exact"

# The Fix: of an error raised where the binlog stream is not what the replication protocol says
# (a check against misreading it): a transient fault is gone when the stream starts again from its
# last commit; one that comes back at the same place needs a report.
RESTART_OR_REPORT = (
    "Fix: start the stream again (it resumes from its last commit; the stream sensor with relaunch=True "
    "does it); if it stops at the same place again, report this message."
)
# The Fix: of a check against a bug of mysqlcdc itself: no input of a user's should reach it.
REPORT_BUG = "Fix: nothing to change on your side: this check guards against a bug of mysqlcdc; report this message."


class CdcError(Exception):
    """Base class of every error the engine raises on purpose."""


class ConfigError(CdcError):
    """The pipeline's configuration cannot work; raised before any data is written."""


class ServerCheckError(ConfigError):
    """The MySQL/MariaDB server is not set up for CDC.

    Carries the setting, the value found and the value needed, so operators can render
    them and tests can assert on them without parsing the message.
    """

    def __init__(self, setting: str, found: object, needed: str, fix: str) -> None:
        self.setting = setting
        self.found = found
        self.needed = needed
        self.fix = fix
        super().__init__(f"{setting}: found {found!r}, need {needed}. Fix: {fix}")


class SourceUnreachableError(ConfigError):
    """The server did not accept a connection (down, restarting, wrong host/port).

    A ConfigError before anything runs; the stream retries it for a while instead, because
    a running stream sees exactly this while the server restarts.
    """


class BinlogPurgedError(CdcError):
    """The binlog file a reader must start from no longer exists on the server."""


class SchemaMismatchError(CdcError):
    """A binlog row does not match the table schema the reader was given."""


class TableChangedError(ConfigError):
    """A table's schema changed between the plan and (the end of) a snapshot batch that reads it:
    the batch would hold rows of a shape the plan does not describe, so it writes nothing."""


_OWN_ERROR_LINE = re.compile(r"airflow_provider_mysqlcdc(?:\.\w+)*\.(\w+): (\S.*)")


def own_error(text: str) -> tuple[str, str] | None:
    """(exception name, message) of the first ``airflow_provider_mysqlcdc...Name: message`` line of a
    Python traceback inside ``text`` (Spark and py4j wrap it in their own), or None."""
    for line in text.splitlines():
        found = _OWN_ERROR_LINE.search(line)
        if found:
            return found.group(1), found.group(2).strip()
    return None


def own_message_first(text: str) -> str:
    """A failure text with the product's own message (the first ``airflow_provider_mysqlcdc...Error:``
    line of a Python traceback, wherever Spark and py4j wrapped it) put first: a user reading the
    stream's status or a log sees what to change before ~2,000 characters of JVM stack."""
    found = own_error(text)
    if found is None:
        return text
    own = f"{found[0]}: {found[1]}"
    return text if text.startswith(own) else f"{own}\n\n{text}"
