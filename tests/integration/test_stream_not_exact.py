"""A stream that can no longer be exact stops loudly (real MariaDB, real stream job, Delta).

``SET GLOBAL binlog_format = 'STATEMENT'`` while the stream runs, writers on: their changes
reach the binlog as statements, without rows. Before, the reader took them for DDL and
skipped them while every health signal said fine. Now the stream stops at the first one,
its status says why (offset, statement, fix), the sink holds exactly what was committed
before it, and the watchdog's sensor fails: first on the server's setting, then, with the
setting fixed, on the stopped stream, which it does not relaunch (it would stop again).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysqlcdc._airflow_compat import AirflowFailException
from airflow_provider_mysqlcdc.cdc.chunks import FinishedBatch, KeyRange
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import (
    launch_local_stream,
    log_tail,
    running_local_stream,
    wait_for_first_commit,
)
from airflow_provider_mysqlcdc.spark.runtime.stream_status import read_status
from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.sink_compare import delta_rows, mysql_rows, wait_until_equal
from mysqlcdc_harness.tables import VALUE_COLS, VALUE_FILL, create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def _wait(pred, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while not pred():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


COLS = ["id", *VALUE_COLS]


@dataclass
class _Stream:
    """A Delta pipeline of one ``orders`` table whose rows all come through the stream (an empty
    snapshot at the head), written out for the stream job."""

    spec: Any
    table: TableId
    config: PipelineConfig
    cfg_path: Path
    state: StateStore

    def sink(self, lake: Path) -> dict:
        return {k: {c: r[c] for c in COLS} for k, r in delta_rows(lake, self.table, ("id",)).items()}


def _stream_pipeline(mariadb, db: str, tmp_dir: Path, name: str, ids: str, rows: int) -> _Stream:
    spec = create_int_table(mariadb, db, rows, "orders")
    t = TableId(db, "orders")
    src = mariadb.source_config(server_id_range=ids, password=ROOT_PASSWORD)
    config = PipelineConfig(
        name=name,
        source=src,
        include=(str(t),),
        state_location=str(tmp_dir / "state"),
        sink=SinkConfig("delta", {"root": str(tmp_dir / "lake")}),
        stream=StreamOptions(max_events_per_batch=2000, heartbeat_s=1.0, trigger_interval_s=0.5),
    )
    cfg_path = tmp_dir / "pipeline.json"
    cfg_path.write_text(config.to_json())
    state = StateStore(config.state_location)
    mariadb.execute("DELETE FROM orders", database=db)
    state.write_finished(
        [FinishedBatch("all", (KeyRange(t, None, None, True),), BinlogOffset(*mariadb.master_status()))]
    )
    return _Stream(spec, t, config, cfg_path, state)


def test_statement_logged_changes_stop_the_stream_and_fail_the_watchdog(mariadb, fresh_db, tmp_dir):
    from airflow_provider_mysqlcdc.sensors.stream import MySqlCdcStreamSensor

    p = _stream_pipeline(mariadb, fresh_db, tmp_dir, "notexact", "6700-6720", 2000)
    spec, t, config, cfg_path, state = p.spec, p.table, p.config, p.cfg_path, p.state
    # Every row comes through the stream: an empty snapshot at the head, then the table refilled.
    mariadb.execute(f"INSERT INTO orders SELECT seq * 2, {', '.join(VALUE_FILL)} FROM seq_1_to_500", database=fresh_db)
    airflow_env.set_connection(
        "notexact_src",
        "mysql_cdc",
        host="127.0.0.1",
        port=mariadb.port,
        login="root",
        password=ROOT_PASSWORD,
        extra={"server_id_range": "6700-6720"},
    )
    airflow_env.set_connection("spark_default", "spark", host="local[2]")
    cols = COLS
    sensor = MySqlCdcStreamSensor(
        task_id="stream_health", state_location=config.state_location, mysql_cdc_conn_id="notexact_src", relaunch=True
    )

    def sink():
        return p.sink(tmp_dir / "lake")

    proc = launch_local_stream(str(cfg_path), state, password=ROOT_PASSWORD)
    try:
        wait_for_first_commit(state, time.time() - 5, 240, proc)
        with ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=9, threads=1, pause_s=0.01):
            time.sleep(3)
        problem = wait_until_equal(lambda: mysql_rows(mariadb, t, cols, ("id",)), sink, timeout_s=120)
        assert not problem, f"the stream did not keep up before the switch: {problem}"
        before = mysql_rows(mariadb, t, cols, ("id",))

        mariadb.execute("SET GLOBAL binlog_format = 'STATEMENT'")
        try:
            with ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=10, threads=1, pause_s=0.01):
                time.sleep(4)
            assert proc.popen.wait(180) != 0, "the stream job must exit with a failure"
            assert running_local_stream(state) is None
            status = read_status(state)
            assert status.state == "failed", status
            assert "logged as a statement" in status.exception and "Fix: SET GLOBAL binlog_format" in status.exception
            assert str(t) in status.exception
            # the watchdog fails on the server's setting itself, before looking at the stream
            with pytest.raises(AirflowFailException, match="binlog_format: found 'STATEMENT', need ROW"):
                sensor.poke({})
        finally:
            mariadb.execute("SET GLOBAL binlog_format = 'ROW'")
        # Exactly what was committed before the first statement: nothing after it, nothing lost before.
        assert not wait_until_equal(lambda: before, sink, timeout_s=5)
        # With the setting fixed, the stopped stream is reported, not relaunched (it would stop again).
        with pytest.raises(AirflowFailException, match="not relaunched: the binlog at .* logged as a statement"):
            sensor.poke({})
        assert running_local_stream(state) is None
    except AssertionError as e:
        raise AssertionError(
            f"{e}\nstatus: {read_status(state)}\njob log:\n{log_tail(state.path('stream', 'stream.log'), 60)}"
        ) from None
    finally:
        if proc.popen is not None and proc.popen.poll() is None:
            os.killpg(proc.pgid, signal.SIGKILL)
            proc.popen.wait(30)
    assert "logged as a statement" in Path(state.path("stream", "stream.log")).read_text(errors="replace")


def test_a_gtid_gap_stops_the_stream_after_committing_everything_before_it(mariadb, fresh_db, tmp_dir):
    """Transactions numbered past a gap (gtid_seq_no set by hand stands in for a failover to a
    server that lacks some): the stream ends its micro-batch before the gap, commits it, and
    stops there with the GTIDs missing and the fix; the watchdog does not relaunch it."""
    p = _stream_pipeline(mariadb, fresh_db, tmp_dir, "gtidgap", "6730-6750", 200)
    spec, t, cfg_path, state, cols = p.spec, p.table, p.cfg_path, p.state, COLS

    def sink():
        return p.sink(tmp_dir / "lake")

    proc = launch_local_stream(str(cfg_path), state, password=ROOT_PASSWORD)
    try:
        wait_for_first_commit(state, time.time() - 5, 240, proc)
        with ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=11, threads=1, pause_s=0.01):
            time.sleep(2)
        # the transactions before the gap, and the gap, reach the binlog together: one scan sees both
        seq = int(mariadb.query("SELECT @@gtid_binlog_pos")[0][0].split(",")[0].split("-")[2])
        mariadb.execute(
            f"INSERT INTO orders SELECT seq * 2 + 100000, {', '.join(VALUE_FILL)} FROM seq_1_to_50",
            f"SET SESSION gtid_seq_no = {seq + 5}",
            f"INSERT INTO orders SELECT seq * 2 + 200000, {', '.join(VALUE_FILL)} FROM seq_1_to_50",
            database=fresh_db,
        )
        assert proc.popen.wait(180) != 0, "the stream job must exit with a failure"
        status = read_status(state)
        assert status.state == "failed", status
        assert f"jumps from GTID seq {seq + 1} to {seq + 5}" in status.exception
        assert "the stream cannot stay exact" in status.exception and "allow_gtid_gaps" in status.exception
        # everything before the gap is in the sink, nothing after it
        got = sink()
        assert max(k[0] for k in got) < 200000 and (100002,) in got and (100100,) in got
        assert {k: v for k, v in mysql_rows(mariadb, t, cols, ("id",)).items() if k[0] < 200000} == got
    except AssertionError as e:
        raise AssertionError(
            f"{e}\nstatus: {read_status(state)}\njob log:\n{log_tail(state.path('stream', 'stream.log'), 60)}"
        ) from None
    finally:
        if proc.popen is not None and proc.popen.poll() is None:
            os.killpg(proc.pgid, signal.SIGKILL)
            proc.popen.wait(30)
