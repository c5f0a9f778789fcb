"""The DAG template as a user meets it: a real Airflow 3 (api-server, scheduler, dag-processor,
triggerer; LocalExecutor), the template copied into its DAGs folder, connections created with
``airflow connections add``, a private MariaDB with writers on, and a real Chromium clicking
through the UI. No ``dag.test()``: the scheduler runs every task, Spark jobs included.

In order (the module shares one Airflow): the form refuses chunk size 0 with a message; a
table that does not exist fails ``validate`` within a minute, naming it, with nothing written;
an initial load started from the form with only the table list changed, one snapshot batch
marked failed while it runs and then cleared from its task page, ends green with the sink
equal to the source; an ``ALTER TABLE`` under writers reaches the sink through the stream the
DAG started; a finished batch cleared in the grid while the stream runs is handed to it and
replaces its range; the stream's health and lag are read in the watchdog's task log.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from mysqlcdc_harness.airflow_env import REPO
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.sink_compare import delta_rows, mysql_rows, wait_until_equal
from mysqlcdc_harness.tables import VALUE_COLS, create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.ui, pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

DAG_ID = "mysql_cdc_pipeline"
WATCHDOG = "mysql_cdc_stream_watchdog"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ui-pipeline")


@pytest.fixture(scope="module")
def ui_dags_folder(work) -> Path:
    folder = work / "dags"
    folder.mkdir()
    shutil.copy(REPO / "dags" / "mysql_cdc_pipeline.py", folder)  # as the README says: copy the template
    return folder


@pytest.fixture(scope="module")
def ui_extra_env(work) -> dict[str, str]:
    return {"MYSQLCDC_STATE_ROOT": str(work / "state"), "MYSQLCDC_LAKE_ROOT": str(work / "lake")}


@pytest.fixture(scope="module")
def source(mariadb, airflow_ui, work):
    """A database with one table and the connections, as a user creates them."""
    db = f"ui_{int(time.time()) % 100000}"
    mariadb.execute(f"CREATE DATABASE `{db}`")
    spec = create_int_table(mariadb, db, 30_000, "orders")
    airflow_ui.add_connection(
        "mysql_cdc_default",
        "mysql_cdc",
        host="127.0.0.1",
        port=mariadb.port,
        login="root",
        password=ROOT_PASSWORD,
        schema=db,
        extra={"server_id_range": "5600-5620"},
    )
    airflow_ui.add_connection("spark_default", "spark", host="local[2]")
    yield {"db": db, "spec": spec, "server": mariadb}
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import stop_local_stream

    stop_local_stream(StateStore(str(work / "state" / "pipeline")))


def _state_of(airflow_api, run_id: str) -> dict[tuple[str, int], dict]:
    return {(t["task_id"], t["map_index"]): t for t in airflow_api.task_instances(DAG_ID, run_id)}


def test_chunk_size_zero_shows_a_message_and_is_not_triggered(airflow_api, browser, source):
    airflow_api.wait_for_dag(DAG_ID, timeout=90)
    before = len(airflow_api.dag_runs(DAG_ID))
    browser.open_trigger_form(DAG_ID)
    browser.open_section("Source")
    browser.screenshot("trigger-form")
    sections = [s["name"] for s in browser.sections()]
    assert sections[:5] == ["Source", "Sink", "Snapshot", "Stream", "Pipeline state"], sections
    assert "Danger zone: reset" in sections
    assert browser.trigger_button_enabled(), "the form must submit at its defaults"
    browser.set_field("chunk_size", 0)
    browser.submit_trigger(expect_success=False)
    error = browser.trigger_error_text()
    assert error and "chunk_size" in error, error
    browser.screenshot("chunk-size-zero-refused")
    browser.close_dialog()
    assert len(airflow_api.dag_runs(DAG_ID)) == before, "no run was created"


def test_a_table_that_does_not_exist_fails_validate_naming_it(airflow_api, browser, source, work):
    db = source["db"]
    state = work / "state-bad"
    browser.open_trigger_form(DAG_ID)
    browser.set_field("tables", ["orders", "no_such_table"])
    browser.set_field("state_location", str(state))
    t0 = time.monotonic()
    run_id = browser.submit_trigger()
    run = airflow_api.wait_for_run(DAG_ID, run_id, ["failed"], timeout=120)
    tis = _state_of(airflow_api, run_id)
    assert tis[("validate", -1)]["state"] == "failed" and tis[("validate", -1)]["try_number"] == 1, tis
    assert time.monotonic() - t0 < 60, "validate should fail within a minute (no retries)"
    assert tis[("plan", -1)]["state"] == "upstream_failed"
    log = browser.read_task_log(DAG_ID, run_id, "validate", wait_for="no_such_table")
    browser.screenshot("validate-names-the-table")
    assert f"ERROR - table pattern '{db}.no_such_table' matches no table on the server." in log, log[-3000:]
    assert "ERROR - Fix: check the database and table names" in log, log[-3000:]
    assert not state.exists(), "nothing may be written for a bad table list"
    assert run["state"] == "failed"


def test_initial_load_from_the_form_with_a_batch_failed_and_cleared(airflow_api, browser, source, work):
    db, spec, server = source["db"], source["spec"], source["server"]
    writer = ConcurrentWriter(lambda: server.connect(db), spec, seed=5, threads=1, pause_s=0.01).start()
    try:
        browser.open_trigger_form(DAG_ID)
        browser.set_field("tables", ["orders"])  # the only change: every other field keeps its default
        browser.screenshot("form-tables")
        run_id = browser.submit_trigger()
        run = airflow_api.dag_run(DAG_ID, run_id)
        assert run["conf"]["tables"] == ["orders"] and run["conf"]["sink_conn_id"] is None

        # The one snapshot batch is running: a user marks it failed from its task page.
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            snap = [t for k, t in _state_of(airflow_api, run_id).items() if k[0] == "snapshot" and k[1] >= 0]
            if (
                snap
                and snap[0]["state"] == "running"
                and "rows" in (snap[0].get("rendered_map_index") or "")
                and "Spark" in airflow_api.task_log(DAG_ID, run_id, "snapshot", snap[0]["map_index"])
            ):
                break  # running, named after its chunks and size (the label Airflow shows), Spark started
            time.sleep(1)
        else:
            pytest.fail(f"no snapshot task started running: {_state_of(airflow_api, run_id)}")
        index = snap[0]["map_index"]
        browser.open_task_instance(DAG_ID, run_id, "snapshot", index)
        browser.open_mark_as_dialog("failed")
        browser.screenshot("mark-running-batch-failed")
        browser.confirm_dialog()
        airflow_api.wait_for_run(DAG_ID, run_id, ["failed"], timeout=120)
        tis = _state_of(airflow_api, run_id)
        assert tis[("snapshot", index)]["state"] == "failed" and tis[("stream", -1)]["state"] == "upstream_failed"

        # Clear it, with Downstream as the dialog pre-selects it, so the stream task runs too.
        browser.open_task_instance(DAG_ID, run_id, "snapshot", index)
        browser.open_clear_dialog()
        affected = {(t, i) for t, i, _ in browser.affected_tasks()}
        assert ("snapshot", index) in affected and ("stream", -1) in affected, affected
        browser.screenshot("clear-with-downstream")
        browser.confirm_dialog()
        # The dialog may close before the clear is stored: wait for the new try, then the run's end.
        deadline = time.monotonic() + 60
        while _state_of(airflow_api, run_id)[("snapshot", index)]["try_number"] < 2:
            assert time.monotonic() < deadline, f"the clear did not start a new try: {_state_of(airflow_api, run_id)}"
            time.sleep(0.5)
        run = airflow_api.wait_for_run(DAG_ID, run_id, ["success", "failed"], timeout=360)
        tis = _state_of(airflow_api, run_id)
        assert run["state"] == "success", tis
        assert tis[("snapshot", index)]["try_number"] == 2
        log = browser.read_task_log(DAG_ID, run_id, "snapshot", index, wait_for="done:")
        browser.screenshot("snapshot-log")
        assert "progress:" in log or "reading " in log, log[-3000:]
        assert "MYSQLCDC_RESULT" not in log and " INFO SparkContext" not in log, log[-3000:]
        time.sleep(3)
    finally:
        writer.stop()
    from airflow_provider_mysqlcdc.cdc.model import TableId

    t = TableId(db, "orders")
    cols = list(spec.key_columns) + list(VALUE_COLS)
    problem = wait_until_equal(
        lambda: mysql_rows(server, t, cols, spec.key_columns),
        lambda: delta_rows(work / "lake", t, spec.key_columns),
        timeout_s=180,
    )
    assert not problem, problem


def test_an_alter_table_reaches_the_sink_through_the_stream_the_dag_started(source, work):
    """The stream the scheduler launched (default ``schema_change_behavior``, lenient) meets an
    ``ALTER TABLE ... ADD COLUMN`` under writers and keeps going: the Delta table gets the column,
    the rows that existed get its DEFAULT, and sink equals source with it."""
    from airflow_provider_mysqlcdc.cdc.model import TableId

    db, spec, server = source["db"], source["spec"], source["server"]
    writer = ConcurrentWriter(lambda: server.connect(db), spec, seed=9, threads=1, pause_s=0.01).start()
    try:
        time.sleep(2)
        server.execute("ALTER TABLE orders ADD COLUMN extra INT NULL DEFAULT 7", database=db)
        time.sleep(1)
        server.execute("UPDATE orders SET extra = id % 97 WHERE id % 10 = 0", database=db)
        time.sleep(3)
    finally:
        writer.stop()
    t = TableId(db, "orders")
    cols = list(spec.key_columns) + list(VALUE_COLS) + ["extra"]

    def sink():
        return {k: {c: r.get(c) for c in cols} for k, r in delta_rows(work / "lake", t, spec.key_columns).items()}

    problem = wait_until_equal(lambda: mysql_rows(server, t, cols, spec.key_columns), sink, timeout_s=180)
    assert not problem, problem
    server.execute("ALTER TABLE orders DROP COLUMN extra", database=db)  # the next tests see the first shape


def test_clearing_a_finished_batch_while_the_stream_runs_replaces_its_range(airflow_api, browser, source, work):
    """The grid's Clear on a finished snapshot map index while the scheduler-launched stream runs:
    the task reads its batch again, hands it to the stream and waits; it ends green saying the
    stream replaced its key ranges, the stream task (cleared with it) says the stream goes on,
    and rows garbled in the Delta table inside that range are right again, writers on."""
    from deltalake import DeltaTable

    from airflow_provider_mysqlcdc.cdc.model import TableId
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import running_local_stream, stop_local_stream

    db, spec, server = source["db"], source["spec"], source["server"]
    run_id = next(r["dag_run_id"] for r in airflow_api.dag_runs(DAG_ID) if r["state"] == "success")
    index = next(k[1] for k in _state_of(airflow_api, run_id) if k[0] == "snapshot" and k[1] >= 0)
    state = StateStore(str(work / "state" / "pipeline"))
    t = TableId(db, "orders")
    # a bad manual fix in the lake, made while the stream is stopped (its merge would conflict)
    assert running_local_stream(state) is not None
    stop_local_stream(state)
    DeltaTable(str(work / "lake" / db / "orders")).update(updates={"s": "'garbled'"}, predicate="id % 10 = 0")
    writer = ConcurrentWriter(lambda: server.connect(db), spec, seed=13, threads=1, pause_s=0.01).start()
    try:
        browser.open_task_instance(DAG_ID, run_id, "stream")  # its Clear starts the stream again
        browser.open_clear_dialog()
        browser.confirm_dialog()
        deadline = time.monotonic() + 240
        while running_local_stream(state) is None:
            assert time.monotonic() < deadline, _state_of(airflow_api, run_id)
            time.sleep(1)
        airflow_api.wait_for_run(DAG_ID, run_id, ["success"], timeout=240)
        tries = _state_of(airflow_api, run_id)[("snapshot", index)]["try_number"]
        browser.open_task_instance(DAG_ID, run_id, "snapshot", index)
        browser.open_clear_dialog()
        affected = {(task, i) for task, i, _ in browser.affected_tasks()}
        assert ("snapshot", index) in affected and ("stream", -1) in affected, affected
        browser.confirm_dialog()
        deadline = time.monotonic() + 60
        while _state_of(airflow_api, run_id)[("snapshot", index)]["try_number"] <= tries:
            assert time.monotonic() < deadline, f"the clear did not start a new try: {_state_of(airflow_api, run_id)}"
            time.sleep(0.5)
        run = airflow_api.wait_for_run(DAG_ID, run_id, ["success", "failed"], timeout=360)
        assert run["state"] == "success", _state_of(airflow_api, run_id)
        log = browser.read_task_log(DAG_ID, run_id, "snapshot", index, wait_for="key ranges in micro-batch")
        browser.screenshot("rerun-while-streaming")
        assert "the stream replaced batch" in log and "rows exact at" in log, log[-3000:]
        stream_log = airflow_api.task_log(DAG_ID, run_id, "stream", -1)
        assert "continues from its checkpoint" in stream_log, stream_log[-3000:]
        time.sleep(3)
    finally:
        writer.stop()
    cols = list(spec.key_columns) + list(VALUE_COLS)

    def sink():
        return {k: {c: r.get(c) for c in cols} for k, r in delta_rows(work / "lake", t, spec.key_columns).items()}

    problem = wait_until_equal(lambda: mysql_rows(server, t, cols, spec.key_columns), sink, timeout_s=180)
    assert not problem, problem


def test_the_stream_lag_can_be_read_in_the_ui(airflow_api, browser, source):
    # check now (0: at every run), as a user asking for a check would: the scheduled watchdog runs
    # every 5 minutes and may have checked moments ago, inside the default hourly interval
    run_id = airflow_api.trigger(WATCHDOG, {"consistency_every_s": 0})
    airflow_api.wait_for_run(WATCHDOG, run_id, ["success"], timeout=180)
    log = browser.read_task_log(WATCHDOG, run_id, "stream_health", wait_for="stream alive")
    browser.screenshot("watchdog-lag")
    line = next(ln for ln in log.splitlines() if "stream alive" in ln)
    assert "lag" in line and "last commit: micro-batch" in line, line
    tis = {t["task_id"]: t for t in airflow_api.task_instances(WATCHDOG, run_id)}
    assert sorted(tis) == ["consistency_check", "sink_maintenance", "stream_health"], sorted(tis)
    assert tis["sink_maintenance"]["state"] == "skipped", tis["sink_maintenance"]  # Iceberg only
    ti = tis["stream_health"]
    assert ti["state"] == "success"
    # the consistency check ran after it, through the same connections, and found the sink exact
    assert tis["consistency_check"]["state"] == "success", tis["consistency_check"]
    check = airflow_api.get(
        f"/dags/{WATCHDOG}/dagRuns/{run_id}/taskInstances/consistency_check/xcomEntries/return_value"
    )
    report = check["value"] if isinstance(check["value"], dict) else json.loads(check["value"])
    assert report["consistent"] is True and report["tables"], report
    assert all(t["state"] == "consistent" for t in report["tables"]), report["summary"]
    xcom = airflow_api.get(f"/dags/{WATCHDOG}/dagRuns/{run_id}/taskInstances/stream_health/xcomEntries/return_value")
    value = xcom["value"] if isinstance(xcom["value"], dict) else json.loads(xcom["value"])
    assert value["running"] is True and "lag_s" in value
    # the same figures as asset events: the health asset's, and one per captured sink table on the
    # pipeline's alias (what a downstream DAG scheduled on them sees)
    events = airflow_api.get("/assets/events", source_dag_id=WATCHDOG, source_run_id=run_id, limit=100)["asset_events"]
    by_uri = {e["uri"]: e["extra"] for e in events}
    health = by_uri.get(f"mysqlcdc://{DAG_ID}/stream_health")
    assert health and health["running"] is True and "lag_s" in health and health["committed_offset"], by_uri
    tables = {uri: extra for uri, extra in by_uri.items() if uri.startswith("file://")}
    assert any(uri.endswith("/orders") for uri in tables), by_uri
    assert all(extra.get("committed_offset") and extra.get("table") for extra in tables.values()), tables
