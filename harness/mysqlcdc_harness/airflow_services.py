"""A private Airflow 3 run the way users run it: its real services as subprocesses.

``AirflowServices`` starts ``airflow api-server``, ``scheduler``, ``dag-processor`` and
``triggerer`` (LocalExecutor, SQLite metadata DB) in a temporary AIRFLOW_HOME of their own,
with a DAGs folder given by the caller, and stops every process they started::

    with AirflowServices(dags_folder=path, extra_env={"MYSQLCDC_STATE_ROOT": ...}) as af:
        af.add_connection("mysql_src", "mysql", host="127.0.0.1", port=3306, login="root")
        api = af.api()                      # REST client, public API v2
        api.wait_for_dag("my_dag")
        run_id = api.trigger("my_dag", {"x": 1})
        api.wait_for_run("my_dag", run_id)

The services' environment is built explicitly (``AirflowServices.env``): every ``AIRFLOW_*``
variable of this process (tests/conftest.py points AIRFLOW_HOME etc. at the ``dag.test()``
Airflow) is dropped, so the two never share a home, a DB or connections; variables the
caller passes in ``extra_env`` reach every service (and so every task).

Each service runs in a new session (its own process group); ``stop()`` sends SIGTERM to each
group, then SIGKILL, and then sweeps any process still carrying this instance's marker
variable in its environment (task processes put themselves in process groups of their own,
and a killed parent leaves them to init). Each service's output goes to ``<home>/service-logs``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping

from mysqlcdc_harness import airflow_env

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_BIN = str(Path(sys.executable).parent / "airflow")
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
MARKER = "MYSQLCDC_UI_AIRFLOW_ID"  # in every service's environment, for the final sweep

ADMIN_USER = "admin"
ADMIN_PASSWORD = "admin-ui-tests"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no {path.name})"
    return "\n".join(text[-lines:])


def _term_with_parent() -> None:
    """In each service's process: SIGTERM when the test process dies, so a killed pytest does
    not leave an Airflow behind (Linux only; best effort)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class AirflowServicesError(RuntimeError):
    pass


class AirflowServices:
    """Airflow's four services on a free port; ``start()`` returns when all are healthy."""

    def __init__(
        self,
        dags_folder: str | os.PathLike | None = None,
        *,
        extra_env: Mapping[str, str] | None = None,
        home: str | os.PathLike | None = None,
        dags_paused_at_creation: bool = False,
        parallelism: int = 8,
        keep_home: bool = False,
    ) -> None:
        self.dags_folder = Path(dags_folder or REPO / "dags").resolve()
        self.extra_env = dict(extra_env or {})
        self._own_home = home is None
        self.home = Path(home or tempfile.mkdtemp(prefix="mysqlcdc-ui-airflow-")).resolve()
        self.home.mkdir(parents=True, exist_ok=True)
        self.logs_dir = self.home / "service-logs"
        self.logs_dir.mkdir(exist_ok=True)
        self.task_logs_dir = self.home / "logs"
        self.keep_home = keep_home
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.user, self.password = ADMIN_USER, ADMIN_PASSWORD
        self.instance_id = uuid.uuid4().hex
        self.dags_paused_at_creation = dags_paused_at_creation
        self.parallelism = parallelism
        self.procs: dict[str, subprocess.Popen] = {}
        self._log_files: dict[str, Any] = {}
        self.timings: dict[str, float] = {}
        self.env = self._build_env()

    # ---- environment -------------------------------------------------------------------

    def _build_env(self) -> dict[str, str]:
        from cryptography.fernet import Fernet

        env = {
            k: v
            for k, v in os.environ.items()
            if not (k.startswith("AIRFLOW") or k.startswith("_AIRFLOW") or k == "MYSQLCDC_TEST_AIRFLOW_HOME")
        }
        passwords = self.home / "simple_auth_manager_passwords.json"
        passwords.write_text(json.dumps({self.user: self.password}))
        venv_bin = str(Path(sys.executable).parent)
        env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
        # The repository on the path, as for the tests: DAG files may import mysqlcdc_harness helpers.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        env.update(
            {
                MARKER: self.instance_id,
                # the services' processes (and the Spark servers their tasks start) belong to this
                # Airflow, not to the worker's: another test's process watcher must not count them
                "MYSQLCDC_TEST_AIRFLOW_HOME": str(self.home),
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": str(self.dags_paused_at_creation),
                "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
                "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{self.user}:admin",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home}/airflow.db",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API__BASE_URL": f"{self.base_url}/",
                "AIRFLOW__API__SECRET_KEY": uuid.uuid4().hex,
                "AIRFLOW__API__EXPOSE_CONFIG": "True",
                "AIRFLOW__API_AUTH__JWT_SECRET": uuid.uuid4().hex + uuid.uuid4().hex,
                "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.task_logs_dir),
                "AIRFLOW__LOGGING__DAG_PROCESSOR_CHILD_PROCESS_LOG_DIRECTORY": str(
                    self.task_logs_dir / "dag_processor"
                ),
                # Both serve task logs over HTTP; free ports, so two instances never clash.
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
                "AIRFLOW__LOGGING__COLORED_CONSOLE_LOG": "False",
                # New DAG files are listed within seconds, changed ones re-parsed soon.
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "2",
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
                "AIRFLOW__DAG_PROCESSOR__BUNDLE_REFRESH_CHECK_INTERVAL": "2",
                "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
                "AIRFLOW__DAG_PROCESSOR__PRINT_STATS_INTERVAL": "300",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
                "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "2",
                "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
                "AIRFLOW__SCHEDULER__STANDALONE_DAG_PROCESSOR": "True",
            }
        )
        env.update({k: str(v) for k, v in self.extra_env.items()})
        return env

    # ---- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> "AirflowServices":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def airflow(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        """Run an ``airflow`` CLI command in the services' environment."""
        p = subprocess.run(
            [AIRFLOW_BIN, *args], env=self.env, cwd=str(self.home), capture_output=True, text=True, timeout=timeout
        )
        if check and p.returncode != 0:
            raise AirflowServicesError(
                f"airflow {' '.join(args[:2])} exited with {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
            )
        return p

    def start(self, timeout: float = 180) -> "AirflowServices":
        t0 = time.monotonic()
        try:
            airflow_env.copy_migrated_db(self.home)  # the session's migrated DB, copied
            self.timings["db_migrate_s"] = time.monotonic() - t0
            t1 = time.monotonic()
            for name in SERVICES:
                self._spawn(name)
            self._wait_healthy(deadline=t1 + timeout)
            self.timings["services_healthy_s"] = time.monotonic() - t1
            self.timings["start_total_s"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str) -> None:
        args = [AIRFLOW_BIN, name]
        if name == "api-server":
            args += ["--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"]
        out = open(self.logs_dir / f"{name}.log", "ab", buffering=0)
        self._log_files[name] = out
        self.procs[name] = subprocess.Popen(
            args,
            env=self.env,
            cwd=str(self.home),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_term_with_parent,
        )

    def kill_service(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal one service's whole process group (its own session), e.g. to crash the
        scheduler; task processes (process groups of their own) are not hit."""
        p = self.procs[name]
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        if sig in (signal.SIGKILL, signal.SIGTERM):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)

    def restart_service(self, name: str, timeout: float = 120) -> None:
        """Start a killed (or still running: killed first) service again; waits until healthy."""
        if self.procs[name].poll() is None:
            self.kill_service(name, signal.SIGTERM)
        self._log_files.pop(name).close()
        since = time.time()
        self._spawn(name)
        self._wait_healthy(deadline=time.monotonic() + timeout, fresh=name, since=since)

    def log_path(self, name: str) -> Path:
        return self.logs_dir / f"{name}.log"

    def logs_tail(self, lines: int = 40) -> str:
        return "\n".join(
            f"----- {name} ({self.log_path(name)}) -----\n{_tail(self.log_path(name), lines)}" for name in SERVICES
        )

    def health(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"{self.base_url}/api/v2/monitor/health", timeout=5) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    _HEALTH_KEYS = {"scheduler": "scheduler", "dag-processor": "dag_processor", "triggerer": "triggerer"}

    def _wait_healthy(self, deadline: float, fresh: str | None = None, since: float | None = None) -> None:
        """Until every component reports healthy; with ``fresh`` (a restarted service), until
        its heartbeat is newer than ``since`` (a killed one's last heartbeat counts as healthy
        for a while)."""
        from datetime import datetime

        last: Any = None
        while True:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise AirflowServicesError(
                        f"airflow {name} exited with {p.returncode} while starting\n{self.logs_tail()}"
                    )
            last = self.health()
            if last and all(
                (last.get(k) or {}).get("status") == "healthy"
                for k in ("metadatabase", "scheduler", "dag_processor", "triggerer")
            ):
                key = self._HEALTH_KEYS.get(fresh or "")
                beat = (last.get(key) or {}).get(f"latest_{key}_heartbeat") if key else None
                if key is None or (beat and datetime.fromisoformat(beat).timestamp() > (since or 0)):
                    return
            if time.monotonic() > deadline:
                raise AirflowServicesError(
                    f"Airflow services not healthy in time; last health: {last}\n{self.logs_tail()}"
                )
            time.sleep(0.5)

    def _marked_processes(self) -> list:
        import psutil

        found = []
        for p in psutil.process_iter(["pid"]):
            if p.pid == os.getpid():
                continue
            try:
                if p.environ().get(MARKER) == self.instance_id:
                    found.append(p)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
                continue
        return found

    def stop(self, grace_s: float = 8) -> None:
        import psutil

        t0 = time.monotonic()
        # Every process now in the services' trees, before any parent dies and leaves children to init.
        tree: dict[int, psutil.Process] = {}
        for p in self.procs.values():
            try:
                root = psutil.Process(p.pid)
                for q in [root, *root.children(recursive=True)]:
                    tree[q.pid] = q
            except psutil.NoSuchProcess:
                pass
        for q in self._marked_processes():
            tree.setdefault(q.pid, q)
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    pass
        deadline = time.monotonic() + grace_s
        for p in self.procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        _, alive = psutil.wait_procs(list(tree.values()), timeout=max(0.1, deadline - time.monotonic()))
        for p in self.procs.values():
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        # Task processes live in process groups of their own: kill what is left by pid, and
        # anything else that carries this instance's marker.
        for _ in range(3):
            left = [q for q in {*alive, *self._marked_processes()} if q.is_running()]
            if not left:
                break
            for q in left:
                try:
                    q.kill()
                except psutil.NoSuchProcess:
                    pass
            psutil.wait_procs(left, timeout=3)
            alive = []
        for p in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.procs.clear()
        for f in self._log_files.values():
            f.close()
        self._log_files.clear()
        self.timings["stop_s"] = time.monotonic() - t0

    def cleanup(self) -> None:
        """Remove the temporary AIRFLOW_HOME (after ``stop``), unless asked to keep it."""
        if self._own_home and not self.keep_home:
            shutil.rmtree(self.home, ignore_errors=True)

    # ---- helpers -----------------------------------------------------------------------

    def add_connection(
        self,
        conn_id: str,
        conn_type: str,
        *,
        host: str | None = None,
        port: int | None = None,
        login: str | None = None,
        password: str | None = None,
        schema: str | None = None,
        extra: Mapping[str, Any] | None = None,
        replace: bool = True,
    ) -> None:
        """A connection stored in the metadata DB (visible in the UI), via ``airflow connections add``.

        Given as ``--conn-json``: with ``--conn-type``, the CLI silently stores a type no
        installed provider registers (e.g. ``mysql`` without the MySQL provider) as ``generic``.
        """
        if replace:
            self.airflow("connections", "delete", conn_id, check=False)
        body: dict[str, Any] = {
            "conn_type": conn_type,
            "host": host,
            "port": port,
            "login": login,
            "password": password,
            "schema": schema,
            "extra": dict(extra) if extra else None,
        }
        self.airflow(
            "connections", "add", conn_id, "--conn-json", json.dumps({k: v for k, v in body.items() if v is not None})
        )

    def api(self) -> "AirflowApi":
        return AirflowApi(self.base_url, self.user, self.password, services=self)

    def task_log_files(self, dag_id: str) -> list[Path]:
        base = self.task_logs_dir / f"dag_id={dag_id}"
        return sorted(p for p in base.rglob("*") if p.is_file())


class ApiError(RuntimeError):
    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        super().__init__(f"{method} {url} -> {status}: {body[:2000]}")
        self.status = status
        self.body = body


class AirflowApi:
    """A small client of the public REST API v2, authenticated with a JWT from ``POST /auth/token``."""

    def __init__(self, base_url: str, user: str, password: str, services: AirflowServices | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.user, self.password = user, password
        self.services = services
        self._token: str | None = None

    # ---- transport ---------------------------------------------------------------------

    def token(self) -> str:
        if self._token is None:
            body = self._request("POST", "/auth/token", {"username": self.user, "password": self.password}, auth=False)
            self._token = body["access_token"]
        return self._token

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        auth: bool = True,
        accept: str = "application/json",
        raw: bool = False,
    ) -> Any:
        url = self.base_url + path
        if params:
            url += "?" + urllib.parse.urlencode(
                [(k, x) for k, v in params.items() if v is not None for x in (v if isinstance(v, list) else [v])]
            )
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(2):
            req = urllib.request.Request(url, data=data, method=method)
            req.add_header("Accept", accept)
            if data is not None:
                req.add_header("Content-Type", "application/json")
            if auth:
                req.add_header("Authorization", f"Bearer {self.token()}")
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    payload = r.read().decode()
                    return payload if raw else (json.loads(payload) if payload else None)
            except urllib.error.HTTPError as e:
                text = e.read().decode(errors="replace")
                if e.code == 401 and auth and attempt == 0:
                    self._token = None  # expired: log in again once
                    continue
                raise ApiError(method, url, e.code, text) from None
        raise AssertionError("unreachable")

    def get(self, path: str, **params: Any) -> Any:
        return self._request("GET", "/api/v2" + path, params=params)

    def post(self, path: str, body: Any) -> Any:
        return self._request("POST", "/api/v2" + path, body)

    def patch(self, path: str, body: Any, **params: Any) -> Any:
        return self._request("PATCH", "/api/v2" + path, body, params=params)

    @staticmethod
    def _q(s: str) -> str:
        return urllib.parse.quote(s, safe="")

    # ---- DAGs and runs -----------------------------------------------------------------

    def dag(self, dag_id: str) -> dict[str, Any]:
        return self.get(f"/dags/{self._q(dag_id)}")

    def import_errors(self) -> list[dict[str, Any]]:
        return self.get("/importErrors", limit=100).get("import_errors", [])

    def wait_for_dag(self, dag_id: str, timeout: float = 60) -> dict[str, Any]:
        """Until the DAG is parsed and listed; raises with the import errors on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.dag(dag_id)
            except ApiError as e:
                if e.status != 404:
                    raise
            if time.monotonic() > deadline:
                errors = "\n".join(
                    f"{e.get('filename')}: {e.get('stack_trace', '')[-1500:]}" for e in self.import_errors()
                )
                tail = self.services.logs_tail(20) if self.services else ""
                raise TimeoutError(f"DAG {dag_id} not listed after {timeout}s; import errors:\n{errors}\n{tail}")
            time.sleep(0.5)

    def unpause(self, dag_id: str) -> dict[str, Any]:
        return self.patch(f"/dags/{self._q(dag_id)}", {"is_paused": False})

    def pause(self, dag_id: str) -> dict[str, Any]:
        return self.patch(f"/dags/{self._q(dag_id)}", {"is_paused": True})

    def trigger(
        self, dag_id: str, conf: Mapping[str, Any] | None = None, *, run_id: str | None = None, note: str | None = None
    ) -> str:
        body: dict[str, Any] = {"logical_date": None, "conf": dict(conf or {})}
        if run_id:
            body["dag_run_id"] = run_id
        if note:
            body["note"] = note
        return self.post(f"/dags/{self._q(dag_id)}/dagRuns", body)["dag_run_id"]

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.get(f"/dags/{self._q(dag_id)}/dagRuns/{self._q(run_id)}")

    def dag_runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self.get(f"/dags/{self._q(dag_id)}/dagRuns", limit=100, order_by="-run_after")["dag_runs"]

    def wait_for_run(
        self,
        dag_id: str,
        run_id: str,
        states: Iterable[str] = ("success", "failed"),
        timeout: float = 120,
        poll_s: float = 0.5,
    ) -> dict[str, Any]:
        """Until the run is in one of ``states``; returns the run. Raises on timeout (with the
        task states), or when it ends in a final state not asked for. ``poll_s``: between two
        requests (a benchmark polls slowly: each request costs the api-server CPU)."""
        states = set(states)
        deadline = time.monotonic() + timeout
        while True:
            run = self.dag_run(dag_id, run_id)
            if run["state"] in states:
                return run
            final = run["state"] in ("success", "failed")
            if final or time.monotonic() > deadline:
                tis = [(t["task_id"], t["map_index"], t["state"]) for t in self.task_instances(dag_id, run_id)]
                msg = f"run {run_id} of {dag_id} is {run['state']!r}, not in {sorted(states)}"
                if final:
                    raise AssertionError(f"{msg}; tasks: {tis}")
                raise TimeoutError(f"{msg} after {timeout}s; tasks: {tis}")
            time.sleep(poll_s)

    # ---- task instances ----------------------------------------------------------------

    def task_instances(self, dag_id: str, run_id: str, task_id: str | None = None) -> list[dict[str, Any]]:
        """Every task instance of a run, mapped ones one per map index (``map_index``,
        ``rendered_map_index``, ``state``, ``try_number``...)."""
        out: list[dict[str, Any]] = []
        offset = 0
        while True:
            page = self.get(
                f"/dags/{self._q(dag_id)}/dagRuns/{self._q(run_id)}/taskInstances",
                task_id=task_id,
                limit=100,
                offset=offset,
                order_by="map_index",
            )
            out += page["task_instances"]
            offset += len(page["task_instances"])
            if not page["task_instances"] or offset >= page["total_entries"]:
                return out

    def task_instance(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, Any]:
        path = f"/dags/{self._q(dag_id)}/dagRuns/{self._q(run_id)}/taskInstances/{self._q(task_id)}"
        return self.get(path if map_index < 0 else f"{path}/{map_index}")

    def task_log(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1, try_number: int | None = None
    ) -> str:
        """The task's log as text, one line per event (``timestamp level event key=value``)."""
        if try_number is None:
            try_number = max(1, self.task_instance(dag_id, run_id, task_id, map_index)["try_number"])
        body = self.get(
            f"/dags/{self._q(dag_id)}/dagRuns/{self._q(run_id)}/taskInstances/{self._q(task_id)}/logs/{try_number}",
            map_index=map_index,
            full_content="true",
        )
        lines = []
        for item in body.get("content", []):
            if isinstance(item, str):
                lines.append(item)
                continue
            extra = " ".join(
                f"{k}={v}" for k, v in item.items() if k not in ("timestamp", "level", "event", "logger", "sources")
            )
            lines.append(
                " ".join(
                    str(x)
                    for x in (item.get("timestamp"), item.get("level"), item.get("event"), extra)
                    if x not in (None, "")
                )
            )
        return "\n".join(lines)

    def patch_task_instance_state(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        new_state: str = "failed",
        map_index: int | None = None,
        *,
        note: str | None = None,
        include_downstream: bool = False,
    ) -> list[dict[str, Any]]:
        """Mark a task instance (one map index, or all of a mapped task) ``failed``/``success``/``skipped``."""
        path = f"/dags/{self._q(dag_id)}/dagRuns/{self._q(run_id)}/taskInstances/{self._q(task_id)}"
        if map_index is not None:
            path += f"/{map_index}"
        body: dict[str, Any] = {"new_state": new_state, "include_downstream": include_downstream}
        if note is not None:
            body["note"] = note
        return self.patch(path, body)["task_instances"]

    def clear_task_instances(
        self,
        dag_id: str,
        run_id: str,
        task_ids: Iterable[str | tuple[str, int]],
        *,
        only_failed: bool = False,
        include_downstream: bool = False,
        dry_run: bool = False,
        reset_dag_runs: bool = True,
    ) -> list[dict[str, Any]]:
        """Clear task instances of a run (``task_id`` or ``(task_id, map_index)``) so the scheduler runs them again."""
        body = {
            "dag_run_id": run_id,
            "dry_run": dry_run,
            "only_failed": only_failed,
            "reset_dag_runs": reset_dag_runs,
            "include_downstream": include_downstream,
            "task_ids": [list(t) if isinstance(t, tuple) else t for t in task_ids],
        }
        return self.post(f"/dags/{self._q(dag_id)}/clearTaskInstances", body)["task_instances"]
