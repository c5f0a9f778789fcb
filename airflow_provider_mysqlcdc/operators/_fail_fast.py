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

from .._airflow_compat import AirflowFailException

from ..cdc.errors import ConfigError, SourceUnreachableError

F = TypeVar("F", bound=Callable[..., Any])


def fail_fast(log: logging.Logger | Any, error: ConfigError) -> AirflowFailException:
    """Log the message (each line on its own) and return the exception that ends the task."""
    for line in str(error).splitlines() or [type(error).__name__]:
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
