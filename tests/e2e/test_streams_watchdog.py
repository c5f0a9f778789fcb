"""One watchdog for every pipeline: a DAG run (``dag.test()``, real Airflow) of
``build_streams_watchdog`` over a search root that holds three pipelines' state locations at
different depths, one more given by hand, and a typo'd search root.

Pipeline ``a`` has a running stream, ``b`` a stream killed with SIGKILL, ``c`` a plan and no
stream yet. The run lists a and b (c is logged, not watched), names each map index after its
state location, leaves a's stream alone, relaunches b's from its checkpoint (a row written while
it was dead reaches its Delta table), and a root that does not exist fails the listing task.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.chunks import FinishedBatch, KeyRange
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.cdc.store.pipeline_file import write_config
from airflow_provider_mysqlcdc.hooks.stream import StreamControl
from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import log_tail, running_local_stream, stop_local_stream
from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.sink_compare import delta_rows, mysql_rows, wait_until_equal

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

DAG_ID = "mysql_cdc_streams_watchdog"


def _pipeline(mariadb, db: str, name: str, state_dir, lake_dir, ids: str, streamed: bool = True) -> StateStore:
    mariadb.execute(f"CREATE TABLE `{name}` (id INT PRIMARY KEY, v VARCHAR(20))", database=db)
    t = TableId(db, name)
    state = StateStore(str(state_dir))
    config = PipelineConfig(
        name=f"wd_{name}",
        source=mariadb.source_config(server_id_range=ids),
        include=(str(t),),
        state_location=state.location,
        sink=SinkConfig("delta", {"root": str(lake_dir)}),
        stream=StreamOptions(max_events_per_batch=2000, heartbeat_s=1.0, trigger_interval_s=0.5),
    )
    write_config(state, config)
    if streamed:
        state.write_finished(
            [FinishedBatch("all", (KeyRange(t, None, None, True),), BinlogOffset(*mariadb.master_status()))]
        )
    return state


def test_one_watchdog_lists_every_pipeline_under_its_roots_and_relaunches_the_dead_stream(mariadb, fresh_db, tmp_dir):
    airflow_env.migrate()
    airflow_env.set_connection(
        "mysql_cdc_default",
        "mysql_cdc",
        host="127.0.0.1",
        port=mariadb.port,
        login="root",
        password=ROOT_PASSWORD,
        extra={"server_id_range": "6900-6950"},
    )
    airflow_env.set_connection("spark_default", "spark", host="local[2]")
    root = tmp_dir / "states"
    a = _pipeline(mariadb, fresh_db, "a", root / "team1" / "a", tmp_dir / "lake_a", "6900-6920")
    b = _pipeline(mariadb, fresh_db, "b", root / "b", tmp_dir / "lake_b", "6930-6950")
    c = _pipeline(
        mariadb, fresh_db, "c", root / "team2" / "x" / "c", tmp_dir / "lake_c", "6960-6980", streamed=False
    )  # planned, never streamed
    controls = [StreamControl(s.location, "mysql_cdc_default", "spark_default", start_timeout_s=240) for s in (a, b)]
    try:
        for control in controls:
            control.launch()
        first_a = running_local_stream(a)
        killed = running_local_stream(b)
        os.killpg(killed.pgid, signal.SIGKILL)
        deadline = time.time() + 30
        while running_local_stream(b) is not None and time.time() < deadline:
            time.sleep(0.2)
        mariadb.execute(
            "INSERT INTO b VALUES (1, 'while dead')", "INSERT INTO a VALUES (1, 'alive')", database=fresh_db
        )

        log = tmp_dir / "watchdog.log"
        res = airflow_env.run_template(
            ["dag-file", str(_dag_file(tmp_dir, DAG_ID, search_roots=[str(root)])), DAG_ID], log
        )
        dr = airflow_env.dag_run(DAG_ID, res["run_id"])
        states = airflow_env.task_states(dr)
        listed = airflow_env.xcom_values(DAG_ID, dr.run_id, "find_pipelines")[-1]
        assert listed == [{"state_location": b.location}, {"state_location": a.location}], listed
        text = log.read_text()
        assert f"not watching {c.location} yet" in text
        health = {k: v for k, v in states.items() if k[0] == "stream_health"}
        assert sorted(health) == [("stream_health", 0), ("stream_health", 1)], states
        assert all(v[0] == "success" for v in health.values()), states
        assert {_rendered_map_index(dr, i) for i in (0, 1)} == {a.location, b.location}
        assert running_local_stream(a).pid == first_a.pid  # a running stream is left alone
        back = running_local_stream(b)
        assert back is not None and back.pid != killed.pid  # the dead one came back
        for name, lake in (("a", tmp_dir / "lake_a"), ("b", tmp_dir / "lake_b")):
            t = TableId(fresh_db, name)
            problem = wait_until_equal(
                lambda: mysql_rows(mariadb, t, ["id", "v"], ("id",)),
                lambda: {k: {"id": r["id"], "v": r["v"]} for k, r in delta_rows(lake, t, ("id",)).items()},
                timeout_s=120,
            )
            assert not problem, f"{name}: {problem}"

        bad = tmp_dir / "bad.log"
        res = airflow_env.run_template(
            [
                "dag-file",
                str(_dag_file(tmp_dir, "mysql_cdc_streams_watchdog_bad", search_roots=[str(root / "no-such-folder")])),
                "mysql_cdc_streams_watchdog_bad",
            ],
            bad,
        )
        dr = airflow_env.dag_run("mysql_cdc_streams_watchdog_bad", res["run_id"])
        assert airflow_env.task_states(dr)[("find_pipelines", -1)][0] == "failed"
        assert "no-such-folder' does not exist" in bad.read_text() and "Fix:" in bad.read_text()
    except AssertionError as e:
        raise AssertionError(f"{e}\nstream b log:\n{log_tail(b.path('stream', 'stream.log'), 40)}") from None
    finally:
        for s in (a, b):
            stop_local_stream(s)


def _dag_file(tmp_dir, dag_id: str, **kwargs) -> "Path":
    """A DAG file as the README shows it, in a folder of its own."""
    folder = tmp_dir / f"dags_{dag_id}"
    folder.mkdir()
    path = folder / f"{dag_id}.py"
    path.write_text(
        "from airflow_provider_mysqlcdc.pipelines.dag_builder import build_streams_watchdog\n\n"
        f"watchdog = build_streams_watchdog({dag_id!r}, **{kwargs!r})\n"
    )
    return path


def _rendered_map_index(dr, map_index: int) -> str | None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        ti = (
            session.query(TaskInstance)
            .filter_by(dag_id=dr.dag_id, run_id=dr.run_id, task_id="stream_health", map_index=map_index)
            .one()
        )
        return ti.rendered_map_index
