"""The binlog as a Spark streaming source (PySpark Python data source API, ``mysqlcdc-binlog``).

Why a custom source: Spark checkpoints a source's offsets and replays a micro-batch from
them after a crash, so if offsets are binlog offsets and re-reading ``[start, end)`` yields
the same rows, the sink's idempotent commit keyed by batch id gives exactly once.

**Offsets** are JSON objects with a fixed key order (Spark compares them as strings)::

    {"file": "mysql-bin.000007", "position": 1234, "row": 0,
     "txn_file": null, "txn_position": null, "gtid": "0-1-42"}

``file``/``position``/``row`` is the first change *not* yet consumed (``row`` orders rows of
one multi-row event). When the offset is a transaction boundary ``txn_*`` are null; when
a rate limit cut a transaction, ``txn_file``/``txn_position`` is where that transaction
starts: the dump must begin there (a rows event is only decodable after its TABLE_MAP),
and everything before ``file:position#row`` is read but not emitted. ``gtid`` is the
server's GTID set at that offset when known (offsets taken from the server's head), else
null; it is informational, ordering uses (file index, position, row).

**Rows**: the executor reads a range with the fast columnar decoder and yields Arrow
record batches in the layout of ``change_rows.SourceLayout`` (one struct column per
table); see ``binlog_read.py`` for the handoff filter, the per-table fallback to
python-mysql-replication and reconnects. Every row's ``seq`` is computed from its binlog
position, so parallel ranges and replays number rows identically.

**Admission control near the head**: ``getDefaultReadLimit()`` is
``ReadMaxRows(max_events_per_batch)``. ``latestOffset(start, limit)`` scans the binlog on
the driver from ``start`` towards the server's head with the fast decoder, counting
captured row changes (one per row of a rows event, before the handoff filter); the offset
of the (N+1)-th change ends the micro-batch, else the head. That scan is a second parse of
the micro-batch's binlog, which is why it is only done near the head.

**Catch-up**: when the stream is at least ``catchup_min_bytes`` of binlog behind the head,
the driver plans by bytes instead (``cdc/catchup.py``): the micro-batch ends at a
transaction start about ``catchup_batch_bytes`` on (or the head), found by the server's
own event walk, and is cut at transaction starts into up to ``catchup_parallelism``
ranges -- one Spark task each, range i > 0 reading with the i-th server id from the top of
``server_id_range``. The binlog is read once, in parallel; the ranges' rows are put back
in binlog order by ``seq`` in the sink. A catch-up micro-batch may hold more than
``max_events_per_batch`` rows. After a driver restart a replayed micro-batch is read as
one range (the cuts are driver memory): same rows, same numbers, just slower.

**Heartbeat**: the head is where the server's binlog ends, whatever tables wrote it. When
the captured tables are idle and others busy, a scan finds no captured change and the
offset still moves to the head -- at most once per ``heartbeat_s`` (every move is an empty
micro-batch and a checkpoint write), with the scanned range remembered so the next call
scans only what is new. Such a known-empty range is planned with no partition at all. So a
restart never replays more than ``heartbeat_s`` of unrelated binlog.

**Server ids** (``source.server_id_range``, see ``cdc/plan.py``): slot 0 is the executor's
reader (range 0), slot 1 the driver's offset scans (latestOffset, and the timestamp / GTID
startup lookups); slots 2.. belong to snapshot batches; catch-up ranges 1.. take ids from
the top of the range down.

**Robustness**: the executor's read and the driver's scans retry a lost connection (server
restart) for ``reconnect_timeout_s``: the read starts again from the range's start and
skips the rows it already yielded, so nothing is emitted twice or lost within the task; a
task failure beyond that is retried by Spark from the range's start (deterministic).
A purged binlog file fails with ``BinlogPurgedError`` (which file, the oldest still there,
snapshot again) -- never retried.

**Password**: from the ``password`` option (Spark redacts option values whose key matches
``spark.redaction.regex``, which by default contains ``password``) or else
``$MYSQLCDC_PASSWORD`` in the driver's / executors' environment. It is never logged.

Options (keys are lower case: Spark lower-cases data source option keys): ``config`` (the
pipeline JSON, no password), ``schemas`` (JSON list of ``TableSchema.to_dict()``),
``password``, optional ``reconnect_timeout_s``, ``checkpoint_location`` (where a moving
initial offset is kept, see ``stable_initial_offset``) and ``direct_write`` (a sink's spec, see
``sinks/direct.py``: each task does the sink's share of its range -- writes changelog parts, or
reduces to the last change per key -- and yields that spec's records instead of source rows).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from ..cdc.chunks import FinishedBatch
from ..cdc.config import PASSWORD_ENV, SourceConfig
from ..cdc.connection import is_connection_loss
from ..cdc.errors import ConfigError
from ..cdc.events import RowChange
from ..cdc.model import TableId, TableSchema
from ..cdc.offsets import BinlogOffset
from ..cdc.pipeline import PipelineConfig
from ..cdc.plan import FIRST_BATCH_SLOT
from ..cdc.state import StateStore
from .change_rows import SourceLayout

log = logging.getLogger(__name__)

FORMAT_NAME = "mysqlcdc-binlog"
STREAM_READER_SLOT = 0   # the executor's binlog reader (range 0 of a micro-batch)
OFFSET_SCAN_SLOT = 1     # the driver's latestOffset / startup scans
DEFAULT_RECONNECT_TIMEOUT_S = 120.0

T = TypeVar("T")


# --- offsets -------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamOffset:
    """A stream offset: the next change to consume, plus where its transaction's dump starts."""

    at: BinlogOffset
    txn_start: BinlogOffset | None = None

    @property
    def dump_from(self) -> BinlogOffset:
        return self.txn_start or BinlogOffset(self.at.file, self.at.position)

    def to_dict(self) -> dict[str, Any]:
        """Fixed key order and always the same keys: Spark compares serialized offsets."""
        return {
            "file": self.at.file,
            "position": self.at.position,
            "row": self.at.row,
            "txn_file": self.txn_start.file if self.txn_start else None,
            "txn_position": self.txn_start.position if self.txn_start else None,
            "gtid": self.at.gtid,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StreamOffset":
        at = BinlogOffset(str(d["file"]), int(d["position"]), d.get("gtid") or None, int(d.get("row") or 0))
        txn = None
        if d.get("txn_file"):
            txn = BinlogOffset(str(d["txn_file"]), int(d["txn_position"]))
        return cls(at, txn)

    @classmethod
    def boundary(cls, offset: BinlogOffset) -> "StreamOffset":
        """A transaction boundary (watermarks, heads, file starts)."""
        return cls(BinlogOffset(offset.file, offset.position, offset.gtid, 0))

    @classmethod
    def after(cls, change: RowChange, txn_start: BinlogOffset | None) -> "StreamOffset":
        """Just past ``change``: its next row, resumed from its transaction's start."""
        o = change.offset
        return cls(BinlogOffset(o.file, o.position, None, o.row + 1), txn_start)

    @classmethod
    def at_change(cls, change: RowChange, txn_start: BinlogOffset | None) -> "StreamOffset":
        """Exactly at ``change`` (exclusive end of a rate-limited batch)."""
        o = change.offset
        return cls(BinlogOffset(o.file, o.position, None, o.row), txn_start)

    def __str__(self) -> str:
        return f"{self.at}" + (f" (txn from {self.txn_start})" if self.txn_start else "")


# --- connection retries ----------------------------------------------------------------------

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


# --- settings and planning (driver) -------------------------------------------------------------

MIN_RANGE_BYTES = 512 << 10  # a catch-up range smaller than this is not worth a reader of its own
SCAN_BATCH_ROWS = 2_000   # the driver's scan flushes often: a cut resumes from the last flush's transaction


@dataclass(frozen=True)
class StreamSettings:
    """Everything the driver and the executor need, picklable (holds the password: never log it)."""

    source: SourceConfig
    schemas: tuple[TableSchema, ...]
    finished: tuple[FinishedBatch, ...]
    max_events_per_batch: int
    heartbeat_s: float
    reconnect_timeout_s: float
    startup_mode: str
    startup_offset: Mapping[str, Any] | None
    startup_timestamp: float | None
    state_location: str
    catchup_parallelism: int = 1
    catchup_min_bytes: int = 16 << 20
    catchup_batch_bytes: int = 256 << 20
    direct_write: str | None = None   # a sink's DirectSpec JSON (sinks/direct.py): tasks yield its records
    checkpoint_location: str | None = None   # the query's checkpoint (keeps a moving initial offset)

    @property
    def tables(self) -> list[TableId]:
        return [s.table_id for s in self.schemas]

    def catchup_server_id(self, part: int) -> int:
        """Range 0 of a micro-batch reads with the stream's id; range i > 0 with the i-th id from
        the top of the range (snapshot batches take theirs from slot 2 upwards)."""
        ids = self.source.server_id_range
        if part == 0:
            return ids.pick(STREAM_READER_SLOT)
        return ids.pick(len(ids) - part)

    def check(self) -> None:
        ids = self.source.server_id_range
        extra = self.catchup_parallelism - 1
        if extra and len(ids) - extra <= FIRST_BATCH_SLOT:
            raise ConfigError(
                f"stream_options.catchup_parallelism {self.catchup_parallelism} needs {extra} server ids beyond "
                f"the stream's two and one for snapshot batches, but server_id_range {ids} has {len(ids)}. "
                "Fix: widen server_id_range or lower catchup_parallelism.")


def _head(source: SourceConfig) -> BinlogOffset:
    from ..cdc.server import current_offset, server_version

    conn = source.connect()
    try:
        return current_offset(conn, server_version(conn))
    finally:
        conn.close()


def _check_available(source: SourceConfig, offset: BinlogOffset, tables: Sequence[TableId]) -> None:
    from ..cdc.server import check_offset_available

    conn = source.connect()
    try:
        check_offset_available(conn, offset, [str(t) for t in tables])
    finally:
        conn.close()


@dataclass
class ScanResult:
    end: StreamOffset
    changes: int
    hit_limit: bool


def scan_for_end(settings: StreamSettings, start: StreamOffset, head: BinlogOffset,
                 max_changes: int | None) -> ScanResult:
    """Count captured changes from ``start`` towards ``head``; end before the (max+1)-th one.

    Decodes with the fast reader (counting needs each event's rows). A cut inside a
    transaction resumes from a transaction start at or before it: the scan's own start for
    the first flush, else the reader's transaction start after the previous flush.
    """
    from ..cdc.fastbinlog.reader import ChangeBatch, FastBinlogReader, UnsupportedRows
    from .change_rows import offsets_of

    server_id = settings.source.server_id_range.pick(OFFSET_SCAN_SLOT)
    n = 0
    resume_from = start.dump_from
    reader = FastBinlogReader(settings.source, server_id, start.at, stop=head, tables=settings.tables,
                              blocking=False, heartbeat_s=None, dump_from=start.dump_from,
                              batch_rows=SCAN_BATCH_ROWS, on_unsupported="report")
    try:
        for group in reader.flushes():
            offsets: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
            for item in group:
                if isinstance(item, ChangeBatch):
                    offsets.append(offsets_of(item.batch))
                elif isinstance(item, UnsupportedRows):   # counted as one change: its rows are not decoded here
                    o = item.offset
                    offsets.append((np.array([o.file_index]), np.array([o.position]), np.array([0])))
            rows = sum(len(o[0]) for o in offsets)
            if max_changes is not None and rows and n + rows > max_changes:
                f = np.concatenate([o[0] for o in offsets])
                p = np.concatenate([o[1] for o in offsets])
                r = np.concatenate([o[2] for o in offsets])
                order = np.lexsort((r, p, f))
                k = order[max_changes - n]
                file = _file_named(settings, group, int(f[k]))
                cut = BinlogOffset(file, int(p[k]), None, int(r[k]))
                return ScanResult(StreamOffset(cut, resume_from), max_changes, True)
            n += rows
            resume_from = reader.transaction_start or resume_from
    finally:
        reader.close()
    return ScanResult(StreamOffset.boundary(head), n, False)


def _file_named(settings: StreamSettings, group: list, index: int) -> str:
    from ..cdc.fastbinlog.reader import ChangeBatch
    from ..cdc.offsets import split_binlog_file

    for item in group:
        names = (pa.compute.unique(item.batch.column("binlog_file")).to_pylist() if isinstance(item, ChangeBatch)
                 else [item.offset.file])
        for name in names:
            if split_binlog_file(name)[1] == index:
                return name
    raise AssertionError(f"no binlog file with index {index} in the scanned flush")


@dataclass(frozen=True)
class CatchupPlan:
    """A micro-batch planned by bytes: its end and the transaction starts cutting it into ranges."""

    end: StreamOffset
    cuts: tuple[BinlogOffset, ...]
    behind_bytes: int


def plan_catchup(settings: StreamSettings, start: StreamOffset, head: BinlogOffset) -> CatchupPlan | None:
    """A byte-planned micro-batch when the stream is at least ``catchup_min_bytes`` behind, else None."""
    from ..cdc import catchup

    conn = settings.source.connect()
    try:
        files = catchup.BinlogFiles.read(conn, head)
        try:
            behind = files.bytes_between(start.dump_from, head)
        except KeyError:
            return None
        if behind < settings.catchup_min_bytes:
            return None
        parts = settings.catchup_parallelism
        end, cuts = catchup.plan_batch(conn, files, start.dump_from, head, settings.catchup_batch_bytes, parts,
                                       MIN_RANGE_BYTES)
        if end <= start.at:  # a start inside a transaction, with the planned end before it
            end = head
            cuts = catchup.split_range(conn, files, start.dump_from, end, parts, MIN_RANGE_BYTES)
        cuts = [c for c in cuts if start.at < c < end]
    finally:
        conn.close()
    return CatchupPlan(StreamOffset.boundary(end), tuple(cuts), behind)


# --- startup offsets ----------------------------------------------------------------------------


def initial_offset(settings: StreamSettings) -> StreamOffset:
    """Where a new query starts, per startup mode (see PipelineConfig.startup_mode)."""
    from ..cdc.server import earliest_offset

    mode = settings.startup_mode
    src = settings.source
    if mode == "initial":
        if not settings.finished:
            raise ConfigError(
                f"startup_mode 'initial': no finished snapshot batches in {settings.state_location} "
                "(finished_batches.json missing or empty). Fix: run the snapshot first, or choose "
                "another startup_mode (latest-offset, earliest-offset, specific-offset, timestamp).")
        return StreamOffset.boundary(min(b.high_watermark for b in settings.finished))
    if mode == "snapshot":
        raise ConfigError("startup_mode 'snapshot' stops after the snapshot: the stream job must not run.")
    if mode == "latest-offset":
        return StreamOffset.boundary(_head(src))
    if mode == "earliest-offset":
        conn = src.connect()
        try:
            return StreamOffset.boundary(earliest_offset(conn))
        finally:
            conn.close()
    if mode == "specific-offset":
        spec = dict(settings.startup_offset or {})
        if spec.get("file"):
            off = BinlogOffset(str(spec["file"]), int(spec.get("position") or 4))
            _check_available(src, off, settings.tables)
            return StreamOffset.boundary(off)
        if spec.get("gtid"):
            return StreamOffset.boundary(offset_after_gtid_set(src, src.server_id_range.pick(OFFSET_SCAN_SLOT),
                                                               str(spec["gtid"])))
        raise ConfigError("startup_offset needs 'file' (+ 'position') or 'gtid'.")
    if mode == "timestamp":
        return StreamOffset.boundary(offset_at_timestamp(src, src.server_id_range.pick(OFFSET_SCAN_SLOT),
                                                         float(settings.startup_timestamp or 0)))
    raise ConfigError(f"startup_mode: unknown {mode!r}")


# Startup modes whose offset depends on when it is asked (the head moves, old files get purged).
MOVING_STARTUP_MODES = ("latest-offset", "earliest-offset")
INITIAL_OFFSET_FILE = "mysqlcdc_initial_offset.json"


def stable_initial_offset(settings: StreamSettings) -> dict:
    """The query's initial offset, asked of the server once per checkpoint.

    Spark asks a source for its initial offset both to plan micro-batch 0 and to run it,
    and again when it replays micro-batch 0 after a crash before its commit (the offset log
    holds only end offsets). For ``latest-offset`` two answers differ as soon as the server
    writes in between, and changes between them would be skipped, so the first answer is
    kept in the query's checkpoint directory and returned from then on.
    """
    store = None
    if settings.startup_mode in MOVING_STARTUP_MODES and settings.checkpoint_location:
        from ..cdc.state import StateStore

        store = StateStore(settings.checkpoint_location)
        if store.exists(INITIAL_OFFSET_FILE):
            kept = StreamOffset.from_dict(store.read_json(INITIAL_OFFSET_FILE))
            log.info("binlog stream: the query starts at %s (startup_mode %s, recorded in the checkpoint)",
                     kept, settings.startup_mode)
            return kept.to_dict()
    off = with_reconnect(lambda: initial_offset(settings), settings.reconnect_timeout_s, "initial offset")
    if store is not None:
        store.write_json(INITIAL_OFFSET_FILE, off.to_dict())
    log.info("binlog stream: new query starts at %s (startup_mode %s)", off, settings.startup_mode)
    return off.to_dict()


# --- the Spark data source ------------------------------------------------------------------------


def _log_to_stderr() -> None:
    """The driver side of a Python source runs in a Python worker process of its own, where
    logging is not configured: without this its planning lines (catch-up, heartbeats) are lost.
    The worker's stderr reaches the job's log."""
    pkg = logging.getLogger("airflow_provider_mysqlcdc")
    if logging.getLogger().handlers or pkg.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    pkg.addHandler(handler)
    pkg.setLevel(logging.INFO)


class BinlogPartition(InputPartition):
    """One range of a micro-batch: offsets as JSON texts, the reader's server id, and the
    micro-batch's first binlog file index (every range numbers its rows from it)."""

    def __init__(self, start: dict, end: dict, server_id: int, first_file_index: int, part: int = 0,
                 parts: int = 1) -> None:
        super().__init__(json.dumps([start, end, server_id, first_file_index, part, parts]))
        self.start = start
        self.end = end
        self.server_id = server_id
        self.first_file_index = first_file_index
        self.part = part
        self.parts = parts


class BinlogStreamReader(DataSourceStreamReader):
    """Driver: offsets, admission control, catch-up planning. Executor: ``read()`` of one range."""

    def __init__(self, settings: StreamSettings) -> None:
        settings.check()
        _log_to_stderr()
        self.settings = settings
        self._layout: SourceLayout | None = None
        # Driver-side memory (not needed for correctness; the executor never uses it):
        self._idle_scan: tuple[str, StreamOffset] | None = None   # (start json, scanned-to head)
        self._last_move = time.monotonic()
        self._empty_ranges: set[str] = set()
        self._cuts: dict[str, tuple[BinlogOffset, ...]] = {}      # range json -> catch-up cuts
        self._initial: dict | None = None

    @property
    def layout(self) -> SourceLayout:
        if self._layout is None:
            self._layout = SourceLayout(self.settings.schemas, self.settings.source.server_time_zone)
        return self._layout

    def initialOffset(self) -> dict:
        """Where the query starts; the same answer every time it is asked (see ``stable_initial_offset``)."""
        if self._initial is None:
            self._initial = stable_initial_offset(self.settings)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.settings.max_events_per_batch)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return with_reconnect(lambda: self._latest(start, max_rows), self.settings.reconnect_timeout_s,
                              "latest offset")

    def _latest(self, start_d: dict, max_rows: int | None) -> dict:
        start = StreamOffset.from_dict(start_d)
        key = json.dumps(start_d)
        _check_available(self.settings.source, start.dump_from, self.settings.tables)
        head = _head(self.settings.source)
        if head <= start.at:
            return start_d
        plan = plan_catchup(self.settings, start, head)
        if plan is not None:
            end_d = plan.end.to_dict()
            self._idle_scan = None
            self._last_move = time.monotonic()
            self._cuts[json.dumps([start_d, end_d])] = plan.cuts
            log.info("binlog stream: %.0f MiB behind the head; catch-up micro-batch to %s in %d ranges",
                     plan.behind_bytes / (1 << 20), plan.end, len(plan.cuts) + 1)
            return end_d
        scan_from = start
        if self._idle_scan is not None and self._idle_scan[0] == key:
            scan_from = self._idle_scan[1]  # [start, there) is known to hold no captured change
            if head <= scan_from.at:
                return self._idle_or_move(start_d, key, scan_from)
        result = scan_for_end(self.settings, scan_from, head, max_rows)
        if result.changes or result.hit_limit:
            self._idle_scan = None
            self._last_move = time.monotonic()
            return result.end.to_dict()
        return self._idle_or_move(start_d, key, result.end)

    def _idle_or_move(self, start_d: dict, key: str, reached: StreamOffset) -> dict:
        """Nothing captured in [start, reached): move there at most once per heartbeat_s."""
        if time.monotonic() - self._last_move < self.settings.heartbeat_s:
            self._idle_scan = (key, reached)
            return start_d
        self._idle_scan = None
        self._last_move = time.monotonic()
        end_d = reached.to_dict()
        self._empty_ranges.add(json.dumps([start_d, end_d]))
        return end_d

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if start == end:
            return []
        key = json.dumps([start, end])
        if key in self._empty_ranges:
            self._empty_ranges.discard(key)
            return []  # scanned on this driver: no captured change in it
        first = min(StreamOffset.from_dict(start).dump_from.file_index, StreamOffset.from_dict(end).at.file_index)
        bounds = [start] + [StreamOffset.boundary(c).to_dict() for c in self._cuts.pop(key, ())] + [end]
        n = len(bounds) - 1
        return [BinlogPartition(a, b, self.settings.catchup_server_id(i), first, i, n)
                for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # imported here: the decoder is executor code, and the driver's source process (one
        # new Python process per query start) then starts ~0.3 s sooner without it
        from .binlog_read import range_batches

        assert isinstance(partition, BinlogPartition)
        s = self.settings
        start, end = StreamOffset.from_dict(partition.start), StreamOffset.from_dict(partition.end)
        began, rows = time.monotonic(), 0
        batches = range_batches(self.layout, s.source, s.schemas, s.finished, start, end, partition.server_id,
                                partition.first_file_index, s.reconnect_timeout_s)
        if s.direct_write is not None:
            from .sinks.direct import current_batch_id, spec_from_json

            records = spec_from_json(s.direct_write).write_range(self.layout, batches, current_batch_id(),
                                                                  partition.part)
            rows = sum(records.column("changes").to_pylist())
            yield records
        else:
            for batch in batches:
                rows += batch.num_rows
                yield batch
        if partition.parts > 1:
            _log_to_stderr()
            took = time.monotonic() - began
            log.info("catch-up range %d/%d %s .. %s: %d changes in %.2f s (server id %d)", partition.part + 1,
                     partition.parts, start, end.at, rows, took, partition.server_id)

    def commit(self, end: dict) -> None:
        """Spark has processed everything before ``end``; nothing to release on the server."""

    def stop(self) -> None:
        """Nothing held between calls: every scan opens and closes its own connections."""


class BinlogDataSource(DataSource):
    """``spark.readStream.format("mysqlcdc-binlog")`` -- see the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        direct = [v for k, v in self.options.items() if str(k).lower() == "direct_write"]
        if direct:
            from .sinks.direct import spec_from_json

            return spec_from_json(direct[0]).spark_schema()
        return source_layout(self.options).spark_schema

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return BinlogStreamReader(settings_from_options(self.options))


def source_layout(options: Mapping[str, str]) -> SourceLayout:
    """The source's schema from its options (the driver asks before any reader exists)."""
    opts = {str(k).lower(): v for k, v in options.items()}
    if "config" not in opts or "schemas" not in opts:
        raise ConfigError(f"{FORMAT_NAME}: options 'config' and 'schemas' are required")
    config = json.loads(opts["config"])
    tz = (config.get("source") or {}).get("server_time_zone") or "UTC"
    return SourceLayout([TableSchema.from_dict(d) for d in json.loads(opts["schemas"])], tz)


def settings_from_options(options: Mapping[str, str]) -> StreamSettings:
    """Parse the (lower-cased) options; the finished-batch list is read once, here, on the driver."""
    opts = {str(k).lower(): v for k, v in options.items()}
    if "config" not in opts or "schemas" not in opts:
        raise ConfigError(f"{FORMAT_NAME}: options 'config' and 'schemas' are required")
    password = opts.get("password")
    if password is None:
        password = os.environ.get(PASSWORD_ENV)
    if password is None:
        raise ConfigError(f"{FORMAT_NAME}: no source password: pass the 'password' option or set ${PASSWORD_ENV}.")
    config = PipelineConfig.from_json(opts["config"], password=password)
    schemas = tuple(TableSchema.from_dict(d) for d in json.loads(opts["schemas"]))
    if not schemas:
        raise ConfigError(f"{FORMAT_NAME}: no captured table schemas given")
    finished: tuple[FinishedBatch, ...] = ()
    if config.startup_mode == "initial":
        finished = tuple(StateStore(config.state_location).read_finished() or ())
    return StreamSettings(
        source=config.source,
        schemas=schemas,
        finished=finished,
        max_events_per_batch=int(config.stream.max_events_per_batch),
        heartbeat_s=float(config.stream.heartbeat_s),
        reconnect_timeout_s=float(opts.get("reconnect_timeout_s") or DEFAULT_RECONNECT_TIMEOUT_S),
        startup_mode=config.startup_mode,
        startup_offset=config.startup_offset,
        startup_timestamp=config.startup_timestamp,
        state_location=config.state_location,
        catchup_parallelism=int(config.stream.catchup_parallelism),
        catchup_min_bytes=int(config.stream.catchup_min_bytes),
        catchup_batch_bytes=int(config.stream.catchup_batch_bytes),
        direct_write=opts.get("direct_write") or None,
        checkpoint_location=opts.get("checkpoint_location") or None,
    )


def register(spark: Any) -> None:
    """Register the source with a session (idempotent)."""
    spark.dataSource.register(BinlogDataSource)


# --- startup lookups: timestamp and GTID set -> offset (driver, slot OFFSET_SCAN_SLOT) ----------


def _raw_events(source: SourceConfig, server_id: int, file: str, position: int,
                only_events: list[type]) -> Iterator[tuple[str, Any]]:
    """(current file, event) of a non-blocking dump from ``file:position`` to the binlog's end."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import RotateEvent

    settings = source.connect_kwargs()
    settings.pop("autocommit", None)
    stream = BinLogStreamReader(connection_settings=settings, server_id=server_id, is_mariadb=False,
                                resume_stream=True, log_file=file, log_pos=position, blocking=False,
                                only_events=[RotateEvent, *only_events], enable_logging=False)
    current = file
    try:
        for ev in stream:
            if isinstance(ev, RotateEvent):
                current = ev.next_binlog
                continue
            yield current, ev
    finally:
        stream.close()


def _event_offset(file: str, ev: Any) -> BinlogOffset:
    return BinlogOffset(file, ev.packet.log_pos - ev.packet.event_size)


def _file_start_time(source: SourceConfig, server_id: int, file: str) -> int | None:
    """The time the binlog file was started (its format description event's timestamp)."""
    from pymysqlreplication.event import FormatDescriptionEvent

    for _, ev in _raw_events(source, server_id, file, 4, [FormatDescriptionEvent]):
        if ev.timestamp:
            return int(ev.timestamp)
    return None


def offset_at_timestamp(source: SourceConfig, server_id: int, ts: float) -> BinlogOffset:
    """The start of the first transaction written at or after ``ts`` (epoch seconds).

    Cost: one short dump per binlog file (newest first) to read its start time until a file
    starts at or before ``ts``, then one scan of the binlog from that file (all events,
    undecoded rows) until the first transaction at or after ``ts``; the head if none. Binlog
    event times have second resolution.
    """
    from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, QueryEvent

    from ..cdc.server import list_binlogs

    conn = source.connect()
    try:
        files = [f for f, _ in list_binlogs(conn)]
    finally:
        conn.close()
    first = files[0]
    for f in reversed(files):
        started = _file_start_time(source, server_id, f)
        if started is not None and started <= ts:
            first = f
            break
    for file, ev in _raw_events(source, server_id, first, 4, [GtidEvent, MariadbGtidEvent, QueryEvent]):
        if not ev.packet.log_pos or ev.timestamp < ts:
            continue
        if isinstance(ev, QueryEvent) and not str(ev.query).strip().upper().startswith("BEGIN"):
            from ..cdc.binlog import is_ddl

            if not is_ddl(ev.query):
                continue
        return _event_offset(file, ev)
    return _head(source)


def offset_after_gtid_set(source: SourceConfig, server_id: int, gtid_text: str) -> BinlogOffset:
    """The start of the first transaction whose GTID is not in ``gtid_text`` (a set already applied).

    Cost: a scan of the retained binlog from the oldest file (GTID events only, rows
    undecoded) up to that transaction; the head if every transaction is in the set.
    """
    from pymysqlreplication.event import GtidEvent, MariadbGtidEvent

    from ..cdc.gtid import guess_flavor, parse_gtid_set
    from ..cdc.server import earliest_offset

    flavor = guess_flavor(gtid_text)
    applied = parse_gtid_set(gtid_text, flavor)
    conn = source.connect()
    try:
        start = earliest_offset(conn)
    finally:
        conn.close()
    for file, ev in _raw_events(source, server_id, start.file, start.position, [GtidEvent, MariadbGtidEvent]):
        if not ev.packet.log_pos:
            continue
        if not applied.contains(parse_gtid_set(ev.gtid, flavor)):
            return _event_offset(file, ev)
    return _head(source)
