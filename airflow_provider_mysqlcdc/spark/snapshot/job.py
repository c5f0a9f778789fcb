"""The snapshot job's work: read one batch consistently, write it to the sink, record the result.

Order matters for "a failed job leaves no result file": the batch's old result file is
removed first, the sink write is atomic per table range, and the new result file is
written last, only after every table of the batch is in the sink.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any, cast

from pyspark.sql import SparkSession

from ...cdc.chunks import Batch
from ...cdc.errors import ConfigError
from ...cdc.faults import HANDOFF_PIECE_HANDED, HANDOFF_ROWS_WRITTEN, crash_point
from ...cdc.model import TableId, TableSchema
from ...cdc.pipeline import PipelineConfig
from ...cdc.plan import Plan
from ...cdc.sinks import logs_changes as sink_logs_changes
from ...cdc.snapshot.resnapshot import (
    Handoff,
    forget_orphans,
    new_handoff_id,
    rows_rel,
    write_manifest,
    write_rows,
)
from ...cdc.source.config import SourceConfig
from ...cdc.state import StateStore
from ..runtime.filesystems import spark_can_write
from ..runtime.job_labels import describe, set_job_group
from ..sinks.base import SnapshotFileSink
from ..sinks.files.snapshot import file_count
from ..sinks.routed import RoutedSink, pipeline_sink
from .arrow_read import choose_reader
from .batch_reader import ROWS_PER_SELECT, ConsistentBatchReader, select_groups
from .materialize import SinkFilesMaterializer
from .progress import SnapshotProgress

log = logging.getLogger(__name__)


def _staging(spark: SparkSession, state: StateStore) -> str | None:
    """Where rows a sink cannot take as files are staged: the state location when Spark can
    write it, else (object storage without Hadoop's connector) Spark's own cache."""
    url = state.url("staging")
    return url if spark_can_write(spark, url) else None


def run_snapshot_batch(
    spark: SparkSession,
    config: PipelineConfig,
    batch_id: str,
    plan: Plan | None = None,
    progress_interval_s: float = 20.0,
) -> dict[str, Any]:
    state = StateStore(config.state_location)
    plan = plan or state.read_plan()
    if plan is None:
        raise FileNotFoundError(
            f"no plan at {state.url('plan.json')}. Fix: run the plan task first (trigger the pipeline), with the "
            "same state_location."
        )
    batch = plan.batch(batch_id)
    source = config.source
    schemas = {t: plan.schemas[t] for t in batch.tables}
    sink = pipeline_sink(config, list(plan.schemas.values()))  # a bad route/transform fails before any read
    if state.stream_started():
        return _hand_off_to_stream(spark, config, plan, batch, sink, schemas, state, progress_interval_s)
    state.delete(StateStore.batch_result_rel(batch_id))

    server_id = plan.batch_server_id(batch_id, source.server_id_range, config.stream.catchup_parallelism - 1)
    t0 = time.monotonic()
    try:
        sink.prepare(list(schemas.values()))
        files = sink_files(sink, schemas, batch, plan.estimated_rows().get(batch_id, 0))
        file_sink = cast(SnapshotFileSink, sink)  # used where files is not None: the sink writes files
        if files is not None:  # a killed earlier run's files: never committed, never read
            for schema in schemas.values():
                file_sink.discard_uncommitted(schema, batch_id)
        reader = ConsistentBatchReader(
            spark,
            source,
            schemas,
            server_id=server_id,
            staging_dir=_staging(spark, state),
            materializer=files,
            chunk_rows=config.split.chunk_size,
            arrow_reader=uses_arrow_reader(source, files),
        )
        progress = SnapshotProgress(
            spark,
            batch_id,
            len(batch.chunks),
            plan.estimated_rows().get(batch_id, 0),
            interval_s=progress_interval_s,
            tasks=read_tasks(batch, config.split.chunk_size),
        )
        set_job_group(spark, progress.group, f"mysqlcdc read {batch_id}")
        progress.start()
        committed: set[TableId] = set()
        try:
            got = reader.read(batch)
            set_job_group(spark, f"mysqlcdc-write-{batch_id}", f"mysqlcdc write {batch_id}")
            try:
                written = _write_ranges(spark, config, batch, schemas, sink, files, got, progress, committed)
            finally:
                got.unpersist()
        except BaseException:
            if files is not None:  # nothing half-written: the SELECTs' files of tables not committed
                for t, schema in schemas.items():
                    if t not in committed:
                        try:
                            file_sink.discard_uncommitted(schema, batch_id)
                        except Exception as e:  # the failure itself is what the user must see
                            log.warning("could not remove batch %s's uncommitted files of %s: %s", batch_id, t, e)
            raise
        finally:
            progress.stop()
    finally:
        sink.close()
    elapsed = time.monotonic() - t0
    return _record_result(state, batch, got, written, elapsed)


def _hand_off_to_stream(
    spark: SparkSession,
    config: PipelineConfig,
    plan: Plan,
    batch: Batch,
    sink: Any,
    schemas: dict[TableId, Any],
    state: StateStore,
    progress_interval_s: float,
) -> dict[str, Any]:
    """The stream owns the sink: the batch's rows go to it (cdc/snapshot/resnapshot.py), read in
    today's shape; refused before anything is read where the sink cannot take a hand-off."""
    batch_id = batch.batch_id
    source = config.source
    routed = [str(t) for t in batch.tables if isinstance(sink, RoutedSink) and not sink.view(t).identity]
    direct = sink.direct_write()
    logs_changes = sink_logs_changes(config.sink.type)
    sink.close()  # the stream writes this batch's rows
    if routed and logs_changes:
        raise ConfigError(
            f"batch {batch_id}: the stream of this pipeline runs, so a batch read again is handed to it, and "
            f"{', '.join(routed)} {'is' if len(routed) == 1 else 'are'} routed or transformed into a changelog: "
            "such hand-offs are not logged through routes and transforms yet. Nothing was read or written. "
            "Fix: trigger with reset=true to load everything again."
        )
    if direct is None:
        raise ConfigError(
            f"batch {batch_id}: the stream of this pipeline runs, so a batch read again is handed to it, and "
            f"only a sink with its direct stream write takes hand-offs ({config.sink.type} has "
            "direct_write: false). Nothing was read or written. Fix: set direct_write: true in sink_options "
            "(the default) and restart the stream, or trigger with reset=true to load everything again."
        )
    state.delete(StateStore.batch_result_rel(batch_id))
    return hand_off_batch(spark, config, plan, batch, current_schemas(source, schemas), state, progress_interval_s)


def _write_ranges(
    spark: SparkSession,
    config: PipelineConfig,
    batch: Batch,
    schemas: dict[TableId, Any],
    sink: Any,
    files: Any,
    got: Any,
    progress: SnapshotProgress,
    committed: set[TableId],
) -> dict[str, Any]:
    """Each range of the batch into the sink (its SELECTs' files committed where the sink writes
    files, else the rows written); ``committed`` gains each table once its rows are in."""
    batch_id = batch.batch_id
    file_sink = cast(SnapshotFileSink, sink)  # used where files is not None: the sink writes files
    written: dict[str, Any] = {}
    for r in batch.ranges():
        describe(spark, f"mysqlcdc write {r.table_id} batch {batch_id}")
        progress.phase(f"writing {r.table_id} to the {config.sink.type} sink")
        if files is not None:  # rows written once: the SELECTs wrote the sink's files
            w = file_sink.commit_chunk_files(
                spark,
                schemas[r.table_id],
                batch_id,
                files.records[r.table_id],
                got.tables[r.table_id].corrections,
                [r],
            )
        else:
            w = sink.write_snapshot(schemas[r.table_id], got.frame(r.table_id), [r], batch_id)
        committed.add(r.table_id)
        written[str(r.table_id)] = {"rows_written": w.rows_written, **dict(w.details)}
    return written


def _record_result(
    state: StateStore, batch: Batch, got: Any, written: dict[str, Any], elapsed: float
) -> dict[str, Any]:
    """The batch's result (watermarks, rows per chunk, corrections, what was written), kept in the
    state location and logged."""
    batch_id = batch.batch_id
    rows = sum(sum(t.rows_per_chunk.values()) for t in got.tables.values())
    result = {
        "batch_id": batch_id,
        "tables": [str(t) for t in batch.tables],
        "chunks": [c.to_dict() for c in batch.chunks],
        "ranges": [r.to_dict() for r in batch.ranges()],
        "low_watermark": got.low_watermark.to_dict(),
        "high_watermark": {**got.high_watermark.to_dict(), **({"server": got.server} if got.server else {})},
        "rows_per_chunk": {str(t): {str(k): v for k, v in tr.rows_per_chunk.items()} for t, tr in got.tables.items()},
        "corrections": {
            str(t): {"deleted": tr.deleted_keys, "upserted": tr.upserted_rows} for t, tr in got.tables.items()
        },
        "backfill_events": got.backfill_events,
        "reader": {str(t): r for t, r in got.readers.items()},
        "written": written,
        "seconds": round(elapsed, 3),
        "rows_per_s": round(rows / elapsed) if elapsed > 0 else None,
    }
    state.write_batch_result(result)
    log.info(
        "batch %s done: %d chunks, %s rows read and %s in %.1f s (%s rows/s); backfill %d events, "
        "%d rows corrected; high watermark %s",
        batch_id,
        len(batch.chunks),
        f"{rows:,}",
        "written",
        elapsed,
        f"{result['rows_per_s']:,}" if result["rows_per_s"] else "?",
        got.backfill_events,
        sum(tr.deleted_keys + tr.upserted_rows for tr in got.tables.values()),
        got.high_watermark,
    )
    return result


def read_tasks(batch: Batch, chunk_rows: int) -> int:
    """How many SELECTs (Spark tasks) read the batch: chunks are read several at a time."""
    return sum(len(select_groups(batch.chunks_of(t), ROWS_PER_SELECT, chunk_rows)) for t in batch.tables)


def sink_files(
    sink: Any, schemas: dict[TableId, TableSchema], batch: Batch, estimated_rows: int
) -> SinkFilesMaterializer | None:
    """For a sink that writes a batch's rows straight into its files (Delta), the materializer
    that does so; None: the rows are staged and the sink writes them afterwards."""
    if not sink.writes_snapshot_files():
        return None

    def files(table_id: TableId) -> int:
        chunks = len(batch.chunks_of(table_id))
        return file_count(estimated_rows * chunks // max(1, len(batch.chunks)), chunks)

    return SinkFilesMaterializer(sink, schemas, batch.batch_id, files)


def uses_arrow_reader(source: SourceConfig, files: SinkFilesMaterializer | None) -> bool:
    """Whether the batch's SELECTs go through the Arrow reader (``arrow_read.py``): the source allows
    it (``snapshot_reader``) and the sink takes the rows as files. 'arrow' with a sink that cannot
    is a ConfigError, before anything is read."""
    if choose_reader(source) != "arrow":
        return False
    if files is None:
        if source.snapshot_reader == "arrow":
            raise ConfigError(
                "snapshot_reader 'arrow': this sink does not take a batch's rows as files (only the "
                "Delta and Iceberg sinks do). Fix: set snapshot_reader to 'auto' or 'jdbc' in the MySQL "
                "connection's extras."
            )
        return False
    return True


def current_schemas(source: SourceConfig, planned: dict[TableId, TableSchema]) -> dict[TableId, TableSchema]:
    """The tables as they are now (the stream has followed their DDL since the plan), keeping the
    plan's chunk key and row identity: the batch's chunk boundaries are on that key."""
    import contextlib

    from ...cdc.source.discovery import read_table_schema

    out = {}
    with contextlib.closing(source.connect()) as conn:
        for t, plan in planned.items():
            now = read_table_schema(conn, t, zero_dates=source.zero_dates)
            missing = [c for c in (*plan.chunk_key, *plan.row_identity) if c not in now.column_names]
            if missing:
                raise ConfigError(
                    f"{t}: the key columns {missing} the plan chunked this table on are gone, so its batches cannot "
                    "be read again. Fix: trigger the pipeline with reset=true to plan it anew."
                )
            out[t] = replace(plan, columns=now.columns, primary_key=now.primary_key)
    return out


def hand_off_batch(
    spark: SparkSession,
    config: PipelineConfig,
    plan: Plan,
    batch: Batch,
    schemas: dict[TableId, TableSchema],
    state: StateStore,
    progress_interval_s: float = 20.0,
    piece_rows: int | None = None,
    record_result: bool = True,
    applier_server_id: int | None = None,
) -> dict[str, Any]:
    """The batch read while the stream runs, handed to it in pieces of consecutive chunks of about
    ``piece_rows`` rows (by the plan's estimate; stream_options.handoff_piece_rows). Each piece is read in its own window (LW, SELECTs,
    HW, corrections: exact on its own key range) and becomes one hand-off, so the stream takes a
    big batch over a piece per micro-batch instead of holding all of it in one.

    ``applier_server_id``: the id the stream reads a piece's binlog from HW with when it takes the
    piece over; by default the batch's own (free once this job ends), but the stream job's own
    reads (``spark/stream/tables/table_reads.py``) are still reading the next piece then."""
    source = config.source
    batch_id = batch.batch_id
    server_id = plan.batch_server_id(batch_id, source.server_id_range, config.stream.catchup_parallelism - 1)
    estimate = plan.estimated_rows().get(batch_id, 0)
    pieces = split_batch(batch, estimate, piece_rows or config.stream.handoff_piece_rows)
    for orphan in forget_orphans(state):
        log.info("removed %s: a hand-off whose job died before its manifest", orphan)
    reader = ConsistentBatchReader(
        spark,
        source,
        schemas,
        server_id=server_id,
        staging_dir=_staging(spark, state),
        chunk_rows=config.split.chunk_size,
    )
    progress = SnapshotProgress(
        spark,
        batch_id,
        len(batch.chunks),
        estimate,
        interval_s=progress_interval_s,
        tasks=read_tasks(batch, config.split.chunk_size),
    )
    t0 = time.monotonic()
    ids: list[str] = []
    rows_per_chunk: dict[str, dict[str, int]] = {}
    corrections: dict[str, dict[str, int]] = {}
    lows, highs, events = [], [], 0
    set_job_group(spark, progress.group, f"mysqlcdc read {batch_id}")
    progress.start()
    try:
        for k, piece in enumerate(pieces):
            got = reader.read(piece)
            try:
                hid = new_handoff_id(batch_id)
                progress.phase(f"handing piece {k + 1}/{len(pieces)} to the running stream")
                for r in piece.ranges():
                    write_rows(state, rows_rel(hid, r.table_id), got.frame(r.table_id).toArrow())
                crash_point(HANDOFF_ROWS_WRITTEN)
                write_manifest(
                    state,
                    Handoff(
                        hid,
                        piece,
                        got.high_watermark,
                        got.low_watermark,
                        {t: schemas[t] for t in piece.tables},
                        {t: rows_rel(hid, t) for t in piece.tables},
                        {t: sum(tr.rows_per_chunk.values()) for t, tr in got.tables.items()},
                        server_id if applier_server_id is None else applier_server_id,
                        time.time(),
                    ),
                )
            finally:
                got.unpersist()
            if k < len(pieces) - 1:
                crash_point(HANDOFF_PIECE_HANDED)
            ids.append(hid)
            lows.append(got.low_watermark)
            highs.append(got.high_watermark)
            events += got.backfill_events
            for t, tr in got.tables.items():
                rows_per_chunk.setdefault(str(t), {}).update({str(c): n for c, n in tr.rows_per_chunk.items()})
                c = corrections.setdefault(str(t), {"deleted": 0, "upserted": 0})
                c["deleted"] += tr.deleted_keys
                c["upserted"] += tr.upserted_rows
    finally:
        progress.stop()
    elapsed = time.monotonic() - t0
    rows = sum(sum(v.values()) for v in rows_per_chunk.values())
    result = {
        "batch_id": batch_id,
        "tables": [str(t) for t in batch.tables],
        "chunks": [c.to_dict() for c in batch.chunks],
        "ranges": [r.to_dict() for r in batch.ranges()],
        "low_watermark": min(lows).to_dict(),
        "high_watermark": max(highs).to_dict(),
        "rows_per_chunk": rows_per_chunk,
        "corrections": corrections,
        "backfill_events": events,
        "written": {
            str(t): {"rows_written": 0, "handed_to_stream": sum(rows_per_chunk.get(str(t), {}).values())}
            for t in batch.tables
        },
        "handoff": ids,
        "seconds": round(elapsed, 3),
        "rows_per_s": round(rows / elapsed) if elapsed > 0 else None,
    }
    if record_result:
        state.write_batch_result(result)
    log.info(
        "batch %s done: %d chunks, %s rows read and handed to the running stream in %d piece(s) in %.1f s; "
        "it replaces the batch's key ranges with them at its micro-batches past each piece's HW",
        batch_id,
        len(batch.chunks),
        f"{rows:,}",
        len(ids),
        elapsed,
    )
    return result


def split_batch(batch: Batch, estimated_rows: int, piece_rows: int) -> list[Batch]:
    """Runs of consecutive chunks of one table, each of about ``piece_rows`` estimated rows (a
    batch's chunks of one table are contiguous, so each run's key range is too)."""
    per_chunk = estimated_rows / max(1, len(batch.chunks))
    take = max(1, int(piece_rows // per_chunk)) if per_chunk > 0 else len(batch.chunks)
    pieces: list[Batch] = []
    for t in batch.tables:
        chunks = batch.chunks_of(t)
        pieces += [Batch(batch.batch_id, tuple(chunks[i : i + take])) for i in range(0, len(chunks), take)]
    return pieces
