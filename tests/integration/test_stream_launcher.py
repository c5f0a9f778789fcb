"""The stream job launched detached by ``spark/runtime/stream_launcher.py``, watched through ``stream/status.json``.

Two parts: the supervision mechanics against stand-in job scripts (fast, no Spark), and the
real job against MariaDB into a Delta sink: first commit detected, lag back to ~0 after the
writes stop, SIGKILL seen as "not running", relaunch resumes from the checkpoint (sink ==
source), a clean stop, and the password nowhere in the log, status or process files.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.chunks import FinishedBatch, KeyRange
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.runtime import stream_launcher
from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import (
    PROCESS_REL,
    StreamStartError,
    launch_local_stream,
    log_tail,
    running_local_stream,
    stop_local_stream,
    wait_for_first_commit,
)
from airflow_provider_mysqlcdc.spark.runtime.stream_status import STATUS_REL, committed_key, read_status
from mysqlcdc_harness.sink_compare import delta_rows, mysql_rows, wait_until_equal
from mysqlcdc_harness.stream_job import committed
from mysqlcdc_harness.tables import VALUE_COLS, create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter, TableSpec

pytestmark = [pytest.mark.integration]

SECRET = "pw-Launcher-7Qz!"


def _wait(pred, timeout: float, what: str, every: float = 0.2) -> None:
    deadline = time.time() + timeout
    while not pred():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


# --- supervision mechanics, with stand-in job scripts ------------------------------------------------

FAKE_JOB = """
import os, signal, sys, time
print("fake job: password in env:", bool(os.environ.get("MYSQLCDC_PASSWORD")), flush=True)
print("fake job: PYSPARK_PYTHON set:", bool(os.environ.get("PYSPARK_PYTHON")), flush=True)
mode = os.environ.get("FAKE_MODE", "run")
if mode == "die":
    print("fake job: boom, cannot start", flush=True)
    sys.exit(3)
def bye(*_):
    print("fake job: SIGTERM, clean exit", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
while True:
    time.sleep(0.1)
"""


@pytest.fixture
def fake(tmp_dir):
    job = tmp_dir / "fake_job.py"
    job.write_text(FAKE_JOB)
    state = StateStore(str(tmp_dir / "state"))
    cfg = PipelineConfig(name="fake", source=SourceConfig(), include=("db.t",), state_location=state.location)
    cfg_path = tmp_dir / "pipeline.json"
    cfg_path.write_text(cfg.to_json())
    launched = []

    def launch(**kw):
        proc = launch_local_stream(str(cfg_path), state, password=SECRET, application=str(job), **kw)
        launched.append(proc)
        return proc

    yield state, cfg_path, launch
    for p in launched:
        if p.popen is not None and p.popen.poll() is None:
            os.killpg(p.pgid, signal.SIGKILL)
            p.popen.wait(10)


def test_launch_records_the_process_and_stop_terminates_it_cleanly(fake):
    state, cfg_path, launch = fake
    proc = launch()
    assert proc.pgid == proc.pid == os.getpgid(proc.pid) != os.getpgrp()  # its own session
    assert proc.log_path == state.path("stream", "stream.log")
    _wait(lambda: "PYSPARK_PYTHON set: True" in log_tail(proc.log_path), 20, "the fake job to start")
    rec = state.read_json(PROCESS_REL)
    assert rec["pid"] == proc.pid and rec["config_url"] == str(cfg_path)
    assert rec["argv"][1:] == [proc.job_file, "--config", str(cfg_path), "--master", "local[2,4]"]
    assert SECRET not in json.dumps(rec) and SECRET not in Path(proc.log_path).read_text()
    assert SECRET.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    assert f"MYSQLCDC_PASSWORD={SECRET}".encode() in Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")

    assert running_local_stream(state).pid == proc.pid
    with pytest.raises(StreamStartError, match="already running"):
        launch()
    with pytest.raises(StreamStartError, match="state_location"):
        launch_local_stream(str(cfg_path), StateStore(state.location + "-other"), password=SECRET)

    assert stop_local_stream(state, timeout_s=10) is True
    assert proc.popen.wait(10) == 0, log_tail(proc.log_path)
    assert "SIGTERM, clean exit" in log_tail(proc.log_path)
    assert not state.exists(PROCESS_REL)
    assert running_local_stream(state) is None
    assert stop_local_stream(state) is False


def test_a_dead_or_reused_pid_is_not_running(fake):
    state, _, launch = fake
    proc = launch()
    assert running_local_stream(state) is not None
    rec = state.read_json(PROCESS_REL)
    # until the child has exec'd, it shows this process's command line, and is taken as ours
    _wait(lambda: proc.job_file in (stream_launcher._cmdline(proc.pid) or []), 30, "the child to exec")
    state.write_json(PROCESS_REL, {**rec, "config_url": "/somewhere/else.json"})  # pid reuse guard
    assert running_local_stream(state) is None
    state.write_json(PROCESS_REL, {**rec, "host": "another-host"})
    assert running_local_stream(state) is None
    assert stop_local_stream(state) is False and state.exists(PROCESS_REL)  # not ours to stop
    state.write_json(PROCESS_REL, rec)
    # a child this process did not launch through the registry: a zombie, reaped by the check
    stream_launcher._children.pop(proc.pid)
    os.killpg(proc.pgid, signal.SIGKILL)
    _wait(lambda: stream_launcher._proc_state(proc.pid) in ("Z", None), 10, "the child to exit")
    assert running_local_stream(state) is None
    assert stream_launcher._proc_state(proc.pid) is None  # reaped, not left a zombie


def test_wait_for_first_commit_reports_a_dead_job_and_a_timeout_with_the_log_tail(fake):
    state, _, launch = fake
    proc = launch(extra_env={"FAKE_MODE": "die"})
    with pytest.raises(StreamStartError) as err:
        wait_for_first_commit(state, proc.started_at, 30, proc)
    msg = str(err.value)
    assert "exited with code 3" in msg and "boom, cannot start" in msg and proc.log_path in msg
    assert SECRET not in msg

    proc = launch()
    with pytest.raises(StreamStartError) as err:
        wait_for_first_commit(state, proc.started_at, 1.0, proc)
    assert "has not committed a micro-batch within 1 s" in str(err.value)
    assert proc.is_alive()  # left running on timeout
    assert stop_local_stream(state, timeout_s=10)


# --- the real job -------------------------------------------------------------------------------------


def _pipeline(mariadb, db: str, tmp_dir: Path, password: str) -> tuple[PipelineConfig, Path, TableSpec]:
    """An empty table handed off at the binlog head (startup 'initial'), a Delta sink: every row
    reaches the sink through the stream, so the sink must end equal to the table."""
    spec = create_int_table(mariadb, db, 1, "orders")
    mariadb.execute("DELETE FROM orders", database=db)
    t = TableId(db, spec.table)
    src = mariadb.source_config(server_id_range="6500-6599", password=password)
    config = PipelineConfig(
        name="launcher",
        source=src,
        include=(f"{db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=SinkConfig("delta", {"root": str(tmp_dir / "lake")}),
        stream=StreamOptions(max_events_per_batch=2000, heartbeat_s=1.0, trigger_interval_s=0.5),
    )
    cfg_path = tmp_dir / "pipeline.json"
    cfg_path.write_text(config.to_json())
    f, p = mariadb.master_status()
    StateStore(config.state_location).write_finished(
        [FinishedBatch("all", (KeyRange(t, None, None, True),), BinlogOffset(f, p))]
    )
    return config, cfg_path, spec


@pytest.mark.spark
@pytest.mark.slow
def test_launched_stream_reports_status_survives_sigkill_and_stops(mariadb, fresh_db, tmp_dir):
    """Three launches of one pipeline: fresh, relaunched on a quiet server, relaunched after SIGKILL."""
    from mysqlcdc_harness.mariadb import ROOT_PASSWORD

    config, cfg_path, spec = _pipeline(mariadb, fresh_db, tmp_dir, ROOT_PASSWORD)
    t = TableId(spec.database, spec.table)
    state = StateStore(config.state_location)
    checkpoint = Path(state.checkpoint_url())
    log_path = state.path("stream", "stream.log")
    procs: list = []
    runs: list = []
    timings: dict[str, float] = {}

    def launch(what: str):
        t0 = time.time()
        proc = launch_local_stream(str(cfg_path), state, password=ROOT_PASSWORD)
        procs.append(proc)
        st = wait_for_first_commit(state, t0, 240, proc)
        timings[what] = time.time() - t0
        runs.append((st.query_id, st.run_id))
        return proc, st, t0

    def stop_cleanly(proc) -> None:
        assert stop_local_stream(state, timeout_s=60) is True
        assert proc.popen.wait(30) == 0, "SIGTERM must stop the job cleanly (exit 0)"
        assert not state.exists(PROCESS_REL) and running_local_stream(state) is None
        assert not stream_launcher._group_alive(proc.pgid), "the JVM and Python workers must be gone"
        assert read_status(state).state == "stopped"

    try:
        # 1. a fresh query commits batch 0 even with nothing to read
        proc, st, _ = launch("fresh launch")
        assert st.pid == proc.pid and st.has_committed and st.committed_at and st.state == "running"
        assert committed(checkpoint)[0] >= st.batch_id, "status must only report committed batches"
        assert running_local_stream(state).pid == proc.pid
        process_json = Path(state.path(PROCESS_REL)).read_text()

        # 2. writes, then the lag drops back to ~0
        with ConcurrentWriter(
            lambda: mariadb.connect(fresh_db), spec, seed=3, threads=1, pause_s=0.01, weights=(0.5, 0.3, 0.1, 0.1)
        ):
            time.sleep(3.0)
        head = BinlogOffset(*mariadb.master_status())

        def caught_up() -> bool:
            s = read_status(state)
            return (
                s is not None
                and s.committed_offset is not None
                and s.lag_s is not None
                and committed_key(s.committed_offset) >= head.sort_key()
                and s.lag_s <= 2.0
            )

        _wait(caught_up, 180, "the status to show the stream at the head with lag ~0")
        st = read_status(state)
        assert st.lag_now() < 5.0 and not st.lag_is_lower_bound and st.behind_bytes == 0
        assert 0 < len(st.head_samples) <= 300 and st.age_s() < 5.0

        # 3. clean stop, relaunch on a quiet server: no micro-batch to run, an idle trigger confirms it
        stop_cleanly(proc)
        proc, st, t0 = launch("quiet relaunch")
        assert st.idle_at >= t0 and st.committed_at is None
        assert st.committed_offset is not None and committed_key(st.committed_offset) >= head.sort_key()
        assert st.lag_s is not None and st.lag_s <= 2.0  # known from the checkpoint and the head samples
        last_batch = st.batch_id

        # 4. SIGKILL: not running any more; writes while it is down; the relaunch resumes
        os.killpg(proc.pgid, signal.SIGKILL)
        proc.popen.wait(30)
        assert running_local_stream(state) is None
        _wait(lambda: not stream_launcher._group_alive(proc.pgid), 20, "the JVM to die with its group")
        mariadb.execute(
            "UPDATE orders SET a = a + 1 ORDER BY id LIMIT 20",
            "DELETE FROM orders ORDER BY id DESC LIMIT 5",
            "INSERT INTO orders (id, a, s, amount, ts) VALUES (999999, 1, 'down', 1.5, NOW(3))",
            database=fresh_db,
        )
        proc, st, _ = launch("relaunch after SIGKILL")
        assert st.batch_id > last_batch and st.committed_at is not None
        assert len({q for q, _ in runs}) == 1 and len({r for _, r in runs}) == 3  # one query, three runs

        cols = ["id", *VALUE_COLS]
        problem = wait_until_equal(
            lambda: mysql_rows(mariadb, t, cols, ("id",)),
            lambda: {k: {c: r[c] for c in cols} for k, r in delta_rows(tmp_dir / "lake", t, ("id",)).items()},
            timeout_s=180,
        )
        assert not problem, f"sink != source after SIGKILL and relaunch:\n{problem}"
        stop_cleanly(proc)
    except (AssertionError, StreamStartError) as e:
        raise AssertionError(f"{e}\nstatus: {read_status(state)}\njob log:\n{log_tail(log_path, 60)}") from None
    finally:
        for p in procs:
            if p.popen.poll() is None:
                os.killpg(p.pgid, signal.SIGKILL)
                p.popen.wait(30)
    text = Path(log_path).read_text(errors="replace")
    assert text.count("binlog stream stopped on request") == 2
    assert "StackOverflowError" not in text, "a stop must not interrupt a micro-batch"
    for content in (text, Path(state.path(STATUS_REL)).read_text(), process_json):
        assert ROOT_PASSWORD not in content
    print(", ".join(f"{k}: {v:.1f} s" for k, v in timings.items()))


def test_a_wrong_password_fails_fast_with_the_reason_and_no_secret(mariadb, fresh_db, tmp_dir):
    config, cfg_path, _ = _pipeline(mariadb, fresh_db, tmp_dir, SECRET)
    state = StateStore(config.state_location)
    t0 = time.time()
    proc = launch_local_stream(str(cfg_path), state, password=SECRET, python=sys.executable)
    try:
        with pytest.raises(StreamStartError) as err:
            wait_for_first_commit(state, t0, 120, proc)
    finally:
        if proc.popen.poll() is None:
            os.killpg(proc.pgid, signal.SIGKILL)
    msg = str(err.value)
    assert "exited with code" in msg and "access denied" in msg, msg
    assert SECRET not in msg and SECRET not in Path(proc.log_path).read_text()
