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
the driver plans by bytes instead (``cdc/binlog/catchup.py``): the micro-batch ends at a
transaction start about ``catchup_batch_bytes`` on (or the head), found by the server's
own event walk, and is cut at transaction starts into up to ``catchup_parallelism``
ranges -- one Spark task each, range i > 0 reading with the i-th server id from the top of
``server_id_range``. The binlog is read once, in parallel; the ranges' rows are put back
in binlog order by ``seq`` in the sink. A catch-up micro-batch may hold more than
``max_events_per_batch`` rows. After a driver restart a replayed micro-batch is read as
one range (the cuts are driver memory): same rows, same numbers, just slower. While a
catch-up micro-batch runs, the next one (from its end) is planned on a thread
(``plan_ahead.py``): the server's walk no longer leaves the tasks idle between micro-batches.

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
reduces to the last change per key -- and yields that spec's records instead of source rows)
and ``first_plan_dir`` (a local directory where ``start_stream`` leaves the first catch-up
plan, see ``first_plan.py``).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from ...cdc.binlog.gtid_watch import watch_or_none
from ...cdc.offsets import BinlogOffset
from .offsets.stream_offset import StreamOffset
from .planning import first_plan
from .planning.batch_planning import CatchupPlan, plan_catchup, scan_for_end
from .planning.plan_ahead import PlanAhead
from .reading.change_rows import SourceLayout
from .server.binlog_server import check_available, head_offset
from .server.placement import Placement
from .server.reconnect import with_reconnect
from .server.startup import stable_initial_offset
from .settings import FORMAT_NAME, StreamSettings, settings_from_options, source_layout

log = logging.getLogger(__name__)


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

    def __init__(
        self,
        start: dict,
        end: dict,
        server_id: int,
        first_file_index: int,
        part: int = 0,
        parts: int = 1,
        source_server: str | None = None,
        handoff: list[dict] | None = None,
    ) -> None:
        super().__init__(json.dumps([start, end, server_id, first_file_index, part, parts, source_server, handoff]))
        self.start = start
        self.end = end
        self.server_id = server_id
        self.first_file_index = first_file_index
        self.part = part
        self.parts = parts
        self.source_server = source_server  # the server the offsets are on: the reader refuses another
        self.handoff = handoff  # the finished batches placed on that server (None: the settings' own)


class BinlogStreamReader(DataSourceStreamReader):
    """Driver: offsets, admission control, catch-up planning. Executor: ``read()`` of one range."""

    def __init__(self, settings: StreamSettings) -> None:
        settings.check()
        _log_to_stderr()
        self.settings = settings
        self._layout: SourceLayout | None = None
        # Driver-side memory (not needed for correctness; the executor never uses it):
        self._idle_scan: tuple[str, StreamOffset] | None = None  # (start json, scanned-to head)
        self._last_move = time.monotonic()
        self._empty_ranges: set[str] = set()
        self._cuts: dict[str, tuple[BinlogOffset, ...]] = {}  # range json -> catch-up cuts
        self._initial: dict | None = None
        self._ahead: PlanAhead[StreamOffset, CatchupPlan | None] = PlanAhead()  # the next catch-up plan
        self._first_plan_dir = settings.first_plan_dir  # the launcher's plan of the first one (first_plan.py)
        self._places = Placement(settings)  # offsets' servers; a failover's relocation (placement.py)
        # The highest GTID per domain / server uuid the scans have read: they read every micro-batch
        # near the head from its start, so a number skipped between two of them is seen too.
        self._gtids = watch_or_none(settings.allow_gtid_gaps)

    @property
    def layout(self) -> SourceLayout:
        if self._layout is None:
            self._layout = SourceLayout(self.settings.schemas, self.settings.source.server_time_zone)
        return self._layout

    def initialOffset(self) -> dict:
        """Where the query starts; the same answer every time it is asked (see ``stable_initial_offset``)."""
        if self._initial is None:
            self._initial = stable_initial_offset(self.settings, self._places)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.settings.max_events_per_batch)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return with_reconnect(lambda: self._placed(start, max_rows), self.settings.reconnect_timeout_s, "latest offset")

    def _placed(self, start_d: dict, max_rows: int | None) -> dict:
        """``_latest`` from ``start_d`` found on the server reachable now (a failover moves it), its
        end marked with that server and its GTID state (``placement.py``)."""
        start, server = self._places.resolve(StreamOffset.from_dict(start_d))
        try:
            end_d = self._latest(start.to_dict(), max_rows)
        except _BinlogWentBack:
            self._places.forget(start)  # checked again against the server: placed by GTID, or a clear stop
            start, server = self._places.resolve(start)
            end_d = self._latest(start.to_dict(), max_rows)
        end = StreamOffset.from_dict(end_d)
        if end.same_place(start):
            return start_d  # no progress: Spark must see the very same offset
        placed = self._places.place(end, server)
        return start_d if placed is None else placed.to_dict()

    def _latest(self, start_d: dict, max_rows: int | None) -> dict:
        start = StreamOffset.from_dict(start_d)
        key = _place_key(start)
        check_available(self.settings.source, start.dump_from, self.settings.tables)
        head = head_offset(self.settings.source)
        launched, self._first_plan_dir = self._first_plan_dir, None  # looked at by the first call only
        if head < start.dump_from and start.server is not None:
            raise _BinlogWentBack(f"the head {head} is before {start}")
        if head <= start.at:
            first_plan.discard(launched)
            return start_d
        plan, made_by = self._ahead.take(start), "while the last one ran"
        if plan is None and launched is not None:
            plan, made_by = first_plan.take(launched, start), "while the query started"
        else:
            first_plan.discard(launched)
        ahead = plan is not None and plan.end.at <= head
        if not ahead:
            plan = plan_catchup(self.settings, start, head)
        if plan is not None:
            end_d = plan.end.to_dict()
            self._idle_scan = None
            self._last_move = time.monotonic()
            self._cuts[_range_key(start, plan.end)] = plan.cuts
            if self._gtids is not None:  # not scanned: its ranges check their own GTIDs
                self._gtids.reset()
            log.info(
                "binlog stream: %.0f MiB behind the head; catch-up micro-batch to %s in %d ranges%s",
                plan.behind_bytes / (1 << 20),
                plan.end,
                len(plan.cuts) + 1,
                f" (planned {made_by})" if ahead else "",
            )
            if plan.end.at < head:  # more backlog: plan the next micro-batch while this one runs
                settings = self.settings
                self._ahead.begin(plan.end, lambda at: plan_catchup(settings, at, head_offset(settings.source)))
            return end_d
        scan_from = start
        if self._idle_scan is not None and self._idle_scan[0] == key:
            scan_from = self._idle_scan[1]  # [start, there) is known to hold no captured change
            if head <= scan_from.at:
                return self._idle_or_move(start_d, key, scan_from)
        result = scan_for_end(self.settings, scan_from, head, max_rows, self._gtids)
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
        self._empty_ranges.add(_range_key(StreamOffset.from_dict(start_d), reached))
        return reached.to_dict()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if start == end:
            return []
        return with_reconnect(lambda: self._partitions(start, end), self.settings.reconnect_timeout_s, "partitions")

    def _partitions(self, start_d: dict, end_d: dict) -> Sequence[InputPartition]:
        start, server = self._places.resolve(StreamOffset.from_dict(start_d))
        end, _ = self._places.resolve(StreamOffset.from_dict(end_d))
        if end.same_place(start):
            return []
        key = _range_key(start, end)
        if key in self._empty_ranges:
            self._empty_ranges.discard(key)
            return []  # scanned on this driver: no captured change in it
        handoff = self._places.handoff(server, start)
        handoff_d = None if handoff is None else [b.to_dict() for b in handoff]
        first = min(start.dump_from.file_index, end.at.file_index)
        bounds = [start.to_dict()] + [StreamOffset.boundary(c).to_dict() for c in self._cuts.pop(key, ())]
        bounds.append(end.to_dict())
        n = len(bounds) - 1
        return [
            BinlogPartition(a, b, self.settings.catchup_server_id(i), first, i, n, server, handoff_d)
            for i, (a, b) in enumerate(zip(bounds, bounds[1:]))
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # imported here: the decoder is executor code, and the driver's source process (one
        # new Python process per query start) then starts ~0.3 s sooner without it
        from .reading.binlog_read import range_batches, range_items

        assert isinstance(partition, BinlogPartition)
        s = self.settings
        start, end = StreamOffset.from_dict(partition.start), StreamOffset.from_dict(partition.end)
        finished = s.finished
        if partition.handoff is not None:
            from ...cdc.chunks import FinishedBatch

            finished = tuple(FinishedBatch.from_dict(d) for d in partition.handoff)
        began, cpu, rows = time.monotonic(), time.process_time(), 0
        if s.direct_write is not None:
            from ..sinks.direct import current_batch_id, spec_from_json
            from .reading.layout_book import LayoutBook

            items = range_items(
                LayoutBook(self.layout, s.source.server_time_zone),
                s.source,
                s.schemas,
                finished,
                start,
                end,
                partition.server_id,
                partition.first_file_index,
                s.reconnect_timeout_s,
                s.new_table if s.include else None,
                s.allow_gtid_gaps,
                partition.source_server,
            )
            records = spec_from_json(s.direct_write).write_range(items, current_batch_id(), partition.part)
            rows = sum(records.column("changes").to_pylist())
            yield records
        else:
            batches = range_batches(
                self.layout,
                s.source,
                s.schemas,
                finished,
                start,
                end,
                partition.server_id,
                partition.first_file_index,
                s.reconnect_timeout_s,
                s.allow_gtid_gaps,
                partition.source_server,
            )
            for batch in batches:
                rows += batch.num_rows
                yield batch
        if partition.parts > 1:
            _log_to_stderr()
            took, cpu = time.monotonic() - began, time.process_time() - cpu
            log.info(
                "catch-up range %d/%d %s .. %s: %d changes in %.2f s, %.2f s CPU (server id %d)",
                partition.part + 1,
                partition.parts,
                start,
                end.at,
                rows,
                took,
                cpu,
                partition.server_id,
            )

    def commit(self, end: dict) -> None:
        """Spark has processed everything before ``end``; nothing to release on the server."""

    def stop(self) -> None:
        """Nothing held between calls: every scan opens and closes its own connections."""


class _BinlogWentBack(Exception):
    """The server's binlog ends before the stream's offset: reset, or another server (see ``_placed``)."""


def _place_key(off: StreamOffset) -> str:
    """A text for an offset's place in the binlog (its server and GTID aside)."""
    return f"{off.at.file}:{off.at.position}#{off.at.row}<{off.dump_from.file}:{off.dump_from.position}"


def _range_key(start: StreamOffset, end: StreamOffset) -> str:
    return f"{_place_key(start)}..{_place_key(end)}"


class BinlogDataSource(DataSource):
    """``spark.readStream.format("mysqlcdc-binlog")`` -- see the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        direct = [v for k, v in self.options.items() if str(k).lower() == "direct_write"]
        if direct:
            from ..sinks.direct import spec_from_json

            return spec_from_json(direct[0]).spark_schema()
        return source_layout(self.options).spark_schema

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return BinlogStreamReader(settings_from_options(self.options))


def register(spark: Any) -> None:
    """Register the source with a session (idempotent)."""
    spark.dataSource.register(BinlogDataSource)
