"""Run the binlog stream job on this machine as a detached, supervised background process.

Why detached: the stream lives for days, far longer than the Airflow task that starts it.
The job runs in its own session (``start_new_session``), so the task's exit, a SIGINT or a
kill of the task's process group leave it running; ``stream/process.json`` in the state
location records it (pid, process group, host, argv without secrets, log path) so a later
task can find it, check it is alive and stop it.

Why the password goes through the environment only: argv is world-readable (``ps``,
``/proc/<pid>/cmdline``) and ends up in logs and ``process.json``; a process's environment is
readable only by its user. The job reads ``$MYSQLCDC_PASSWORD`` (see ``jobs/binlog_stream.py``).

No Spark is imported here: the Airflow operators import this module in their workers.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ...cdc.errors import REPORT_BUG, CdcError
from ...cdc.source.config import PASSWORD_ENV

if TYPE_CHECKING:
    from ...cdc.state import StateStore
    from .stream_status import StreamStatus

log = logging.getLogger(__name__)

PROCESS_REL = "stream/process.json"
DEFAULT_MASTER = "local[2,4]"
LOG_TAIL_LINES = 40

# Popen objects of the streams this process launched, by pid: lets us reap our own exited
# children (a zombie would otherwise look alive to a pid check).
_children: dict[int, subprocess.Popen] = {}


class StreamStartError(CdcError):
    """The stream process could not be started, died, or did not commit in time (see the log tail)."""


class StreamFailedError(StreamStartError):
    """The stream just launched started its query, which then failed before committing: the stream's
    own reason (``status.exception``), not a race with another launcher."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class LocalStreamProcess:
    """A stream job launched on this host (the content of ``stream/process.json``).

    ``popen`` is set only in the Python process that launched it (to reap it and read its
    exit code); it is never written to the file.
    """

    pid: int
    pgid: int
    host: str
    started_at: float
    argv: list[str]
    log_path: str
    config_url: str
    popen: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    @property
    def job_file(self) -> str:
        return self.argv[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "pgid": self.pgid,
            "host": self.host,
            "started_at": self.started_at,
            "argv": list(self.argv),
            "log_path": self.log_path,
            "config_url": self.config_url,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LocalStreamProcess":
        return cls(
            int(d["pid"]),
            int(d["pgid"]),
            str(d["host"]),
            float(d["started_at"]),
            [str(a) for a in d["argv"]],
            str(d["log_path"]),
            str(d["config_url"]),
        )

    def is_alive(self) -> bool:
        """The process exists and is not a zombie (our own exited child is reaped here)."""
        return _alive(self.pid)

    def returncode(self, wait_s: float = 0.0) -> int | None:
        """The exit code, if this process launched it and it has exited; else None. ``wait_s``:
        how long to wait for it (a process whose main thread has exited is dead for
        ``is_alive`` while its other threads still finish, and has no exit code until then)."""
        popen = self.popen or _children.get(self.pid)
        if popen is None:
            return None
        if wait_s > 0:
            try:
                return popen.wait(wait_s)
            except subprocess.TimeoutExpired:
                return None
        return popen.poll()


# --- /proc helpers --------------------------------------------------------------------------------


def _reap(pid: int) -> None:
    """Collect the exit status of our own exited child, so it stops being a zombie."""
    popen = _children.get(pid)
    if popen is not None:
        popen.poll()
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child: its parent (or init) reaps it
        pass


def _proc_state(pid: int) -> str | None:
    """The state letter of /proc/<pid>/stat ('R', 'S', 'Z', ...); None if no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return "?"
    return text[text.rfind(")") + 2 :].split(" ", 1)[0]


def _alive(pid: int) -> bool:
    """Exists and is not a zombie. A process whose main thread is a zombie is exiting (its
    other threads may take a moment): dead for our purposes, and reaped once it can be."""
    if pid <= 0:
        return False
    _reap(pid)
    if Path("/proc").is_dir():
        state = _proc_state(pid)
        if state == "Z":
            _reap(pid)
            return False
        return state is not None
    try:  # no /proc (macOS): existence only
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cmdline(pid: int) -> list[str] | None:
    """The process's argv from /proc, or None where /proc is not available."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_until(pred, timeout_s: float, every_s: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
    return True


# --- files ----------------------------------------------------------------------------------------


def log_tail(path: str | os.PathLike | None, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a (possibly large) log file; '' if it does not exist."""
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            chunk = 64 * 1024
            while True:
                start = max(0, size - chunk)
                f.seek(start)
                data = f.read(size - start)
                if start == 0 or data.count(b"\n") > lines:
                    break
                chunk *= 4
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", errors="replace").splitlines()[-lines:])


def _is_local(state: "StateStore") -> bool:
    protocol = state.fs.protocol
    return bool({"file", "local"} & set(protocol if isinstance(protocol, (tuple, list)) else (protocol,)))


def default_log_path(state: "StateStore", pipeline_name: str) -> str:
    """``<state>/stream/stream.log`` for a local state location; else ``~/.mysqlcdc/<name>/stream.log``
    (the child's stdout must go to a local file; object stores cannot be appended to)."""
    if _is_local(state):
        return state.path("stream", "stream.log")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", pipeline_name) or "pipeline"
    return str(Path.home() / ".mysqlcdc" / safe / "stream.log")


def _read_record(state: "StateStore") -> LocalStreamProcess | None:
    try:
        if not state.exists(PROCESS_REL):
            return None
        return LocalStreamProcess.from_dict(state.read_json(PROCESS_REL))
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("ignoring unreadable %s: %s", state.url(PROCESS_REL), e)
        return None


# --- public API -----------------------------------------------------------------------------------


def _child_env(password: str, python: str, extra_env: Mapping[str, str] | None, master: str) -> dict[str, str]:
    env = dict(os.environ)
    # A caller that holds a SparkSession itself has these set; the child must start its own
    # JVM, not attach to the caller's (which dies with the caller).
    for name in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"):
        env.pop(name, None)
    env.update(extra_env or {})
    env[PASSWORD_ENV] = password
    if master.strip().lower().startswith("local"):
        env["PYSPARK_PYTHON"] = python  # local executors: this interpreter; a cluster's: its own Python
    elif "PYSPARK_PYTHON" not in env:
        # Client mode on a cluster: one name, python3, serves the driver's own Python workers (the
        # source's planning runs there) and the executors, each resolving it on its own PATH.
        bindir = os.path.dirname(python)
        if bindir not in env.get("PATH", "").split(os.pathsep):
            env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def _check_same_state(state_location: str, state: "StateStore") -> None:
    """The job writes its checkpoint and status.json under the config's state_location; the
    launcher records and watches ``state``: they must be one place."""
    from ...cdc.state import StateStore

    theirs = StateStore(state_location)
    if (theirs.root, theirs.fs.protocol) != (state.root, state.fs.protocol):
        raise StreamStartError(
            f"the pipeline config's state_location ({state_location}) is not the state location given to the "
            f"launcher ({state.location}): the job would write its checkpoint and status elsewhere. Fix: pass "
            "StateStore(config.state_location)."
        )


def launch_local_stream(
    config_url: str,
    state: "StateStore",
    *,
    password: str,
    master: str = DEFAULT_MASTER,
    python: str = sys.executable,
    application: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    log_path: str | None = None,
) -> LocalStreamProcess:
    """Start ``python <job> --config <config_url> --master <master>`` detached; record it in
    ``stream/process.json``; return at once (use ``wait_for_first_commit`` to know it works).

    The password reaches the child only through ``$MYSQLCDC_PASSWORD`` in its environment.
    stdout and stderr are appended to ``log_path`` (default: see ``default_log_path``). The
    child keeps the caller's working directory, so relative paths in the config mean the same
    to both. Refuses to start a second stream of the same state location on this host.
    """
    from ...cdc.pipeline import load_pipeline_config
    from .package_files import application_path

    if password is None:
        raise StreamStartError(
            f"no source password given. Fix: pass password= (it reaches the job as ${PASSWORD_ENV})."
        )
    running = running_local_stream(state)
    if running is not None:
        raise StreamStartError(
            f"a binlog stream of this pipeline is already running on {running.host} (pid {running.pid}, "
            f"log {running.log_path}). Fix: stop it first with stop_local_stream(), or leave it running."
        )
    config = load_pipeline_config(config_url)  # fails fast on a missing or invalid config
    _check_same_state(config.state_location, state)
    app = application or application_path("binlog_stream")
    log_file = Path(log_path or default_log_path(state, config.name))
    log_file.parent.mkdir(parents=True, exist_ok=True)
    argv = [python, app, "--config", config_url, "--master", master]
    started_at = time.time()
    with open(log_file, "ab") as out:
        out.write(
            f"\n=== mysqlcdc: launching the binlog stream at {time.strftime('%Y-%m-%d %H:%M:%S')}: "
            f"{' '.join(argv)}\n".encode()
        )
        out.flush()
        try:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=_child_env(password, python, extra_env, master),
                start_new_session=True,
                close_fds=True,
            )
        except OSError as e:
            raise StreamStartError(
                f"cannot start the binlog stream ({' '.join(argv)}): {e}. "
                "Fix: check the python= interpreter and the application path."
            ) from None
    _children[popen.pid] = popen
    proc = LocalStreamProcess(
        pid=popen.pid,
        pgid=popen.pid,
        host=socket.gethostname(),
        started_at=started_at,
        argv=argv,
        log_path=str(log_file),
        config_url=config_url,
        popen=popen,
    )
    try:
        state.write_json(PROCESS_REL, proc.to_dict())
    except Exception:
        _terminate(proc, 10)  # an unrecorded stream could never be found or stopped again
        raise
    log.info("binlog stream launched: pid %d, log %s", proc.pid, proc.log_path)
    return proc


def recorded_log_path(state: "StateStore") -> str | None:
    """The log file of the last local launch (running or not), if one was recorded."""
    rec = _read_record(state)
    return rec.log_path if rec is not None else None


def running_local_stream(state: "StateStore") -> LocalStreamProcess | None:
    """The recorded stream process, if it runs on this host, is alive (not a zombie), and its
    command line still holds the job file and config URL (guards against a reused pid)."""
    rec = _read_record(state)
    if rec is None or rec.host != socket.gethostname() or not _alive(rec.pid):
        return None
    cmd = _cmdline(rec.pid)
    if cmd is not None and not (rec.job_file in cmd and rec.config_url in cmd):
        if not (rec.pid in _children and (cmd == [] or cmd == _cmdline(os.getpid()))):
            return None  # the pid now belongs to another program
        # else: our own child between fork and exec (it still shows our command line), or
        # inside execve (its command line reads empty for that moment)
    rec.popen = _children.get(rec.pid)
    return rec


def _terminate(proc: LocalStreamProcess, timeout_s: float) -> None:
    """SIGTERM the driver, SIGKILL the whole group after ``timeout_s``; then clear the group.

    The driver alone gets SIGTERM first: it stops the query, closes the sink and stops Spark
    (jobs/binlog_stream.py). SIGTERM to the whole group would also hit the JVM, whose
    shutdown would pull Spark away under the driver's clean stop. What the driver leaves
    behind (JVM, Python workers) gets SIGKILL after a short grace period.
    """
    if proc.pgid == os.getpgrp():
        raise StreamStartError(
            f"refusing to signal process group {proc.pgid}: it is the caller's own group. {REPORT_BUG}"
        )
    try:
        os.kill(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    if not _wait_until(lambda: not _alive(proc.pid), timeout_s):
        log.warning("binlog stream pid %d did not stop within %.0f s of SIGTERM: SIGKILL", proc.pid, timeout_s)
        _killpg(proc.pgid)
        _wait_until(lambda: not _alive(proc.pid), 10)
    if not _wait_until(lambda: _group_gone(proc), 10):
        _killpg(proc.pgid)
        _wait_until(lambda: _group_gone(proc), 5)


def _group_gone(proc: LocalStreamProcess) -> bool:
    # The leader shows as a zombie while its other threads still exit, and stays in the
    # group until reaped: reap it on every look.
    _reap(proc.pid)
    return not _group_alive(proc.pgid)


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop_local_stream(state: "StateStore", timeout_s: float = 30) -> bool:
    """Stop the recorded stream: SIGTERM (clean stop), SIGKILL after ``timeout_s``; remove
    ``process.json``. True if a running stream was stopped, False if none was running here
    (a record of a stream on another host is left in place: stop it on that host)."""
    rec = _read_record(state)
    if rec is None:
        return False
    if rec.host != socket.gethostname():
        log.warning(
            "the binlog stream was launched on %s (pid %d), not here (%s): stop it there",
            rec.host,
            rec.pid,
            socket.gethostname(),
        )
        return False
    running = running_local_stream(state)
    if running is not None:
        _terminate(running, timeout_s)
    state.delete(PROCESS_REL)
    return running is not None


def stop_stream(state: "StateStore", reason: str, timeout_s: float = 60) -> bool:
    """Stop the pipeline's stream wherever its driver runs: a local one by signal, one elsewhere
    (a cluster node, another Airflow worker) through a stop request in the state location, then
    wait until it gave up its lease. True if a running stream was stopped."""
    from ...cdc.store.lease import StreamLease

    if stop_local_stream(state, timeout_s=min(timeout_s, 30)):
        return True
    lease = StreamLease(state)
    if lease.holder() is None:
        return False
    state.request_stream_stop(reason)
    deadline = time.monotonic() + timeout_s
    while lease.holder() is not None:
        if time.monotonic() > deadline:
            raise StreamStartError(
                f"the binlog stream did not stop within {timeout_s:.0f} s of the stop request (its lease is still "
                f"held: {lease.holder()}). Fix: stop its driver through the cluster manager (the Spark master's UI, "
                "yarn application -kill, kubectl delete pod), then try again."
            )
        time.sleep(1.0)
    return True


def _died_message(proc: LocalStreamProcess) -> str:
    rc = proc.returncode(wait_s=10.0)
    how = f"exited with code {rc}" if rc is not None else "exited"
    return (
        f"the binlog stream (pid {proc.pid}) {how} before committing its first micro-batch. "
        f"Fix: correct the cause shown in its log ({proc.log_path}) and launch it again."
    )


def _with_tail(message: str, log_path: str | None) -> str:
    tail = log_tail(log_path)
    if not tail:
        return message
    return f"{message}\n--- last {LOG_TAIL_LINES} lines of {log_path} ---\n{tail}"


def wait_for_first_commit(
    state: "StateStore",
    since: float,
    timeout_s: float,
    process: LocalStreamProcess | None = None,
    poll_s: float = 0.5,
    local: bool = True,
) -> "StreamStatus":
    """Return the stream's status once it shows a micro-batch committed at or after ``since``
    (epoch seconds, e.g. the launch time); raise ``StreamStartError`` (with the log's tail)
    if ``process`` dies first, if the query fails, or after ``timeout_s``. On timeout the
    process is left running: the caller decides whether to stop it.

    A relaunched stream with nothing new to read (a quiet server) runs no micro-batch at all
    -- Spark only runs one when the source's offset moved -- so an idle trigger after
    ``since`` confirms it too: then ``status.committed_at`` is None, ``status.idle_at`` set,
    and ``batch_id`` / ``committed_offset`` are the checkpoint's last commit.

    ``local=False``: the driver runs on a cluster; no local process record is consulted.
    """
    from .stream_status import read_status

    process = process or (_read_record(state) if local else None)
    deadline = time.monotonic() + timeout_s
    log_path = process.log_path if process is not None else None

    def fresh_commit() -> "StreamStatus | None":
        st = read_status(state)
        if st is not None and st.works_since(since):
            return st
        if st is not None and st.state == "failed" and st.updated_at >= since:
            raise StreamFailedError(
                _with_tail(
                    f"the binlog stream's query failed before committing a micro-batch: {st.exception}", log_path
                ),
                st.exception or "",
            )
        return None

    while True:
        st = fresh_commit()
        if st is not None:
            return st
        if process is not None and not process.is_alive():
            st = fresh_commit()  # it may have committed just before exiting
            if st is not None:
                return st
            raise StreamStartError(_with_tail(_died_message(process), log_path))
        if time.monotonic() >= deadline:
            where = (
                f" (pid {process.pid}, still running; log {log_path})"
                if process is not None
                else " (its driver on the cluster: see its log through the Spark master's UI)"
                if not local
                else ""
            )
            raise StreamStartError(
                _with_tail(
                    f"the binlog stream{where} has not committed a micro-batch within {timeout_s:.0f} s. It may still "
                    "be starting (Spark start-up, a long first micro-batch: lower stream.max_events_per_batch) or be "
                    "stuck. Fix: see its log; it was left running: stop it with stop_local_stream() if it should "
                    "not run.",
                    log_path,
                )
            )
        time.sleep(poll_s)
