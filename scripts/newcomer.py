"""The quick start (docs/quickstart.md), followed as a newcomer would, timed.

    python scripts/newcomer.py [--airflow 3.1.8] [--work DIR]        (make newcomer)

Only the steps the quick start names, in its order, each timed:

1. the server: a private MariaDB with the quick start's binlog settings, the ``cdc`` user created
   with the quick start's grants, a table ``shop.orders`` with rows and a writer changing it from
   here to the end;
2. install: a new venv next to a *released* Airflow (not the project's pinned one),
   ``pip install`` of this package's wheel (it stands in for the package index) with pip's
   resolver and no constraints file; ``airflow providers list`` shows the provider;
3. the connections as ``AIRFLOW_CONN_*`` JSON, exactly the quick start's shape;
   ``python -m airflow_provider_mysqlcdc check-connection mysql_cdc_default`` passes;
4. ``python -m airflow_provider_mysqlcdc init $AIRFLOW_HOME`` writes the DAG template and the
   example pipeline file; the file is edited (its lake and state under this run's folder),
   checked (``pipelines validate --check-source``) and its DAG file written (``pipelines
   dag-files``), the commands the file's header names;
5. Airflow runs for real (``airflow standalone``: scheduler, DAG processor, API server,
   triggerer), the pipeline file's DAG is triggered (the CLI's trigger, which posts what the
   UI's Trigger posts), the run is watched until the stream task is green; the writer stops
   and the Delta table must equal the source row by row.

Prints one line per step with its seconds and ``NEWCOMER total=<s> result=ok``; fails when a
step fails or the whole path takes longer than 15 minutes (``--budget-s``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compat import REPO, Failed, build_and_check, clean_env, installed_versions, run, snapshot  # noqa: E402

DAG_ID = "shop_orders"  # the example pipeline file's DAG
PASSWORD = "change-me"  # the quick start's
GRANTS = "GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'cdc'@'%'"  # its MariaDB line


def say(msg: str) -> None:
    print(msg, flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Steps:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.times: dict[str, float] = {}

    @contextlib.contextmanager
    def step(self, name: str):
        t = time.monotonic()
        say(f"--- {name}")
        yield
        self.times[name] = time.monotonic() - t
        say(f"newcomer step={name.split(':')[0]} seconds={self.times[name]:.0f}")

    @property
    def total(self) -> float:
        return time.monotonic() - self.t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--airflow", default="3.1.8", help="the released Airflow to install next to")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--budget-s", type=float, default=900.0)
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="mysqlcdc-newcomer-"))
    work.mkdir(parents=True, exist_ok=True)
    steps = Steps()

    from airflow_provider_mysqlcdc.cdc.model import TableId
    from mysqlcdc_harness.mariadb import MariaDB
    from mysqlcdc_harness.sink_compare import delta_rows, mysql_rows, wait_until_equal
    from mysqlcdc_harness.tables import VALUE_COLS, create_int_table
    from mysqlcdc_harness.writer import ConcurrentWriter

    server = MariaDB(base_dir=work / "mariadb", server_id=1)
    airflow = None
    writer = None
    try:
        with steps.step("1: the server"):
            server.start()
            server.execute(f"CREATE USER 'cdc'@'%' IDENTIFIED BY '{PASSWORD}'", GRANTS, "CREATE DATABASE shop")
            spec = create_int_table(server, "shop", args.rows, "orders")
            writer = ConcurrentWriter(lambda: server.connect("shop"), spec, seed=3, threads=1, pause_s=0.01).start()

        venv, home = work / "venv", work / "airflow"
        py, bin_ = str(venv / "bin" / "python"), venv / "bin"
        with steps.step(f"2: install next to Airflow {args.airflow}"):
            src, _tests = snapshot(work)
            _results, ok, wheel = build_and_check(work, src)
            if not ok or wheel is None:
                raise Failed("the package did not build")
            run([sys.executable, "-m", "venv", venv])
            pip = [py, "-m", "pip", "--no-input"]
            run([*pip, "install", "-q", f"pip=={installed_versions(sys.executable, ['pip'])['pip']}"], cwd=work)
            run([*pip, "install", "-q", f"apache-airflow=={args.airflow}", wheel], cwd=work, timeout=1800)
            got = installed_versions(py, ["apache-airflow", "pyspark", "pyspark-client"])
            say(f"installed {got}")
            if got.get("pyspark-client") and got["pyspark"] != got["pyspark-client"]:
                raise Failed(f"pip picked pyspark {got['pyspark']} beside pyspark-client {got['pyspark-client']}")

        env = clean_env(venv)
        port = _free_port()  # not 8080: another Airflow on this machine may have it (not a quick-start step)
        env.update(
            {
                "AIRFLOW_HOME": str(home),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__API__PORT": str(port),
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://localhost:{port}/execution/",
                "MYSQLCDC_STATE_ROOT": str(work / "state"),
                "MYSQLCDC_LAKE_ROOT": str(work / "lake"),
                "MYSQLCDC_RUNTIME_DIR": str(work / "runtime"),
                "AIRFLOW_CONN_MYSQL_CDC_DEFAULT": json.dumps(
                    {
                        "conn_type": "mysql_cdc",
                        "host": "127.0.0.1",
                        "port": server.port,
                        "login": "cdc",
                        "password": PASSWORD,
                        "schema": "shop",
                        "extra": {"server_id_range": "5400-5499", "server_time_zone": "UTC"},
                    }
                ),
                "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
            }
        )
        airflow_cli = str(bin_ / "airflow")
        with steps.step("2b: providers list"):
            listed = run([airflow_cli, "providers", "list"], env=env, cwd=work).stdout
            if "airflow-provider-mysqlcdc" not in listed:
                raise Failed(f"airflow providers list does not show the provider:\n{listed[-2000:]}")

        with steps.step("3: check-connection"):
            p = run([py, "-m", "airflow_provider_mysqlcdc", "check-connection", "mysql_cdc_default"], env=env, cwd=work)
            say(p.stdout.strip()[-800:])

        with steps.step("4: init, the pipeline file, its DAG file"):
            run([py, "-m", "airflow_provider_mysqlcdc", "init", home], env=env, cwd=work)
            example = home / "pipelines" / "shop_orders.yaml"
            if not (home / "dags" / "mysql_cdc_pipeline.py").is_file() or not example.is_file():
                raise Failed(f"init wrote no template DAG or example pipeline file under {home}")
            # "Edit it": this run's own lake and state (the example's are under /tmp)
            text = example.read_text()
            text = text.replace("/tmp/mysqlcdc-lake/shop_orders", str(work / "lake" / "shop_orders"))
            example.write_text(text.replace("/tmp/mysqlcdc/shop_orders", str(work / "state" / "shop_orders")))
            # "check it and write its DAG file", the commands the file's header names
            pipelines = [py, "-m", "airflow_provider_mysqlcdc.pipelines"]
            run([*pipelines, "validate", "pipelines/", "--check-source"], env=env, cwd=home)
            run([*pipelines, "dag-files", "pipelines/", "dags/"], env=env, cwd=home)

        with steps.step("5: trigger and watch"):
            log = open(work / "standalone.log", "wb")
            airflow = subprocess.Popen(
                [airflow_cli, "standalone"],
                env=env,
                cwd=str(work),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            _wait_for_dag(airflow_cli, env, work, airflow)
            run([airflow_cli, "dags", "unpause", DAG_ID], env=env, cwd=work)
            out = run([airflow_cli, "dags", "trigger", DAG_ID, "-o", "json"], env=env, cwd=work).stdout
            run_id = _run_id(out)
            say(f"triggered {run_id}")
            _wait_for_stream(airflow_cli, env, work, run_id, deadline=time.monotonic() + 900)

        with steps.step("5b: the sink equals the source"):
            changes = writer.stop().total
            writer = None
            t = TableId("shop", "orders")
            cols = list(spec.key_columns) + list(VALUE_COLS)
            problem = wait_until_equal(
                lambda: mysql_rows(server, t, cols, ("id",)),
                lambda: {
                    k: {c: r[c] for c in cols} for k, r in delta_rows(work / "lake" / "shop_orders", t, ("id",)).items()
                },
                timeout_s=180,
            )
            if problem:
                raise Failed(f"the Delta table differs from the source after {changes} changes:\n{problem}")
            say(f"VERIFIED: sink equals source ({args.rows} rows loaded, {changes} changes streamed)")
    except Failed as e:
        say(f"NEWCOMER FAILED at {list(steps.times)[-1:] or 'the start'}: {e}")
        say(f"NEWCOMER total={steps.total:.0f} result=failed work={work}")
        return 1
    finally:
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.stop()
        _stop_streams(work)
        if airflow is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(airflow.pid, signal.SIGTERM)
            with contextlib.suppress(Exception):
                airflow.wait(30)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(airflow.pid, signal.SIGKILL)
        server.stop()
    within = steps.total <= args.budget_s
    say(
        "NEWCOMER total={:.0f} budget={:.0f} result={} {}".format(
            steps.total,
            args.budget_s,
            "ok" if within else "over_budget",
            " ".join(f"{k.split(':')[0]}={v:.0f}" for k, v in steps.times.items()),
        )
    )
    return 0 if within else 1


def _wait_for_dag(airflow_cli: str, env: dict[str, str], work: Path, proc: subprocess.Popen) -> None:
    """Until the DAG processor has parsed the template (``airflow dags list`` shows the DAG)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Failed(f"airflow standalone exited ({proc.returncode}); see {work / 'standalone.log'}")
        p = run([airflow_cli, "dags", "list", "-o", "json"], env=env, cwd=work, check=False)
        if p.returncode == 0 and DAG_ID in p.stdout:
            return
        time.sleep(3)
    errors = run([airflow_cli, "dags", "list-import-errors"], env=env, cwd=work, check=False).stdout
    raise Failed(f"the DAG {DAG_ID} was not parsed within 300 s; import errors:\n{errors[-2000:]}")


def _run_id(out: str) -> str:
    start = out.find("[")
    runs = json.loads(out[start:]) if start >= 0 else []
    if not runs:
        raise Failed(f"airflow dags trigger printed no run:\n{out[-1000:]}")
    return str(runs[0].get("dag_run_id") or runs[0].get("run_id"))


def _wait_for_stream(airflow_cli: str, env: dict[str, str], work: Path, run_id: str, deadline: float) -> None:
    """Until the run's ``stream`` task is green (its first micro-batch committed); a failed task
    fails the path with the states of all."""
    last = ""
    while time.monotonic() < deadline:
        p = run(
            [airflow_cli, "tasks", "states-for-dag-run", DAG_ID, run_id, "-o", "json"], env=env, cwd=work, check=False
        )
        start = p.stdout.find("[")
        states = json.loads(p.stdout[start:]) if p.returncode == 0 and start >= 0 else []
        summary = " ".join(f"{s.get('task_id')}[{s.get('map_index')}]={s.get('state')}" for s in states)
        if summary != last:
            say(f"  {summary}")
            last = summary
        by_task = {s.get("task_id"): s.get("state") for s in states}
        if any(s.get("state") in ("failed", "upstream_failed") for s in states):
            raise Failed(f"a task failed: {summary}; task logs under {work / 'airflow' / 'logs'}")
        if by_task.get("stream") == "success":
            return
        time.sleep(5)
    raise Failed(f"the stream task was not green in time: {last}")


def _stop_streams(work: Path) -> None:
    """The stream keeps running after the run, as the quick start says: stop it (every process of this work dir)."""
    import psutil

    mine = {os.getpid(), *(a.pid for a in psutil.Process().parents())}  # this script and what runs it
    for p in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if p.info["pid"] not in mine and str(work) in " ".join(p.info["cmdline"] or []):
                p.kill()  # the stream, and the local Spark Connect server the snapshot tasks shared


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
