"""State location and Delta sink on S3, credentials from an Airflow connection.

A local S3 API server (moto's standalone server, ``moto[server]`` from PyPI: it speaks the S3
REST API over HTTP, honours ``If-None-Match`` on PUT -- delta-rs' exclusive commit -- and needs
no Docker or JVM) holds the whole pipeline: ``pipeline.json``, the batch results, the stream's
checkpoint and status, and the Delta tables. The DAG template runs with ``dag.test()`` (real
Airflow, MariaDB, the Spark Connect runtime for the snapshot and a local ``spark-submit`` for
the stream), writers on throughout; the credentials reach the tasks only through the ``aws``
connection named by ``aws_conn_id``: the test process has none in its environment.

Checked: the sink equals the source row by row; the stream killed with SIGKILL while it
commits, then started again by the stream task, goes on from the checkpoint on S3 (its local
working copy deleted first) and the sink is still exact; the secret key is in no object under
the state location, no log, no XCom, no rendered field and no command line; a secret put in
``sink_options.storage_options`` fails the plan task before anything is written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.processes import CommandLineWatcher
from mysqlcdc_harness.s3 import BUCKET, aws_env, s3_delta_rows, s3_server
from mysqlcdc_harness.sink_compare import mysql_rows, wait_until_equal
from mysqlcdc_harness.tables import VALUE_COLS, create_composite_table, create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with s3_server(tmp_path_factory.mktemp("moto")) as info:
        yield info


def _conf(db: str, prefix: str, **kw) -> dict:
    conf = {
        "tables": [f"{db}.orders", "tenant_items"],
        "state_location": f"s3://{BUCKET}/{prefix}/state",
        "sink_type": "delta",
        "sink_options": {"root": f"s3://{BUCKET}/{prefix}/tables"},
        "aws_conn_id": "aws_lake",
        "chunk_size": 3000,
        "rows_per_batch": 15_000,
        "stream_options": {"max_events_per_batch": 20000, "heartbeat_s": 1.0, "trigger_interval_s": 0.5},
    }
    conf.update(kw)
    return conf


@pytest.fixture(scope="module")
def s3_run(mariadb, s3, tmp_path_factory):
    from airflow_provider_mysqlcdc.cdc.store.object_store import ALL_NAMES
    from tests.e2e.test_pipeline_dag import _use_source, run_dag

    assert not any(os.environ.get(k) for k in ALL_NAMES), "the test process must not hold AWS credentials"
    db = f"s3_{os.getpid()}"
    work = tmp_path_factory.mktemp("s3e2e")
    runtime = work / "connect-runtime"
    runtime_before = os.environ.get("MYSQLCDC_RUNTIME_DIR")
    os.environ["MYSQLCDC_RUNTIME_DIR"] = str(runtime)
    mariadb.execute(f"CREATE DATABASE `{db}`")
    specs = [create_int_table(mariadb, db, 40_000, "orders"), create_composite_table(mariadb, db, 12_000)]
    _use_source(mariadb, db)
    airflow_env.set_connection(
        "aws_lake",
        "aws",
        host="",
        login=s3["key_id"],
        password=s3["secret"],
        extra={"endpoint_url": s3["endpoint"], "region_name": s3["region"]},
    )
    conf = _conf(db, f"p{os.getpid()}")
    watcher = CommandLineWatcher(("SparkSubmit", "binlog_stream", "SparkConnectServer")).start()
    writers = [
        ConcurrentWriter(lambda: mariadb.connect(db), s, seed=41 + i, threads=1, pause_s=0.003).start()
        for i, s in enumerate(specs)
    ]
    try:
        dr = run_dag(conf, work / "dag_test_output.log")
        yield {
            "dr": dr,
            "db": db,
            "work": work,
            "specs": specs,
            "conf": conf,
            "writers": writers,
            "watcher": watcher,
            "server": mariadb,
            "s3": s3,
        }
    finally:
        for w in writers:
            w.stop()
        watcher.stop()
        with aws_env(s3):
            from airflow_provider_mysqlcdc.cdc.state import StateStore
            from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import stop_local_stream

            stop_local_stream(StateStore(conf["state_location"]))
        from airflow_provider_mysqlcdc.spark.runtime.connect_server import stop_local_servers

        stop_local_servers(runtime)
        if runtime_before is None:
            os.environ.pop("MYSQLCDC_RUNTIME_DIR", None)
        else:
            os.environ["MYSQLCDC_RUNTIME_DIR"] = runtime_before


def _sink_problems(run, timeout_s: float = 300.0) -> str:
    from airflow_provider_mysqlcdc.cdc.model import TableId

    problems = []
    root = run["conf"]["sink_options"]["root"]
    for spec in run["specs"]:
        t = TableId(spec.database, spec.table)
        cols = list(spec.key_columns) + list(VALUE_COLS)
        problem = wait_until_equal(
            lambda: mysql_rows(run["server"], t, cols, spec.key_columns),
            lambda: s3_delta_rows(run["s3"], f"{root}/{t.database}/{t.table}", spec.key_columns),
            timeout_s=timeout_s,
        )
        if problem:
            problems.append(f"{t}: {problem}")
    return "; ".join(problems)


def test_the_dag_loads_and_streams_into_delta_on_s3_and_survives_a_kill_of_the_stream(s3_run):
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import running_local_stream
    from airflow_provider_mysqlcdc.spark.stream.offsets.checkpoint_mirror import local_copy_dir
    from tests.e2e.test_pipeline_dag import clear_and_run

    run = s3_run
    states = airflow_env.task_states(run["dr"])
    assert run["dr"].state == "success", states
    time.sleep(5)  # the writers go on; the stream follows them
    with aws_env(run["s3"]):
        state = StateStore(run["conf"]["state_location"])
        assert state.exists("pipeline.json") and state.exists("stream/status.json")
        assert state.fs.find(state.path("stream", "checkpoint", "commits")), "Spark's commits reached S3"
        proc = running_local_stream(state)
    assert proc is not None, "the stream runs"
    assert "checkpoints to" in Path(proc.log_path).read_text(errors="replace"), "the stream mirrors its checkpoint"

    # kill -9 while micro-batches commit (every 0.5 s, writers on), then start it again from S3
    os.killpg(proc.pgid, signal.SIGKILL)
    shutil.rmtree(local_copy_dir(state.checkpoint_url()), ignore_errors=True)
    time.sleep(3)
    dr = clear_and_run(run["dr"].run_id, ["stream"], run["work"] / "rerun_output.log")
    assert dr.state == "success", airflow_env.task_states(dr)
    with aws_env(run["s3"]):
        again = running_local_stream(state)
    assert again is not None and again.pid != proc.pid
    restored = re.findall(r"restored from \S+ \((\d+) files\)", Path(again.log_path).read_text(errors="replace"))
    assert restored and int(restored[-1]) > 0, "the relaunched stream took its checkpoint from S3"
    time.sleep(5)
    changes = sum(w.stop().total for w in run["writers"])
    run["writers"].clear()
    assert changes > 500, f"the writers changed rows throughout ({changes})"
    assert not _sink_problems(run)


def test_the_secret_key_is_in_no_state_file_log_xcom_or_command_line(s3_run):
    run = s3_run
    secret = run["s3"]["secret"]
    dag_id = "mysql_cdc_pipeline"
    places: dict[str, str] = {}
    with aws_env(run["s3"]):
        import fsspec

        fs = fsspec.filesystem("s3")
        base = run["conf"]["state_location"].removeprefix("s3://")
        names = fs.find(base)
        assert any(n.endswith("pipeline.json") for n in names)
        for name in names:
            if not name.endswith((".parquet", ".crc")) and fs.size(name) < 5_000_000:
                places[f"s3://{name}"] = fs.cat_file(name).decode(errors="replace")
        from airflow_provider_mysqlcdc.cdc.state import StateStore
        from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import recorded_log_path

        stream_log = recorded_log_path(StateStore(run["conf"]["state_location"]))
    assert stream_log and Path(stream_log).exists()
    places[stream_log] = Path(stream_log).read_text(errors="replace")
    for p in [*run["work"].glob("*.log"), *airflow_env.task_log_files(dag_id)]:
        places[str(p)] = p.read_text(errors="replace")
    for p in (run["work"] / "connect-runtime").rglob("*"):
        if p.is_file() and p.stat().st_size < 20_000_000:
            places[str(p)] = p.read_text(errors="replace")
    for task_id in ("validate", "plan", "snapshot", "stream"):
        places[f"xcom {task_id}"] = json.dumps(airflow_env.xcom_values(dag_id, run["dr"].run_id, task_id), default=str)
    places["rendered fields"] = airflow_env.rendered_fields_text(dag_id, run["dr"].run_id)
    places["command lines"] = "\n".join(run["watcher"].seen)
    assert any("binlog_stream" in c for c in run["watcher"].seen)
    assert any(k.startswith("s3://") and k.endswith("status.json") for k in places)
    leaked = [where for where, text in places.items() if secret in text]
    assert not leaked, f"the secret key appears in: {leaked}"
    assert "aws_lake" in places[f"s3://{run['conf']['state_location'].removeprefix('s3://')}/stream/launch.json"]


def test_a_secret_in_storage_options_fails_the_plan_before_anything_is_written(s3_run, tmp_path):
    from tests.e2e.test_pipeline_dag import run_dag

    run = s3_run
    conf = _conf(
        run["db"],
        f"bad{os.getpid()}",
        sink_options={
            "root": f"s3://{BUCKET}/bad/tables",
            "storage_options": {"AWS_SECRET_ACCESS_KEY": "do-not-write-me"},
        },
    )
    dr = run_dag(conf, tmp_path / "bad.log")
    states = airflow_env.task_states(dr)
    assert states[("plan", -1)][0] == "failed", states
    text = tmp_path.joinpath("bad.log").read_text(errors="replace")
    assert "sink_options.storage_options holds credentials (AWS_SECRET_ACCESS_KEY)" in text, text[-3000:]
    assert "set aws_conn_id" in text
    with aws_env(run["s3"]):
        import fsspec

        assert not fsspec.filesystem("s3").exists(f"{BUCKET}/bad{os.getpid()}"), "nothing may be written"


def test_each_sink_table_on_s3_got_asset_events_from_its_snapshot_batches_and_the_watchdog(s3_run):
    root = s3_run["conf"]["sink_options"]["root"]
    db = s3_run["db"]
    events = airflow_env.asset_events(root)
    by_task = {}
    for e in events:
        by_task.setdefault(e["task_id"], set()).add(e["uri"])
    assert by_task.get("snapshot") == {f"{root}/{db}/orders", f"{root}/{db}/tenant_items"}, events
    snap = [e for e in events if e["task_id"] == "snapshot"]
    assert all(
        e["extra"]["batch_id"].startswith("batch-")
        and e["extra"]["high_watermark"]
        and e["extra"]["table"] in (f"{db}.orders", f"{db}.tenant_items")
        for e in snap
    ), snap
