"""The Iceberg sink through routes and transforms: two shards of one table merged into one Iceberg
table, projected (a computed column) and filtered, loaded by snapshot batches while writers change
both shards, then kept current by the stream; the Iceberg table must equal the transformed source
row by row."""

from __future__ import annotations

import time

import pytest

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.cdc.transform.table_views import Rules
from airflow_provider_mysqlcdc.spark.sinks.routed import pipeline_sink
from airflow_provider_mysqlcdc.spark.snapshot.job import run_snapshot_batch
from airflow_provider_mysqlcdc.spark.stream.query import start_stream
from mysqlcdc_harness.sink_compare import iceberg_rows, wait_until_equal
from mysqlcdc_harness.tables import create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark]


COLUMNS = ("_source_table", "id", "a1", "s")


def _expected(mariadb, db: str) -> dict[tuple, dict]:
    """The transformed source, computed here from the source rows: both shards (the same ids in
    both, kept apart by ``_source_table``), a > 0 only, with a1 = a + 1."""
    out = {}
    for shard in ("orders_1", "orders_2"):
        for id_, a, s in mariadb.query(f"SELECT id, a, s FROM `{db}`.`{shard}` WHERE a > 0"):
            source = f"{db}.{shard}"
            out[(source, id_)] = {"_source_table": source, "id": id_, "a1": a + 1, "s": s}
    return out


def test_shards_merged_projected_and_filtered_into_iceberg_equal_the_transformed_source(
    mariadb, fresh_db, spark, tmp_dir
):
    # the shards hold the same ids: the merged table's identity is (_source_table, id)
    specs = [create_int_table(mariadb, fresh_db, 6_000, name) for name in ("orders_1", "orders_2")]
    src = mariadb.source_config()
    rules = Rules(
        route=({"source_table": f"{fresh_db}.orders_\\d", "sink_table": f"{fresh_db}.orders"},),
        transform=(
            {
                "source_table": f"{fresh_db}.orders_\\d",
                "projection": "id, a + 1 AS a1, s",
                "filter": "a > 0",
            },
        ),
    )
    config = PipelineConfig(
        name="iceberg-routes",
        source=src,
        include=(f"{fresh_db}.orders_1", f"{fresh_db}.orders_2"),
        state_location=str(tmp_dir / "state"),
        sink=SinkConfig("iceberg", {"root": str(tmp_dir / "lake")}),
        split=SplitOptions(chunk_size=1500),
        stream=StreamOptions(max_events_per_batch=3000, heartbeat_s=1.0, trigger_interval_s=0.5),
        rules=rules,
    )
    plan = build_plan(src, config.include, split=config.split, chunks_per_batch=2)
    state = StateStore(config.state_location)
    state.write_plan(plan)
    schemas = list(plan.schemas.values())
    writers = [
        ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=70 + i, threads=1, pause_s=0.01).start()
        for i, spec in enumerate(specs)
    ]
    query = None
    try:
        for b in plan.batches:
            run_snapshot_batch(spark, config, b.batch_id, plan=plan)
        state.write_finished(state.finished_from_results())
        query = start_stream(spark, config, pipeline_sink(config, schemas), schemas)
        time.sleep(4)
    finally:
        changes = sum(w.stop().total for w in writers)
    merged = TableId(fresh_db, "orders")
    try:
        assert changes > 100

        def actual():
            return {
                k: {c: r[c] for c in COLUMNS}
                for k, r in iceberg_rows(tmp_dir / "lake", merged, ("_source_table", "id")).items()
            }

        problem = wait_until_equal(lambda: _expected(mariadb, fresh_db), actual, timeout_s=120)
        assert not problem, f"after {changes} changes:\n{problem}"
        assert query.exception() is None
    finally:
        if query is not None:
            query.stop()
