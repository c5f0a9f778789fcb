"""``stream/status.json``: what the running binlog stream has committed, and how far behind it is.

Why a file: the stream job runs detached (its own process, possibly on another machine), and
whoever asks "is it healthy?" -- an Airflow sensor, a person -- can always read the state
location but cannot reach into the driver. A ``StreamingQueryListener`` on the driver
rewrites the file after micro-batches and idle triggers (at most once per ``min_interval_s``,
except the first of a run, which is written at once so a launcher can tell that the stream
works). At start it takes the last commit from the checkpoint, so a restarted stream reports
its position and lag before its first micro-batch.

**Lag** ("seconds behind the binlog head"): at each write the server's binlog head is read
and kept as a sample ``[file, position, seen_at]``. If the newest sample whose offset is <=
the committed offset was seen at time T, everything the server had written by T is in the
sink, so lag = now - T (0 when the stream has reached the current head). If no sample
qualifies (the stream started far behind, before the oldest sample), lag = now - the oldest
sample time, flagged ``lag_is_lower_bound``. Samples survive restarts (they are facts about
the server, not the run), so a restarted stream reports a real lag, not a lower bound.

Readers use ``StreamStatus.lag_now()``: it recomputes the lag from the samples at read time,
so a stuck stream (or a dead driver that writes nothing) shows a lag that keeps growing. A
healthy stream on a quiet server runs no micro-batches; Spark's idle events refresh the file
every ``spark.sql.streaming.noDataProgressEventInterval`` (10 s by default), so its
``lag_now()`` saw-tooths between 0 and about that.

The module imports no Spark at import time (readers such as the Airflow operators only
need ``read_status``); the listener class is built on first use.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ...cdc.errors import own_message_first
from ...cdc.offsets import BinlogOffset, split_binlog_file
from ...cdc.store.lease import host_id

if TYPE_CHECKING:
    from ...cdc.pipeline import PipelineConfig
    from ...cdc.source.config import SourceConfig
    from ...cdc.state import StateStore

log = logging.getLogger(__name__)

STATUS_REL = "stream/status.json"
MAX_HEAD_SAMPLES = 300
MIN_WRITE_INTERVAL_S = 1.0
_MAX_EXCEPTION_CHARS = 4000

# A head sample: [binlog file, position, epoch seconds when the server reported it].
Sample = list

HeadReader = Callable[[], "tuple[BinlogOffset, list[tuple[str, int]]]"]


# --- pure helpers (unit-tested without Spark or a server) --------------------------------------


def _offset_key(file: str, position: int, row: int = 0) -> tuple[int, int, int]:
    return (split_binlog_file(file)[1], int(position), int(row))


def committed_key(offset: Mapping[str, Any]) -> tuple[int, int, int]:
    """Order key of a stream offset dict (``StreamOffset.to_dict()``): (file index, position, row)."""
    return _offset_key(str(offset["file"]), int(offset["position"]), int(offset.get("row") or 0))


def compute_lag(
    committed: Mapping[str, Any] | None, samples: Sequence[Sample], now: float
) -> tuple[float | None, bool]:
    """(lag seconds, is a lower bound) of ``committed`` given head ``samples`` (oldest first).

    None when nothing is committed yet or no head was ever sampled: unknown, not zero.
    """
    if committed is None or not samples:
        return None, False
    key = committed_key(committed)
    for file, position, seen_at in reversed(samples):
        if _offset_key(file, position) <= key:
            return max(0.0, now - float(seen_at)), False
    return max(0.0, now - float(samples[0][2])), True


def add_head_sample(
    samples: list[Sample], head: BinlogOffset, seen_at: float, max_samples: int = MAX_HEAD_SAMPLES
) -> list[Sample]:
    """Append a head sample, keeping the list bounded and informative.

    A run of samples with one unchanged head keeps only its first and last sighting: the
    lag needs the newest time the head was still there, the lower bound the oldest. When
    the list grows past ``max_samples``, the older half is thinned to every other sample,
    so the history reaches further back at a coarser resolution (a stream far behind still
    gets a real lag, not only a lower bound). A head *before* the last sample (binlog reset)
    drops the history: old samples would compare against a different binlog.
    """
    new = [head.file, head.position, seen_at]
    new_key = _offset_key(head.file, head.position)
    if samples and _offset_key(samples[-1][0], samples[-1][1]) > new_key:
        samples.clear()
    if (
        len(samples) >= 2
        and _offset_key(samples[-1][0], samples[-1][1]) == new_key
        and _offset_key(samples[-2][0], samples[-2][1]) == new_key
    ):
        samples[-1] = new
    else:
        samples.append(new)
    if len(samples) > max_samples:
        keep = max(1, max_samples // 2)
        older, recent = samples[:-keep], samples[-keep:]
        samples[:] = older[::2] + recent
    return samples


def behind_bytes(
    committed: Mapping[str, Any] | None, head: BinlogOffset | None, logs: Sequence[tuple[str, int]]
) -> int | None:
    """Binlog bytes between the committed offset and the head, from SHOW BINARY LOGS sizes.

    Purged files in between count as 0 (their size is unknown); None when either end is unknown.
    """
    if committed is None or head is None:
        return None
    c_file, c_pos = str(committed["file"]), int(committed["position"])
    c_idx, h_idx = split_binlog_file(c_file)[1], head.file_index
    if (c_idx, c_pos) >= (h_idx, head.position):
        return 0
    if c_idx == h_idx:
        return head.position - c_pos
    sizes = dict(logs)
    total = max(0, sizes.get(c_file, c_pos) - c_pos)
    total += sum(size for name, size in logs if c_idx < split_binlog_file(name)[1] < h_idx)
    return total + head.position


# --- the status document ------------------------------------------------------------------------


@dataclass
class StreamStatus:
    """The content of ``stream/status.json``.

    ``state``: ``starting`` (query started, no micro-batch committed by this run yet),
    ``running``, ``stopped`` (terminated without error), ``failed`` (terminated with
    ``exception``). ``batch_id`` / ``committed_offset`` are the last committed micro-batch:
    at start, the checkpoint's (a previous run's), then this run's. ``committed_at`` is set
    only by this run's commits and ``idle_at`` by this run's idle triggers (the query ran a
    trigger and found nothing to read: Spark runs no micro-batch when a restarted query has
    nothing new), so a reader can tell that *this* run works. ``head_error`` is the last
    failure to read the head (the lag then ages).
    """

    query_id: str | None = None
    run_id: str | None = None
    state: str = "starting"
    batch_id: int | None = None
    committed_offset: dict[str, Any] | None = None
    committed_at: float | None = None
    idle_at: float | None = None
    head_offset: dict[str, Any] | None = None
    head_error: str | None = None
    updated_at: float = 0.0
    started_at: float | None = None
    pid: int | None = None
    host: str | None = None
    rows_last_batch: int | None = None
    behind_bytes: int | None = None
    head_samples: list[Sample] = field(default_factory=list)
    lag_s: float | None = None
    lag_is_lower_bound: bool = False
    exception: str | None = None
    ui_url: str | None = None
    # Values a sink stored otherwise than read, by table then by why (e.g. "nul_in_text": text
    # holding U+0000 stored with U+FFFD in PostgreSQL), counted at commit since the stream's first run.
    replaced_values: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StreamStatus":
        """Unknown keys are ignored, so an older reader accepts a newer writer's file."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        kw["head_samples"] = [[str(s[0]), int(s[1]), float(s[2])] for s in d.get("head_samples") or ()]
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def has_committed(self) -> bool:
        """A micro-batch has been committed (by this run or, from the checkpoint, an earlier one)."""
        return self.batch_id is not None and self.committed_offset is not None

    def works_since(self, since: float) -> bool:
        """This run committed a micro-batch, or ran a trigger that found nothing new, at or after
        ``since``: either proves the query and its source work (a commit also the sink)."""
        return (
            self.updated_at >= since
            and self.state in ("starting", "running")
            and ((self.committed_at or 0.0) >= since or (self.idle_at or 0.0) >= since)
        )

    def age_s(self, now: float | None = None) -> float:
        """Seconds since the driver last wrote this status (grows when the driver is gone)."""
        return max(0.0, (time.time() if now is None else now) - self.updated_at)

    def lag_estimate(self, now: float | None = None) -> tuple[float | None, bool]:
        """(lag seconds at ``now``, is a lower bound), recomputed from the head samples."""
        return compute_lag(self.committed_offset, self.head_samples, time.time() if now is None else now)

    def lag_now(self, now: float | None = None) -> float | None:
        """Seconds behind the binlog head at ``now`` (None: nothing committed or no head seen)."""
        return self.lag_estimate(now)[0]


def read_status(state: "StateStore") -> StreamStatus | None:
    """The last status the stream wrote, or None if it never wrote one (or it is unreadable)."""
    try:
        if not state.exists(STATUS_REL):
            return None
        return StreamStatus.from_dict(state.read_json(STATUS_REL))
    except (OSError, ValueError, TypeError, KeyError) as e:
        log.warning("cannot read %s: %s", state.url(STATUS_REL), e)
        return None


def last_committed(state: "StateStore") -> tuple[int, dict[str, Any]] | None:
    """The checkpoint's last committed micro-batch id and its end offset, or None.

    Read at query start, so a restarted stream reports where it stands (and its lag) before
    its first micro-batch -- on a quiet server that may be a long time. Spark's checkpoint
    layout: ``commits/<id>`` marks a batch done, ``offsets/<id>`` holds a version line, the
    batch metadata line, then one offset line per source (this query has one).
    """
    import json
    import posixpath

    root = state.path("stream", "checkpoint")
    try:
        names = state.fs.ls(posixpath.join(root, "commits"), detail=False)
        ids = [int(n) for n in (posixpath.basename(str(p).rstrip("/")) for p in names) if n.isdigit()]
        if not ids:
            return None
        last = max(ids)
        with state.fs.open(posixpath.join(root, "offsets", str(last)), "r") as f:
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
        return last, json.loads(lines[-1])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, IndexError) as e:
        log.warning("stream status: cannot read the last commit from the checkpoint %s: %s", root, e)
        return None


# --- reading the head ---------------------------------------------------------------------------


class ServerHead:
    """The server's binlog head and binlog file sizes over one reused, short-timeout connection.

    Any failure closes the connection, so the next read reconnects (server restart).
    """

    def __init__(self, source: "SourceConfig", connect_timeout_s: int = 5, read_timeout_s: int = 10) -> None:
        self.source = source
        self.connect_timeout_s = min(connect_timeout_s, source.connect_timeout or connect_timeout_s)
        self.read_timeout_s = read_timeout_s
        self._conn: Any = None
        self._version: Any = None

    def __call__(self) -> tuple[BinlogOffset, list[tuple[str, int]]]:
        from ...cdc.source.server import current_offset, list_binlogs, server_version

        try:
            if self._conn is None:
                self._conn = self.source.connect(
                    connect_timeout=self.connect_timeout_s,
                    read_timeout=self.read_timeout_s,
                    write_timeout=self.read_timeout_s,
                )
                self._version = server_version(self._conn)
            return current_offset(self._conn, self._version), list_binlogs(self._conn)
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already broken
                pass


# --- the recorder: event -> status.json, throttled ---------------------------------------------


def _timer(delay_s: float, fn: Callable[[], None]) -> Any:
    t = threading.Timer(delay_s, fn)
    t.daemon = True
    t.start()
    return t


class StatusRecorder:
    """Turns query events into ``status.json`` writes; never raises (a broken status must not
    stop the stream).

    Throttle: a write happens at most every ``min_interval_s``; a throttled event marks the
    status dirty and schedules one deferred write at the end of the interval, so the last
    progress before a quiet spell still reaches the file. The first progress of a run, the
    query start and its termination are written at once.
    """

    def __init__(
        self,
        state: "StateStore",
        head: HeadReader | None,
        *,
        min_interval_s: float = MIN_WRITE_INTERVAL_S,
        max_samples: int = MAX_HEAD_SAMPLES,
        clock: Callable[[], float] = time.time,
        schedule: Callable[[float, Callable[[], None]], Any] = _timer,
    ) -> None:
        self.state = state
        self.head = head
        self.min_interval_s = min_interval_s
        self.max_samples = max_samples
        self.clock = clock
        self.schedule = schedule
        self._lock = threading.RLock()
        self._last_write: float | None = None
        self._dirty = False
        self._timer: Any = None
        self._head_failing = False
        self._query_id: str | None = None
        self._closed = False
        self.writes = 0
        self.status = StreamStatus(started_at=clock(), pid=os.getpid(), host=host_id())
        previous = read_status(state)
        if previous is not None:
            self.status.head_samples = list(previous.head_samples)
            self.status.replaced_values = {t: dict(v) for t, v in (previous.replaced_values or {}).items()}

    # events ------------------------------------------------------------------------------------

    def started(self, query_id: str, run_id: str) -> None:
        with self._lock:
            if self._closed or not self._ours(query_id):
                return
            s = self.status
            s.query_id, s.run_id, s.state = query_id, run_id, "starting"
            s.batch_id = s.committed_offset = s.committed_at = s.idle_at = s.rows_last_batch = None
            s.behind_bytes = s.lag_s = s.exception = None
            s.started_at = self.clock()
            previous = last_committed(self.state)
            if previous is not None:
                s.batch_id, s.committed_offset = previous
            self._write()

    def progress(
        self, query_id: str, run_id: str, batch_id: int, end_offset: Mapping[str, Any] | None, rows: int | None
    ) -> None:
        with self._lock:
            if self._closed or not self._ours(query_id):
                return
            s = self.status
            first = s.committed_at is None
            s.query_id, s.run_id, s.state = query_id, run_id, "running"
            s.batch_id, s.rows_last_batch, s.committed_at = int(batch_id), rows, self.clock()
            if end_offset is not None:
                s.committed_offset = dict(end_offset)
            if first:
                self._write()
            else:
                self._throttled()

    def count_replaced(self, table: str, what: str, count: int) -> None:
        """A sink committed ``count`` values of ``table`` stored otherwise (``what`` says how)."""
        with self._lock:
            if self._closed or count <= 0:
                return
            per = self.status.replaced_values.setdefault(table, {})
            per[what] = per.get(what, 0) + int(count)
            self._throttled()

    def idle(self, query_id: str) -> None:
        """The query waits for data: refresh the head and lag (throttled)."""
        with self._lock:
            if self._closed or not self._ours(query_id):
                return
            first = self.status.idle_at is None and self.status.committed_at is None
            self.status.idle_at = self.clock()
            if first:
                self._write()
            else:
                self._throttled()

    def terminated(self, query_id: str, exception: str | None) -> None:
        """The query ended. Spark delivers this asynchronously, often after the job's ``close()``,
        which already recorded the outcome the job saw (a requested stop, or the failure)."""
        with self._lock:
            if self._closed or not self._ours(query_id):
                return
            self._finish(exception)

    def close(self, exception: str | None = None) -> None:
        """The job is shutting down (``exception``: why, if the query failed): record the final
        state unless the query's termination already did, drop the connection, ignore later
        events."""
        with self._lock:
            if self._closed:
                return
            if self.status.state not in ("stopped", "failed") or (exception and self.status.state != "failed"):
                self._finish(exception)
            elif self._dirty:
                self._write()
            self._closed = True
            self._cancel_timer()
            if isinstance(self.head, ServerHead):
                self.head.close()

    def _finish(self, exception: str | None) -> None:
        self.status.state = "failed" if exception else "stopped"
        self.status.exception = own_message_first(exception)[:_MAX_EXCEPTION_CHARS] if exception else None
        self._cancel_timer()
        self._write()

    # internals ---------------------------------------------------------------------------------

    def _ours(self, query_id: str) -> bool:
        """Only the first query this listener saw start (the job runs one)."""
        if self._query_id is None:
            self._query_id = query_id
        return query_id == self._query_id

    def _throttled(self) -> None:
        now = self.clock()
        if self._last_write is None or now - self._last_write >= self.min_interval_s:
            self._write()
            return
        self._dirty = True
        if self._timer is None:
            self._timer = self.schedule(self.min_interval_s - (now - self._last_write), self._deferred)

    def _deferred(self) -> None:
        with self._lock:
            self._timer = None
            if self._dirty:
                self._write()

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None and hasattr(timer, "cancel"):
            timer.cancel()

    def _sample_head(self, now: float) -> BinlogOffset | None:
        if self.head is None or self._closed:  # closed: no new connection while the job exits
            return None
        try:
            head, logs = self.head()
        except Exception as e:  # server down, network, permissions: the status just ages
            if not self._head_failing:
                log.warning("stream status: cannot read the binlog head (will retry at the next write): %s", e)
            self._head_failing = True
            self.status.head_error = f"{type(e).__name__}: {e}"[:500]
            return None
        if self._head_failing:
            log.info("stream status: binlog head readable again")
        self._head_failing = False
        s = self.status
        s.head_error = None
        s.head_offset = head.to_dict()
        add_head_sample(s.head_samples, head, now, self.max_samples)
        s.behind_bytes = behind_bytes(s.committed_offset, head, logs)
        return head

    def _write(self) -> None:
        try:
            now = self.clock()
            self._sample_head(now)
            s = self.status
            lag, lower = compute_lag(s.committed_offset, s.head_samples, now)
            s.lag_s = None if lag is None else round(lag, 3)
            s.lag_is_lower_bound = lower
            s.updated_at = now
            self.state.write_json(STATUS_REL, s.to_dict())
            self.writes += 1
        except Exception as e:  # never let a status problem reach the query
            log.warning("stream status: cannot write %s: %s", STATUS_REL, e)
        finally:
            self._last_write = self.clock()
            self._dirty = False


# --- the Spark listener -------------------------------------------------------------------------

# Changes written per (query id, batch id) by a direct-write foreachBatch (spark/stream/query.py):
# there Spark's numInputRows counts the part records, not the changes. Same driver process.
_ROWS_WRITTEN: dict[tuple[str, int], int] = {}
_ROWS_LOCK = threading.Lock()
_MAX_NOTED = 1000


def note_rows_written(query_id: str | None, batch_id: int, rows: int) -> None:
    """Record the changes a micro-batch wrote, for the listener's ``rows_last_batch``."""
    if query_id is None:
        return
    with _ROWS_LOCK:
        if len(_ROWS_WRITTEN) >= _MAX_NOTED:  # progress events that never came (a failed batch)
            _ROWS_WRITTEN.clear()
        _ROWS_WRITTEN[(str(query_id), int(batch_id))] = int(rows)


def rows_written(query_id: str, batch_id: int) -> int | None:
    """The changes noted for a micro-batch (once: the entry is removed), or None."""
    with _ROWS_LOCK:
        return _ROWS_WRITTEN.pop((str(query_id), int(batch_id)), None)


def _get(obj: Any, name: str) -> Any:
    """Field of a PySpark event/progress (dict subclasses in PySpark 4, objects before)."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def end_offset_of(progress: Any) -> dict[str, Any] | None:
    """The (only) source's endOffset of a progress, parsed (PySpark gives a JSON string)."""
    import json

    sources = _get(progress, "sources") or []
    if not sources:
        return None
    end = _get(sources[0], "endOffset")
    if end is None:
        return None
    return json.loads(end) if isinstance(end, (str, bytes)) else dict(end)


_LISTENER_CLASS: type | None = None


class _JsonEvents:
    """The driver's end of Spark's ``PythonStreamingQueryListener`` (a py4j callback object).

    PySpark's own adapter turns each progress event into Python one field at a time: about a
    hundred py4j round trips per micro-batch (every duration, every source and sink field), which
    kept Spark's listener thread busy for 0.13 of a core at two micro-batches a second (measured
    with a per-thread CPU sample of the stream's JVM: a third of the JVM's CPU while it streamed
    170 changes/s). Here the JVM renders the progress as one JSON string, so each event is one
    or two round trips, and the listener gets the same fields as plain dicts.
    """

    def __init__(self, listener: Any) -> None:
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:
        self.listener.onQueryStarted(
            SimpleNamespace(id=str(jevent.id().toString()), runId=str(jevent.runId().toString()))
        )

    def onQueryProgress(self, jevent: Any) -> None:
        import json

        try:
            progress = json.loads(jevent.progress().json())
        except Exception as e:
            log.warning("stream status listener: %s: %s", type(e).__name__, e)
            return
        self.listener.onQueryProgress(SimpleNamespace(progress=progress))

    def onQueryIdle(self, jevent: Any) -> None:
        self.listener.onQueryIdle(SimpleNamespace(id=str(jevent.id().toString())))

    def onQueryTerminated(self, jevent: Any) -> None:
        exception = jevent.exception()
        self.listener.onQueryTerminated(
            SimpleNamespace(
                id=str(jevent.id().toString()), exception=exception.get() if exception.isDefined() else None
            )
        )

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def _listener_class() -> type:
    """``StreamStatusListener``: built on first use so importing this module needs no Spark."""
    global _LISTENER_CLASS
    if _LISTENER_CLASS is not None:
        return _LISTENER_CLASS
    from pyspark.sql.streaming import StreamingQueryListener

    class StreamStatusListener(StreamingQueryListener):
        """Driver-side listener that feeds a ``StatusRecorder``; every callback swallows errors,
        because an exception here would only be logged by Spark's listener bus anyway."""

        def __init__(self, recorder: StatusRecorder) -> None:
            self.recorder = recorder

        def onQueryStarted(self, event: Any) -> None:
            self._safe(lambda: self.recorder.started(str(event.id), str(event.runId)))

        def onQueryProgress(self, event: Any) -> None:
            def go() -> None:
                p = event.progress
                rows = rows_written(str(_get(p, "id")), int(_get(p, "batchId")))
                rows = _get(p, "numInputRows") if rows is None else rows
                self.recorder.progress(
                    str(_get(p, "id")),
                    str(_get(p, "runId")),
                    int(_get(p, "batchId")),
                    end_offset_of(p),
                    None if rows is None else int(rows),
                )

            self._safe(go)

        def onQueryIdle(self, event: Any) -> None:
            self._safe(lambda: self.recorder.idle(str(event.id)))

        def onQueryTerminated(self, event: Any) -> None:
            self._safe(lambda: self.recorder.terminated(str(event.id), event.exception))

        def close(self, exception: str | None = None) -> None:
            """Call when the job shuts down, with the failure if the query failed."""
            self._safe(lambda: self.recorder.close(exception))

        @property
        def _jlistener(self) -> Any:
            """What Spark's listener bus calls (through py4j): ``_JsonEvents`` instead of PySpark's
            adapter, which rebuilds each progress event field by field."""
            if getattr(self, "_jlistenerobj", None) is None:
                from pyspark import SparkContext

                jvm: Any = SparkContext._jvm
                self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_JsonEvents(self))
            return self._jlistenerobj

        @staticmethod
        def _safe(fn: Callable[[], None]) -> None:
            try:
                fn()
            except Exception as e:
                log.warning("stream status listener: %s: %s", type(e).__name__, e)

    _LISTENER_CLASS = StreamStatusListener
    return StreamStatusListener


def __getattr__(name: str) -> Any:
    if name == "StreamStatusListener":
        return _listener_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def install_status_listener(
    spark: Any, config: "PipelineConfig", state: "StateStore", *, min_interval_s: float = MIN_WRITE_INTERVAL_S
) -> Any:
    """Register a ``StreamStatusListener`` on ``spark`` (before the query starts, so it sees the
    start) writing ``stream/status.json`` in ``state``; returns it (call ``close()`` on shutdown)."""
    recorder = StatusRecorder(state, ServerHead(config.source), min_interval_s=min_interval_s)
    try:  # the driver's Spark UI, for the operators' extra link (None when the UI is off)
        recorder.status.ui_url = spark.sparkContext.uiWebUrl
    except Exception:  # pragma: no cover - Spark Connect sessions have no SparkContext
        pass
    listener = _listener_class()(recorder)
    spark.streams.addListener(listener)
    return listener
