"""The contract end to end for the Delta, PostgreSQL and Iceberg sinks.

Snapshot batches (the snapshot job's code, in process) run while writers change two tables;
then the binlog stream takes over from the minimum HW; the writers stop; the sink must equal
the source row by row. Several seeds per sink.
"""

from __future__ import annotations

import time

import pytest

from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.sinks.factory import build_sink
from airflow_provider_mysqlcdc.spark.snapshot.job import run_snapshot_batch
from airflow_provider_mysqlcdc.spark.stream.query import start_stream
from mysqlcdc_harness.sink_compare import (
    delta_rows,
    iceberg_rows,
    mysql_rows,
    postgres_rows,
    sink_config,
    wait_until_equal,
)
from mysqlcdc_harness.tables import VALUE_COLS, create_composite_table, create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark]

# delta, postgres: the source's tasks reduce each binlog range (last_change.py); -rows: Spark reduces the change rows
CASES = [
    ("delta", 0),
    ("delta", 1),
    ("delta-rows", 2),
    ("postgres", 0),
    ("postgres", 1),
    ("postgres-rows", 2),
    ("iceberg", 0),
    ("iceberg-rows", 2),
]


@pytest.mark.parametrize("kind,seed", CASES, ids=[f"{k}-seed{s}" for k, s in CASES])
def test_snapshot_under_writers_then_stream_equals_source(
    mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch, kind, seed
):
    specs = [
        create_int_table(mariadb, fresh_db, 30_000, "orders"),
        create_composite_table(mariadb, fresh_db, 20_000, "tenant_items"),
    ]
    src = mariadb.source_config()
    sink_cfg = sink_config(kind, tmp_dir, postgres, monkeypatch)
    config = PipelineConfig(
        name=f"e2e-{kind}-{seed}",
        source=src,
        include=(f"{fresh_db}.orders", f"{fresh_db}.tenant_items"),
        state_location=str(tmp_dir / "state"),
        sink=sink_cfg,
        split=SplitOptions(chunk_size=4000 + 500 * seed),
        stream=StreamOptions(max_events_per_batch=3000, heartbeat_s=1.0, trigger_interval_s=0.5),
    )
    plan = build_plan(src, config.include, split=config.split, chunks_per_batch=3)
    state = StateStore(config.state_location)
    state.write_plan(plan)
    assert len(plan.batches) >= 4

    writers = [
        ConcurrentWriter(
            lambda: mariadb.connect(fresh_db),
            spec,
            seed=seed * 10 + i,
            threads=1,
            pause_s=0.002,
            hot_keys=[
                c.start
                for b in plan.batches
                for c in b.chunks
                if c.table_id.table == spec.table and c.start is not None
            ],
        )
        for i, spec in enumerate(specs)
    ]
    for w in writers:
        w.start()
    query = None
    try:
        for b in plan.batches:
            run_snapshot_batch(spark, config, b.batch_id, plan=plan)
        state.write_finished(state.finished_from_results())
        sink = build_sink(config.sink)
        sink.prepare(list(plan.schemas.values()))
        published: list[int] = []  # a spy: the real publish_steps runs
        if sink.direct_write() is not None:
            real = sink.publish_steps
            sink.publish_steps = lambda t, steps, batch_id: (published.append(len(steps)), real(t, steps, batch_id))[1]
        query = start_stream(spark, config, sink, list(plan.schemas.values()))
        time.sleep(4)
    finally:
        changes = sum(w.stop().total for w in writers)
    assert changes > 100, "the writers must really write during snapshot and stream"
    try:
        for spec in specs:
            schema = next(s for t, s in plan.schemas.items() if t.table == spec.table)
            cols = list(spec.key_columns) + list(VALUE_COLS)
            ident = schema.row_identity

            def expected():
                return mysql_rows(mariadb, schema.table_id, cols, ident)

            if kind.startswith("delta"):

                def actual():
                    return {
                        k: {c: r[c] for c in cols}
                        for k, r in delta_rows(tmp_dir / "lake", schema.table_id, ident).items()
                    }
            elif kind.startswith("iceberg"):

                def actual():
                    return {
                        k: {c: r[c] for c in cols}
                        for k, r in iceberg_rows(tmp_dir / "lake", schema.table_id, ident).items()
                    }
            else:
                pg_table = f"{fresh_db}__{spec.table}"

                def actual():
                    return postgres_rows(postgres, pg_table, cols, ident, sink_cfg.options["schema"])

            problem = wait_until_equal(expected, actual, timeout_s=120)
            assert not problem, f"{kind} seed {seed} {schema.table_id} after {changes} changes:\n{problem}"
        assert query.exception() is None
        assert bool(published) == (not kind.endswith("-rows")), f"{kind}: micro-batches via publish_steps: {published}"
    finally:
        if query is not None:
            query.stop()
