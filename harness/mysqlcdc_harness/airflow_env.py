"""A real Airflow for tests: its own AIRFLOW_HOME, a SQLite metadata DB, connections from env.

``configure()`` must run before anything imports ``airflow`` (Airflow reads its settings at
import), so the root conftest calls it at import time. ``run_dag`` is ``dag.test()``;
``clear_and_run`` clears some task instances of a finished run (e.g. one map index) and runs
what became runnable with the same loop ``dag.test()`` uses -- what a scheduler would do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[2]
_HOME: Path | None = None


def configure() -> Path:
    """The test Airflow's home, set in ``os.environ`` so child processes share it. Under
    pytest-xdist each worker takes its own home under the controller's (one SQLite metadata DB
    per worker: SQLite does not take two writers)."""
    global _HOME
    if _HOME is not None:
        return _HOME
    # the controller's base reaches the workers and every child process through the environment
    base = Path(os.environ.get("MYSQLCDC_TEST_AIRFLOW_BASE") or tempfile.mkdtemp(prefix="mysqlcdc-airflow-"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    home = base / worker if worker else base
    home.mkdir(parents=True, exist_ok=True)
    os.environ.update(
        {
            "MYSQLCDC_TEST_AIRFLOW_BASE": str(base),
            "MYSQLCDC_TEST_AIRFLOW_HOME": str(home),  # marks this session's processes (processes.py)
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__SCHEDULER__STANDALONE_DAG_PROCESSOR": "False",
        }
    )
    _HOME = home
    return home


def migrate() -> None:
    """A migrated metadata DB in this home (see ``copy_migrated_db``)."""
    copy_migrated_db(configure())


def copy_migrated_db(home: Path) -> None:
    """``home/airflow.db`` as ``airflow db migrate`` leaves it. The migration (about 20 s) runs
    once per test session, into a template under the session's base that every home (each
    xdist worker's, the UI services', a test's private one) copies; a home already migrated is
    left alone."""
    stamp = home / ".migrated"
    if stamp.exists():
        return
    import fcntl
    import shutil

    base = os.environ.get("MYSQLCDC_TEST_AIRFLOW_BASE")  # unset outside the tests (a bench)
    template = (Path(base) if base else home.parent) / "migrated-template"
    template.mkdir(parents=True, exist_ok=True)
    with open(template / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (template / ".migrated").exists():
            airflow = str(Path(sys.executable).parent / "airflow")
            env = {
                **os.environ,
                "AIRFLOW_HOME": str(template),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{template}/airflow.db",
                "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(template / "logs"),
            }
            p = subprocess.run([airflow, "db", "migrate"], env=env, capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError(f"airflow db migrate failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
            (template / ".migrated").touch()
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template / "airflow.db", home / "airflow.db")
    stamp.touch()


def set_connection(
    conn_id: str,
    conn_type: str,
    *,
    host: str,
    port: int | None = None,
    login: str | None = None,
    password: str | None = None,
    schema: str | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    body = {
        "conn_type": conn_type,
        "host": host,
        "port": port,
        "login": login,
        "password": password,
        "schema": schema,
        "extra": extra or {},
    }
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps({k: v for k, v in body.items() if v is not None})


def load_template_dag(dag_id: str = "mysql_cdc_pipeline"):
    """The template DAG file as users copy it, imported fresh."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "mysql_cdc_pipeline_under_test", REPO / "dags" / "mysql_cdc_pipeline.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {d.dag_id: d for d in vars(module).values() if type(d).__name__ == "DAG"}[dag_id]


def task_states(dr) -> dict[tuple[str, int], tuple[str, int]]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=dr.dag_id, run_id=dr.run_id).all()
        return {(ti.task_id, ti.map_index): (str(ti.state), ti.try_number) for ti in tis}


def xcom_values(dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> dict[int, Any]:
    """One XCom per map index (``return_value`` by default; operator extra links are XComs too)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(XComModel).filter_by(dag_id=dag_id, run_id=run_id, task_id=task_id, key=key).all()
        return {r.map_index: XComModel.deserialize_value(r) for r in rows}


def clear_and_run(dag, run_id: str, task_ids: Sequence[Any]):
    """Clear ``task_ids`` (names or ``(name, map_index)``) of a run and run them to the end."""
    from airflow.models.dagrun import DagRun
    from airflow.sdk import timezone
    from airflow.sdk.definitions.dag import _run_task
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState, TaskInstanceState

    scheduler_dag = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    scheduler_dag.clear(task_ids=list(task_ids), run_id=run_id, dag_run_state=DagRunState.RUNNING)
    with create_session() as session:
        dr = session.query(DagRun).filter_by(dag_id=dag.dag_id, run_id=run_id).one()
        dr.dag = scheduler_dag
        while dr.state == DagRunState.RUNNING:
            session.expire_all()
            schedulable, _ = dr.update_state(session=session)
            for ti in schedulable:
                if ti.state != TaskInstanceState.UP_FOR_RESCHEDULE:
                    ti.try_number += 1
                ti.state = TaskInstanceState.SCHEDULED
                ti.scheduled_dttm = timezone.utcnow()
            session.commit()
            scheduled = [ti for ti in dr.get_task_instances(session=session) if ti.state == TaskInstanceState.SCHEDULED]
            for ti in scheduled:
                try:
                    _run_task(ti=ti, task=dag.task_dict[ti.task_id])
                except Exception:  # the task's failure is recorded in its state
                    pass
            if not scheduled and not schedulable:
                session.expire_all()
                dr = session.query(DagRun).filter_by(dag_id=dag.dag_id, run_id=run_id).one()
                dr.dag = scheduler_dag
                if dr.state == DagRunState.RUNNING:
                    dr.update_state(session=session)
                    session.commit()
                    if dr.state == DagRunState.RUNNING and not any(
                        ti.state in (TaskInstanceState.SCHEDULED, None, TaskInstanceState.UP_FOR_RETRY)
                        for ti in dr.get_task_instances(session=session)
                    ):
                        break
        return dr


def run_template(action: Sequence[str], log_path: Path, timeout_s: float = 1500) -> dict[str, Any]:
    """``harness/mysqlcdc_harness/airflow_runner.py`` in a subprocess, output appended to ``log_path``;
    returns ``{"run_id", "state"}`` and a handle to the run for queries."""
    with open(log_path, "ab") as out:
        p = subprocess.run(
            [sys.executable, "-m", "mysqlcdc_harness.airflow_runner", *action],
            cwd=str(REPO),
            env=dict(os.environ),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=timeout_s,
        )
    lines = [ln for ln in Path(log_path).read_text(errors="replace").splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        tail = "\n".join(Path(log_path).read_text(errors="replace").splitlines()[-60:])
        raise RuntimeError(f"airflow runner {action[0]} exited with {p.returncode}:\n{tail}")
    return json.loads(lines[-1].split(" ", 1)[1])


def dag_run(dag_id: str, run_id: str):
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        dr = session.query(DagRun).filter_by(dag_id=dag_id, run_id=run_id).one()
        session.expunge(dr)
        return dr


def task_log_files(dag_id: str) -> list[Path]:
    base = configure() / "logs" / f"dag_id={dag_id}"
    return sorted(p for p in base.rglob("*") if p.is_file())


def rendered_fields_text(dag_id: str, run_id: str) -> str:
    """Every stored rendered template field of a run (what the UI's Rendered tab shows)."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as RTIF
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(RTIF).filter_by(dag_id=dag_id, run_id=run_id).all()
        return "\n".join(json.dumps(r.rendered_fields, default=str) for r in rows)


def asset_events(uri_prefix: str) -> list[dict[str, Any]]:
    """Asset events of assets whose URI starts with ``uri_prefix``: uri, extra, the emitting task."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (
            session.query(AssetModel.uri, AssetEvent.extra, AssetEvent.source_task_id)
            .join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
            .filter(AssetModel.uri.like(f"{uri_prefix}%"))
            .all()
        )
        return [{"uri": u, "extra": dict(e or {}), "task_id": t} for u, e, t in rows]
