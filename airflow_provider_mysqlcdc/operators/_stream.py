"""Launching the binlog stream and telling whether it runs: shared by the stream operator
and the stream sensor, so "start it" and "bring it back" are one code path.

Local master (``local[*]``): the job runs as a detached background process on this worker,
its pid, log and status in the state location (``spark/runtime/stream_launcher.py``). A cluster
master: spark-submit in cluster deploy mode, fire-and-forget; the job's status file (written
by the driver after every micro-batch) is then the only sign of life, so a status older than
``stale_after_s`` counts as dead.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..cdc.lease import StreamLease
from ..cdc.object_store import StorageCredentials
from ..cdc.state import StateStore
from ..hooks.mysql_cdc import MySqlCdcHook
from ..hooks.object_storage import storage_credentials
from ..spark.runtime.package_files import application_path
from . import _spark
from ._pipeline import config_url, follow_connection

log = logging.getLogger(__name__)


def local_master_with_retries(master: str, max_failures: int = 4) -> str:
    """``local[2]`` -> ``local[2,4]``: plain local mode gives up on a task's first failure."""
    m = re.fullmatch(r"local(?:\[([^\],]+)(?:,\s*\d+)?\])?", master.strip())
    if not m:
        return master
    return f"local[{m.group(1) or '1'},{max_failures}]"


def status_summary(status: Any, now: float | None = None) -> dict[str, Any]:
    if status is None:
        return {"running": False}
    return {
        "running": True,
        "batch_id": status.batch_id,
        "committed_offset": status.committed_offset,
        "committed_at": getattr(status, "committed_at", None),
        "head_offset": status.head_offset,
        "lag_s": round(status.lag_now(now), 3) if status.lag_now(now) is not None else None,
        "behind_bytes": status.behind_bytes,
        "updated_at": status.updated_at,
        "pid": status.pid,
        "host": status.host,
    }


# What a relaunch needs besides the pipeline's settings: the connection ids and how the
# driver finds its passwords (never the passwords). The watchdog reads it, so it restarts a
# PostgreSQL-sink stream as well as a Delta one from the state location alone.
LAUNCH_REL = "stream/launch.json"
_LAUNCH_KEYS = (
    "mysql_cdc_conn_id",
    "spark_conn_id",
    "sink_conn_id",
    "password_file",
    "cluster_provides_password",
    "python_archive",
    "aws_conn_id",
)


def read_launch_record(state: StateStore) -> dict[str, Any] | None:
    try:
        return state.read_json(LAUNCH_REL) if state.exists(LAUNCH_REL) else None
    except (OSError, ValueError):
        return None


@dataclass
class StreamControl:
    state_location: str
    mysql_cdc_conn_id: str
    spark_conn_id: str = "spark_default"
    sink_conn_id: str | None = None
    password_file: str | None = None
    cluster_provides_password: bool = False
    python_archive: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)
    start_timeout_s: float = 600.0
    stale_after_s: float = 300.0
    aws_conn_id: str | None = None

    def __post_init__(self) -> None:
        self.state = StateStore(self.state_location)
        self._master: tuple[str, str | None] | None = None

    def launch_record(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _LAUNCH_KEYS}

    @classmethod
    def from_state(cls, state_location: str, **given: Any) -> "StreamControl":
        """A control for the stream of ``state_location``: what the caller gives (not None)
        wins, then what the last launch recorded, then the defaults."""
        recorded = read_launch_record(StateStore(state_location)) or {}
        kw = {k: recorded[k] for k in _LAUNCH_KEYS if recorded.get(k) not in (None, "")}
        kw.update({k: v for k, v in given.items() if v not in (None, "")})
        kw.setdefault("mysql_cdc_conn_id", MySqlCdcHook.default_conn_name)
        return cls(state_location, **kw)

    # --- where it runs -------------------------------------------------------------------

    def _spark_hook(self, **kwargs: Any):
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        return SparkSubmitHook(conn_id=self.spark_conn_id, **kwargs)

    @property
    def master(self) -> tuple[str, str | None]:
        if self._master is None:
            c = self._spark_hook()._connection
            self._master = (c["master"], c["deploy_mode"])
        return self._master

    @property
    def is_local(self) -> bool:
        return self.master[0].lower().startswith("local")

    # --- is it running -------------------------------------------------------------------

    def running(self):
        """The stream's last status when it runs, else None."""
        from ..spark.runtime.stream_launcher import running_local_stream
        from ..spark.runtime.stream_status import read_status

        status = read_status(self.state)
        if self.is_local:
            proc = running_local_stream(self.state)
            if proc is not None:
                return status if status is not None and status.pid == proc.pid else _Starting(proc.pid)
        held = StreamLease(self.state).holder()
        if held is not None:  # a stream on another host (or not recorded here) holds the lease
            owner = held.get("owner") or {}
            if status is not None and status.pid == owner.get("pid") and status.host == owner.get("host"):
                return status
            return _Starting(int(owner.get("pid") or 0), host=owner.get("host"))
        if self.is_local:
            return None
        if status is not None and status.state in ("starting", "running") and status.age_s() < self.stale_after_s:
            return status  # a cluster stream: its recent status is the sign of life (a failed one is dead)
        return None

    def log_path(self) -> str | None:
        """Where the last local launch logs (None on a cluster: see the Spark UI / history)."""
        from ..spark.runtime.stream_launcher import recorded_log_path

        return recorded_log_path(self.state)

    def log_tail(self, lines: int) -> str:
        from ..spark.runtime.stream_launcher import log_tail

        return log_tail(self.log_path(), lines)

    # --- start it ------------------------------------------------------------------------

    def _sink_password(self) -> str | None:
        from airflow.sdk import BaseHook

        return BaseHook.get_connection(self.sink_conn_id).password or "" if self.sink_conn_id else None

    def launch(self):
        """Start the stream (it resumes from its checkpoint if it has one) and wait until its
        first micro-batch committed; returns that status."""
        from ..spark.runtime.install_check import check_pyspark_install
        from ..spark.runtime.stream_launcher import launch_local_stream, wait_for_first_commit

        check_pyspark_install()
        from ..spark.stream.checkpoint_offsets import check_readable

        check_readable(self.state.checkpoint_url())  # Spark would fail on it with a parser's stack trace
        source = MySqlCdcHook(self.mysql_cdc_conn_id).get_source_config()
        # the stream (local or on a cluster) reads the state's settings: the connection's address first
        config = follow_connection(self.state, source, self.mysql_cdc_conn_id, log)
        mysql_pw, sink_pw = source.password, self._sink_password()
        self.state.write_json(LAUNCH_REL, self.launch_record())
        since = time.time()
        url = config_url(self.state)
        storage = storage_credentials(self.aws_conn_id or None)
        if self.is_local:
            extra = {**_spark.python_env(self.master[0]), **(storage.env() if storage else {})}
            if sink_pw is not None:
                extra[_spark.PG_PASSWORD_ENV] = sink_pw
            proc = launch_local_stream(
                url, self.state, password=mysql_pw, master=local_master_with_retries(self.master[0]), extra_env=extra
            )
            log.info("stream launched locally: pid %s, log %s", proc.pid, proc.log_path)
            return wait_for_first_commit(self.state, since, self.start_timeout_s, proc)
        self._submit_to_cluster(url, mysql_pw, sink_pw, config.name, storage)
        return wait_for_first_commit(self.state, since, self.start_timeout_s, None)

    def _submit_to_cluster(
        self, url: str, mysql_pw: str, sink_pw: str | None, name: str, storage: StorageCredentials | None = None
    ) -> None:
        master, deploy_mode = self.master
        env = _spark.secret_env(
            master=master,
            deploy_mode=deploy_mode,
            mysql_password=mysql_pw,
            sink_password=sink_pw,
            password_file=self.password_file,
            cluster_provides_password=self.cluster_provides_password,
            storage_env=storage.env() if storage else None,
        )
        archive, archive_conf = _spark.archive_conf(self.python_archive)
        conf = {
            "spark.yarn.submit.waitAppCompletion": "false",
            "spark.kubernetes.submission.waitAppCompletion": "false",
            "spark.task.maxFailures": "4",
            **archive_conf,
            **dict(self.conf),
        }
        args = ["--config", url] + (["--password-file", self.password_file] if self.password_file else [])
        hook = self._spark_hook(
            conf=conf,
            name=f"mysqlcdc {name} binlog stream",
            application_args=args,
            py_files=_spark.package_zip(),
            archives=archive,
            env_vars=env or None,
            deploy_mode="cluster",
        )
        hook.submit(application_path("binlog_stream"))
        log.info("stream submitted to %s in cluster deploy mode", master)


@dataclass
class _Starting:
    """A live local stream process that has not written its first status yet."""

    pid: int
    batch_id: int | None = None
    committed_offset: Any = None
    head_offset: Any = None
    behind_bytes: int | None = None
    updated_at: float | None = None
    host: str | None = None

    def lag_now(self, now: float | None = None) -> float | None:
        return None

    def age_s(self, now: float | None = None) -> float:
        return 0.0
