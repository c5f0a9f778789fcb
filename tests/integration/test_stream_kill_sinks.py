"""SIGKILL the stream job mid micro-batch, start it again: Delta and PostgreSQL still equal the source.

The whole pipeline: snapshot batches under writers (the snapshot job's code, in process),
then the stream job as its own process from the minimum HW, killed with SIGKILL while a
micro-batch is in flight (offsets logged, commit not yet), restarted from its checkpoint.
"""

from __future__ import annotations

import time

import pytest

from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.snapshot.job import run_snapshot_batch
from mysqlcdc_harness.sink_compare import (
    delta_rows,
    iceberg_rows,
    mysql_rows,
    postgres_rows,
    sink_config,
    wait_until_equal,
)
from mysqlcdc_harness.stream_job import committed, in_flight, kill_job, start_job
from mysqlcdc_harness.tables import VALUE_COLS, create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def _wait(pred, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while not pred():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.parametrize("kind", ["delta", "postgres", "iceberg"])
def test_sigkilled_stream_job_leaves_the_sink_equal_to_the_source(
    mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch, kind
):
    spec = create_int_table(mariadb, fresh_db, 20_000, "orders")
    src = mariadb.source_config(server_id_range="6300-6399")
    sink_cfg = sink_config(kind, tmp_dir, postgres, monkeypatch)
    config = PipelineConfig(
        name=f"kill-{kind}",
        source=src,
        include=(f"{fresh_db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=sink_cfg,
        split=SplitOptions(chunk_size=5000),
        stream=StreamOptions(max_events_per_batch=150, heartbeat_s=1.0, trigger_interval_s=0.0),
    )
    cfg_path = tmp_dir / "pipeline.json"
    cfg_path.write_text(config.to_json())
    plan = build_plan(src, config.include, split=config.split, chunks_per_batch=2)
    state = StateStore(config.state_location)
    state.write_plan(plan)
    writer = ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=5, threads=1, pause_s=0.01).start()
    writing = True
    proc = None
    log = tmp_dir / "job.log"
    checkpoint = tmp_dir / "state" / "stream" / "checkpoint"
    try:
        for b in plan.batches:
            run_snapshot_batch(spark, config, b.batch_id, plan=plan)
        state.write_finished(state.finished_from_results())
        proc = start_job(cfg_path, log, src.password)
        _wait(lambda: committed(checkpoint) is not None, 180, "the first committed micro-batch")
        time.sleep(1.0)
        _wait(lambda: in_flight(checkpoint), 60, "a micro-batch in flight")
        kill_job(proc)
        killed_at = committed(checkpoint)
        time.sleep(1.0)
        writer.stop()
        writing = False
        proc = start_job(cfg_path, log, src.password)
        schema = plan.schemas[next(iter(plan.schemas))]
        cols = ["id", *VALUE_COLS]

        def expected():
            return mysql_rows(mariadb, schema.table_id, cols, ("id",))

        if kind in ("delta", "iceberg"):
            read = delta_rows if kind == "delta" else iceberg_rows

            def actual():
                return {k: {c: r[c] for c in cols} for k, r in read(tmp_dir / "lake", schema.table_id, ("id",)).items()}
        else:

            def actual():
                return postgres_rows(postgres, f"{fresh_db}__orders", cols, ("id",), sink_cfg.options["schema"])

        problem = wait_until_equal(expected, actual, timeout_s=180)
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        assert not problem, f"{kind}: sink != source after SIGKILL at {killed_at}:\n{problem}\njob log:\n{tail}"
        assert committed(checkpoint)[0] > killed_at[0], "the restarted job must have committed new batches"
        assert src.password not in log.read_text(errors="replace")
        # the ranges were reduced by the source's tasks, before and after the kill
        assert log.read_text(errors="replace").count("reduced by the source's tasks") >= 2
    finally:
        if writing:
            writer.stop()
        if proc is not None:
            kill_job(proc)
