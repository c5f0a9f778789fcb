"""Run spark_jobs/binlog_stream.py as a separate process, watch its checkpoint, kill it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence

from airflow_provider_mysqlcdc.spark.runtime.session import with_light_jit
from airflow_provider_mysqlcdc.spark.stream.offsets.stream_offset import StreamOffset

REPO = Path(__file__).resolve().parents[2]


def start_job(
    cfg_path: Path, log: Path, password: str, extra_args: Sequence[str] = (), extra_env: Mapping[str, str] | None = None
) -> subprocess.Popen:
    """The stream job in its own process group, password only in its environment."""
    env = dict(os.environ, MYSQLCDC_PASSWORD=password, PYTHONPATH=str(REPO), PYSPARK_PYTHON=sys.executable)
    env.update(extra_env or {})
    return subprocess.Popen(
        [
            sys.executable,
            str(REPO / "airflow_provider_mysqlcdc" / "jobs" / "binlog_stream.py"),
            "--config",
            str(cfg_path),
            *extra_args,
        ],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def start_snapshot_job(
    cfg_path: Path, batch_id: str, log: Path, password: str, extra_env: Mapping[str, str] | None = None
) -> subprocess.Popen:
    """The snapshot job of one batch, as the operator submits it, in its own process group."""
    env = dict(os.environ, MYSQLCDC_PASSWORD=password, PYTHONPATH=str(REPO), PYSPARK_PYTHON=sys.executable)
    # the light JIT, as the snapshot operator gives a batch whose rows bypass the JVM: the tests'
    # jobs read little, so the JIT tier changes only what their start costs
    env["SPARK_SUBMIT_OPTS"] = with_light_jit(env.get("SPARK_SUBMIT_OPTS", ""))
    env.update(extra_env or {})
    return subprocess.Popen(
        [
            sys.executable,
            str(REPO / "airflow_provider_mysqlcdc" / "jobs" / "snapshot_chunks.py"),
            "--config",
            str(cfg_path),
            "--batch-id",
            batch_id,
        ],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def kill_job(proc: subprocess.Popen) -> None:
    """SIGKILL the whole process group (driver JVM and Python workers), as a crash would."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def committed(checkpoint: Path) -> tuple[int, StreamOffset] | None:
    """The last committed micro-batch id and its end offset, from the Spark checkpoint."""
    commits = sorted(int(p.name) for p in (checkpoint / "commits").glob("[0-9]*"))
    if not commits:
        return None
    last = commits[-1]
    text = (checkpoint / "offsets" / str(last)).read_text().strip().splitlines()[-1]
    return last, StreamOffset.from_dict(json.loads(text))


def in_flight(checkpoint: Path) -> bool:
    """A micro-batch's offsets are logged but it is not committed yet."""
    logged = [int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*")]
    done = (committed(checkpoint) or (-1,))[0]
    return bool(logged) and max(logged) > done
