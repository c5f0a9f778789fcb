"""The stream job's control loop: a stop request in the state location stops the query between
micro-batches and leaves a mark the watchdog honours; a restart request restarts it. (A fake
query; the real one on a cluster node is in tests/e2e/test_spark_cluster.py.)"""

from __future__ import annotations

import logging
import threading

from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.jobs.binlog_stream import _run_until_stopped


class FakeQuery:
    def __init__(self) -> None:
        self.stopped = False
        self.status = {"isTriggerActive": False}

    def awaitTermination(self, timeout: float) -> bool:
        return False

    def stop(self) -> None:
        self.stopped = True


def test_a_stop_request_stops_the_query_and_marks_it(tmp_path):
    state = StateStore(str(tmp_path / "state"))
    state.request_stream_stop("maintenance window")
    q = FakeQuery()
    again = _run_until_stopped(q, threading.Event(), logging.getLogger("t"), state=state)
    assert again is False and q.stopped
    assert state.read_json(state.STOPPED_ON_REQUEST)["reason"] == "maintenance window"
    assert state.take_restart_request() is None, "the request was taken"


def test_a_launch_clears_an_old_stop_request_and_mark(tmp_path):
    state = StateStore(str(tmp_path / "state"))
    state.request_stream_stop("old")
    state.write_json(state.STOPPED_ON_REQUEST, {"reason": "old"})
    state.clear_stream_requests()
    assert not state.exists(state.RESTART_REQUEST) and not state.exists(state.STOPPED_ON_REQUEST)


def test_a_restart_request_restarts_the_query(tmp_path):
    from airflow_provider_mysqlcdc.spark.stream.tables.restart import RESTART

    state = StateStore(str(tmp_path / "state"))
    state.request_stream_restart("tables removed")
    q = FakeQuery()
    try:
        assert _run_until_stopped(q, threading.Event(), logging.getLogger("t"), state=state) is True
        assert q.stopped and not state.exists(state.STOPPED_ON_REQUEST)
    finally:
        RESTART.clear()
