"""The DAG template's default Spark runtime: the run's snapshot tasks are Spark Connect clients
of one local Spark application (``dag.test()`` of the template, real MariaDB, Delta, writers on).

Checked: one Spark application serves every batch (a single Connect server JVM, no
spark-submit of a batch), each task says where it ran, the sink equals the source after the
stream; the server's token is in no log and no command line; a Spark Connect connection to a
port where nothing listens fails the task with the fix and writes nothing; the server stops by
itself once idle.
"""

from __future__ import annotations

import os
import time

import pytest

from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.processes import CommandLineWatcher
from mysqlcdc_harness.sink_compare import delta_rows, mysql_rows, wait_until_equal
from mysqlcdc_harness.tables import VALUE_COLS, create_composite_table, create_int_table, create_unsigned_edge_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"
SUBMIT = "org.apache.spark.deploy.SparkSubmit"


@pytest.fixture
def runtime_dir(tmp_path, monkeypatch):
    from airflow_provider_mysqlcdc.spark.runtime.connect_server import stop_local_servers

    d = tmp_path / "connect-runtime"
    monkeypatch.setenv("MYSQLCDC_RUNTIME_DIR", str(d))
    yield d
    stop_local_servers(d)


def test_the_runs_batches_share_one_spark_connect_application(mariadb, tmp_path, runtime_dir):
    from airflow_provider_mysqlcdc.cdc.model import TableId
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from airflow_provider_mysqlcdc.spark.runtime.connect_server import _read_info, fresh_leases
    from tests.e2e.test_pipeline_dag import _stop_stream, _use_source, run_dag

    db = f"connect_{os.getpid()}"
    mariadb.execute(f"CREATE DATABASE `{db}`")
    # u_edges: BIGINT UNSIGNED keys at both ends, deletes and key moves >= 2^63 through the default
    # runtime and sink (such deletes were once lost in Delta with every health signal green)
    specs = [
        create_int_table(mariadb, db, 30_000, "orders"),
        create_composite_table(mariadb, db, 12_000),
        create_unsigned_edge_table(mariadb, db, 3_000),
    ]
    _use_source(mariadb, db)
    conf = {
        "tables": [f"{db}.orders", "tenant_items", "u_edges"],
        "state_location": str(tmp_path / "state"),
        "sink_type": "delta",
        "sink_options": {"root": str(tmp_path / "lake")},
        "chunk_size": 3000,
        "rows_per_batch": 10_000,
        "stream_options": {"max_events_per_batch": 20000, "heartbeat_s": 1.0, "trigger_interval_s": 0.5},
    }
    watcher = CommandLineWatcher(("SparkSubmit", "snapshot_chunks", "binlog_stream", "SparkConnectServer")).start()
    writers = [
        ConcurrentWriter(lambda: mariadb.connect(db), s, seed=21 + i, threads=1, pause_s=0.003).start()
        for i, s in enumerate(specs)
    ]
    log = tmp_path / "dag_test_output.log"
    try:
        dr = run_dag(conf, log)
        time.sleep(3)
    finally:
        for w in writers:
            w.stop()
    try:
        states = airflow_env.task_states(dr)
        snapshots = [k for k in states if k[0] == "snapshot"]
        assert len(snapshots) >= 4 and all(v[0] == "success" for v in states.values()), states
        # not counted: the launcher JVM, and the class-data-sharing archive builder, which runs a
        # stopped server's java command line with -Xshare:dump (any earlier test's server may have
        # started it: the archive directory is per user, not per test)
        servers = watcher.processes(CONNECT_SERVER, "-cp ", unless=("org.apache.spark.launcher.Main", "-Xshare:dump"))
        assert len(servers) == 1, f"one Spark application for the run's {len(snapshots)} batches: " + "; ".join(
            f"pid {pid} (parent {watcher.parent.get(pid)}): {[ln[-160:] for ln in watcher.by_pid[pid]]}"
            for pid in servers
        )
        batch_jobs = watcher.processes(SUBMIT, "--batch-id")
        assert batch_jobs == [], "no batch starts its own Spark application"
        text = log.read_text(errors="replace")
        assert text.count("on the local Spark Connect server at sc://localhost:") >= len(snapshots), text[-3000:]
        assert "attaching to Spark Connect" in text
        (info_file,) = list(runtime_dir.glob("server-*.json"))
        info = _read_info(info_file)
        assert oct(info_file.stat().st_mode & 0o777) == "0o600"
        assert info.token not in text, "the server's token is in the task log"
        assert not any(info.token in line for line in watcher.seen), "the token is on a command line"
        assert not fresh_leases(runtime_dir, info.fingerprint), "every task let its lease go"
        for spec in specs:
            t = TableId(spec.database, spec.table)
            cols = list(spec.key_columns) + list(VALUE_COLS)
            problem = wait_until_equal(
                lambda: mysql_rows(mariadb, t, cols, spec.key_columns),
                lambda: delta_rows(tmp_path / "lake", t, spec.key_columns),
                timeout_s=180,
            )
            assert not problem, f"{t}: {problem}"
        results = StateStore(conf["state_location"]).batch_results()
        assert len(results) == len(snapshots) and all(r["rows_per_chunk"] for r in results)
    finally:
        watcher.stop()
        _stop_stream(conf["state_location"])
        mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")


def test_a_spark_connect_connection_where_nothing_listens_fails_the_task_with_the_fix(mariadb, tmp_path, runtime_dir):
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from mysqlcdc_harness.mariadb import free_port
    from tests.e2e.test_pipeline_dag import _use_source, run_dag

    db = f"connect_bad_{os.getpid()}"
    mariadb.execute(f"CREATE DATABASE `{db}`")
    create_int_table(mariadb, db, 2_000, "orders")
    _use_source(mariadb, db)
    port = free_port()
    airflow_env.set_connection("spark_connect_nowhere", "spark_connect", host="localhost", port=port)
    conf = {
        "tables": [f"{db}.orders"],
        "state_location": str(tmp_path / "state"),
        "sink_type": "delta",
        "sink_options": {"root": str(tmp_path / "lake")},
        "spark_connect_conn_id": "spark_connect_nowhere",
    }
    log = tmp_path / "dag_test_output.log"
    try:
        dr = run_dag(conf, log)
        states = airflow_env.task_states(dr)
        assert [v[0] for k, v in states.items() if k[0] == "snapshot"] == ["failed"], states
        text = log.read_text(errors="replace")
        assert "cannot reach the Spark Connect server of connection 'spark_connect_nowhere'" in text, text[-3000:]
        assert "Fix: start it or correct the connection's host, port and token" in text
        assert StateStore(conf["state_location"]).batch_results() == []
        assert not (tmp_path / "lake" / db).exists() or not any((tmp_path / "lake" / db).rglob("*.parquet"))
        assert not list(runtime_dir.glob("server-*.json")), "a Connect connection starts no local server"
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")


def test_a_local_server_stops_by_itself_once_no_task_used_it(tmp_path, runtime_dir):
    from airflow_provider_mysqlcdc.spark.runtime.connect_server import (
        Lease,
        _alive,
        ensure_local_server,
        remote_session,
        settings_from,
    )

    settings = settings_from("local[1]", (), {"spark.sql.session.timeZone": "UTC"}, driver_memory="512m")
    info = ensure_local_server(settings, idle_s=6, directory=runtime_dir)
    assert ensure_local_server(settings, idle_s=6, directory=runtime_dir) == info, "reused, not started again"
    with Lease(info, runtime_dir):
        with remote_session(info.url) as spark:
            assert spark.range(5).count() == 5
            with remote_session(f"sc://localhost:{info.port}/;token=not-the-token") as bad:
                with pytest.raises(Exception, match="UNAUTHENTICATED|authentication"):
                    bad.range(1).count()
            time.sleep(9)  # longer than idle_s, but the lease is held
            assert _alive(info.supervisor_pid) and spark.range(3).count() == 3
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ, "a later classic session or spark-submit would break"
    deadline = time.time() + 60
    while _alive(info.supervisor_pid):
        assert time.time() < deadline, "the idle server did not stop"
        time.sleep(0.5)
    assert not list(runtime_dir.glob("server-*.json"))
