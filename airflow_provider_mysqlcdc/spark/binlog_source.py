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

**Admission control**: ``getDefaultReadLimit()`` is ``ReadMaxRows(max_events_per_batch)``.
``latestOffset(start, limit)`` scans the binlog on the driver from ``start`` towards the
server's head, counting captured row changes (one per row of a row event, before the
handoff filter); the offset of the (N+1)-th change ends the micro-batch, else the head.
This costs a second parse of each micro-batch's binlog (the driver's count, then the
executor's read), with the cheap packet-level table filter of python-mysql-replication
skipping other tables' rows undecoded.

**Heartbeat**: the head is where the server's binlog ends, whatever tables wrote it. When
the captured tables are idle and others busy, a scan finds no captured change and the
offset still moves to the head -- at most once per ``heartbeat_s`` (every move is an empty
micro-batch and a checkpoint write), with the scanned range remembered so the next call
scans only what is new. Such a known-empty range is planned with no partition at all. So a
restart never replays more than ``heartbeat_s`` of unrelated binlog.

**One reader**: ``partitions()`` returns one partition: the binlog is one ordered stream,
and exactly one task reads it. Server ids (``source.server_id_range``, see ``cdc/plan.py``):
slot 0 is the executor's reader, slot 1 the driver's offset scans (latestOffset, and the
timestamp / GTID startup lookups); slots 2.. belong to snapshot batches.

**Robustness**: the executor's read and the driver's scans retry a lost connection (server
restart) for ``reconnect_timeout_s``: the read resumes after the last row it yielded (from
that row's transaction start), so nothing is emitted twice or lost within the task; a
task failure beyond that is retried by Spark from the partition's start (deterministic).
A purged binlog file fails with ``BinlogPurgedError`` (which file, the oldest still there,
snapshot again) -- never retried.

**Password**: from the ``password`` option (Spark redacts option values whose key matches
``spark.redaction.regex``, which by default contains ``password``) or else
``$MYSQLCDC_PASSWORD`` in the driver's / executors' environment. It is never logged.

Options (keys are lower case: Spark lower-cases data source option keys): ``config`` (the
pipeline JSON, no password), ``schemas`` (JSON list of ``TableSchema.to_dict()``),
``password``, optional ``reconnect_timeout_s``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows
from pyspark.sql.types import (
    IntegerType, LongType, StringType, StructField, StructType, TimestampType,
)

from ..cdc.binlog import BinlogReader
from ..cdc.chunks import FinishedBatch
from ..cdc.config import PASSWORD_ENV, SourceConfig
from ..cdc.errors import BinlogPurgedError, ConfigError, SourceUnreachableError
from ..cdc.events import RowChange
from ..cdc.handoff import HandoffFilter
from ..cdc.model import TableId, TableSchema
from ..cdc.offsets import BinlogOffset
from ..cdc.pipeline import PipelineConfig
from ..cdc.state import StateStore
from . import change_rows as cr

log = logging.getLogger(__name__)

FORMAT_NAME = "mysqlcdc-binlog"
STREAM_READER_SLOT = 0   # the executor's one binlog reader
OFFSET_SCAN_SLOT = 1     # the driver's latestOffset / startup scans
DEFAULT_RECONNECT_TIMEOUT_S = 120.0

SOURCE_SCHEMA = StructType([
    StructField(cr.SRC_DATABASE, StringType(), False),
    StructField(cr.SRC_TABLE, StringType(), False),
    StructField(cr.SRC_OP, StringType(), False),
    StructField(cr.SRC_FILE, StringType(), False),
    StructField(cr.SRC_POS, LongType(), False),
    StructField(cr.SRC_ROW, IntegerType(), False),
    StructField(cr.SRC_GTID, StringType(), True),
    StructField(cr.SRC_TS, TimestampType(), True),
    StructField(cr.SRC_SEQ, LongType(), False),
    StructField(cr.SRC_PAYLOAD, StringType(), False),
])

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

_RETRY_MYSQL_CODES = {1053, 2003, 2006, 2013, 2055, 1927}  # shutdown, can't connect, gone, lost


def is_connection_loss(e: BaseException) -> bool:
    """A lost or refused connection (server restart), worth retrying; never a purged binlog."""
    if isinstance(e, BinlogPurgedError):
        return False
    if isinstance(e, SourceUnreachableError):
        return True
    import pymysql

    if isinstance(e, (pymysql.err.OperationalError, pymysql.err.InterfaceError)):
        code = e.args[0] if e.args else None
        return code in _RETRY_MYSQL_CODES or isinstance(e, pymysql.err.InterfaceError)
    return isinstance(e, (ConnectionError, EOFError, BrokenPipeError, TimeoutError))


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


# --- reading -----------------------------------------------------------------------------------


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

    @property
    def tables(self) -> list[TableId]:
        return [s.table_id for s in self.schemas]


def build_handoff(settings: StreamSettings) -> HandoffFilter | None:
    """The handoff filter over the finished batches of captured tables (None when there are none)."""
    from ..cdc.keyorder import key_order_for

    schemas = {s.table_id: s for s in settings.schemas}
    finished = []
    for b in settings.finished:
        ranges = tuple(r for r in b.ranges if r.table_id in schemas)
        if ranges:
            finished.append(FinishedBatch(b.batch_id, ranges, b.high_watermark))
    if not finished:
        return None
    tables = {r.table_id for b in finished for r in b.ranges}
    orders = {t: key_order_for(schemas[t], settings.source) for t in tables}
    return HandoffFilter(finished, orders, {t: schemas[t] for t in tables})


def read_changes(settings: StreamSettings, start: StreamOffset, end: StreamOffset,
                 server_id: int, normalize: bool = True) -> Iterator[tuple[RowChange, BinlogOffset | None]]:
    """Captured row changes in ``[start, end)`` with their transaction starts, reconnecting as needed.

    Deterministic: the same range always yields the same changes. After a lost connection
    the read resumes just after the last change yielded (from its transaction's start), so
    within one call nothing is yielded twice and nothing is skipped.
    """
    from ..cdc.types import row_normalizer

    normalizers = ({s.table_id: row_normalizer(s, settings.source.server_time_zone) for s in settings.schemas}
                   if normalize else None)
    pos = start
    deadline = None
    while pos.at < end.at:
        reader = BinlogReader(settings.source, server_id, pos.at, stop=_stop_for(end),
                              tables=settings.tables, normalizers=normalizers, blocking=False,
                              dump_from=pos.dump_from, heartbeat_s=0)
        try:
            for ev in reader:
                if not isinstance(ev, RowChange):
                    continue
                if ev.offset >= end.at:
                    return
                txn = reader.transaction_start
                yield ev, txn
                pos = StreamOffset.after(ev, txn)
                deadline = None
            return
        except Exception as e:
            if not is_connection_loss(e):
                raise
            deadline = deadline or time.monotonic() + settings.reconnect_timeout_s
            if time.monotonic() > deadline:
                raise
            log.warning("binlog read: connection lost at %s (%s); resuming", pos, type(e).__name__)
            time.sleep(1.0)
        finally:
            reader.close()


def _stop_for(end: StreamOffset) -> BinlogOffset:
    """The reader's stop for an exclusive ``end``: the reader stops on whole events, so an end in
    the middle of an event (``row`` > 0) lets that event through and ``read_changes`` cuts its rows."""
    return BinlogOffset(end.at.file, end.at.position + (1 if end.at.row else 0))


def source_rows(settings: StreamSettings, start: StreamOffset, end: StreamOffset) -> Iterator[tuple]:
    """The source rows of ``[start, end)``: handoff-filtered changes, numbered in binlog order."""
    handoff = build_handoff(settings) if settings.finished else None
    server_id = settings.source.server_id_range.pick(STREAM_READER_SLOT)
    seq = 0
    try:
        for change, _ in read_changes(settings, start, end, server_id):
            for out in (handoff.apply(change) if handoff is not None else [change]):
                if isinstance(out, RowChange):
                    yield cr.source_row(out, seq)
                    seq += 1
    finally:
        if handoff is not None:
            handoff.close()


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
    """Count captured changes from ``start`` towards ``head``; stop at the (max+1)-th one."""
    server_id = settings.source.server_id_range.pick(OFFSET_SCAN_SLOT)
    n = 0
    for change, txn in read_changes(settings, start, StreamOffset.boundary(head), server_id, normalize=False):
        if max_changes is not None and n >= max_changes:
            return ScanResult(StreamOffset.at_change(change, txn), n, True)
        n += 1
    return ScanResult(StreamOffset.boundary(head), n, False)


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


# --- the Spark data source ------------------------------------------------------------------------


class BinlogPartition(InputPartition):
    """The one partition of a micro-batch: the offset range as JSON texts."""

    def __init__(self, start: dict, end: dict) -> None:
        super().__init__(json.dumps([start, end]))
        self.start = start
        self.end = end


class BinlogStreamReader(DataSourceStreamReader):
    """Driver: offsets and admission control. Executor: ``read()`` of one offset range."""

    def __init__(self, settings: StreamSettings) -> None:
        self.settings = settings
        # Driver-side memory (not needed for correctness; the executor never uses it):
        self._idle_scan: tuple[str, StreamOffset] | None = None   # (start json, scanned-to head)
        self._last_move = time.monotonic()
        self._empty_ranges: set[str] = set()

    def initialOffset(self) -> dict:
        off = with_reconnect(lambda: initial_offset(self.settings), self.settings.reconnect_timeout_s,
                             "initial offset")
        log.info("binlog stream: new query starts at %s (startup_mode %s)", off, self.settings.startup_mode)
        return off.to_dict()

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
        if json.dumps([start, end]) in self._empty_ranges:
            self._empty_ranges.discard(json.dumps([start, end]))
            return []  # scanned on this driver: no captured change in it
        return [BinlogPartition(start, end)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, BinlogPartition)
        yield from source_rows(self.settings, StreamOffset.from_dict(partition.start),
                               StreamOffset.from_dict(partition.end))

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
        return SOURCE_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return BinlogStreamReader(settings_from_options(self.options))


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
