"""Where a micro-batch ends: a change count near the head, bytes when far behind (catch-up).

Near the head the driver scans the binlog with the fast decoder and counts captured changes, so
a micro-batch holds at most ``max_events_per_batch``. When the stream is ``catchup_min_bytes`` or
more behind, the micro-batch is planned by bytes from the server's own event walk and cut at
transaction starts into parallel ranges (``cdc/binlog/catchup.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute

from ....cdc.binlog.gtid_watch import GtidGapError, GtidWatch
from ....cdc.offsets import BinlogOffset
from ..offsets.stream_offset import StreamOffset
from ..settings import OFFSET_SCAN_SLOT, StreamSettings

log = logging.getLogger(__name__)

MIN_RANGE_BYTES = 512 << 10  # a catch-up range smaller than this is not worth a reader of its own
SCAN_BATCH_ROWS = 2_000  # the driver's scan flushes often: a cut resumes from the last flush's transaction


@dataclass
class ScanResult:
    end: StreamOffset
    changes: int
    hit_limit: bool


def scan_for_end(
    settings: StreamSettings,
    start: StreamOffset,
    head: BinlogOffset,
    max_changes: int | None,
    gtid_watch: GtidWatch | None = None,
) -> ScanResult:
    """Count captured changes from ``start`` towards ``head``; end before the (max+1)-th one.

    Decodes with the fast reader (counting needs each event's rows). A cut inside a
    transaction resumes from a transaction start at or before it: the scan's own start for
    the first flush, else the reader's transaction start after the previous flush.

    A DDL on a captured table ends the micro-batch before it (unless it is where the batch
    starts): so near the head a DDL opens its micro-batch, its rows come after it, and a stop
    at the DDL (``schema_change_behavior`` exception) leaves every change before it committed.
    (A catch-up micro-batch, planned by bytes, may hold a DDL inside; the sinks take it in order.)

    A GTID gap (``gtid_watch``, cdc/binlog/gtid_watch.py) ends the micro-batch before the transaction
    after the gap; a micro-batch that starts there fails with the ``GtidGapError``: every change
    before the gap is committed, none after it.
    """
    from ....cdc.binlog.fast.batches import ChangeBatch, UnsupportedRows
    from ....cdc.binlog.fast.reader import FastBinlogReader
    from ....cdc.events import SchemaChange
    from ..reading.change_rows import offsets_of

    server_id = settings.source.server_id_range.pick(OFFSET_SCAN_SLOT)
    n = 0
    resume_from = start.dump_from
    reader = FastBinlogReader(
        settings.source,
        server_id,
        start.at,
        stop=head,
        tables=settings.tables,
        blocking=False,
        heartbeat_s=None,
        dump_from=start.dump_from,
        batch_rows=SCAN_BATCH_ROWS,
        on_unsupported="report",
        gtid_watch=gtid_watch,
    )
    try:
        for group in reader.flushes():
            offsets: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
            for item in group:
                if isinstance(item, ChangeBatch):
                    offsets.append(offsets_of(item.batch))
                elif isinstance(item, UnsupportedRows):  # counted as one change: its rows are not decoded here
                    o = item.offset
                    offsets.append((np.array([o.file_index]), np.array([o.position]), np.array([0])))
            rows = sum(len(o[0]) for o in offsets)
            ddl = next((x for x in group if isinstance(x, SchemaChange) and x.offset > start.at), None)
            if ddl is not None and (max_changes is None or n + rows <= max_changes):
                return ScanResult(StreamOffset.boundary(ddl.offset), n + rows, True)
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
    except GtidGapError as gap:
        if gap.offset > start.at:
            log.warning("binlog stream: %s", gap)
            return ScanResult(StreamOffset.boundary(gap.offset), n, True)
        raise
    finally:
        reader.close()
    return ScanResult(StreamOffset.boundary(head), n, False)


def _file_named(settings: StreamSettings, group: list, index: int) -> str:
    from ....cdc.binlog.fast.batches import ChangeBatch
    from ....cdc.offsets import split_binlog_file

    for item in group:
        names = (
            pa.compute.unique(item.batch.column("binlog_file")).to_pylist()
            if isinstance(item, ChangeBatch)
            else [item.offset.file]
        )
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
    from ....cdc.binlog import catchup

    conn = settings.source.connect_binlog()
    try:
        files = catchup.BinlogFiles.read(conn, head)
        try:
            behind = files.bytes_between(start.dump_from, head)
        except KeyError:
            return None
        if behind < settings.catchup_min_bytes:
            return None
        parts = settings.catchup_parallelism
        end, cuts = catchup.plan_batch(
            conn,
            files,
            start.dump_from,
            head,
            settings.catchup_batch_bytes,
            parts,
            MIN_RANGE_BYTES,
            tail_bytes=settings.catchup_min_bytes,
        )
        if end <= start.at:  # a start inside a transaction, with the planned end before it
            end = head
            cuts = catchup.split_range(conn, files, start.dump_from, end, parts, MIN_RANGE_BYTES)
        cuts = [c for c in cuts if start.at < c < end]
    finally:
        conn.close()
    return CatchupPlan(StreamOffset.boundary(end), tuple(cuts), behind)


# --- startup offsets ----------------------------------------------------------------------------
