"""Smoke test of the browser-test machinery against a real Airflow 3: log in, fill the trigger
form of a tiny DAG (a client-side and a server-side validation error on the way), trigger it,
wait for the run over REST, and read the task's log in the UI.
"""

from __future__ import annotations

import json
import textwrap
import time

import pytest

pytestmark = pytest.mark.ui

DAG_ID = "mysqlcdc_ui_smoke"
MARKER = "UI-SMOKE-DONE"

DAG_FILE = textwrap.dedent(f'''
    from __future__ import annotations

    import pendulum
    from airflow.sdk import Param, dag, task


    @dag(dag_id="{DAG_ID}", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False,
         params={{
             "label": Param("", type=["null", "string"], title="Label", description="Free text, may be empty."),
             "batch_size": Param(8096, type="integer", minimum=1, title="Batch size"),
             "lines": Param(120, type="integer", exclusiveMinimum=0, title="Log lines", section="Checks"),
         }})
    def {DAG_ID}():
        @task
        def report(params=None):
            for i in range(params["lines"]):
                print(f"line {{i}} of the smoke task")
            print(f"{MARKER} batch_size={{params['batch_size']}} label={{params['label']}}")
            return params["batch_size"]

        report()


    {DAG_ID}()
''')


@pytest.fixture(scope="module")
def ui_dags_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ui-smoke-dags")
    (folder / f"{DAG_ID}.py").write_text(DAG_FILE)
    return folder


def test_trigger_form_run_and_log(airflow_ui, airflow_api, browser):
    t0 = time.monotonic()
    airflow_api.wait_for_dag(DAG_ID, timeout=60)
    timings = {"dag_listed_s": time.monotonic() - t0}

    browser.open_trigger_form(DAG_ID)
    browser.screenshot("smoke-trigger-form")
    assert [s["name"] for s in browser.sections()] == ["Run Parameters", "Checks", "Advanced Options"]
    assert browser.field_names() == ["label", "batch_size", "lines"]
    assert browser.field_kind("batch_size") == "number"
    assert browser.field_kind("Label") == "text"  # by title works too
    assert browser.get_field("batch_size") == 8096
    assert browser.trigger_button_enabled()

    # The number input knows ``minimum`` only as a bound: 0 is clamped to 1 when the field loses
    # the focus, without a message (Airflow 3.3.2).
    browser.set_field("batch_size", 0)
    browser.blur()
    assert browser.get_field("batch_size") == 1
    assert browser.field_error_text("batch_size") is None

    # An empty non-nullable field is what the form itself rejects: message + Trigger disabled.
    browser.set_field("batch_size", None)
    assert browser.wait_field_error("batch_size") == "This field is required"
    assert browser.field_invalid("batch_size")
    assert not browser.trigger_button_enabled()
    assert {s["name"]: s["has_error"] for s in browser.sections()}["Run Parameters"]
    browser.screenshot("batch-size-required")

    browser.set_field("batch_size", 42)
    assert browser.field_error_text("batch_size") is None
    assert browser.trigger_button_enabled()

    # exclusiveMinimum is checked by the server only: the dialog stays open with its message.
    browser.set_field("lines", 0)
    assert browser.field_error_text("lines") is None and browser.trigger_button_enabled()
    assert browser.submit_trigger(expect_success=False) is None
    error = browser.trigger_error_text()
    assert error and "Invalid input for param lines" in error, error
    browser.screenshot("lines-rejected-by-server")

    browser.set_field("lines", 120)
    browser.set_field("label", "from the UI")
    assert browser.get_field("label") == "from the UI"
    browser.screenshot("form-filled")
    t1 = time.monotonic()
    run_id = browser.submit_trigger()
    browser.screenshot("run-page")
    assert run_id, "the UI did not open the new run"

    run = airflow_api.dag_run(DAG_ID, run_id)
    assert run["conf"] == {"label": "from the UI", "batch_size": 42, "lines": 120}, run["conf"]
    assert run["logical_date"] is not None  # the form sends its Logical Date
    run = airflow_api.wait_for_run(DAG_ID, run_id, ["success"], timeout=120)
    timings["trigger_to_success_s"] = time.monotonic() - t1

    (ti,) = airflow_api.task_instances(DAG_ID, run_id)
    assert (ti["task_id"], ti["map_index"], ti["state"]) == ("report", -1, "success")
    assert f"{MARKER} batch_size=42 label=from the UI" in airflow_api.task_log(DAG_ID, run_id, "report")

    browser.open_run(DAG_ID, run_id)
    browser.grid_cell(run_id, "report")
    browser.screenshot("grid")
    t2 = time.monotonic()
    log = browser.read_task_log(DAG_ID, run_id, "report", wait_for=MARKER)
    timings["ui_log_read_s"] = time.monotonic() - t2
    browser.screenshot("task-log")
    assert f"{MARKER} batch_size=42 label=from the UI" in log, log[-2000:]
    # Every line, not just those in view: the log list is virtualized and was scrolled through.
    assert all(f"line {i} of the smoke task" in log for i in (0, 60, 119)), log[-2000:]

    timings["test_s"] = time.monotonic() - t0
    (browser.artifacts / "test-timings.json").write_text(json.dumps(timings, indent=2))
