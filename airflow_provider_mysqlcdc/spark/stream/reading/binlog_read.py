"""Reading one offset range of the binlog into the stream's Arrow batches (the executor side).

``range_batches`` is what a Spark task of the binlog source runs: the fast columnar decoder
(``cdc/binlog/fast``) over ``[start, end)``, each of its batches cast into the source layout
(``change_rows.SourceLayout``) with no per-row Python work. Three things may still touch
single rows, and only where needed:

* **the handoff filter** after a snapshot: rows before the table's largest high watermark
  need a key lookup; a batch wholly after it passes through untouched;
* **tables the fast path refuses** (``UnsupportedRows``: e.g. pre-5.6 temporal columns) are
  read with python-mysql-replication, in one dump after the fast read, for exactly the
  rows events the fast reader reported. If the library returns no rows for one of them
  (it silently drops MariaDB's compressed events), the read fails rather than lose them;
* **a lost connection** (server restart) restarts the fast read from the range's start and
  skips every row already yielded, so within one task nothing is emitted twice or lost;
  after ``reconnect_timeout_s`` the error reaches Spark, which retries the task from the
  range's start (the output is a function of the range: same rows, same ``seq``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np
import pyarrow as pa

from ....cdc.binlog.fast.batches import ChangeBatch, UnsupportedRows
from ....cdc.binlog.fast.fallback import library_changes
from ....cdc.binlog.fast.reader import FastBinlogReader
from ....cdc.binlog.gtid_watch import watch_or_none
from ....cdc.chunks import FinishedBatch
from ....cdc.events import RowChange, SchemaChange
from ....cdc.model import TableId, TableSchema
from ....cdc.offsets import BinlogOffset
from ....cdc.snapshot.handoff import HandoffFilter
from ....cdc.source.config import SourceConfig
from ....cdc.source.connection import is_connection_loss
from ...sinks.direct_spec import DdlMark, TableRows
from .change_rows import SourceLayout, offsets_of

if TYPE_CHECKING:
    from ..offsets.stream_offset import StreamOffset
    from .layout_book import LayoutBook

log = logging.getLogger(__name__)


def build_handoff(
    source: SourceConfig, schemas: Sequence[TableSchema], finished: Sequence[FinishedBatch]
) -> HandoffFilter | None:
    """The handoff filter over the finished batches of captured tables (None when there are none)."""
    from ....cdc.snapshot.keyorder import key_order_for

    by_id = {s.table_id: s for s in schemas}
    kept = []
    for b in finished:
        ranges = tuple(r for r in b.ranges if r.table_id in by_id)
        if ranges:
            kept.append(FinishedBatch(b.batch_id, ranges, b.high_watermark, b.server))
    if not kept:
        return None
    tables = {r.table_id for b in kept for r in b.ranges}
    orders = {t: key_order_for(by_id[t], source) for t in tables}
    return HandoffFilter(kept, orders, {t: by_id[t] for t in tables})


def stop_for(end: BinlogOffset) -> BinlogOffset:
    """A reader's (event-level, exclusive) stop for an exclusive row-level ``end``: an end in the
    middle of an event (``row`` > 0) lets that event through, and its later rows are cut here."""
    return BinlogOffset(end.file, end.position + (1 if end.row else 0))


def before_mask(batch: pa.RecordBatch, offset: BinlogOffset) -> np.ndarray:
    """Which rows of ``batch`` are at offsets before ``offset``."""
    f, p, r = offsets_of(batch)
    fi = offset.file_index
    return (f < fi) | ((f == fi) & ((p < offset.position) | ((p == offset.position) & (r < offset.row))))


def _last_offset(batch: pa.RecordBatch) -> BinlogOffset:
    i = batch.num_rows - 1
    return BinlogOffset(
        batch.column("binlog_file")[i].as_py(),
        batch.column("binlog_pos")[i].as_py(),
        row=batch.column("binlog_row")[i].as_py(),
    )


def fast_items(
    source: SourceConfig,
    tables: Sequence[TableId],
    start: "StreamOffset",
    end: "StreamOffset",
    server_id: int,
    reconnect_timeout_s: float,
    new_tables: Any = None,
    allow_gtid_gaps: bool = False,
    source_server: str | None = None,
) -> Iterator[ChangeBatch | UnsupportedRows | SchemaChange]:
    """The fast reader's row batches, unsupported events and DDL of ``[start, end)``, in binlog
    order, reconnecting as needed (a DDL or unsupported event is yielded once). A GTID gap inside
    the range fails the read (the driver's scans, which see every micro-batch's GTIDs near the
    head, end a micro-batch before a gap; this catches one inside a catch-up range). With
    ``source_server``, every (re)connection must reach that server (``cdc/binlog/failover.py``): offsets
    of one server are never read in another's binlog."""
    watch = watch_or_none(allow_gtid_gaps)  # one for the reconnects too: GTIDs read again are not gaps
    last: BinlogOffset | None = None  # the last row yielded
    seen_unsupported: set[tuple[str, int]] = set()
    seen_ddl: set[tuple[str, int]] = set()
    deadline: float | None = None
    while True:
        at = start.at if last is None else BinlogOffset(last.file, last.position, None, last.row + 1)
        reader = FastBinlogReader(
            source,
            server_id,
            at,
            stop=stop_for(end.at),
            tables=tables,
            blocking=False,
            heartbeat_s=None,
            dump_from=start.dump_from,
            on_unsupported="report",
            new_tables=new_tables,
            gtid_watch=watch,
            expect_server=source_server,
        )
        try:
            for item in reader.batches():
                if isinstance(item, ChangeBatch):
                    batch = item.batch
                    if end.at.row:
                        keep = before_mask(batch, end.at)
                        if not keep.all():
                            batch = batch.filter(pa.array(keep))
                    if batch.num_rows:
                        yield ChangeBatch(item.table_id, item.decoder, batch)
                        off = _last_offset(batch)
                        last = off if last is None or off > last else last
                        deadline = None
                elif isinstance(item, UnsupportedRows):
                    key = (item.offset.file, item.offset.position)
                    if item.offset < end.at and key not in seen_unsupported:
                        seen_unsupported.add(key)
                        yield item
                elif isinstance(item, SchemaChange):
                    key = (item.offset.file, item.offset.position)
                    if start.at <= item.offset < end.at and key not in seen_ddl:
                        seen_ddl.add(key)
                        yield item
            return
        except Exception as e:
            if not is_connection_loss(e):
                raise
            deadline = deadline or time.monotonic() + reconnect_timeout_s
            if time.monotonic() > deadline:
                raise
            log.warning(
                "binlog read: connection lost after %s (%s); reading again from %s",
                last or start.at,
                type(e).__name__,
                start.dump_from,
            )
            time.sleep(1.0)
        finally:
            reader.close()


def range_batches(
    layout: SourceLayout,
    source: SourceConfig,
    schemas: Sequence[TableSchema],
    finished: Sequence[FinishedBatch],
    start: "StreamOffset",
    end: "StreamOffset",
    server_id: int,
    first_file_index: int,
    reconnect_timeout_s: float,
    allow_gtid_gaps: bool = False,
    source_server: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """The source batches of ``[start, end)``: handoff-filtered, in the layout, numbered by position."""
    handoff = build_handoff(source, schemas, finished) if finished else None
    tables = [s.table_id for s in schemas]
    unsupported: list[UnsupportedRows] = []
    try:
        for item in fast_items(
            source,
            tables,
            start,
            end,
            server_id,
            reconnect_timeout_s,
            allow_gtid_gaps=allow_gtid_gaps,
            source_server=source_server,
        ):
            if isinstance(item, SchemaChange):
                continue  # the row path has one shape per table for the whole query
            if isinstance(item, UnsupportedRows):
                unsupported.append(item)
                continue
            batch = item.batch
            horizon = handoff.horizon(item.table_id) if handoff is not None else None
            if handoff is not None and horizon is not None:
                early = before_mask(batch, horizon)
                if early.any():
                    changes = ChangeBatch(item.table_id, item.decoder, batch.filter(pa.array(early))).changes()
                    yield from _filtered(layout, handoff, changes, first_file_index)
                    batch = batch.filter(pa.array(~early))
            if batch.num_rows:
                yield layout.from_arrow(item.table_id, batch, first_file_index)
        if unsupported:
            log.info(
                "binlog read: %d rows events read by python-mysql-replication (%s)",
                len(unsupported),
                "; ".join(sorted({f"{u.table_id}: {u.reason}" for u in unsupported})),
            )
            changes = library_changes(source, schemas, unsupported, start.at, end.at, server_id)
            if handoff is not None:
                yield from _filtered(layout, handoff, changes, first_file_index)
            else:
                yield from layout.from_changes(changes, first_file_index)
    finally:
        if handoff is not None:
            handoff.close()


def _filtered(
    layout: SourceLayout, handoff: HandoffFilter, changes: Sequence[RowChange], first_file_index: int
) -> Iterator[pa.RecordBatch]:
    kept = [out for out in handoff.apply_many(changes) if isinstance(out, RowChange)]
    if kept:
        yield from layout.from_changes(kept, first_file_index)


def range_items(
    book: "LayoutBook",
    source: SourceConfig,
    schemas: Sequence[TableSchema],
    finished: Sequence[FinishedBatch],
    start: "StreamOffset",
    end: "StreamOffset",
    server_id: int,
    first_file_index: int,
    reconnect_timeout_s: float,
    new_tables: Any = None,
    allow_gtid_gaps: bool = False,
    source_server: str | None = None,
) -> Iterator[TableRows | DdlMark]:
    """What a direct write's task gets for ``[start, end)``: each table's rows in the layout of
    the version they were logged with, and the DDL on captured tables between them, in binlog
    order (rows python-mysql-replication reads come last; their ``_seq`` places them)."""
    handoff = build_handoff(source, schemas, finished) if finished else None
    tables = [s.table_id for s in schemas]
    unsupported: list[UnsupportedRows] = []
    base = book.base
    try:
        for item in fast_items(
            source, tables, start, end, server_id, reconnect_timeout_s, new_tables, allow_gtid_gaps, source_server
        ):
            if isinstance(item, SchemaChange):
                yield book.mark(item, first_file_index)
                continue
            if isinstance(item, UnsupportedRows):
                unsupported.append(item)
                continue
            layout = book.layout_for(item.table_id, item.decoder.schema, item.decoder.image_type)
            batch = item.batch
            horizon = handoff.horizon(item.table_id) if handoff is not None else None
            if handoff is not None and horizon is not None:
                early = before_mask(batch, horizon)
                if early.any():
                    changes = ChangeBatch(item.table_id, item.decoder, batch.filter(pa.array(early))).changes()
                    for rows in _filtered(layout, handoff, changes, first_file_index):
                        yield TableRows(item.table_id, layout.slot(item.table_id), rows)
                    batch = batch.filter(pa.array(~early))
            if batch.num_rows:
                yield TableRows(
                    item.table_id, layout.slot(item.table_id), layout.from_arrow(item.table_id, batch, first_file_index)
                )
        if unsupported:
            log.info(
                "binlog read: %d rows events read by python-mysql-replication (%s)",
                len(unsupported),
                "; ".join(sorted({f"{u.table_id}: {u.reason}" for u in unsupported})),
            )
            changes = library_changes(source, schemas, unsupported, start.at, end.at, server_id)
            kept = (
                [out for c in changes for out in handoff.apply(c) if isinstance(out, RowChange)]
                if handoff is not None
                else list(changes)
            )
            for rows in base.from_changes(kept, first_file_index):
                t = TableId(rows.column("database")[0].as_py(), rows.column("table")[0].as_py())
                yield TableRows(t, base.slot(t), rows)
    finally:
        if handoff is not None:
            handoff.close()
