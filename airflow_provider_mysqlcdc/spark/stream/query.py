"""The streaming query: binlog source -> foreachBatch -> one ``sink.write_changes`` per table.

Exactly once, and why: Spark writes a micro-batch's offset range to the checkpoint's offset
log *before* running it and marks it done in the commit log *after* ``foreachBatch``
returns. After a crash the last logged, uncommitted batch runs again with the same batch id
and the same offsets; the source re-reads exactly the same rows (``[start, end)`` of the
binlog, same handoff filter, same numbering), and every sink's ``write_changes`` is
idempotent per (table, batch id). So a batch is either not in the sink, or in it once.

With several tables the source rows of a micro-batch are persisted first: each table's
``write_changes`` is its own Spark job over the same rows, and re-reading the binlog once
per table would cost a binlog parse per table (and, with a Spark task retry in between,
still be correct but slow). With one table its write is the only job and reads the binlog
itself: persisting would only copy every row once more. Sinks accept an empty frame (a
range without captured changes).

A sink with a direct write (``Sink.direct_write``: the changelog's JSON lines) skips the
rows: the source's task that reads a binlog range writes that range's part files, and
``foreachBatch`` only commits them (``Sink.publish_steps``), in one Spark job for every
table. Exactly once holds the same way: the parts are a function of the range, and the
commit is idempotent per (table, batch id).
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any, Callable, Sequence

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener

from ...cdc.faults import RESNAPSHOT_APPLIED, RESNAPSHOT_TAKEN, SCHEMA_APPLIED, SCHEMA_RECORDED, crash_point
from ...cdc.model import TableId, TableSchema
from ...cdc.pipeline import PipelineConfig
from ...cdc.state import StateStore
from ..runtime.filesystems import spark_can_write
from ..sinks.base import BATCH_ID_PROPERTY, Sink
from . import binlog_source
from .offsets.checkpoint_mirror import CheckpointMirror
from .planning import first_plan
from .reading.change_rows import ChangeProjection, SourceLayout

log = logging.getLogger(__name__)


def source_options(
    config: PipelineConfig,
    schemas: Sequence[TableSchema],
    password: str | None = None,
    reconnect_timeout_s: float | None = None,
    direct_write: Any = None,
    checkpoint_location: str | None = None,
) -> dict[str, str]:
    """The binlog source's options (``settings.settings_from_options`` parses them).

    The password goes in the ``password`` option, which Spark redacts (spark.redaction.regex);
    without it the source reads ``$MYSQLCDC_PASSWORD`` from its process environment.
    """
    options = {"config": config.to_json(), "schemas": json.dumps([s.to_dict() for s in schemas], sort_keys=True)}
    pw = password if password is not None else (config.source.password or None)
    if pw is not None:
        options["password"] = pw
    if reconnect_timeout_s is not None:
        options["reconnect_timeout_s"] = str(reconnect_timeout_s)
    if direct_write is not None:
        options["direct_write"] = direct_write.to_json()
    if checkpoint_location is not None:
        options["checkpoint_location"] = checkpoint_location
    return options


def source_frame(
    spark: SparkSession,
    config: PipelineConfig,
    schemas: Sequence[TableSchema],
    password: str | None = None,
    reconnect_timeout_s: float | None = None,
    direct_write: Any = None,
    checkpoint_location: str | None = None,
) -> DataFrame:
    """The streaming DataFrame of source rows (``change_rows.SourceLayout``), or with
    ``direct_write`` (a sink's spec) of the part records the source's tasks wrote."""
    return load_source(
        spark, source_options(config, schemas, password, reconnect_timeout_s, direct_write, checkpoint_location)
    )


def load_source(spark: SparkSession, options: dict[str, str]) -> DataFrame:
    binlog_source.register(spark)
    return spark.readStream.format(binlog_source.FORMAT_NAME).options(**options).load()


def direct_batch_writer(
    sink: Sink, planner: Any, resnapshots: Any = None, captured: Sequence[TableId] | None = None
) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function when the source's tasks do the sink's share themselves
    (``sinks/direct.py``): run the micro-batch (the batch id reaches the tasks as a local
    property), then let the sink commit what their records report, table by table, as the
    ``planner`` (``cdc/schema/steps.StepPlanner``) orders them: steps of rows and schema
    changes (flush, then apply, then resume). ``resnapshots`` (``resnapshots.ResnapshotApplier``)
    adds the re-read batches this micro-batch takes over as its tables' last records."""
    from ..runtime.stream_status import note_rows_written

    reading = frozenset(captured or ())

    def write(batch: DataFrame, batch_id: int) -> None:
        from .tables.restart import RESTART, RESTART_MARKER, StreamRestart
        from .tables.table_set import ask_reads_for_renames, take_up_new_tables

        if RESTART.is_set():  # this query does not read a table it took over: nothing more from it
            raise StreamRestart(f"{RESTART_MARKER} (micro-batch {batch_id} is read again by the next query)")
        sc = batch.sparkSession.sparkContext
        query_id = sc.getLocalProperty("sql.streaming.queryId")
        sc.setLocalProperty(BATCH_ID_PROPERTY, str(batch_id))
        try:
            extra, outcomes = resnapshots.take(batch_id) if resnapshots is not None else ([], [])
            if batch.rdd.getNumPartitions() == 0 and not extra:
                note_rows_written(query_id, batch_id, 0)
                return  # a range the driver knows holds no captured change (heartbeat)
            sc.setJobDescription(f"mysqlcdc stream batch {batch_id}")
            records = [r.asDict() for r in batch.collect()] if batch.rdd.getNumPartitions() else []
        finally:
            sc.setLocalProperty(BATCH_ID_PROPERTY, None)  # type: ignore[arg-type]
        if (
            captured is not None
            and resnapshots is not None
            and take_up_new_tables(records, reading, planner, resnapshots.config, resnapshots.save_history)
        ):
            raise StreamRestart(f"{RESTART_MARKER} (micro-batch {batch_id} is read again by the next query)")
        if captured is not None and resnapshots is not None:
            ask_reads_for_renames(records, reading, resnapshots.config)
        written = 0
        planned = planner.plan(records + extra)
        if outcomes:
            crash_point(RESNAPSHOT_TAKEN)
        changed = any(not hasattr(s, "records") for steps in planned.values() for s in steps)
        if changed:
            crash_point(SCHEMA_RECORDED)
        written += sink.publish_micro_batch(planned, batch_id)
        if changed:
            crash_point(SCHEMA_APPLIED)
        if outcomes:
            crash_point(RESNAPSHOT_APPLIED)
            resnapshots.mark(outcomes)
        note_rows_written(query_id, batch_id, written)

    return write


def batch_writer(
    sink: Sink, schemas: Sequence[TableSchema], server_time_zone: str = "UTC"
) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function: fan one micro-batch out to the sink, table by table."""
    layout = SourceLayout(schemas, server_time_zone)
    captured = set(layout.slots)
    projections: dict[TableId, ChangeProjection] = {}  # built on first use, reused by every batch

    def changes(batch: DataFrame, t: TableId) -> DataFrame:
        if t not in projections:
            projections[t] = ChangeProjection(layout, t)
        return projections[t].apply(batch)

    def write(batch: DataFrame, batch_id: int) -> None:
        if len(captured) == 1:  # one table: its write is the only job, so read the binlog in it
            if batch.rdd.getNumPartitions() == 0:
                return  # a range the driver knows holds no captured change (heartbeat)
            (t,) = captured
            batch.sparkSession.sparkContext.setJobDescription(f"mysqlcdc stream {t} batch {batch_id}")
            sink.write_changes(layout.slot(t).schema, changes(batch, t), batch_id)
            return
        batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            for t in layout.tables_in(batch):
                if t not in captured:  # the source reads captured tables only
                    log.warning("micro-batch %s: rows of uncaptured table %s ignored", batch_id, t)
                    continue
                batch.sparkSession.sparkContext.setJobDescription(f"mysqlcdc stream {t} batch {batch_id}")
                sink.write_changes(layout.slot(t).schema, changes(batch, t), batch_id)
        finally:
            batch.unpersist()

    return write


def _prepare_from_history(sink: Sink, history: Any) -> None:
    """Prepare each table with its latest sink version -- or, when the sink table still has the
    shape of an earlier one (a crash after the history recorded a DDL, before the sink applied
    it), with that one: the replayed micro-batch applies the rest."""
    from ...cdc.errors import ConfigError

    for t in history.tables:
        versions = [v.sink for v in reversed(history.versions[t]) if v.sink is not None]
        if not versions:
            continue
        first_error: ConfigError | None = None
        for schema in versions:
            try:
                sink.prepare([schema])
                break
            except ConfigError as e:
                first_error = first_error or e
        else:
            assert first_error is not None
            raise first_error
        if schema is not versions[0]:
            log.info(
                "%s: the sink table has the shape of an earlier schema version; the replayed micro-batch "
                "applies the later DDL",
                t,
            )


def mirrored_writer(
    write: Callable[[DataFrame, int], None], mirror: CheckpointMirror
) -> Callable[[DataFrame, int], None]:
    """``write`` with the durable checkpoint brought up to date before the batch reaches the
    sink (its ``offsets/<id>`` above all) and after it."""

    def run(batch: DataFrame, batch_id: int) -> None:
        mirror.sync()
        write(batch, batch_id)
        mirror.sync()

    return run


class MirrorListener(StreamingQueryListener):
    """Uploads Spark's ``commits/<id>`` once a micro-batch is done (progress follows the commit)."""

    def __init__(self, mirror: CheckpointMirror) -> None:
        self.mirror = mirror

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        try:
            self.mirror.sync()
        except Exception as e:  # the next sync retries; a listener must not raise
            log.warning(
                "stream checkpoint: upload to %s failed (%s); retried with the next micro-batch", self.mirror.url, e
            )

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        self.onQueryProgress(event)


IDLE_POLL_MS = 100
_SPARK_POLL_DEFAULTS = ("10ms", "10")


def _pace_idle_polls(spark: SparkSession) -> None:
    """How long Spark waits before asking the source again after a micro-batch found nothing new:
    ``IDLE_POLL_MS`` instead of Spark's 10 ms, unless the session sets its own. Each ask runs the
    source's ``latestOffset`` (a round-trip to the server), so with ``trigger_interval_s: 0`` an idle
    stream asked ~100 times a second and kept a fifth of a core busy doing nothing (measured: 3.6
    CPU-s in 20 idle s, 0.4 with a 0.5 s trigger). A change then waits at most this long more."""
    key = "spark.sql.streaming.pollingDelay"
    try:
        current = spark.conf.get(key, None)
    except Exception:  # a session that does not know the conf: leave it
        return
    if current is None or str(current).strip() in _SPARK_POLL_DEFAULTS:
        spark.conf.set(key, f"{IDLE_POLL_MS}ms")


def start_stream(
    spark: SparkSession,
    config: PipelineConfig,
    sink: Sink,
    schemas: Sequence[TableSchema],
    password: str | None = None,
    checkpoint_location: str | None = None,
    trigger_interval_s: float | None = None,
    query_name: str | None = None,
    reconnect_timeout_s: float | None = None,
) -> StreamingQuery:
    """Start the binlog stream of ``config`` into ``sink`` (already ``prepare``d) and return the query.

    The checkpoint defaults to the state location's ``stream/checkpoint``; a restarted query
    with the same checkpoint resumes after the last committed micro-batch.
    """
    checkpoint = checkpoint_location or StateStore(config.state_location).checkpoint_url()
    mirror = None
    if not spark_can_write(spark, checkpoint):  # e.g. s3:// without Hadoop's S3 jars
        mirror = CheckpointMirror(checkpoint)
        mirror.restore()
        log.info(
            "binlog stream: Spark has no file system for %s; it checkpoints to %s, kept in step there",
            checkpoint,
            mirror.local_dir,
        )
        checkpoint = mirror.local_dir
    interval = config.stream.trigger_interval_s if trigger_interval_s is None else trigger_interval_s
    direct = sink.direct_write()
    planner = None
    if direct is not None:
        from ...cdc.schema.steps import StepPlanner
        from .tables.schema_history import HistoryStore
        from .tables.table_set import forget_removed

        store = HistoryStore(checkpoint, after_save=mirror.sync if mirror is not None else None)
        # After a snapshot, the binlog from its watermarks on was logged with the plan's schemas
        # (snapshot/batch_reader.py checks it); a start elsewhere only has today's.
        history = store.load(schemas, pending=config.startup_mode not in ("initial", "latest-offset"))
        forget_removed(history, config, checkpoint, store)
        schemas = history.latest_sources()
        planner = StepPlanner(
            history,
            config.schema_change_behavior,
            sink.name,
            sink.schema_capabilities(),
            on_record=lambda: store.save(history),
            zero_dates=config.source.zero_dates,
        )
        _prepare_from_history(sink, history)
    else:
        sink.prepare(schemas)
    options = source_options(config, schemas, password, reconnect_timeout_s, direct, checkpoint)
    # the first catch-up micro-batch is planned here while Spark starts the source (first_plan.py)
    options["first_plan_dir"] = plan_dir = first_plan.new_directory()
    frame = load_source(spark, options)
    if direct is not None:
        from .tables.resnapshots import ResnapshotApplier

        with_password = (
            config if password is None else replace(config, source=replace(config.source, password=password))
        )
        write = direct_batch_writer(
            sink,
            planner,
            ResnapshotApplier(
                spark, with_password, sink, checkpoint, history, save_history=lambda: store.save(history)
            ),
            captured=[s.table_id for s in schemas],
        )
    else:
        write = batch_writer(sink, schemas, config.source.server_time_zone)
    if mirror is not None:
        write = mirrored_writer(write, mirror)
        spark.streams.addListener(MirrorListener(mirror))
        mirror.sync()
    writer: Any = (
        frame.writeStream.foreachBatch(write)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{max(interval, 0.0)} seconds")
    )
    if query_name:
        writer = writer.queryName(query_name)
    _pace_idle_polls(spark)
    try:
        query = writer.start()
    except BaseException:
        first_plan.discard(plan_dir)
        raise
    # begun only now: its imports and parsing would hold the GIL while this thread drives the JVM
    first_plan.begin(plan_dir, lambda: first_plan.plan_from_options(options, checkpoint))
    log.info(
        "binlog stream %s started (checkpoint %s, %d tables%s)",
        query.id,
        checkpoint,
        len(schemas),
        ", files written by the source's tasks" if direct is not None else "",
    )
    return query
