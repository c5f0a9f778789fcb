"""Configuration errors fail a task at once, with the engine's message as the first error line.

A wrong table name or a missing setting does not fix itself a minute later, so retrying it
only delays the message. Airflow retries every exception but ``AirflowFailException``; and
it prints the task's exception under "Task failed with exception" after a traceback of its
own internals, where a one-line ``Fix:`` is easy to miss. So the message is logged first, as
an ERROR line of its own, then the task fails without retries.

A server that does not answer (``SourceUnreachableError``) is not a configuration error
here: during a restart it answers again, and retries are what bring the task through.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, TypeVar

from ._airflow_compat import AirflowFailException
from .cdc.errors import ConfigError, SourceUnreachableError

F = TypeVar("F", bound=Callable[..., Any])


LINE_WIDTH = 120


def readable_lines(message: str, width: int = LINE_WIDTH) -> list[str]:
    """The message as the task log shows it best: the problem, then its ``Fix:`` on a line of
    its own, each wrapped (the UI's log view cuts long lines at the right edge)."""
    import textwrap

    out: list[str] = []
    for line in message.splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        problem, sep, fix = line.partition(" Fix: ")
        fix_indent = indent + ("  " if line.lstrip().startswith("- ") else "")  # under a list item's text
        parts = [problem] + ([f"{fix_indent}Fix: {fix}"] if sep else [])
        for part in parts:
            lead = part[: len(part) - len(part.lstrip())]
            out += textwrap.wrap(
                part,
                width=width,
                initial_indent="",
                subsequent_indent=lead + "    ",
                break_long_words=False,
                break_on_hyphens=False,
            ) or [part]
    return out


def fail_fast(log: logging.Logger | Any, error: ConfigError) -> AirflowFailException:
    """Log the message (problem, then fix, wrapped) and return the exception that ends the task."""
    for line in readable_lines(str(error)) or [type(error).__name__]:
        log.error("%s", line)
    return AirflowFailException(str(error))


def config_errors_fail_at_once(execute: F) -> F:
    """Decorates an operator's ``execute``: ConfigError -> logged, failed, not retried."""

    @functools.wraps(execute)
    def wrapper(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return execute(self, *args, **kwargs)
        except SourceUnreachableError:
            raise
        except ConfigError as e:
            raise fail_fast(self.log, e) from None

    return wrapper  # type: ignore[return-value]
