"""The next catch-up micro-batch planned while the current one runs.

Why: a catch-up plan (``batch_planning.plan_catchup``) has the server walk the micro-batch's
events (``SHOW BINLOG EVENTS``) to name the transaction starts its ranges begin at and end at:
0.2-0.7 s per 256 MiB here. Spark asks for the next offset only after a micro-batch is
committed, so during every walk the tasks had nothing to do -- about a quarter of a long
catch-up's wall time (4M-statement bench: 4.2 s of 15.5 s into Delta). The next micro-batch
starts exactly where the current one ends, so its plan can be made meanwhile, on a thread of
the source's driver process with its own connection; ``latestOffset`` takes it when Spark asks
from that start.

A plan holds only positions the server named, so it stays right however late it is used: the
head only moves on (a plan that ends beyond the head Spark's call sees is dropped). A plan that
failed (a lost connection, say) is made again in the call, where the reconnect rules apply, and
a plan for another start is dropped.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Generic, TypeVar

log = logging.getLogger(__name__)

K = TypeVar("K")
P = TypeVar("P")


class _Planning(threading.Thread, Generic[K, P]):
    def __init__(self, start: K, make: Callable[[K], P]) -> None:
        super().__init__(name="mysqlcdc-plan-ahead", daemon=True)
        self.start_at = start
        self.make = make
        self.plan: P | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.plan = self.make(self.start_at)
        except BaseException as e:  # noqa: BLE001 -- reported by take(), which plans again
            self.error = e


class PlanAhead(Generic[K, P]):
    """At most one plan in the making, for one start. Pickles empty: Spark may ship the
    source's reader to its workers, and a thread does not travel."""

    def __init__(self) -> None:
        self._planning: _Planning[K, P] | None = None

    def begin(self, start: K, make: Callable[[K], P]) -> None:
        """Start planning from ``start`` (replaces a plan not taken)."""
        self._planning = _Planning(start, make)
        self._planning.start()

    def take(self, start: K) -> P | None:
        """The plan made from ``start`` (waiting for it if it is still being made), or None when
        there is none for that start or making it failed."""
        planning, self._planning = self._planning, None
        if planning is None or planning.start_at != start:
            return None
        planning.join()
        if planning.error is not None:
            log.info(
                "binlog stream: planning ahead from %s failed (%s); planning again",
                start,
                type(planning.error).__name__,
            )
            return None
        return planning.plan

    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self._planning = None
