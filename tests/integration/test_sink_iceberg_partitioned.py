"""Partitioned Iceberg sink tables through a real local Spark and MariaDB: one table partitioned by
``day(ts)``, one by ``bucket(4, id)`` and its ``region`` text column, loaded by snapshot batches,
then kept current by the stream while updates move rows between partitions (a new day, a new
region) and rows are deleted and inserted. Each Iceberg table must equal its source row by row,
carry the spec the pipeline's transforms give, and hold every data file in one partition (the
value its manifest entry records, recomputed from the file's rows), after the snapshot and after
the stream."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.cdc.transform.table_views import Rules
from airflow_provider_mysqlcdc.spark.sinks.iceberg import catalog as cat
from airflow_provider_mysqlcdc.spark.sinks.iceberg import partitioning as part
from airflow_provider_mysqlcdc.spark.sinks.routed import pipeline_sink
from airflow_provider_mysqlcdc.spark.snapshot.job import run_snapshot_batch
from airflow_provider_mysqlcdc.spark.stream.query import start_stream
from mysqlcdc_harness.sink_compare import iceberg_rows, mysql_rows, wait_until_equal

pytestmark = [pytest.mark.integration, pytest.mark.spark]

COLUMNS = ("id", "region", "ts", "n")
ROWS = 3_000


def _create(mariadb, db: str, table: str) -> None:
    """``ROWS`` rows over ~40 days of ``ts`` and three regions (and a NULL one)."""
    mariadb.execute(
        f"CREATE TABLE `{table}` (id BIGINT NOT NULL PRIMARY KEY, region VARCHAR(8), ts DATETIME(6), n INT) "
        "ENGINE=InnoDB",
        f"INSERT INTO `{table}` SELECT seq, ELT(1 + seq % 4, 'eu', 'us', 'apac', NULL), "
        f"'2024-03-01' + INTERVAL seq * 19 MINUTE, seq FROM seq_1_to_{ROWS}",
        f"ANALYZE TABLE `{table}`",
        database=db,
    )


def _move_rows(mariadb, db: str, table: str) -> None:
    """Updates that move rows to other days and regions, deletes, inserts, and an update of a
    row inserted by this stream."""
    mariadb.execute(
        f"UPDATE `{table}` SET ts = ts + INTERVAL 3 DAY, n = n + 1 WHERE id % 7 = 0",
        f"UPDATE `{table}` SET region = IF(region = 'eu', 'us', 'eu') WHERE id % 5 = 0",
        f"UPDATE `{table}` SET region = NULL, ts = NULL WHERE id % 97 = 0",
        f"DELETE FROM `{table}` WHERE id % 11 = 0",
        f"INSERT INTO `{table}` SELECT {ROWS} + seq, 'apac', '2024-05-20' + INTERVAL seq HOUR, -seq FROM seq_1_to_200",
        f"UPDATE `{table}` SET ts = '2023-12-31 23:59:59.999999', region = 'eu' WHERE id = {ROWS + 5}",
        database=db,
    )


def _check_files(root, table_id: TableId, want: list[str]) -> int:
    """The table's spec is ``want`` and each data file holds the one partition it records."""
    props = cat.check_catalog_options(str(root), None)
    table = cat.load(cat.DEFAULT_CATALOG_NAME, props).load_table(cat.identifier(table_id))
    assert part.describe_spec(table.spec(), table.schema()) == want
    columns = part.PartitionColumns.of(table.spec(), table.schema())
    files = [task.file for task in table.scan().plan_files()]
    for f in files:
        path = f.file_path[len("file://") :] if f.file_path.startswith("file://") else f.file_path
        assert set(columns.values(pq.read_table(path))) == {tuple(f.partition)}, f.file_path
    return len(files)


def test_tables_partitioned_by_day_and_by_bucket_and_region_equal_their_source(mariadb, fresh_db, spark, tmp_dir):
    for name in ("events", "orders"):
        _create(mariadb, fresh_db, name)
    src = mariadb.source_config()
    events, orders = TableId(fresh_db, "events"), TableId(fresh_db, "orders")
    rules = Rules(
        transform=(
            {"source_table": str(events), "partition_keys": ["day(ts)"]},
            {"source_table": str(orders), "partition_keys": ["bucket(4, id)", "region"]},
        )
    )
    root = tmp_dir / "lake"
    config = PipelineConfig(
        name="iceberg-partitioned",
        source=src,
        include=(str(events), str(orders)),
        state_location=str(tmp_dir / "state"),
        sink=SinkConfig("iceberg", {"root": str(root)}),
        split=SplitOptions(chunk_size=1000),
        stream=StreamOptions(max_events_per_batch=2000, heartbeat_s=1.0, trigger_interval_s=0.5),
        rules=rules,
    )
    plan = build_plan(src, config.include, split=config.split, chunks_per_batch=2)
    state = StateStore(config.state_location)
    state.write_plan(plan)
    schemas = list(plan.schemas.values())
    for b in plan.batches:
        run_snapshot_batch(spark, config, b.batch_id, plan=plan)
    state.write_finished(state.finished_from_results())

    def expected(t: TableId):
        return lambda: mysql_rows(mariadb, t, COLUMNS, ("id",))

    def actual(t: TableId):
        return lambda: {k: {c: r[c] for c in COLUMNS} for k, r in iceberg_rows(root, t, ("id",)).items()}

    for t in (events, orders):
        assert not wait_until_equal(expected(t), actual(t), timeout_s=1)
    assert _check_files(root, events, ["day(ts)"]) > 30  # ~40 days
    assert _check_files(root, orders, ["bucket(4, id)", "region"]) >= 16  # 4 buckets x 4 regions

    query = start_stream(spark, config, pipeline_sink(config, schemas), schemas)
    try:
        for name in ("events", "orders"):
            _move_rows(mariadb, fresh_db, name)
        for t in (events, orders):
            problem = wait_until_equal(expected(t), actual(t), timeout_s=90)
            assert not problem, f"{t}:\n{problem}"
        assert query.exception() is None
    finally:
        query.stop()
    assert _check_files(root, events, ["day(ts)"]) > 30
    assert _check_files(root, orders, ["bucket(4, id)", "region"]) >= 16
