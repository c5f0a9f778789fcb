"""The whole pipeline on a Spark standalone cluster whose nodes share no files with Airflow.

A master and two workers (``mysqlcdc_harness.spark_cluster``): each worker in its own mount and
UTS namespace -- its own host name, a private ``/tmp``, the repository and ``/opt`` hidden, and a
node Python environment (the package from a wheel) at a path the Airflow host does not have. The
state location and the Delta lake live on an S3 API server (moto); the nodes reach it with their
own credentials (as an instance role would give), the Airflow tasks with the ``aws`` connection.
The MySQL password the stream's driver needs is a file on the nodes only (the Spark connection's
``mysqlcdc_password_file``), never in their environment; the PostgreSQL sink's password is there
(``$PGPASSWORD``, as a cluster's spark-env.sh would set it), for the PostgreSQL run. The Airflow test
process has no PYSPARK_PYTHON: nothing tells Spark to use the Airflow worker's interpreter.

The DAG template runs with ``dag.test()`` and ``spark_default`` = the cluster in cluster deploy
mode, writers on throughout. Checked: the snapshot batches run on the cluster's executors; the
stream's driver runs on a node (its status and lease name the node), not on the Airflow host; a
finished batch cleared while the stream runs there is handed to it through the state location; the
driver's environment holds none of the Airflow worker's secrets (the submission client sends
spark-submit's environment to the driver); killed with SIGKILL, the stream is brought back on the
cluster by the watchdog DAG from its checkpoint on S3; an ADD COLUMN while it runs there reaches the
Delta table; the sink equals the source row by row; a stop request through the state location stops the
driver on the node.

The same cluster then runs the template into the PostgreSQL sink (its own source database, state
location and PostgreSQL schema): the Spark connection's extra adds
``mysqlcdc_cluster_provides_password`` (a cluster-mode stream with a sink connection needs it), the
driver takes the MySQL password from the file and the sink's from the node's environment, runs on
a node, and the sink equals the source row by row; no password on a command line, in the launch
record or in the DAG's output; the watchdog's stop request ends the driver.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.postgres import DATABASE as PG_DATABASE
from mysqlcdc_harness.postgres import SUPERUSER as PG_USER
from mysqlcdc_harness.processes import CommandLineWatcher
from mysqlcdc_harness.s3 import BUCKET, aws_env, s3_delta_rows, s3_server
from mysqlcdc_harness.sink_compare import mysql_rows, postgres_rows, wait_until_equal
from mysqlcdc_harness.spark_cluster import NODE_SECRETS_DIR, node_spark_home, standalone_cluster
from mysqlcdc_harness.tables import VALUE_COLS, create_composite_table, create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

PASSWORD_FILE = f"{NODE_SECRETS_DIR}/password"
LEASE_TTL_S = 15


def _stream_drivers(state_location: str | None = None) -> list[psutil.Process]:
    """The stream job's Python processes on the nodes (children of a DriverWrapper JVM); with
    ``state_location``, only that pipeline's (its ``--config`` lies there)."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info.get("cmdline") or []
        if "airflow_provider_mysqlcdc.jobs.binlog_stream" in cmd and "python" in os.path.basename(cmd[0]):
            if state_location is None or any(c.startswith(state_location.rstrip("/") + "/") for c in cmd):
                out.append(p)
    return out


@pytest.fixture(scope="module")
def cluster_run(mariadb, postgres, tmp_path_factory):
    from airflow_provider_mysqlcdc.cdc.store.object_store import ALL_NAMES
    from tests.e2e.test_pipeline_dag import _use_source, run_dag

    assert not any(os.environ.get(k) for k in ALL_NAMES), "the test process must not hold AWS credentials"
    work = tmp_path_factory.mktemp("cluster_e2e")
    saved = {
        k: os.environ.get(k)
        for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP", "MYSQLCDC_RUNTIME_DIR")
    }
    for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        os.environ.pop(k, None)  # an Airflow worker does not tell Spark which Python the cluster has
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["MYSQLCDC_RUNTIME_DIR"] = str(work / "connect-runtime")
    with s3_server(work) as s3:
        node_env = {
            "AWS_ACCESS_KEY_ID": s3["key_id"],
            "AWS_SECRET_ACCESS_KEY": s3["secret"],
            "AWS_REGION": s3["region"],
            "AWS_DEFAULT_REGION": s3["region"],
            "AWS_ENDPOINT_URL": s3["endpoint"],
            "AWS_ALLOW_HTTP": "true",
            # what a cluster gives a PostgreSQL sink's driver (mysqlcdc_cluster_provides_password): the
            # MySQL password stays a file, so the Delta run proves that mysqlcdc_password_file is used
            "PGPASSWORD": postgres.password,
        }
        with standalone_cluster(
            work / "cluster",
            tmp_path_factory.getbasetemp() / "cluster-cache",
            workers=2,
            cores=2,
            node_env=node_env,
            node_secrets={"password": ROOT_PASSWORD},
        ) as cluster:
            db = f"cl_{os.getpid()}"
            mariadb.execute(f"CREATE DATABASE `{db}`")
            specs = [create_int_table(mariadb, db, 30_000, "orders"), create_composite_table(mariadb, db, 8_000)]
            _use_source(mariadb, db)
            host, port = cluster.master_url.rsplit(":", 1)
            spark_extra = {
                "deploy-mode": "cluster",
                "mysqlcdc_spark_home": node_spark_home(),
                "mysqlcdc_password_file": PASSWORD_FILE,
            }
            airflow_env.set_connection("spark_default", "spark", host=host, port=int(port), extra=spark_extra)
            airflow_env.set_connection(
                "aws_lake",
                "aws",
                host="",
                login=s3["key_id"],
                password=s3["secret"],
                extra={"endpoint_url": s3["endpoint"], "region_name": s3["region"]},
            )
            prefix = f"c{os.getpid()}"
            conf = {
                "tables": [f"{db}.orders", "tenant_items"],
                "state_location": f"s3://{BUCKET}/{prefix}/state",
                "sink_type": "delta",
                "sink_options": {"root": f"s3://{BUCKET}/{prefix}/tables"},
                "aws_conn_id": "aws_lake",
                "chunk_size": 3000,
                "rows_per_batch": 12_000,
                "stream_options": {
                    "max_events_per_batch": 20000,
                    "heartbeat_s": 1.0,
                    "trigger_interval_s": 0.5,
                    "lease_ttl_s": LEASE_TTL_S,
                },
            }
            watcher = CommandLineWatcher(
                ("SparkSubmit", "binlog_stream", "SparkConnectServer", "DriverWrapper")
            ).start()
            writers = [
                ConcurrentWriter(lambda: mariadb.connect(db), s, seed=61 + i, threads=1, pause_s=0.005).start()
                for i, s in enumerate(specs)
            ]
            run = {
                "db": db,
                "work": work,
                "specs": specs,
                "conf": conf,
                "writers": writers,
                "watcher": watcher,
                "server": mariadb,
                "s3": s3,
                "cluster": cluster,
                "spark_extra": spark_extra,
                "pg_password": postgres.password,
            }
            try:
                run["dr"] = run_dag(conf, work / "dag_test_output.log")
                yield run
            finally:
                for w in writers:
                    w.stop()
                watcher.stop()
                from airflow_provider_mysqlcdc.spark.runtime.connect_server import stop_local_servers

                stop_local_servers(work / "connect-runtime")
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _status(run, state_location: str | None = None):
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from airflow_provider_mysqlcdc.spark.runtime.stream_status import read_status

    with aws_env(run["s3"]):
        return read_status(StateStore(state_location or run["conf"]["state_location"]))


def _sink_problems(run, timeout_s: float = 300.0) -> str:
    from airflow_provider_mysqlcdc.cdc.model import TableId

    problems = []
    root = run["conf"]["sink_options"]["root"]
    for spec in run["specs"]:
        t = TableId(spec.database, spec.table)
        cols = list(spec.key_columns) + list(VALUE_COLS)
        problem = wait_until_equal(
            lambda: mysql_rows(run["server"], t, cols, spec.key_columns),
            lambda: {
                k: {c: r[c] for c in cols}
                for k, r in s3_delta_rows(run["s3"], f"{root}/{t.database}/{t.table}", spec.key_columns).items()
            },
            timeout_s=timeout_s,
        )
        if problem:
            problems.append(f"{t}: {problem}")
    return "; ".join(problems)


def test_the_pipeline_runs_on_the_cluster_and_the_watchdog_brings_a_killed_stream_back_there(cluster_run):
    run = cluster_run
    cluster = run["cluster"]
    states = airflow_env.task_states(run["dr"])
    assert run["dr"].state == "success", (states, cluster.worker_logs())
    status = _status(run)
    assert status is not None and status.host.startswith("spark-node-"), f"the driver runs on a node: {status}"
    drivers = _stream_drivers()
    assert len(drivers) == 1, [d.cmdline() for d in drivers]
    first = drivers[0]
    # the submission client hands spark-submit's environment to the driver: none of Airflow's
    environ = open(f"/proc/{first.pid}/environ", "rb").read().decode(errors="replace")
    assert ROOT_PASSWORD not in environ and "AIRFLOW_CONN_" not in environ and run["s3"]["secret"] in environ, (
        "the driver has the node's storage credentials and none of the Airflow worker's secrets"
    )
    assert [d for d in cluster.active_drivers() if "binlog stream" in json.dumps(d) or d.get("state") == "RUNNING"]
    # executors of the snapshot ran on both nodes (the Connect server's application)
    apps = cluster.state().get("completedapps", []) + cluster.state().get("activeapps", [])
    assert any("snapshot" in a.get("name", "") for a in apps), apps

    time.sleep(4)  # the writers go on; the stream follows them on the cluster
    # kill -9 the driver (its Python and its JVM), then let the watchdog bring it back
    jvm = first.parent()
    for p in (first, jvm):
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGKILL)
    time.sleep(LEASE_TTL_S + 2)  # its lease expires: the only sign of a driver's death on another host
    res = airflow_env.run_template(
        [
            "watchdog",
            json.dumps(
                {"state_location": run["conf"]["state_location"], "aws_conn_id": "aws_lake", "consistency_every_s": -1}
            ),
        ],
        run["work"] / "watchdog_output.log",
    )
    dr = airflow_env.dag_run("mysql_cdc_stream_watchdog", res["run_id"])
    assert airflow_env.task_states(dr).get(("stream_health", -1), ("",))[0] == "success", (
        airflow_env.task_states(dr),
        Path(run["work"] / "watchdog_output.log").read_text(errors="replace")[-3000:],
    )
    again = _stream_drivers()
    assert len(again) == 1 and again[0].pid != first.pid, "relaunched once, on the cluster"
    status = _status(run)
    assert status.host.startswith("spark-node-") and status.pid == again[0].pid

    # a finished batch read again while the stream runs there (the grid's Clear on one map index,
    # Downstream ticked): its rows reach the driver on the node as files in the state location on S3
    # (no Hadoop S3 connector in the cluster's Spark), and the stream replaces the batch's key ranges
    from tests.e2e.test_pipeline_dag import clear_and_run

    rerun_log = run["work"] / "rerun_output.log"
    dr2 = clear_and_run(run["dr"].run_id, [["snapshot", 0], "stream"], rerun_log)
    states2 = airflow_env.task_states(dr2)
    text = rerun_log.read_text(errors="replace")
    assert states2[("snapshot", 0)][0] == "success" and states2[("stream", -1)][0] == "success", (states2, text[-3000:])
    assert "key ranges in micro-batch" in text, text[-3000:]
    assert [d.pid for d in _stream_drivers()] == [again[0].pid], "the stream task run again left the one driver"

    # a DDL while the stream runs there: the driver on the node follows it into the Delta table
    for w in run["writers"]:
        w.pause()
    run["server"].execute("ALTER TABLE orders ADD COLUMN note VARCHAR(10) DEFAULT 'n'", database=run["db"])
    for w in run["writers"]:
        w.resume()
    time.sleep(4)
    changes = sum(w.stop().total for w in run["writers"])
    run["writers"].clear()
    assert changes > 300, f"the writers changed rows throughout ({changes})"
    assert not _sink_problems(run)
    root = run["conf"]["sink_options"]["root"]
    orders = s3_delta_rows(run["s3"], f"{root}/{run['db']}/orders", ("id",))
    assert orders and all(r.get("note") == "n" for r in orders.values()), "the added column reached the sink"

    # stopped from Airflow: the watchdog DAG triggered with stop_stream; its request in the state
    # location reaches the driver on its node, and later watchdog runs leave the stream stopped
    for i, conf in enumerate(({"stop_stream": True}, {})):
        res = airflow_env.run_template(
            [
                "watchdog",
                json.dumps({"state_location": run["conf"]["state_location"], "aws_conn_id": "aws_lake", **conf}),
            ],
            run["work"] / f"watchdog_stop_{i}.log",
        )
        dr = airflow_env.dag_run("mysql_cdc_stream_watchdog", res["run_id"])
        assert airflow_env.task_states(dr)[("stream_health", -1)][0] == "skipped", airflow_env.task_states(dr)
        deadline = time.monotonic() + 30
        while _stream_drivers() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _stream_drivers(), "the driver exited on the stop request and was not relaunched"
    assert _status(run).state == "stopped"


def test_no_secret_on_a_command_line_or_in_the_launch_record(cluster_run):
    run = cluster_run
    secret_words = (ROOT_PASSWORD, run["s3"]["secret"], run["pg_password"])
    seen = run["watcher"].matching("")
    assert any("PythonRunner" in c for c in seen), "the stream was submitted as Spark's Python runner"
    for line in seen:
        assert not any(s in line for s in secret_words), line
    with aws_env(run["s3"]):
        from airflow_provider_mysqlcdc.cdc.state import StateStore

        state = StateStore(run["conf"]["state_location"])
        for rel in ("stream/launch.json", "stream/cluster_driver.json", "stream/status.json", "pipeline.json"):
            text = json.dumps(state.read_json(rel))
            assert not any(s in text for s in secret_words), rel


def test_a_driver_the_cluster_cannot_start_fails_the_launch_at_once_with_the_fix(cluster_run):
    """A wrong cluster SPARK_HOME (the driver's jar is not on the node): the submission fails in
    seconds with the driver's id and what to check, as a configuration error (not retried)."""
    from airflow_provider_mysqlcdc.cdc.errors import ConfigError
    from airflow_provider_mysqlcdc.hooks.stream import StreamControl
    from airflow_provider_mysqlcdc.spark.runtime.cluster_stream import ClusterSubmitError

    run = cluster_run
    host, port = run["cluster"].master_url.rsplit(":", 1)
    airflow_env.set_connection(
        "spark_wrong_home",
        "spark",
        host=host,
        port=int(port),
        extra={"mysqlcdc_spark_home": "/nowhere/spark", "mysqlcdc_password_file": PASSWORD_FILE},
    )
    with aws_env(run["s3"]):
        control = StreamControl(run["conf"]["state_location"], "mysql_cdc_default", "spark_wrong_home")
        started = time.monotonic()
        with pytest.raises(ClusterSubmitError, match="failed on a worker") as e:
            control._submit_to_cluster(run["conf"]["state_location"] + "/pipeline.json", "wrong home")
    assert isinstance(e.value, ConfigError) and "mysqlcdc_spark_home" in str(e.value)
    assert time.monotonic() - started < 90


def test_executors_whose_python_cannot_run_the_package_fail_the_first_task_with_what_to_install(cluster_run, tmp_path):
    """The nodes' system Python (no package; PySpark ships its own modules) as the executors' interpreter: the probe
    every job runs first on a cluster says so as a configuration error."""
    import subprocess
    import sys

    script = tmp_path / "probe.py"
    script.write_text(
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "from airflow_provider_mysqlcdc.cdc.errors import ConfigError\n"
        "from airflow_provider_mysqlcdc.spark.runtime.executor_check import check_executors\n"
        "spark = SparkSession.builder.master({run_master!r})"
        ".config('spark.cores.max', '1').config('spark.task.maxFailures', '1').getOrCreate()\n"
        "try:\n"
        "    check_executors(spark, 'the test cluster')\n"
        "    print('NO ERROR')\n"
        "except ConfigError as e:\n"
        "    print('CONFIG ERROR', e)\n"
        "spark.stop()\n".replace("{run_master!r}", repr(cluster_run["cluster"].master_url))
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    env["PYSPARK_PYTHON"] = "/usr/bin/python3"  # what a driver names when it assumes the nodes' system Python
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=env)
    line = next((ln for ln in out.stdout.splitlines() if "ERROR" in ln), out.stdout + out.stderr[-3000:])
    assert line.startswith("CONFIG ERROR"), line
    assert "cannot import 'airflow_provider_mysqlcdc'" in line and "spark.pyspark.python" in line, line


# --- the PostgreSQL sink on the same cluster ---------------------------------------------------

PG_CONN_ID = "cluster_pg_sink"


def _stop_pipeline_stream(run, state_location: str) -> None:
    """Stop a pipeline's driver on the cluster (a stop request, then SIGKILL of what is left of it):
    a driver left running would keep the cluster's cores from the tests after this one."""
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import stop_stream

    with contextlib.suppress(Exception), aws_env(run["s3"]):
        stop_stream(StateStore(state_location), "the test ends", timeout_s=60)
    for p in _stream_drivers(state_location):
        with contextlib.suppress(psutil.NoSuchProcess):
            jvm = p.parent()
            for q in (p, jvm):
                if q is not None:
                    q.send_signal(signal.SIGKILL)


@pytest.fixture(scope="module")
def pg_cluster_run(cluster_run, mariadb, postgres):
    """The template on the same cluster into the PostgreSQL sink, writers on throughout: its own
    source database, state location and PostgreSQL schema; the Spark connection's extra says that
    the cluster provides the sink's password (the MySQL password stays the file on the nodes)."""
    from tests.e2e.test_pipeline_dag import run_dag

    run = cluster_run
    work = run["work"] / "pg"
    work.mkdir()
    db = f"clpg_{os.getpid()}"
    mariadb.execute(f"CREATE DATABASE `{db}`")
    specs = [create_int_table(mariadb, db, 6_000, "orders"), create_composite_table(mariadb, db, 3_000)]
    schema = postgres.fresh_schema("cluster_")
    airflow_env.set_connection(
        PG_CONN_ID,
        "postgres",
        host="127.0.0.1",
        port=postgres.port,
        login=PG_USER,
        password=postgres.password,
        schema=PG_DATABASE,
    )
    host, port = run["cluster"].master_url.rsplit(":", 1)
    airflow_env.set_connection(
        "spark_default",
        "spark",
        host=host,
        port=int(port),
        extra={**run["spark_extra"], "mysqlcdc_cluster_provides_password": True},
    )
    state_location = f"s3://{BUCKET}/pg{os.getpid()}/state"
    conf = {
        "tables": [f"{db}.orders", f"{db}.tenant_items"],
        "state_location": state_location,
        "sink_type": "postgres",
        "sink_conn_id": PG_CONN_ID,
        "sink_options": {"schema": schema},
        "aws_conn_id": "aws_lake",
        "chunk_size": 2000,
        "rows_per_batch": 5000,
        "stream_options": run["conf"]["stream_options"],
    }
    watcher = CommandLineWatcher(("SparkSubmit", "binlog_stream", "SparkConnectServer", "DriverWrapper")).start()
    writers = [
        ConcurrentWriter(lambda: mariadb.connect(db), s, seed=71 + i, threads=1, pause_s=0.02).start()
        for i, s in enumerate(specs)
    ]
    pg_run = {
        "db": db,
        "work": work,
        "specs": specs,
        "conf": conf,
        "writers": writers,
        "watcher": watcher,
        "schema": schema,
        "log": work / "dag_test_output.log",
    }
    try:
        pg_run["dr"] = run_dag(conf, pg_run["log"])
        yield pg_run
    finally:
        for w in writers:
            w.stop()
        watcher.stop()
        _stop_pipeline_stream(run, state_location)
        airflow_env.set_connection("spark_default", "spark", host=host, port=int(port), extra=run["spark_extra"])
        postgres.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")


def _pg_problems(mariadb, postgres, pg_run, timeout_s: float = 180.0) -> str:
    from airflow_provider_mysqlcdc.cdc.model import TableId

    problems = []
    for spec in pg_run["specs"]:
        t = TableId(spec.database, spec.table)
        cols = list(spec.key_columns) + list(VALUE_COLS)
        problem = wait_until_equal(
            lambda: mysql_rows(mariadb, t, cols, spec.key_columns),
            lambda: postgres_rows(postgres, f"{t.database}__{t.table}", cols, spec.key_columns, pg_run["schema"]),
            timeout_s=timeout_s,
        )
        if problem:
            problems.append(f"{t}: {problem}")
    return "; ".join(problems)


def test_the_postgres_sink_on_the_cluster_equals_the_source_and_no_password_shows(
    cluster_run, pg_cluster_run, mariadb, postgres
):
    run, pg_run = cluster_run, pg_cluster_run
    state_location = pg_run["conf"]["state_location"]
    states = airflow_env.task_states(pg_run["dr"])
    output = pg_run["log"].read_text(errors="replace")
    assert pg_run["dr"].state == "success", (states, output[-3000:], run["cluster"].worker_logs())
    assert sum(1 for (task, _), _s in states.items() if task == "snapshot") >= 2, states

    # the stream's driver runs on a node (a worker's DriverWrapper JVM), not on the Airflow host
    status = _status(run, state_location)
    assert status is not None and status.host.startswith("spark-node-"), f"the driver runs on a node: {status}"
    drivers = _stream_drivers(state_location)
    assert len(drivers) == 1 and status.pid == drivers[0].pid, [d.cmdline() for d in drivers]
    assert "DriverWrapper" in " ".join(drivers[0].parent().cmdline())
    assert f"--password-file {PASSWORD_FILE}" in " ".join(drivers[0].cmdline()), drivers[0].cmdline()
    # its passwords come from the node: MySQL's from the file, the sink's from the node's environment
    environ = open(f"/proc/{drivers[0].pid}/environ", "rb").read().decode(errors="replace")
    assert f"PGPASSWORD={postgres.password}" in environ.split("\0")
    assert ROOT_PASSWORD not in environ and "AIRFLOW_CONN_" not in environ

    time.sleep(4)  # the writers go on; the stream follows them into PostgreSQL
    changes = sum(w.stop().total for w in pg_run["writers"])
    assert all(not w.errors for w in pg_run["writers"]), [w.errors for w in pg_run["writers"]]
    assert changes > 300, f"the writers changed rows throughout ({changes})"
    problem = _pg_problems(mariadb, postgres, pg_run)
    assert not problem, problem

    # no password on a command line (spark-submit, the Connect server, the driver), in what the
    # state location keeps or in the DAG's output
    secrets = (ROOT_PASSWORD, postgres.password)
    seen = pg_run["watcher"].matching("")
    assert any("PythonRunner" in c for c in seen), "the stream was submitted as Spark's Python runner"
    for line in seen:
        assert not any(s in line for s in secrets), line
    with aws_env(run["s3"]):
        from airflow_provider_mysqlcdc.cdc.state import StateStore

        state = StateStore(state_location)
        launch = state.read_json("stream/launch.json")
        assert launch["sink_conn_id"] == PG_CONN_ID, launch
        for rel in ("stream/launch.json", "stream/cluster_driver.json", "stream/status.json", "pipeline.json"):
            text = json.dumps(state.read_json(rel))
            assert not any(s in text for s in secrets), rel
    assert not any(s in output for s in secrets), "a password in the DAG's output"

    # stopped from Airflow: the watchdog DAG's stop request reaches the driver on its node
    res = airflow_env.run_template(
        ["watchdog", json.dumps({"state_location": state_location, "aws_conn_id": "aws_lake", "stop_stream": True})],
        pg_run["work"] / "watchdog_stop.log",
    )
    dr = airflow_env.dag_run("mysql_cdc_stream_watchdog", res["run_id"])
    assert airflow_env.task_states(dr)[("stream_health", -1)][0] == "skipped", airflow_env.task_states(dr)
    deadline = time.monotonic() + 30
    while _stream_drivers(state_location) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _stream_drivers(state_location), "the driver exited on the stop request"
    assert _status(run, state_location).state == "stopped"
