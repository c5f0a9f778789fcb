"""The embedded Spark Connect server: one Spark application that the snapshot tasks share.

A snapshot task that starts its own Spark application pays seconds of JVM start-up and JIT
warm-up before reading a row, for every batch. With ``spark_runtime="connect"`` and no
Connect endpoint of the user's, the first task on a machine starts a local Spark Connect
server (``ensure_local_server``) and later tasks attach to it as thin clients.

Its life is bounded by *leases*: every client holds one (a file it touches every few seconds)
while it runs, and a small supervisor process (``python -m ...connect_server serve``) stops
the server once no lease has been fresh for ``idle_s`` seconds, so nothing outlives the load
for long and nobody has to stop it. A task killed with -9 leaves a lease that goes stale.

Security: the server listens on 127.0.0.1 only and requires a random token, which the
server gets through its environment (``SPARK_CONNECT_AUTHENTICATE_TOKEN``) and clients from
``server.json`` (mode 600) in the runtime directory: never on a command line or in a log.

A server started for another version of this package or other settings (jars, master,
memory) is not reused: its Python workers would run the old code. The new one starts on
another port; the old one stops when its own leases end.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from . import class_sharing
from .session import LIGHT_JIT_OPTION

log = logging.getLogger(__name__)

RUNTIME_DIR_ENV = "MYSQLCDC_RUNTIME_DIR"
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
LEASE_REFRESH_S = 5.0
LEASE_STALE_S = 45.0
DEFAULT_IDLE_S = 300.0


def runtime_dir() -> Path:
    return Path(os.environ.get(RUNTIME_DIR_ENV) or Path.home() / ".mysqlcdc" / "connect")


@dataclass(frozen=True)
class ServerInfo:
    port: int
    token: str
    supervisor_pid: int
    fingerprint: str
    started_at: float
    log_path: str

    @property
    def url(self) -> str:
        """The Connect URL with its token: a secret (never log it; ``display_url`` is for logs)."""
        return f"sc://localhost:{self.port}/;token={self.token}"

    @property
    def display_url(self) -> str:
        return f"sc://localhost:{self.port}"


@dataclass(frozen=True)
class ServerSettings:
    """What the server is started with; a running server with other settings is not reused."""

    master: str = "local[*]"
    driver_memory: str = "2g"
    jars: tuple[str, ...] = ()
    conf: tuple[tuple[str, str], ...] = ()

    def fingerprint(self) -> str:
        from .package_files import package_digest  # the package's content: workers import it

        h = hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode())
        h.update(package_digest().encode())
        h.update(sys.executable.encode())
        return h.hexdigest()[:16]


def _alive(pid: int) -> bool:
    """Running (a zombie -- exited, not yet reaped by the task that started it -- is not)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _listening(port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout_s):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read_info(path: Path) -> ServerInfo | None:
    try:
        return ServerInfo(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    import fcntl

    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_local_server(
    settings: ServerSettings,
    idle_s: float = DEFAULT_IDLE_S,
    start_timeout_s: float = 180.0,
    directory: Path | None = None,
    wait: bool = True,
) -> ServerInfo:
    """The running local server for ``settings``, started if there is none (one at a time: a
    file lock, so mapped tasks starting together share one). ``wait=False`` returns once the
    server is starting (validate and plan start it early, so its JVM is up when the first snapshot
    task asks); a caller that waits also waits for a server another process is starting."""
    directory = directory or runtime_dir()
    fp = settings.fingerprint()
    info_path = directory / f"server-{fp}.json"
    with _locked(directory):
        info = _read_info(info_path)
        if info is not None and _alive(info.supervisor_pid):
            if wait and not _listening(info.port):
                _wait_listening(info, None, start_timeout_s, info_path)
            return info
        port, token = _free_port(), secrets.token_hex(24)
        log_path = directory / f"server-{fp}.log"
        env = dict(os.environ, **{TOKEN_ENV: token})
        env.update(_python_env(settings))
        bindir = str(Path(sys.executable).parent)
        if bindir not in env.get("PATH", "").split(os.pathsep):
            env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        cmd = [
            sys.executable,
            "-m",
            __name__,
            "serve",
            "--dir",
            str(directory),
            "--fingerprint",
            fp,
            "--port",
            str(port),
            "--idle-s",
            str(idle_s),
            "--settings",
            json.dumps(asdict(settings)),
        ]
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=str(directory)
            )
        info = ServerInfo(port, token, proc.pid, fp, time.time(), str(log_path))
        _write_private(info_path, json.dumps(asdict(info)))
        if not wait:
            log.info(
                "starting a local Spark Connect server on %s (%s, stops after %.0f s without a task)",
                info.display_url,
                settings.master,
                idle_s,
            )
            return info
        _wait_listening(info, proc, start_timeout_s, info_path)
        log.info(
            "started a local Spark Connect server on %s (%s, stops after %.0f s without a task)",
            info.display_url,
            settings.master,
            idle_s,
        )
        return info


def _wait_listening(info: ServerInfo, proc: subprocess.Popen | None, timeout_s: float, info_path: Path) -> None:
    """Until the server accepts connections; its supervisor dead or the time up: an error (and
    the server's files removed, so the next caller starts a new one)."""
    from ...cdc.errors import CdcError

    deadline = time.monotonic() + timeout_s
    while not _listening(info.port):
        gone = proc.poll() is not None if proc is not None else not _alive(info.supervisor_pid)
        if gone or time.monotonic() > deadline:
            if not gone:
                os.killpg(info.supervisor_pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                info_path.unlink()
            raise CdcError(
                f"the local Spark Connect server did not start within {timeout_s:.0f} s (its log: "
                f"{info.log_path}):\n{_tail(Path(info.log_path))}\nFix: see the log; or set spark_runtime='submit' to "
                "run each batch with spark-submit, or give a Spark Connect connection of a running cluster."
            )
        time.sleep(0.25)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Lease:
    """Held while a client uses a local server: a file under ``leases/`` touched every few
    seconds by a daemon thread; removed on exit. The supervisor ignores stale ones."""

    def __init__(self, info: ServerInfo, directory: Path | None = None) -> None:
        self.path = (directory or runtime_dir()) / "leases" / f"{info.fingerprint}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._touch, name="connect-lease", daemon=True)

    def __enter__(self) -> "Lease":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(str(os.getpid()))
        self._thread.start()
        return self

    def _touch(self) -> None:
        while not self._stop.wait(LEASE_REFRESH_S):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self.path.unlink()


def fresh_leases(directory: Path, fingerprint: str, now: float | None = None) -> list[Path]:
    now = time.time() if now is None else now
    out = []
    for p in (directory / "leases").glob(f"{fingerprint}-*"):
        try:
            if now - p.stat().st_mtime < LEASE_STALE_S:
                out.append(p)
            else:
                p.unlink()
        except OSError:
            continue
    return out


def _server_command(settings: ServerSettings, port: int, java_options: Sequence[str] = ()) -> list[str]:
    bindir = Path(sys.executable).parent
    submit = bindir / "spark-submit"
    cmd = [
        str(submit) if submit.exists() else "spark-submit",
        "--class",
        SERVER_CLASS,
        "--master",
        settings.master,
        "--driver-memory",
        settings.driver_memory,
        "--name",
        "mysqlcdc snapshots (Spark Connect)",
    ]
    if settings.jars:
        cmd += ["--jars", ",".join(settings.jars)]
    conf = {
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.ui.showConsoleProgress": "false",
        **dict(settings.conf),
    }
    if java_options:  # with the user's own driver options, not instead of them
        conf["spark.driver.extraJavaOptions"] = " ".join(
            [*filter(None, [conf.get("spark.driver.extraJavaOptions", "").strip()]), *java_options]
        )
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd


def serve(directory: Path, fingerprint: str, port: int, idle_s: float, settings: ServerSettings) -> int:
    """The supervisor: runs the server and stops it once idle (or when told to with SIGTERM)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    cds_key = class_sharing.archive_key(settings.jars) if class_sharing.enabled() else None
    class_list = directory / f"classes-{fingerprint}-{os.getpid()}.lst"
    java_options = class_sharing.java_options(
        cds_key, class_list, dict(settings.conf).get("spark.driver.extraJavaOptions", "")
    )
    child = subprocess.Popen(_server_command(settings, port, java_options), stdout=sys.stdout, stderr=subprocess.STDOUT)
    log.info(
        "Spark Connect server pid %d on 127.0.0.1:%d%s%s",
        child.pid,
        port,
        ""
        if not java_options
        else " (class-data-sharing archive)"
        if "-Xshare:auto" in java_options
        else " (recording its classes for a class-data-sharing archive)",
        " (JIT without C2: the snapshot rows bypass its JVM)"
        if LIGHT_JIT_OPTION in dict(settings.conf).get("spark.driver.extraJavaOptions", "")
        else "",
    )
    recording = any(o.startswith("-XX:DumpLoadedClassList=") for o in java_options)
    java_argv: list[str] | None = None
    last_busy = time.time()
    rc = 0
    try:
        while not stop.wait(2.0):
            if recording and java_argv is None and _listening(port):
                java_argv = class_sharing.java_command_of(child.pid)  # spark-submit has exec'd java by now
            if child.poll() is not None:
                rc = child.returncode or 1
                log.error("the Spark Connect server exited with %s", child.returncode)
                break
            if fresh_leases(directory, fingerprint) or not _listening(port):
                last_busy = time.time()  # idle counts from when the server could be used
            elif time.time() - last_busy > idle_s:
                log.info("no snapshot task for %.0f s: stopping the Spark Connect server", idle_s)
                break
    finally:
        info_path = directory / f"server-{fingerprint}.json"
        info = _read_info(info_path)
        if info is not None and info.supervisor_pid == os.getpid():
            with contextlib.suppress(OSError):
                info_path.unlink()
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if recording and java_argv is not None and cds_key is not None:
            with contextlib.suppress(OSError):
                if class_sharing.start_build(cds_key, java_argv, class_list):
                    log.info(
                        "building the class-data-sharing archive %s in the background",
                        class_sharing.archive_path(cds_key),
                    )
        with contextlib.suppress(OSError):
            class_list.unlink()
    return rc


def _python_env(settings: ServerSettings) -> dict[str, str]:
    """The Python the server's Python workers run. Local master: this interpreter (its executors
    are this machine's). A cluster: the user's ``spark.pyspark.python`` if given, else none, so the
    executors run ``python3`` from their nodes' PATH: the cluster's Python, never a path that only
    exists on this Airflow worker."""
    if settings.master.strip().lower().startswith("local"):
        return {"PYSPARK_PYTHON": sys.executable}
    given = dict(settings.conf).get("spark.pyspark.python")
    return {"PYSPARK_PYTHON": given} if given else {}  # else the user's $PYSPARK_PYTHON, or python3


def stop_idle_servers(directory: Path | None = None, timeout_s: float = 40.0) -> int:
    """Stop the local servers no task uses now (no fresh lease). On a standalone cluster an idle
    server still holds its executors' cores, which the stream's driver and executors need."""
    directory = directory or runtime_dir()
    stopped = 0
    for path in directory.glob("server-*.json"):
        info = _read_info(path)
        if info is None or not _alive(info.supervisor_pid) or fresh_leases(directory, info.fingerprint):
            continue
        stop_server(info, timeout_s)
        stopped += 1
    return stopped


def stop_local_servers(directory: Path | None = None, timeout_s: float = 40.0) -> int:
    """Stop every local server of this runtime directory (tests, a user's clean-up); how many."""
    directory = directory or runtime_dir()
    stopped = 0
    for path in directory.glob("server-*.json"):
        info = _read_info(path)
        if info is None or not _alive(info.supervisor_pid):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        stop_server(info, timeout_s)
        stopped += 1
    return stopped


def stop_server(info: ServerInfo, timeout_s: float = 40.0) -> None:
    """Stop one local server through its supervisor (SIGTERM; SIGKILL of its group after
    ``timeout_s``); the supervisor removes the server's info file."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(info.supervisor_pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(info.supervisor_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(info.supervisor_pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(info.supervisor_pid, signal.SIGKILL)


def settings_from(
    master: str, jars: Sequence[str] = (), conf: Mapping[str, str] | None = None, driver_memory: str = "2g"
) -> ServerSettings:
    return ServerSettings(master, driver_memory, tuple(jars), tuple(sorted((conf or {}).items())))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the mysqlcdc Spark Connect server supervisor")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--dir", required=True)
    s.add_argument("--fingerprint", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--idle-s", type=float, default=DEFAULT_IDLE_S)
    s.add_argument("--settings", required=True)
    sub.add_parser("stop")
    args = ap.parse_args(argv)
    if args.cmd == "stop":
        print(f"stopped {stop_local_servers()} server(s)")
        return 0
    d = json.loads(args.settings)
    settings = ServerSettings(d["master"], d["driver_memory"], tuple(d["jars"]), tuple(tuple(x) for x in d["conf"]))
    return serve(Path(args.dir), args.fingerprint, args.port, args.idle_s, settings)


if __name__ == "__main__":
    sys.exit(main())


def endpoint_reachable(url: str, timeout_s: float = 10.0) -> str | None:
    """None when something accepts TCP connections at the Connect URL's host and port, else why
    not. The Connect client itself retries an unreachable endpoint for about ten minutes."""
    from urllib.parse import urlparse

    parsed = urlparse(url.replace("sc://", "http://", 1))
    host, port = parsed.hostname or "localhost", parsed.port or 15002
    try:
        with socket.create_connection((host, port), timeout_s):
            return None
    except OSError as e:
        return f"{host}:{port}: {e.strerror or type(e).__name__}"


_CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


@contextlib.contextmanager
def remote_session(url: str) -> Iterator[Any]:
    """A Spark Connect client session for the ``with`` block, stopped at its end. PySpark marks
    the whole process as a Connect client in ``os.environ`` (its column functions read the mark);
    the mark is removed afterwards, or every Spark job this process starts later (``spark-submit``
    of the stream, a classic session) would inherit it and fail with ``CONNECT_URL_NOT_SET``."""
    from pyspark.sql import SparkSession

    before = {k: os.environ.get(k) for k in _CONNECT_ENV}
    spark = None
    try:
        spark = SparkSession.builder.remote(url).create()
        yield spark
    finally:
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
