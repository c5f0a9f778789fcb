"""The watchdog brings back a PostgreSQL-sink stream from the state location alone.

The stream is launched as the pipeline's stream task does (``StreamControl`` with its
connection ids), SIGKILLed while writers run, and the sensor -- given nothing but the state
location, as the template's watchdog is -- relaunches it with the same source, Spark and
sink connections (before, it had no sink connection: "fe_sendauth: no password supplied").
The PostgreSQL table then equals the source row by row.

Meanwhile the source moved to a new endpoint: the pipeline was planned and first launched
through another address of the server (a forwarder standing for the old primary's endpoint),
which is gone before the relaunch; the user repointed the source connection, and the relaunch
follows it (it once dialled the address stored at plan time: "nothing accepts connections").
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time

import pytest

from airflow_provider_mysqlcdc.cdc.chunks import FinishedBatch, KeyRange
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.cdc.store.pipeline_file import read_config, write_config
from airflow_provider_mysqlcdc.hooks.stream import StreamControl
from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import log_tail, running_local_stream, stop_local_stream
from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.postgres import DATABASE, SUPERUSER
from mysqlcdc_harness.sink_compare import mysql_rows, postgres_rows, wait_until_equal
from mysqlcdc_harness.tables import VALUE_COLS, create_int_table
from mysqlcdc_harness.tcp_forward import TcpForward
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def test_the_watchdog_relaunches_a_postgres_sink_stream_from_the_state_alone(
    mariadb, postgres, fresh_db, tmp_dir, monkeypatch
):
    from airflow_provider_mysqlcdc.sensors.stream import MySqlCdcStreamSensor

    monkeypatch.delenv("PGPASSWORD", raising=False)  # the sink's password must come from its connection
    spec = create_int_table(mariadb, fresh_db, 1, "orders")
    mariadb.execute("DELETE FROM orders", database=fresh_db)
    t = TableId(fresh_db, "orders")
    old_endpoint = TcpForward(mariadb.port)

    def source_connection(port: int) -> None:
        airflow_env.set_connection(
            "wd_src",
            "mysql_cdc",
            host="127.0.0.1",
            port=port,
            login="root",
            password=ROOT_PASSWORD,
            extra={"server_id_range": "6800-6820"},
        )

    source_connection(old_endpoint.port)
    airflow_env.set_connection("wd_spark", "spark", host="local[2]")
    airflow_env.set_connection(
        "wd_pg",
        "postgres",
        host="127.0.0.1",
        port=postgres.port,
        login=SUPERUSER,
        password=postgres.password,
        schema=DATABASE,
    )
    schema = postgres.fresh_schema()
    state = StateStore(str(tmp_dir / "state"))
    config = PipelineConfig(
        name="watchdog",
        source=dataclasses.replace(mariadb.source_config(server_id_range="6800-6820"), port=old_endpoint.port),
        include=(str(t),),
        state_location=state.location,
        sink=SinkConfig(
            "postgres",
            {
                "dsn": {"host": "127.0.0.1", "port": postgres.port, "dbname": DATABASE, "user": SUPERUSER},
                "schema": schema,
            },
        ),
        stream=StreamOptions(max_events_per_batch=2000, heartbeat_s=1.0, trigger_interval_s=0.5),
    )
    write_config(state, config)
    state.write_finished(
        [FinishedBatch("all", (KeyRange(t, None, None, True),), BinlogOffset(*mariadb.master_status()))]
    )
    cols = ["id", *VALUE_COLS]
    pg_table = f"{fresh_db}__orders"

    control = StreamControl(state.location, "wd_src", "wd_spark", "wd_pg", start_timeout_s=240)
    try:
        first = control.launch()
        with ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=21, threads=1, pause_s=0.01):
            time.sleep(2)
            proc = running_local_stream(state)
            os.killpg(proc.pgid, signal.SIGKILL)  # a crash mid-stream, writers still on
            deadline = time.time() + 30
            while running_local_stream(state) is not None and time.time() < deadline:
                time.sleep(0.2)
            time.sleep(2)
        old_endpoint.close()  # the old primary's endpoint is gone; the user repoints the connection
        source_connection(mariadb.port)
        sensor = MySqlCdcStreamSensor(
            task_id="stream_health", state_location=state.location, relaunch=True, start_timeout_s=240
        )
        result = sensor.poke({})
        assert result.is_done and result.xcom_value["running"], result
        assert running_local_stream(state).pid != first.pid
        assert read_config(state).source.port == mariadb.port, "the state keeps the connection's new address"
        problem = wait_until_equal(
            lambda: mysql_rows(mariadb, t, cols, ("id",)),
            lambda: postgres_rows(postgres, pg_table, cols, ("id",), schema=schema),
            timeout_s=180,
        )
        assert not problem, problem
    except AssertionError as e:
        raise AssertionError(f"{e}\njob log:\n{log_tail(state.path('stream', 'stream.log'), 60)}") from None
    finally:
        stop_local_stream(state)
        old_endpoint.close()
