"""Snapshot-then-stream driven by hand (no Airflow): what the consistency tests and demo run.

plan -> read every batch with the consistent batch reader (writers running) -> binlog from
the minimum HW to a final offset through the handoff filter -> applied to the batches' rows.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Sequence

from airflow_provider_mysqlcdc.cdc.binlog.fast.fallback import changes_with_fallback
from airflow_provider_mysqlcdc.cdc.chunks import Batch, Chunk, FinishedBatch, group_chunks
from airflow_provider_mysqlcdc.cdc.model import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.snapshot.handoff import HandoffFilter
from airflow_provider_mysqlcdc.cdc.snapshot.keyorder import key_order_for
from airflow_provider_mysqlcdc.cdc.snapshot.splitter import ChunkSplitter
from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig, SplitOptions
from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
from airflow_provider_mysqlcdc.cdc.source.server import current_offset, server_version
from airflow_provider_mysqlcdc.spark.snapshot.batch_reader import ConsistentBatchReader
from mysqlcdc_harness.verify import apply_changes, collect


@dataclass
class Plan:
    schema: TableSchema
    chunks: list[Chunk]
    batches: list[Batch]


def plan_table(source: SourceConfig, table_id: TableId, chunk_size: int, chunks_per_batch: int) -> Plan:
    with contextlib.closing(source.connect()) as conn:
        schema = read_table_schema(conn, table_id)
        chunks = ChunkSplitter(conn, SplitOptions(chunk_size=chunk_size)).split(schema)
    return Plan(schema, chunks, group_chunks(chunks, chunks_per_batch))


def offset_now(source: SourceConfig) -> BinlogOffset:
    with contextlib.closing(source.connect()) as conn:
        return current_offset(conn, server_version(conn))


def snapshot(
    spark,
    source: SourceConfig,
    plan: Plan,
    staging_dir: str | None = None,
    lake: str | None = None,
    writer: str = "auto",
) -> tuple[dict[tuple, dict], list[FinishedBatch]]:
    """Read every batch; return the union of their rows and the finished-batch list. With
    ``lake``, each batch's SELECTs write a Delta table's files themselves and the window's
    corrections are applied to those files (rows written once); its rows are then read back
    from the files the batch's commit added. ``writer``: the Delta sink's ``snapshot_writer``."""
    ident = plan.schema.row_identity
    t = plan.schema.table_id
    rows: dict[tuple, dict] = {}
    finished = []
    sink = None
    if lake is not None:
        from airflow_provider_mysqlcdc.spark.sinks.delta.sink import DeltaSink

        sink = DeltaSink(lake, snapshot_writer=writer)
        sink.prepare([plan.schema])
    for b in plan.batches:
        files = None
        if sink is not None:
            from airflow_provider_mysqlcdc.spark.snapshot.materialize import SinkFilesMaterializer

            files = SinkFilesMaterializer(sink, {t: plan.schema}, b.batch_id, lambda _t: 2)
        reader = ConsistentBatchReader(spark, source, {t: plan.schema}, staging_dir=staging_dir, materializer=files)
        got = reader.read(b)
        if files is not None:
            sink.commit_chunk_files(
                spark, plan.schema, b.batch_id, files.records[t], got.tables[t].corrections, b.ranges()
            )
            from deltalake import DeltaTable

            prefix = "/" + sink.snapshot_prefix(b.batch_id)
            uris = [u for u in DeltaTable(sink.table_uri(t)).file_uris() if prefix in u]
            part = collect(spark.read.parquet(*uris), ident) if uris else {}
        else:
            part = collect(got.frame(t), ident)
        overlap = rows.keys() & part.keys()
        assert not overlap, f"batch {b.batch_id} repeats rows of an earlier batch: {list(overlap)[:5]}"
        rows.update(part)
        finished.append(FinishedBatch(b.batch_id, b.ranges(), got.high_watermark))
        got.unpersist()
    return rows, finished


def stream_into(
    rows: dict[tuple, dict],
    source: SourceConfig,
    schema: TableSchema,
    finished: Sequence[FinishedBatch],
    stop: BinlogOffset,
    server_id: int = 5499,
) -> int:
    """Binlog from the minimum HW to ``stop``, handoff-filtered, applied to ``rows``: read as the
    stream and the snapshot's corrections read it (the fast decoder, the library for what it refuses;
    tests/integration/test_fastbinlog_* hold that decoder to the library's values)."""
    t = schema.table_id
    handoff = HandoffFilter(finished, {t: key_order_for(schema, source)}, {t: schema})
    start = min(f.high_watermark for f in finished)
    applied = 0
    events = list(changes_with_fallback(source, server_id, start, stop, [schema]))
    for i in range(0, len(events), 10_000):  # as the stream's micro-batches: keys looked up a run at a time
        applied += apply_changes(rows, handoff.apply_many(events[i : i + 10_000]), schema.row_identity)
    handoff.close()
    return applied


def fresh_select(spark, source: SourceConfig, schema: TableSchema) -> dict[tuple, dict]:
    """The whole table read through the same type mapping, with no writer running."""
    whole = Batch("verify", (Chunk(schema.table_id, 0, None, None, True),))
    reader = ConsistentBatchReader(spark, source, {schema.table_id: schema})
    got = reader.read(whole)
    try:
        return collect(got.frame(schema.table_id), schema.row_identity)
    finally:
        got.unpersist()


@dataclass
class CaseResult:
    rows: int
    batches: int
    writer_changes: int
    streamed: int
    problem: str


def run_consistency_case(
    server,
    spark,
    database: str,
    variant: str,
    seed: int,
    rows: int,
    chunk_size: int,
    chunks_per_batch: int,
    threads: int = 2,
    staging_dir: str | None = None,
    lake: str | None = None,
    delta_writer: str = "auto",
) -> CaseResult:
    """One seeded run of the contract: snapshot under writers, stream, compare row by row.

    Writers start before the first batch and stop after the last, aiming half their
    changes at chunk boundaries and at the first and last keys of the table.
    """
    import time

    from mysqlcdc_harness.tables import VARIANTS
    from mysqlcdc_harness.verify import diff
    from mysqlcdc_harness.writer import ConcurrentWriter

    spec = VARIANTS[variant](server, database, rows)
    source = server.source_config()
    plan = plan_table(source, TableId(database, spec.table), chunk_size, chunks_per_batch)
    keys = ", ".join(f"`{c}`" for c in spec.key_columns)
    desc = ", ".join(f"`{c}` DESC" for c in spec.key_columns)
    edges = server.query(
        f"(SELECT {keys} FROM `{spec.table}` ORDER BY {keys} LIMIT 3) UNION ALL "
        f"(SELECT {keys} FROM `{spec.table}` ORDER BY {desc} LIMIT 3)",
        database=database,
    )
    hot = [c.start for c in plan.chunks if c.start is not None] + [tuple(r) for r in edges]
    writer = ConcurrentWriter(
        lambda: server.connect(database), spec, seed=seed, threads=threads, hot_keys=hot, hot_ratio=0.5
    )
    with writer:
        time.sleep(0.3)
        got, finished = snapshot(spark, source, plan, staging_dir, lake, delta_writer)
        time.sleep(0.5)
    final = offset_now(source)
    streamed = stream_into(got, source, plan.schema, finished, final)
    expected = fresh_select(spark, source, plan.schema)
    return CaseResult(len(expected), len(plan.batches), writer.stats.total, streamed, diff(expected, got))
