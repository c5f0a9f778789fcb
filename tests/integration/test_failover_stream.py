"""A primary failover under a running pipeline, through the doors a user has: the stream task
(``StreamControl``) and the watchdog's relaunch (``MySqlCdcStreamSensor``).

A MariaDB primary and a GTID replica (``log_slave_updates``, with a transaction of its own in
another domain); the source connection names an endpoint that forwards to the primary, as a
managed database's endpoint does. The stream loads into PostgreSQL with writers on; then writers
off, the replica caught up, the stream and the primary killed, the replica promoted and the
endpoint moved to it (same endpoint), the new primary taking writes. The watchdog relaunches the
stream, which must place its committed offset on the new server by GTID (it once asked the new
server for the old primary's file and position and died with "log event entry exceeded
max_allowed_packet"), and the sink must equal the new primary row by row.

When the replica was behind, the relaunched stream stops naming the missing transactions and the
watchdog fails with that reason, never a retry into the wrong place.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import time
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.binlog.failover import gtid_state_at
from airflow_provider_mysqlcdc.cdc.chunks import FinishedBatch, KeyRange
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.source.server import current_offset, server_version
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.cdc.store.pipeline_file import write_config
from airflow_provider_mysqlcdc.hooks.stream import StreamControl
from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import log_tail, running_local_stream, stop_local_stream
from airflow_provider_mysqlcdc.spark.stream.server.placement import FAILOVERS_FILE
from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.mariadb import ROOT_PASSWORD, MariaDB, primary_and_replica
from mysqlcdc_harness.postgres import DATABASE, SUPERUSER
from mysqlcdc_harness.sink_compare import delta_rows, mysql_rows, postgres_rows, wait_until_equal
from mysqlcdc_harness.tables import VALUE_COLS, create_int_table
from mysqlcdc_harness.tcp_forward import TcpForward
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

DB = "shop"
COLS = ["id", *VALUE_COLS]


@dataclasses.dataclass
class Rig:
    primary: MariaDB
    replica: MariaDB
    endpoint: TcpForward
    state: StateStore
    control: StreamControl
    spec: object
    table: TableId
    pg_table: str
    schema: str
    lake: Path | None = None  # the Delta sink's root (None: the PostgreSQL sink)


@contextlib.contextmanager
def _rig(postgres, tmp_dir: Path, name: str, sink: str = "postgres"):
    endpoint = None
    state = StateStore(str(tmp_dir / name))
    with primary_and_replica(21, 22) as (primary, replica):
        try:
            primary.execute(f"CREATE DATABASE {DB}")
            spec = create_int_table(primary, DB, 1, "orders")
            primary.execute("DELETE FROM orders", database=DB)
            # the replica's own transaction, in a domain of its own, on a table the pipeline does not capture
            replica.caught_up(primary)
            replica.execute("SET SESSION gtid_domain_id = 9", f"CREATE TABLE {DB}.replica_only (id INT PRIMARY KEY)")
            endpoint = TcpForward(primary.port)
            airflow_env.set_connection(
                "fo_src",
                "mysql_cdc",
                host="127.0.0.1",
                port=endpoint.port,
                login="root",
                password=ROOT_PASSWORD,
                extra={"server_id_range": "7100-7120"},
            )
            airflow_env.set_connection("fo_spark", "spark", host="local[2]")
            airflow_env.set_connection(
                "fo_pg",
                "postgres",
                host="127.0.0.1",
                port=postgres.port,
                login=SUPERUSER,
                password=postgres.password,
                schema=DATABASE,
            )
            schema = postgres.fresh_schema()
            t = TableId(DB, "orders")
            lake = tmp_dir / f"{name}-lake" if sink == "delta" else None
            config = PipelineConfig(
                name=name,
                source=dataclasses.replace(primary.source_config(server_id_range="7100-7120"), port=endpoint.port),
                include=(str(t),),
                state_location=state.location,
                sink=SinkConfig("delta", {"root": str(lake)})
                if lake is not None
                else SinkConfig(
                    "postgres",
                    {
                        "dsn": {"host": "127.0.0.1", "port": postgres.port, "dbname": DATABASE, "user": SUPERUSER},
                        "schema": schema,
                    },
                ),
                stream=StreamOptions(max_events_per_batch=2000, heartbeat_s=1.0, trigger_interval_s=0.5),
            )
            write_config(state, config)
            with contextlib.closing(primary.connect()) as c:  # the (empty) snapshot's watermark, as a batch records it
                v = server_version(c)
                hw = current_offset(c, v)
                hw = BinlogOffset(hw.file, hw.position, gtid_state_at(c, v, hw))
            state.write_finished([FinishedBatch("all", (KeyRange(t, None, None, True),), hw, "mariadb:21")])
            control = StreamControl(
                state.location, "fo_src", "fo_spark", None if lake else "fo_pg", start_timeout_s=240
            )
            yield Rig(primary, replica, endpoint, state, control, spec, t, f"{DB}__orders", schema, lake)
        finally:
            with contextlib.suppress(Exception):
                stop_local_stream(state)
            if endpoint is not None:
                endpoint.close()


def _kill_stream(state: StateStore) -> None:
    proc = running_local_stream(state)
    assert proc is not None, "the stream is not running"
    os.killpg(proc.pgid, signal.SIGKILL)
    deadline = time.time() + 30
    while running_local_stream(state) is not None and time.time() < deadline:
        time.sleep(0.2)


def _kill_in_first_micro_batch(rig: Rig) -> None:
    import threading

    from mysqlcdc_harness.stream_job import committed

    checkpoint = Path(rig.state.path("stream", "checkpoint"))

    def logged() -> int:
        return max((int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*")), default=-1)

    before = logged()
    launcher = threading.Thread(target=_launch_quietly, args=(rig,))
    launcher.start()
    deadline = time.monotonic() + 120
    while logged() <= before:  # a new micro-batch logged: its start the old server's, its end the new one's
        assert time.monotonic() < deadline, "no new micro-batch after the relaunch"
        time.sleep(0.05)
    _kill_stream(rig.state)
    launcher.join(60)
    assert (committed(checkpoint) or (-1,))[0] < logged(), "killed with a micro-batch on the new server in flight"


def _launch_quietly(rig: Rig) -> None:
    with contextlib.suppress(Exception):  # killed before its first commit: the launch reports that; expected
        rig.control.launch()


def _sink_equals(rig: Rig, server: MariaDB, postgres) -> str | None:
    def sink_rows():
        if rig.lake is None:
            return postgres_rows(postgres, rig.pg_table, COLS, ("id",), schema=rig.schema)
        return {k: {c: r[c] for c in COLS} for k, r in delta_rows(rig.lake, rig.table, ("id",)).items()}

    return wait_until_equal(lambda: mysql_rows(server, rig.table, COLS, ("id",)), sink_rows, timeout_s=180)


def _watchdog(rig: Rig):
    from airflow_provider_mysqlcdc.sensors.stream import MySqlCdcStreamSensor

    return MySqlCdcStreamSensor(
        task_id="stream_health", state_location=rig.state.location, relaunch=True, start_timeout_s=240
    )


@pytest.mark.parametrize("sink", ["postgres", "delta"])
def test_a_promoted_replica_behind_the_same_endpoint_continues_the_stream_exactly(postgres, tmp_dir, monkeypatch, sink):
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with _rig(postgres, tmp_dir, f"failover_same_endpoint_{sink}", sink) as rig:
        try:
            rig.control.launch()
            with ConcurrentWriter(lambda: rig.primary.connect(DB), rig.spec, seed=31, threads=1, pause_s=0.01):
                time.sleep(3)
            problem = _sink_equals(rig, rig.primary, postgres)
            assert not problem, f"before the failover: {problem}"
            rig.replica.caught_up(rig.primary)
            _kill_stream(rig.state)
            rig.primary.kill()
            rig.replica.promote()
            rig.endpoint.retarget(rig.replica.port)  # the endpoint now leads to the promoted replica
            promoted_at = time.monotonic()
            with ConcurrentWriter(lambda: rig.replica.connect(DB), rig.spec, seed=32, threads=1, pause_s=0.01):
                if sink == "postgres":
                    # kill -9 during the first micro-batch on the new server (logged from the old server's
                    # offset to one of the new server's): its replay must place the old offset again
                    _kill_in_first_micro_batch(rig)
                result = _watchdog(rig).poke({})
                first_commit_s = time.monotonic() - promoted_at
                time.sleep(2)
            assert result.is_done and result.xcom_value["running"], result
            problem = _sink_equals(rig, rig.replica, postgres)
            assert not problem, f"after the failover: {problem}"
            moves = rig.state.read_json(FAILOVERS_FILE)
            # once per driver that met the old offset (twice after the kill -9): always to the same place
            assert {(m["old_server"], m["new_server"]) for m in moves} == {("mariadb:21", "mariadb:22")}, moves
            assert len(moves) == (2 if sink == "postgres" else 1), moves
            assert len({json.dumps(m["new_offset"], sort_keys=True) for m in moves}) == 1, moves
            assert moves[0]["skipped"] == ["9-22-1"], moves  # the replica's own domain: no captured table
            print(f"failover (same endpoint): promoted -> first micro-batch committed on it in {first_commit_s:.1f} s")
            assert first_commit_s < 60 + 30
        except AssertionError as e:
            raise AssertionError(f"{e}\njob log:\n{log_tail(rig.state.path('stream', 'stream.log'), 80)}") from None


def test_a_failover_under_a_running_stream_is_followed(postgres, tmp_dir, monkeypatch):
    """The stream is not killed: the primary dies under it. Its reads of the old server fail, it
    reconnects through the endpoint to the promoted replica, and either places its offset there
    in the running driver or (a task caught mid-range refuses the other server) fails and is
    relaunched by the watchdog, which then places it. Either way nothing is lost or doubled."""
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with _rig(postgres, tmp_dir, "failover_live") as rig:
        try:
            rig.control.launch()
            with ConcurrentWriter(lambda: rig.primary.connect(DB), rig.spec, seed=41, threads=1, pause_s=0.01):
                time.sleep(3)
            rig.replica.caught_up(rig.primary)
            rig.primary.kill()
            rig.replica.promote()
            rig.endpoint.retarget(rig.replica.port)
            with ConcurrentWriter(lambda: rig.replica.connect(DB), rig.spec, seed=42, threads=1, pause_s=0.01):
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:  # the watchdog's runs, every few seconds here
                    _watchdog(rig).poke({})
                    if rig.state.exists(FAILOVERS_FILE):
                        break
                    time.sleep(3)
                time.sleep(2)
            _watchdog(rig).poke({})
            problem = _sink_equals(rig, rig.replica, postgres)
            assert not problem, f"after the failover: {problem}"
            moves = rig.state.read_json(FAILOVERS_FILE)
            assert moves and {(m["old_server"], m["new_server"]) for m in moves} == {("mariadb:21", "mariadb:22")}
        except AssertionError as e:
            raise AssertionError(f"{e}\njob log:\n{log_tail(rig.state.path('stream', 'stream.log'), 80)}") from None


def test_a_replica_that_was_behind_stops_the_stream_and_the_watchdog_says_why(postgres, tmp_dir, monkeypatch):
    from airflow.exceptions import AirflowException

    monkeypatch.delenv("PGPASSWORD", raising=False)
    with _rig(postgres, tmp_dir, "failover_behind") as rig:
        rig.control.launch()
        rig.replica.caught_up(rig.primary)
        rig.replica.execute("STOP SLAVE")  # falls behind; the stream keeps reading the primary
        with ConcurrentWriter(lambda: rig.primary.connect(DB), rig.spec, seed=33, threads=1, pause_s=0.01):
            time.sleep(2)
        problem = _sink_equals(rig, rig.primary, postgres)
        assert not problem, problem
        _kill_stream(rig.state)
        rig.primary.kill()
        rig.replica.promote()
        # a new endpoint: the user repoints the source connection at the promoted replica
        airflow_env.set_connection(
            "fo_src",
            "mysql_cdc",
            host="127.0.0.1",
            port=rig.replica.port,
            login="root",
            password=ROOT_PASSWORD,
            extra={"server_id_range": "7100-7120"},
        )
        with pytest.raises(AirflowException) as e:  # the watchdog's check fails, with the stream's reason
            _watchdog(rig).poke({})
        text = str(e.value)
        log = log_tail(rig.state.path("stream", "stream.log"), 200)
        assert text.startswith("the relaunched stream stopped: source failover:"), f"{text}\n{log}"
        assert "lacks transactions the sink already holds" in text and "domain 0: 0-21-" in text, text
        assert "max_allowed_packet" not in text + log
        # a second watchdog run reports the reason instead of relaunching into the same stop
        with pytest.raises(Exception) as again:
            _watchdog(rig).poke({})
        assert "lacks transactions" in str(again.value), str(again.value)


def test_a_snapshot_batch_whose_window_spans_a_failover_writes_nothing_and_its_rerun_reads_the_new_server(
    spark, tmp_dir
):
    from airflow_provider_mysqlcdc.cdc.binlog.failover import SourceChangedError
    from airflow_provider_mysqlcdc.cdc.pipeline import SplitOptions
    from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
    from airflow_provider_mysqlcdc.spark.snapshot import batch_reader
    from airflow_provider_mysqlcdc.spark.snapshot.job import run_snapshot_batch

    with primary_and_replica(23, 24) as (primary, replica):
        primary.execute(f"CREATE DATABASE {DB}")
        create_int_table(primary, DB, 3000, "orders")
        replica.caught_up(primary)
        with TcpForward(primary.port) as endpoint:
            src = dataclasses.replace(primary.source_config(server_id_range="7200-7220"), port=endpoint.port)
            lake = tmp_dir / "window-lake"
            config = PipelineConfig(
                name="failover_window",
                source=src,
                include=(f"{DB}.orders",),
                state_location=str(tmp_dir / "window-state"),
                sink=SinkConfig("delta", {"root": str(lake)}),
                split=SplitOptions(chunk_size=1000),
            )
            plan = build_plan(src, config.include, split=config.split, chunks_per_batch=10)
            state = StateStore(config.state_location)
            state.write_plan(plan)
            write_config(state, config)
            (batch,) = plan.batches
            real_hw = batch_reader.ConsistentBatchReader._high_watermark

            def failover_then_hw(self, conn, version):
                # the chunks are read; the primary dies and the promoted replica takes the endpoint
                # before the high watermark is taken (on the batch's connection, which still reaches the
                # old server in a planned switchover: here the old one is stopped cleanly)
                primary.stop(remove=False)
                replica.promote()
                endpoint.retarget(replica.port)
                with contextlib.closing(self.source.connect()) as fresh:
                    return real_hw(self, fresh, version)

            batch_reader.ConsistentBatchReader._high_watermark = failover_then_hw
            try:
                with pytest.raises(SourceChangedError) as e:
                    run_snapshot_batch(spark, config, batch.batch_id, plan=plan)
            finally:
                batch_reader.ConsistentBatchReader._high_watermark = real_hw
            assert "server_id 23 at the low watermark, server_id 24 now" in str(e.value), str(e.value)
            assert state.read_batch_result(batch.batch_id) is None, "a batch spanning a failover recorded a result"
            assert not (lake / DB / "orders").exists() or not delta_rows(lake, TableId(DB, "orders"), ("id",))
            # the task's retry reads it again, on the new server, and records that server
            run_snapshot_batch(spark, config, batch.batch_id, plan=plan)
            result = state.read_batch_result(batch.batch_id)
            assert result["high_watermark"]["server"] == "mariadb:24", result["high_watermark"]
            assert len(delta_rows(lake, TableId(DB, "orders"), ("id",))) == 3000
