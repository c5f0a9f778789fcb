"""The DAG template end to end under ``dag.test()``: real Airflow (SQLite metadata DB), real
MariaDB, real ``spark-submit`` in local mode, the Delta sink, writers running throughout.

One run is shared by several tests (each DAG run costs minutes of spark-submits): one
snapshot task fails and only its map index is cleared and rerun, the sink equals the
source, the stream task is idempotent, a killed stream comes back through the sensor, a
finished batch cleared while the stream runs is handed to it and replaces its range, and
the password appears in no log, XCom or command line.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.processes import CommandLineWatcher
from mysqlcdc_harness.sink_compare import delta_rows, mysql_rows, wait_until_equal
from mysqlcdc_harness.tables import VALUE_COLS, create_composite_table, create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def _conf(db: str, work: Path, **kw) -> dict:
    conf = {
        "tables": [f"{db}.orders", "tenant_items"],
        "state_location": str(work / "state"),
        "sink_type": "delta",
        "sink_options": {"root": str(work / "lake")},
        "chunk_size": 4000,
        "rows_per_batch": 25_000,
        # spark-submit per batch (clusters without Spark Connect): the fixture kills one batch's job;
        # the shared Spark Connect application is tests/e2e/test_connect_runtime.py's
        "spark_runtime": "submit",
        "stream_options": {"max_events_per_batch": 20000, "heartbeat_s": 1.0, "trigger_interval_s": 0.5},
    }
    conf.update(kw)
    return conf


def _use_source(server, db: str) -> None:
    airflow_env.migrate()
    airflow_env.set_connection(
        "mysql_cdc_default",
        "mysql_cdc",
        host="127.0.0.1",
        port=server.port,
        login="root",
        password=ROOT_PASSWORD,
        schema=db,
        extra={"server_id_range": "5400-5420"},
    )
    airflow_env.set_connection("spark_default", "spark", host="local[2]")


def run_dag(conf: dict, log_path: Path):
    """``dag.test()`` of the template in a subprocess (see harness/mysqlcdc_harness/airflow_runner.py)."""
    res = airflow_env.run_template(["test", json.dumps(conf)], log_path)
    return airflow_env.dag_run("mysql_cdc_pipeline", res["run_id"])


def clear_and_run(run_id: str, task_ids: list, log_path: Path):
    res = airflow_env.run_template(["clear", run_id, json.dumps(task_ids)], log_path)
    return airflow_env.dag_run("mysql_cdc_pipeline", res["run_id"])


def _sink_equals_source(server, work: Path, specs, timeout_s: float = 300.0) -> str:
    problems = []
    for spec in specs:
        from airflow_provider_mysqlcdc.cdc.model import TableId

        t = TableId(spec.database, spec.table)
        cols = list(spec.key_columns) + list(VALUE_COLS)
        problem = wait_until_equal(
            lambda: mysql_rows(server, t, cols, spec.key_columns),
            lambda: delta_rows(work / "lake", t, spec.key_columns),
            timeout_s=timeout_s,
        )
        if problem:
            problems.append(f"{t}: {problem}")
    return "; ".join(problems)


def _stop_stream(state_location: str) -> None:
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import stop_local_stream

    stop_local_stream(StateStore(state_location))


# spark-submit execs spark-class, which execs the JVM running SparkSubmit (one pid per job);
# spark-class's subshell and the short-lived launcher JVM it runs name SparkSubmit too.
SUBMIT = "org.apache.spark.deploy.SparkSubmit"
LAUNCHER = "org.apache.spark.launcher.Main"
JVM = "-cp "
VICTIM = "batch-0001"


@pytest.fixture(scope="module")
def pipeline_run(mariadb, tmp_path_factory):
    """One DAG run, writers going throughout, in which one snapshot task fails (its Spark job
    is killed mid-read: a lost node, an OOM kill) and then that map index alone is cleared and
    run again, as from the grid's "Clear" on one map index; the stream then starts."""
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from airflow_provider_mysqlcdc.hooks.spark_job import kill_process_tree

    db = f"e2e_{os.getpid()}"
    work = tmp_path_factory.mktemp("e2e")
    mariadb.execute(f"CREATE DATABASE `{db}`")
    specs = [create_int_table(mariadb, db, 60_000, "orders"), create_composite_table(mariadb, db, 20_000)]
    _use_source(mariadb, db)
    dag = airflow_env.load_template_dag()
    conf = _conf(db, work)
    killed: list[str] = []

    def kill_victim_once(pid: int, line: str) -> None:
        if (
            not killed
            and SUBMIT in line
            and JVM in line
            and LAUNCHER not in line
            and conf["state_location"] in line
            and f"--batch-id {VICTIM}" in line
        ):
            killed.append(line)
            time.sleep(4)
            kill_process_tree(pid)

    watcher = CommandLineWatcher(
        ("spark-submit", "SparkSubmit", "snapshot_chunks", "binlog_stream"), on_new=kill_victim_once
    ).start()
    writers = [
        ConcurrentWriter(lambda: mariadb.connect(db), s, seed=11 + i, threads=1, pause_s=0.003).start()
        for i, s in enumerate(specs)
    ]
    state = StateStore(conf["state_location"])
    try:
        dr = run_dag(conf, work / "dag_test_output.log")
        first = {
            "states": airflow_env.task_states(dr),
            "killed": list(killed),
            "victim_result": state.read_batch_result(VICTIM),
            "others": {r["batch_id"]: r for r in state.batch_results()},
        }
        failed = [k for k, v in first["states"].items() if v[0] == "failed"]
        victim_index = failed[0][1] if failed else None
        if victim_index is not None:
            dr = clear_and_run(dr.run_id, [["snapshot", victim_index], "stream"], work / "rerun_output.log")
        time.sleep(5)  # the stream keeps up with the writers for a while
        changes = sum(w.stop().total for w in writers)
        writers.clear()
        yield {
            "dag": dag,
            "dr": dr,
            "db": db,
            "work": work,
            "specs": specs,
            "conf": conf,
            "first": first,
            "victim_index": victim_index,
            "changes": changes,
            "watcher": watcher,
            "server": mariadb,
        }
    finally:
        for w in writers:
            w.stop()
        watcher.stop()
        _stop_stream(conf["state_location"])


def test_a_failed_snapshot_task_left_nothing_and_failed_the_run(pipeline_run):
    first = pipeline_run["first"]
    assert first["killed"], "the victim batch's Spark job was never seen"
    failed = [k for k, v in first["states"].items() if v[0] == "failed"]
    assert len(failed) == 1 and failed[0][0] == "snapshot", first["states"]
    assert first["states"][("stream", -1)][0] == "upstream_failed", first["states"]
    assert first["victim_result"] is None  # a failed job leaves no result file
    assert first["others"] and VICTIM not in first["others"]


def test_clearing_that_map_index_alone_reran_only_its_batch(pipeline_run):
    from airflow_provider_mysqlcdc.cdc.state import StateStore

    states = airflow_env.task_states(pipeline_run["dr"])
    index = pipeline_run["victim_index"]
    assert pipeline_run["dr"].state == "success", states
    assert states[("snapshot", index)] == ("success", 2)
    assert all(v == ("success", 1) for k, v in states.items() if k[0] == "snapshot" and k[1] != index)
    # Only the victim's chunks were read again: one Spark job per other batch in all.
    others = pipeline_run["first"]["others"]
    watcher = pipeline_run["watcher"]
    mine = pipeline_run["conf"]["state_location"]  # not another pipeline's jobs on this machine
    per_batch = {
        b: len(watcher.processes(SUBMIT, JVM, mine, f"--batch-id {b}", unless=LAUNCHER)) for b in [*others, VICTIM]
    }
    assert per_batch[VICTIM] == 2 and all(n == 1 for b, n in per_batch.items() if b != VICTIM), per_batch
    state = StateStore(pipeline_run["conf"]["state_location"])
    for b, before in others.items():
        assert state.read_batch_result(b) == before  # untouched
    assert VICTIM in {f.batch_id for f in state.read_finished()}


def test_dag_run_loads_and_streams_with_the_sink_equal_to_the_source(pipeline_run):
    dr, work = pipeline_run["dr"], pipeline_run["work"]
    states = airflow_env.task_states(dr)
    assert dr.state == "success", states
    snapshots = {k: v for k, v in states.items() if k[0] == "snapshot"}
    assert len(snapshots) >= 3, states  # several mapped Spark jobs
    assert all(v[0] == "success" for v in snapshots.values())
    assert pipeline_run["changes"] > 500
    assert not _sink_equals_source(pipeline_run["server"], work, pipeline_run["specs"])


def test_snapshot_xcoms_carry_high_watermarks_and_the_stream_starts_at_their_minimum(pipeline_run):
    from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
    from airflow_provider_mysqlcdc.cdc.state import StateStore

    dag, dr = pipeline_run["dag"], pipeline_run["dr"]
    xcoms = airflow_env.xcom_values(dag.dag_id, dr.run_id, "snapshot")
    assert len(xcoms) >= 3
    for summary in xcoms.values():
        assert summary["high_watermark"]["file"] and summary["rows"] > 0 and summary["batch_label"]
    state = StateStore(pipeline_run["conf"]["state_location"])
    finished = state.read_finished()
    assert sorted(f.batch_id for f in finished) == sorted(x["batch_id"] for x in xcoms.values())
    assert min(f.high_watermark for f in finished) == min(
        BinlogOffset.from_dict(x["high_watermark"]) for x in xcoms.values()
    )
    stream = airflow_env.xcom_values(dag.dag_id, dr.run_id, "stream")[-1]
    assert stream["running"] and stream["batch_id"] is not None
    # the task's extra link: the stream driver's Spark UI, as its status recorded it
    link = airflow_env.xcom_values(dag.dag_id, dr.run_id, "stream", key="_link_StreamSparkUiLink")[-1]
    assert link.startswith("http://") and link == state.read_json("stream/status.json")["ui_url"], link


def test_map_indexes_are_named_after_their_tables_and_chunks(pipeline_run):
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    dr = pipeline_run["dr"]
    with create_session() as session:
        names = [
            ti.rendered_map_index
            for ti in session.query(TaskInstance).filter_by(dag_id=dr.dag_id, run_id=dr.run_id, task_id="snapshot")
        ]
    assert names and all(n and "chunk" in n for n in names), names
    assert any(n.startswith(f"{pipeline_run['db']}.orders chunks ") for n in names), names


def test_stream_task_run_again_leaves_one_stream_and_a_killed_one_comes_back(pipeline_run):
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from airflow_provider_mysqlcdc.sensors.stream import MySqlCdcStreamSensor
    from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import running_local_stream

    _dag, dr, work, server = pipeline_run["dag"], pipeline_run["dr"], pipeline_run["work"], pipeline_run["server"]
    state = StateStore(pipeline_run["conf"]["state_location"])
    first = running_local_stream(state)
    assert first is not None
    dr2 = clear_and_run(dr.run_id, ["stream"], work / "rerun_stream.log")
    assert airflow_env.task_states(dr2)[("stream", -1)][0] == "success"
    again = running_local_stream(state)
    assert again is not None and again.pid == first.pid  # no second stream
    assert "already running" in (work / "rerun_stream.log").read_text()

    # Kill it hard, write more, and let the watchdog sensor bring it back from its checkpoint.
    os.killpg(first.pgid, signal.SIGKILL)
    deadline = time.time() + 20
    while running_local_stream(state) is not None and time.time() < deadline:
        time.sleep(0.2)
    assert running_local_stream(state) is None
    specs = pipeline_run["specs"]
    writers = [
        ConcurrentWriter(lambda: server.connect(pipeline_run["db"]), s, seed=31 + i, threads=1, pause_s=0.003).start()
        for i, s in enumerate(specs)
    ]
    time.sleep(3)
    sensor = MySqlCdcStreamSensor(
        task_id="stream_health", state_location=str(state.location), max_lag_s=None, relaunch=True
    )
    result = sensor.poke({})
    for w in writers:
        w.stop()
    assert result.is_done and result.xcom_value["running"]
    back = running_local_stream(state)
    assert back is not None and back.pid != first.pid
    assert not _sink_equals_source(server, work, specs)


def test_clearing_a_finished_batch_after_the_stream_started_replaces_its_range_exactly(pipeline_run):
    """Once the stream runs it is the sink's only writer: a cleared snapshot task reads its batch
    again (one more Spark job), hands the rows to the stream and waits until the stream replaced
    the batch's key range. Rows garbled in the sink inside that range (a bad manual fix) are
    right again, and the sink equals the source with writers on throughout."""
    from deltalake import DeltaTable

    from airflow_provider_mysqlcdc.cdc.chunks import KeyRange
    from airflow_provider_mysqlcdc.cdc.model import TableId
    from airflow_provider_mysqlcdc.cdc.state import StateStore

    dr, work, server = pipeline_run["dr"], pipeline_run["work"], pipeline_run["server"]
    state = StateStore(pipeline_run["conf"]["state_location"])
    orders = TableId(pipeline_run["db"], "orders")
    other = next(
        b
        for b, r in pipeline_run["first"]["others"].items()
        if any(KeyRange.from_dict(x).table_id == orders for x in r["ranges"])
    )
    index = next(
        k[1]
        for k in airflow_env.task_states(dr)
        if k[0] == "snapshot"
        and (airflow_env.xcom_values(dr.dag_id, dr.run_id, "snapshot").get(k[1]) or {}).get("batch_id") == other
    )
    (rng,) = [
        KeyRange.from_dict(x)
        for x in state.read_batch_result(other)["ranges"]
        if KeyRange.from_dict(x).table_id == orders
    ]
    where = " AND ".join(
        [*([f"id >= {rng.start[0]}"] if rng.start else []), *([f"id < {rng.end[0]}"] if rng.end else [])]
    )
    # Damaged while the stream is stopped (its merge and this update would conflict), then relaunched.
    from airflow_provider_mysqlcdc.sensors.stream import MySqlCdcStreamSensor

    _stop_stream(str(state.location))
    DeltaTable(str(work / "lake" / orders.database / orders.table)).update(
        updates={"s": "'garbled'"}, predicate=f"{where} AND id % 10 = 0"
    )
    assert (
        MySqlCdcStreamSensor(task_id="stream_health", state_location=str(state.location), max_lag_s=None, relaunch=True)
        .poke({})
        .is_done
    )
    watcher = pipeline_run["watcher"]
    jobs_before = len(watcher.processes(SUBMIT, JVM, str(state.location), f"--batch-id {other}", unless=LAUNCHER))
    specs = pipeline_run["specs"]
    writers = [
        ConcurrentWriter(lambda: server.connect(pipeline_run["db"]), s, seed=51 + i, threads=1, pause_s=0.003).start()
        for i, s in enumerate(specs)
    ]
    log = work / "rerun_after_stream.log"
    try:
        # with the stream task, as the UI's Clear (Downstream pre-selected) does
        dr2 = clear_and_run(dr.run_id, [["snapshot", index], "stream"], log)
    finally:
        for w in writers:
            w.stop()
    assert airflow_env.task_states(dr2)[("stream", -1)][0] == "success"
    state_now, tries = airflow_env.task_states(dr2)[("snapshot", index)]
    text = log.read_text(errors="replace")
    assert state_now == "success", (state_now, tries, text[-3000:])
    assert f"the stream replaced batch {other}'s key ranges in micro-batch" in text, text[-3000:]
    assert (
        len(watcher.processes(SUBMIT, JVM, str(state.location), f"--batch-id {other}", unless=LAUNCHER))
        == jobs_before + 1
    ), "one Spark job reads the batch again"
    assert state.read_batch_result(other)["handoff"]
    health = MySqlCdcStreamSensor(
        task_id="stream_health", state_location=str(state.location), max_lag_s=None, relaunch=False
    ).poke({})
    taken = health.xcom_value["resnapshots"]
    assert taken["pending"] == [] and taken["applied"][-1]["batch"] == other and taken["applied"][-1]["rows"] > 0
    assert not _sink_equals_source(server, work, specs)


def test_runs_with_a_longer_then_a_shorter_table_list_add_and_remove_a_table_while_streaming(pipeline_run):
    """A DAG run whose table list names one more table plans and reads only that table, hands it
    to the running stream (no reset, no other batch read again), and the stream captures it from
    then on. A run with the first list again removes it: the stream stops capturing it and its
    sink table keeps what it held. Writers on every table throughout."""
    from airflow_provider_mysqlcdc.cdc.model import TableId
    from airflow_provider_mysqlcdc.cdc.state import StateStore

    _dr, work, server, db = pipeline_run["dr"], pipeline_run["work"], pipeline_run["server"], pipeline_run["db"]
    state = StateStore(pipeline_run["conf"]["state_location"])
    assert state.stream_started()
    refunds = create_int_table(server, db, 12_000, "refunds")
    specs = [*pipeline_run["specs"], refunds]
    batches_before = {b.batch_id for b in state.read_plan().batches}
    watcher = pipeline_run["watcher"]
    reads_before = len(watcher.processes(SUBMIT, JVM, str(state.location), "--batch-id", unless=LAUNCHER))
    writers = [
        ConcurrentWriter(lambda: server.connect(db), s, seed=71 + i, threads=1, pause_s=0.003).start()
        for i, s in enumerate(specs)
    ]
    wider = _conf(db, work, tables=[f"{db}.orders", "tenant_items", "refunds"])
    try:
        dr2 = run_dag(wider, work / "add_table_output.log")
    finally:
        for w in writers:
            w.stop()
    states = airflow_env.task_states(dr2)
    assert all(v[0] == "success" for v in states.values()), states
    (reload,) = airflow_env.xcom_values(dr2.dag_id, dr2.run_id, "plan", key="reload").values()
    assert reload["tables_added"] == [f"{db}.refunds"] and reload["stream_running"], reload
    new = [b for b in state.read_plan().batches if b.batch_id not in batches_before]
    assert new and all(b.tables == (TableId(db, "refunds"),) for b in new)
    assert sorted(reload["read"]) == sorted(b.batch_id for b in new), reload
    jobs = len(watcher.processes(SUBMIT, JVM, str(state.location), "--batch-id", unless=LAUNCHER)) - reads_before
    assert jobs == len(new), f"{jobs} snapshot Spark jobs for {len(new)} new batches: no other batch is read again"
    assert all(state.read_batch_result(b.batch_id)["handoff"] for b in new)
    assert not _sink_equals_source(server, work, specs)

    # the first list again: refunds leaves the pipeline; its sink table stays as it was
    narrower = _conf(db, work)
    dr3 = run_dag(narrower, work / "remove_table_output.log")
    (reload,) = airflow_env.xcom_values(dr3.dag_id, dr3.run_id, "plan", key="reload").values()
    assert reload["tables_removed"] == [f"{db}.refunds"] and reload["read"] == [], reload
    t = TableId(db, "refunds")
    cols = ["id", *VALUE_COLS]
    deadline = time.time() + 120
    while "not read any more" not in (work / "state" / "stream" / "stream.log").read_text(errors="replace"):
        assert time.time() < deadline, "the stream did not start again without refunds"
        time.sleep(1)
    held = delta_rows(work / "lake", t, ("id",))
    server.execute("UPDATE refunds SET s = 'after removal' WHERE id % 10 = 0", database=db)
    writers = [
        ConcurrentWriter(lambda: server.connect(db), s, seed=81 + i, threads=1, pause_s=0.003).start()
        for i, s in enumerate(pipeline_run["specs"])
    ]
    time.sleep(5)
    for w in writers:
        w.stop()
    assert not _sink_equals_source(server, work, pipeline_run["specs"])
    assert delta_rows(work / "lake", t, ("id",)) == held, "a removed table's sink table is left as it was"
    assert mysql_rows(server, t, cols, ("id",)) != {k: {c: r[c] for c in cols} for k, r in held.items()}


def test_the_password_appears_in_no_log_xcom_or_command_line(pipeline_run):
    dag, dr, work = pipeline_run["dag"], pipeline_run["dr"], pipeline_run["work"]
    secret = ROOT_PASSWORD
    places: dict[str, str] = {}
    for p in [*work.glob("*.log"), *airflow_env.task_log_files(dag.dag_id)]:
        places[str(p)] = p.read_text(errors="replace")
    state_dir = Path(pipeline_run["conf"]["state_location"])
    for p in state_dir.rglob("*"):
        if p.is_file() and p.suffix in (".json", ".log", "") and p.stat().st_size < 5_000_000:
            places[str(p)] = p.read_text(errors="replace")
    for task_id in ("validate", "plan", "snapshot", "stream"):
        places[f"xcom {task_id}"] = json.dumps(airflow_env.xcom_values(dag.dag_id, dr.run_id, task_id), default=str)
    places["rendered fields"] = airflow_env.rendered_fields_text(dag.dag_id, dr.run_id)
    cmdlines = pipeline_run["watcher"].seen
    assert any("snapshot_chunks" in c for c in cmdlines) and any("binlog_stream" in c for c in cmdlines)
    places["command lines"] = "\n".join(cmdlines)
    assert "Spark-Submit cmd" in places[str(work / "dag_test_output.log")]
    leaked = [where for where, text in places.items() if secret in text]
    assert not leaked, f"the MySQL password appears in: {leaked}"
