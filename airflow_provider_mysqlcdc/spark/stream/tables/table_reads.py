"""Tables the stream job reads itself, while its query runs.

A ``RENAME TABLE`` into a name the pipeline's list matches brings rows the binlog after the
rename does not hold. The stream takes the table up at the rename (``table_set.py``) and asks
for a read (``cdc/snapshot/resnapshot.request_table_read``); this thread, on the stream job's driver,
reads the table the way a snapshot batch read while streaming does (pieces, each exact at its
own high watermark) and hands the pieces to its own query, which replaces the table's key
ranges with them at a micro-batch past each piece's watermark. No DAG run is needed.

A request stays until every piece is handed over, so a stream killed in the middle reads the
table again when it starts (pieces already handed over are replaced by newer exact rows, which
is still exact). A request for a table that is gone by the time it is read (dropped, renamed
away) or no longer on the list is dropped with a log line: the stream follows its DDL.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from ....cdc.errors import ConfigError
from ....cdc.model import TableId
from ....cdc.pipeline import PipelineConfig
from ....cdc.snapshot.planning import plan_table_read
from ....cdc.snapshot.resnapshot import forget_table_read, note_table_read, table_read_requests
from ....cdc.source.table_patterns import matches
from ....cdc.state import StateStore
from ...snapshot.job import current_schemas, hand_off_batch
from ..settings import OFFSET_SCAN_SLOT

log = logging.getLogger(__name__)

RETRY_AFTER_S = 30.0


class TableReader:
    """A daemon thread polling the state's read requests. ``load_config`` returns the pipeline's
    config with the source password (it may have changed since the job started)."""

    def __init__(self, spark: Any, load_config: Callable[[], PipelineConfig], poll_s: float = 2.0) -> None:
        self.spark = spark
        self.load_config = load_config
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._failed_at: dict[str, float] = {}
        self._thread = threading.Thread(target=self._loop, name="mysqlcdc-table-reads", daemon=True)

    def start(self) -> "TableReader":
        self._thread.start()
        return self

    def close(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)

    def _loop(self) -> None:
        state: StateStore | None = None
        while not self._stop.is_set():
            try:
                state = state or StateStore(self.load_config().state_location)
                due = [
                    r
                    for r in table_read_requests(state)
                    if time.monotonic() - self._failed_at.get(r["table"], -RETRY_AFTER_S) >= RETRY_AFTER_S
                ]
                config = self.load_config() if due else None  # the list may have changed since
                for request in due:
                    if self._stop.is_set():
                        return
                    assert config is not None  # loaded above: due is not empty
                    self.read(config, state, request)
            except Exception:  # the next poll tries again; the stream itself is not affected
                log.exception("table reads: looking for requests failed")
            self._stop.wait(self.poll_s)

    def read(self, config: PipelineConfig, state: StateStore, request: dict[str, Any]) -> None:
        t = TableId(request["database"], request["name"])
        if not matches(t, config.include, config.exclude):
            log.info("%s is no longer on the pipeline's table list: not read", t)
            forget_table_read(state, t)
            return
        try:
            plan, batch = plan_table_read(config.source, t, config.split, state.read_plan())
        except ConfigError as e:
            if _gone(config, t):
                log.info(
                    "%s is gone from the server since it came under the table list: not read (the stream "
                    "follows its DDL)",
                    t,
                )
                forget_table_read(state, t)
                return
            self._failed(state, t, e)
            return
        except Exception as e:  # a lost connection: again in RETRY_AFTER_S
            self._failed(state, t, e)
            return
        log.info(
            "%s came under the pipeline's table list with rows of its own (%s): the stream job reads it "
            "(%d chunks) and takes it over",
            t,
            request.get("reason", ""),
            len(batch.chunks),
        )
        note_table_read(state, t, reading_since=time.time(), chunks=len(batch.chunks), error=None)
        try:
            schemas = current_schemas(config.source, {t: plan.schemas[t]})
            result = hand_off_batch(
                self.spark,
                config,
                plan,
                batch,
                schemas,
                state,
                record_result=False,
                applier_server_id=config.source.server_id_range.pick(OFFSET_SCAN_SLOT),
            )
        except Exception as e:
            self._failed(state, t, e)
            return
        forget_table_read(state, t)
        log.info(
            "%s: %s rows read and handed to the stream in %d piece(s)",
            t,
            f"{sum(sum(v.values()) for v in result['rows_per_chunk'].values()):,}",
            len(result["handoff"]),
        )

    def _failed(self, state: StateStore, t: TableId, error: Exception) -> None:
        self._failed_at[str(t)] = time.monotonic()
        note_table_read(state, t, error=f"{type(error).__name__}: {error}", failed_at=time.time())
        log.warning(
            "%s: reading it for the stream failed (%s: %s); trying again in %.0f s",
            t,
            type(error).__name__,
            error,
            RETRY_AFTER_S,
        )


def _gone(config: PipelineConfig, t: TableId) -> bool:
    import contextlib

    with contextlib.closing(config.source.connect()) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (t.database, t.table)
        )
        return cur.fetchone() is None
