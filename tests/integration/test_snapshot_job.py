"""The snapshot job: a batch read consistently, written to the sink, its result file written last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.runtime.session import jdbc_jar_path
from airflow_provider_mysqlcdc.spark.snapshot.job import run_snapshot_batch
from mysqlcdc_harness.tables import create_int_table

pytestmark = [pytest.mark.integration, pytest.mark.spark]
ROOT = Path(__file__).resolve().parents[2]


def _delta_rows(root: Path, db: str, table: str) -> dict[int, dict]:
    from deltalake import DeltaTable

    t = DeltaTable(str(root / db / table)).to_pyarrow_table()
    return {r["id"]: r for r in t.to_pylist()}


@pytest.fixture
def pipeline_setup(mariadb, fresh_db, tmp_dir):
    create_int_table(mariadb, fresh_db, 20_000)
    src = mariadb.source_config()
    config = PipelineConfig(
        name="job-test",
        source=src,
        include=(f"{fresh_db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=SinkConfig("delta", {"root": str(tmp_dir / "lake")}),
    )
    plan = build_plan(src, config.include, split=config.split, chunks_per_batch=1)
    StateStore(config.state_location).write_plan(plan)
    cfg_path = tmp_dir / "pipeline.json"
    cfg_path.write_text(config.to_json())
    assert src.password not in cfg_path.read_text()
    return config, plan, cfg_path


def _source_rows(mariadb, db):
    cols = ("id", "a", "s", "amount", "ts")
    return {r[0]: dict(zip(cols, r)) for r in mariadb.query(f"SELECT {', '.join(cols)} FROM orders", database=db)}


def test_batches_fill_the_sink_and_a_rerun_changes_nothing(mariadb, fresh_db, spark, tmp_dir, pipeline_setup):
    config, plan, _ = pipeline_setup
    assert len(plan.batches) >= 2
    state = StateStore(config.state_location)
    results = [run_snapshot_batch(spark, config, b.batch_id) for b in plan.batches]
    for b, r in zip(plan.batches, results):
        assert state.read_batch_result(b.batch_id) == json.loads(json.dumps(r, sort_keys=True))
        assert r["high_watermark"]["file"].startswith("mysql-bin.")
        assert set(r["reader"].values()) == {"arrow"}, r["reader"]  # snapshot_reader auto, a Delta sink
    lake = tmp_dir / "lake"
    expected = _source_rows(mariadb, fresh_db)
    got = _delta_rows(lake, fresh_db, "orders")
    assert got.keys() == expected.keys()
    assert all(got[k] == expected[k] for k in expected)

    from deltalake import DeltaTable

    dt_before = DeltaTable(str(lake / fresh_db / "orders"))
    files_before = len(dt_before.file_uris())
    run_snapshot_batch(spark, config, plan.batches[0].batch_id)
    dt_after = DeltaTable(str(lake / fresh_db / "orders"))
    assert dt_after.version() > dt_before.version()
    assert len(dt_after.file_uris()) == files_before, "a rerun replaces the batch's files, it does not add"
    assert _delta_rows(lake, fresh_db, "orders") == got


def test_a_failed_job_leaves_no_result_file(mariadb, fresh_db, spark, pipeline_setup, monkeypatch):
    config, plan, _ = pipeline_setup
    state = StateStore(config.state_location)
    bid = plan.batches[0].batch_id
    run_snapshot_batch(spark, config, bid)
    assert state.read_batch_result(bid) is not None

    from airflow_provider_mysqlcdc.spark.sinks.delta import sink as delta

    def broken(*a, **kw):
        raise RuntimeError("disk full")

    monkeypatch.setattr(delta.DeltaSink, "commit_chunk_files", broken)  # rows written once: the commit fails
    with pytest.raises(RuntimeError, match="disk full"):
        run_snapshot_batch(spark, config, bid)
    assert state.read_batch_result(bid) is None, "the old result must not outlive a failed rerun"
    monkeypatch.setattr(delta.DeltaSink, "writes_snapshot_files", lambda self: False)  # staged, then written
    monkeypatch.setattr(delta.DeltaSink, "write_snapshot", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        run_snapshot_batch(spark, config, bid)
    assert state.read_batch_result(bid) is None


def test_spark_submit_entry_keeps_the_password_off_the_command_line(mariadb, fresh_db, tmp_dir, pipeline_setup):
    config, plan, cfg_path = pipeline_setup
    bid = plan.batches[-1].batch_id
    password = config.source.password
    env = dict(
        os.environ, MYSQLCDC_PASSWORD=password, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable
    )
    argv = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.ui.showConsoleProgress=false",
        # Under spark-submit the driver's JVM exists before the job's code runs: the JDBC
        # driver jar must come with --jars (spark.jars set in code reaches executors only).
        "--jars",
        jdbc_jar_path(),
        str(ROOT / "airflow_provider_mysqlcdc" / "jobs" / "snapshot_chunks.py"),
        "--config",
        str(cfg_path),
        "--batch-id",
        bid,
    ]
    assert not any(password in a for a in argv)
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    errors = "\n".join(ln for ln in p.stderr.splitlines() if " INFO " not in ln)
    assert p.returncode == 0, errors[-4000:]
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("MYSQLCDC_RESULT ")]
    assert lines, p.stdout[-2000:]
    result = json.loads(lines[-1].split(" ", 1)[1])
    assert result["batch_id"] == bid
    assert StateStore(config.state_location).read_batch_result(bid)["high_watermark"] == result["high_watermark"]
    assert password not in p.stdout and password not in p.stderr
    got = _delta_rows(tmp_dir / "lake", fresh_db, "orders")
    assert len(got) == result["rows"]
