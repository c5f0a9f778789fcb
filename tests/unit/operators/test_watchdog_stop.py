"""Stopping a stream from the Airflow UI: the watchdog DAG triggered with stop_stream."""

from __future__ import annotations

import pytest
from airflow.exceptions import AirflowSkipException

from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.hooks.stream import LAUNCH_REL
from airflow_provider_mysqlcdc.sensors.stream import MySqlCdcStreamSensor


def test_the_watchdog_dag_offers_stop_stream_in_its_form():
    from airflow_provider_mysqlcdc.pipelines.dag_builder import build_pipeline_dags

    _, watchdog = build_pipeline_dags("p_stop", settings={"tables": ["shop.orders"], "state_location": "/tmp/x"})
    assert watchdog.params["stop_stream"] is False
    assert watchdog.get_task("stream_health").stop == "{{ params.stop_stream }}"


@pytest.mark.parametrize("flag", [True, "True", "true"])
def test_stop_requests_the_stop_and_leaves_it_stopped(tmp_path, flag):
    state = StateStore(str(tmp_path / "state"))
    state.write_json(LAUNCH_REL, {"mysql_cdc_conn_id": "src"})
    sensor = MySqlCdcStreamSensor(task_id="stream_health", state_location=state.location, stop=flag)
    with pytest.raises(AirflowSkipException, match="stays stopped until the pipeline's stream task runs again"):
        sensor.poke({})
    assert "stop_stream" in state.read_json(state.STOPPED_ON_REQUEST)["reason"]
