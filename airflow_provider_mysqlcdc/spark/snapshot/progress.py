"""Progress lines of a snapshot job, for the person watching its Airflow task log.

A batch of millions of rows reads for minutes, and Spark's own progress bar is off in the
task log. A daemon thread in the driver reads Spark's status tracker every ``interval_s``
seconds and logs one line: chunks read out of all, rows (estimated from the plan: the
exact count exists only once a chunk's file is written), the rate and the time left.
Each chunk is one JDBC partition, so completed tasks of the reading jobs are chunks read.
A Spark Connect client has no status tracker: the server reports its operations' stages to
a progress handler instead, which counts the same completed tasks.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ...cdc.batching import short_count

log = logging.getLogger(__name__)

READ_GROUP_PREFIX = "mysqlcdc-read-"


def _duration(s: float) -> str:
    s = max(0, int(round(s)))
    if s < 90:
        return f"{s} s"
    if s < 5400:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


class SnapshotProgress:
    """Logs ``progress: 12/40 chunks read (~1.2M of ~4.0M rows), 110k rows/s, about 25 s left``
    while a batch is read, then which phase runs (correcting, writing) until ``stop()``."""

    def __init__(
        self,
        spark: Any,
        batch_id: str,
        total_chunks: int,
        estimated_rows: int,
        interval_s: float = 20.0,
        tasks: int | None = None,
    ) -> None:
        """``tasks``: how many read tasks the chunks take (several chunks a SELECT); a finished
        task counts for its share of the chunks."""
        from ..runtime.job_labels import is_connect

        self.spark = spark
        self.connect = is_connect(spark)
        self._remote_done: dict[int, int] = {}  # Connect: completed tasks per stage of the reading jobs
        self.batch_id = batch_id
        self.group = READ_GROUP_PREFIX + batch_id
        self.total_chunks = max(1, int(total_chunks))
        self.tasks = max(1, int(tasks)) if tasks else self.total_chunks
        self.estimated_rows = max(0, int(estimated_rows))
        self.interval_s = interval_s
        self._phase = "reading"
        self._phase_since = time.monotonic()
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"progress-{batch_id}", daemon=True)

    def start(self) -> "SnapshotProgress":
        log.info("reading %d chunks (~%s rows)", self.total_chunks, short_count(self.estimated_rows))
        if self.connect:
            self.spark.registerProgressHandler(self._on_progress)
        self._thread.start()
        return self

    def _on_progress(self, stages: Any, inflight_tasks: int, operation_id: Any, done: bool) -> None:
        if self._phase == "reading":
            for st in stages or ():
                self._remote_done[st.stage_id] = int(st.num_completed_tasks)

    def phase(self, name: str) -> None:
        """The job moved on (e.g. 'writing shop.orders to the sink'): later lines say so."""
        self._phase, self._phase_since = name, time.monotonic()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self.connect:
            try:
                self.spark.removeProgressHandler(self._on_progress)
            except Exception:  # the session is closing: nothing left to report
                pass

    def chunks_read(self) -> int:
        if self.connect:
            return self._as_chunks(sum(self._remote_done.values()))
        tracker = self.spark.sparkContext.statusTracker()
        done = 0
        for job_id in tracker.getJobIdsForGroup(self.group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    done += int(info.numCompletedTasks)
        return self._as_chunks(done)

    def _as_chunks(self, tasks_done: int) -> int:
        return min(self.total_chunks, round(min(tasks_done, self.tasks) * self.total_chunks / self.tasks))

    def line(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        elapsed = now - self._t0
        if self._phase != "reading":
            return f"progress: {self._phase} ({_duration(now - self._phase_since)}; {_duration(elapsed)} in all)"
        chunks = self.chunks_read()
        rows = self.estimated_rows * chunks / self.total_chunks
        rate = rows / elapsed if elapsed > 0 else 0.0
        left = (self.estimated_rows - rows) / rate if rate > 0 else None
        eta = f"about {_duration(left)} left" if left is not None else "time left unknown yet"
        return (
            f"progress: {chunks}/{self.total_chunks} chunks read (~{short_count(rows)} of "
            f"~{short_count(self.estimated_rows)} rows), ~{short_count(rate)} rows/s, {eta}"
        )

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                log.info("%s", self.line())
            except Exception as e:  # the status tracker is gone at shutdown; progress is best effort
                log.debug("progress unavailable: %s", e)
