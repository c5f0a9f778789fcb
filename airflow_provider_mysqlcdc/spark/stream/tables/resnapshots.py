"""The stream takes over re-read batches (hand-offs, ``cdc/snapshot/resnapshot.py``) at its micro-batches.

Per micro-batch, on the driver, before its records are planned: every pending hand-off whose
high watermark HW is at or before the micro-batch's end S (Spark wrote S to the checkpoint's
offsets log before running the batch, so a replay finds the same S) becomes one more record
of its table, sorted after the micro-batch's own changes:

* the batch's rows, corrected by the binlog between HW and S (the snapshot's reduction, with
  the batch's own server id, which is free once its job ended), as upserts;
* the keys the sink holds inside the batch's ranges that those rows do not have, as deletes.

So the sink's commit of the micro-batch (one transaction in PostgreSQL, one merge commit in
Delta) replaces the ranges exactly at S; the changelog gets an ``RS`` line naming the ranges
and S, then the rows as read records (``op`` = ``r``). A DDL on the table between HW and S, or
a shape the stream's schema history does not have, supersedes the hand-off instead (the
stream never stops for it; the batch task says to read it again). A micro-batch takes pieces up
to ``stream_options.takeover_rows_per_batch`` rows; the rest wait for the next ones. A table the history lacks
(added to the pipeline) is recorded at S, and the query starts again to read it (``restart.py``).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ....cdc.chunks import KeyRange
from ....cdc.errors import TableChangedError
from ....cdc.events import RowChange, SchemaChange
from ....cdc.model import TableId, TableSchema
from ....cdc.offsets import BinlogOffset
from ....cdc.pipeline import PipelineConfig
from ....cdc.schema.history import TableVersion
from ....cdc.snapshot.corrections import reduce_changes
from ....cdc.snapshot.keyorder import key_order_for
from ....cdc.snapshot.resnapshot import (
    Handoff,
    forget_rows,
    mark_applied,
    pending,
    read_rows,
    same_columns,
)
from ....cdc.state import StateStore
from ...sinks.resnapshot_rows import RESNAPSHOT_SEQ
from ..offsets.checkpoint_offsets import batch_end_offset
from ..offsets.stream_offset import StreamOffset
from ..reading.change_rows import SourceLayout
from .restart import RESTART

log = logging.getLogger(__name__)


class ResnapshotApplier:
    """Turns pending hand-offs into records of the micro-batch that takes them over."""

    def __init__(
        self,
        spark: Any,
        config: PipelineConfig,
        sink: Any,
        checkpoint: str,
        history: Any,
        save_history: Any = lambda: None,
    ) -> None:
        self.spark = spark
        self.config = config
        self.sink = sink
        self.checkpoint = checkpoint
        self.history = history
        self.save_history = save_history
        self.state = StateStore(config.state_location)
        self._waiting_logged: set[str] = set()
        self.added: list[TableId] = []  # tables this query took over without capturing them
        self._last_take: int | None = None  # the last micro-batch that took a piece over

    def take(self, batch_id: int) -> tuple[list[dict[str, Any]], list[tuple[Handoff, dict[str, Any]]]]:
        """(records to add to the micro-batch, outcomes to mark once it is committed)."""
        handoffs = pending(self.state)
        if not handoffs:
            return [], []
        if self._last_take is not None and batch_id == self._last_take + 1:
            # every other micro-batch: the one after a take-over drains the changes that waited for it,
            # so back-to-back pieces of a big batch do not stack their delays
            return [], []
        end = batch_end_offset(self.checkpoint, batch_id)
        if end is None:
            return [], []
        s = end.at
        records: list[dict[str, Any]] = []
        outcomes: list[tuple[Handoff, dict[str, Any]]] = []
        taken_rows = 0
        for k, h in enumerate(handoffs):
            if taken_rows and taken_rows + sum(h.row_counts.values()) > self.config.stream.takeover_rows_per_batch:
                break  # the rest waits for the next micro-batches: one holds a bounded share
            if h.high_watermark > s:
                if h.handoff_id not in self._waiting_logged:
                    log.info(
                        "re-snapshot %s waits: its HW %s is past this micro-batch's end %s",
                        h.handoff_id,
                        h.high_watermark,
                        s,
                    )
                    self._waiting_logged.add(h.handoff_id)
                continue
            t0 = time.monotonic()
            try:
                recs, counts = self._records(h, s, batch_id, RESNAPSHOT_SEQ + 4 * k)
            except TableChangedError as e:
                log.warning("re-snapshot %s superseded: %s", h.handoff_id, e)
                outcomes.append((h, {"superseded": str(e), "micro_batch": batch_id}))
                continue
            records += recs
            taken_rows += counts["rows"]
            self._last_take = batch_id
            outcome = {
                "micro_batch": batch_id,
                "exact_at": end.to_dict(),
                **counts,
                "seconds": round(time.monotonic() - t0, 3),
            }
            log.info(
                "re-snapshot %s (batch %s): %d rows exact at %s replace its ranges in micro-batch %d "
                "(%d binlog events between its HW and there, %d rows the sink held there deleted)",
                h.handoff_id,
                h.batch.batch_id,
                counts["rows"],
                s,
                batch_id,
                counts["events"],
                counts["deleted"],
            )
            outcomes.append((h, outcome))
        return records, outcomes

    def mark(self, outcomes: Sequence[tuple[Handoff, Mapping[str, Any]]]) -> None:
        for h, outcome in outcomes:
            mark_applied(self.state, h.handoff_id, outcome)
            forget_rows(self.state, h.handoff_id)  # in the sink now (or superseded): only the record stays
        if self.added:
            log.info(
                "the stream took over %s, which this query does not read: it starts again from its checkpoint "
                "to capture them",
                ", ".join(map(str, self.added)),
            )
            RESTART.set()

    # --- one hand-off -----------------------------------------------------------------------------

    def _records(self, h: Handoff, s: BinlogOffset, batch_id: int, seq: int) -> tuple[list[dict], dict[str, int]]:
        from pyspark.sql.pandas.types import from_arrow_schema

        from ...snapshot.batch_reader import ConsistentBatchReader

        for t, schema in h.schemas.items():
            if t not in self.history.versions or self.history.latest(t).source is None:
                # a table added to the pipeline (or back after it was removed): captured from S on
                self.history.record(
                    t,
                    TableVersion(
                        StreamOffset(s).to_dict(),
                        schema,
                        schema,
                        None,
                        (),
                        (
                            f"added to the pipeline: its rows up to {s} came from batch "
                            f"{h.batch.batch_id}, its changes from there on",
                        ),
                    ),
                )
                self.save_history()
                self.sink.prepare([schema])
                if t not in self.added:
                    self.added.append(t)
            latest = self.history.latest(t) if t in self.history.versions else None
            if latest is None or latest.source is None or not same_columns(latest.source, schema):
                raise TableChangedError(
                    f"{t} is not in the shape batch {h.batch.batch_id} read it in (the stream's version has "
                    f"{[c.name for c in latest.source.columns] if latest and latest.source else 'no table'}, the batch "
                    f"read {list(schema.column_names)}). Fix: read the batch again (clear its snapshot task)."
                )
        corrections, events = self._corrections(h, s)
        reader = ConsistentBatchReader(self.spark, self.config.source, h.schemas, server_id=h.server_id)
        records = []
        counts = {"rows": 0, "deleted": 0, "events": events}
        for r in h.ranges:
            t = r.table_id
            schema = self.history.latest(t).source
            rows = read_rows(self.state, h.rows[t])  # pyarrow: no Hadoop file system needed for s3://
            tc = corrections.get(t)
            if tc:
                # the Spark types the batch's frame had: a timestamp without a zone stays TIMESTAMP_NTZ
                # (createDataFrame alone would read it as the session's TIMESTAMP)
                frame = self.spark.createDataFrame(
                    rows, schema=from_arrow_schema(rows.schema, prefer_timestamp_ntz=True)
                )
                rows = reader.apply_corrections(t, frame, tc).toArrow()
            sink_keys = self.sink.keys_in_sink(schema, r)
            gone = (
                _keys_not_in(_in_range(sink_keys, schema, r, self.config.source), rows, schema.row_identity)
                if sink_keys is not None
                else None
            )
            counts["rows"] += rows.num_rows
            counts["deleted"] += gone.num_rows if gone is not None else 0
            image = SourceLayout([schema], self.config.source.server_time_zone).slot(t).image
            records.append(self.sink.resnapshot_record(schema, image, rows, gone, r, _describe(h, s), batch_id, seq))
        return records, counts

    def _corrections(self, h: Handoff, s: BinlogOffset) -> tuple[dict, int]:
        from ....cdc.binlog.fast.fallback import changes_with_fallback

        if not h.high_watermark < s:
            return {}, 0
        # S may sit inside a rows event (a rate-limited micro-batch): read that event whole, keep rows before S.
        stop = BinlogOffset(s.file, s.position + 1) if s.row else BinlogOffset(s.file, s.position)
        tables = set(h.schemas)
        counted = 0

        def before_s(items):
            nonlocal counted
            for e in items:
                if isinstance(e, SchemaChange):
                    hit = [t for t in (e.tables or (e.table_id,)) if t in tables]
                    if hit and e.offset < s:
                        raise TableChangedError(
                            f"{', '.join(map(str, hit))} changed after batch {h.batch.batch_id} "
                            f"read it (DDL at {e.offset}). Fix: read the batch again (clear its snapshot task)."
                        )
                    continue
                if isinstance(e, RowChange) and e.offset < s:
                    counted += 1
                    yield e

        changes = changes_with_fallback(
            self.config.source, h.server_id, h.high_watermark, stop, list(h.schemas.values())
        )
        key_orders = {t: key_order_for(sch, self.config.source) for t, sch in h.schemas.items()}
        return reduce_changes(before_s(changes), h.batch, h.schemas, key_orders), counted


def _describe(h: Handoff, s: BinlogOffset) -> dict[str, Any]:
    return {"batch": h.batch.batch_id, "handoff": h.handoff_id, "exact_at": s.to_dict()}


def _in_range(keys: pa.Table, schema: TableSchema, r: KeyRange, source: Any) -> pa.Table:
    """The rows of ``keys`` (identity and chunk-key columns) whose chunk key is inside ``r``, by the
    server's order (collations included)."""
    if keys.num_rows == 0:
        return keys
    chunk = list(schema.chunk_key)
    if len(chunk) == 1 and pa.types.is_integer(keys.schema.field(chunk[0]).type):
        col = keys.column(chunk[0])
        mask = pc.is_valid(col)
        if r.start is not None:
            mask = pc.and_(mask, pc.fill_null(pc.greater_equal(col, r.start[0]), False))
        if r.end is not None:
            mask = pc.and_(mask, pc.fill_null(pc.less(col, r.end[0]), False))
        if r.includes_null:
            mask = pc.or_(mask, pc.is_null(col))
        return keys.filter(mask)
    order = key_order_for(schema, source)
    cols = [keys.column(c).to_pylist() for c in chunk]
    mask = [order.contains(r.start, r.end, r.includes_null, tuple(v)) for v in zip(*cols)]
    return keys.filter(pa.array(mask, pa.bool_()))


def _keys_not_in(keys: pa.Table, rows: pa.Table, identity: Sequence[str]) -> pa.Table:
    """Identity keys of ``keys`` that no row of ``rows`` has."""
    ident = list(identity)
    have = set(zip(*[rows.column(c).to_pylist() for c in ident])) if rows.num_rows else set()
    mine = list(zip(*[keys.column(c).to_pylist() for c in ident])) if keys.num_rows else []
    seen: set = set()
    mask = []
    for k in mine:  # once per key: a sink may hold a key twice (a Delta table written beside the stream)
        mask.append(k not in have and k not in seen)
        seen.add(k)
    return keys.select(ident).filter(pa.array(mask, pa.bool_())) if mine else keys.select(ident)
