"""Retries of the short server calls the stream makes while the server restarts.

The driver's scans and the executors' reads both survive a server restart up to
``reconnect_timeout_s``; anything else (a purged file, bad credentials) fails at once.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, TypeVar

from ....cdc.source.connection import is_connection_loss

log = logging.getLogger(__name__)

T = TypeVar("T")


def with_reconnect(fn: Callable[[], T], timeout_s: float, what: str) -> T:
    """``fn()``, retried with backoff while the server is unreachable, up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    delay = 0.2
    while True:
        try:
            return fn()
        except Exception as e:
            if not is_connection_loss(e) or time.monotonic() > deadline:
                raise
            log.warning("%s: connection lost (%s); retrying in %.1fs", what, type(e).__name__, delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
