"""The binlog stream's process: launching it and telling whether it runs. A hook, since it owns an
external process (Airflow's providers keep process and job control in hooks, operators thin over
them); the stream operator and the stream sensor share it, so "start it" and "bring it back" are one
code path.

Local master (``local[*]``), or client deploy mode on a cluster: the job runs as a detached
background process on this worker, its pid, log and status in the state location
(``spark/runtime/stream_launcher.py``). A cluster master (standalone, YARN, Kubernetes) in cluster
deploy mode, the default: the driver is submitted to the cluster (``spark/runtime/cluster_stream.py``)
and lives there; its lease in the state location (renewed by the driver every third of its time to
live) is then the sign of life: an expired lease means a dead driver, whatever its last status says.

How to run on a cluster is a property of the cluster, so it lives with the Spark connection, in
its extra (next to the Spark provider's ``deploy-mode``): ``mysqlcdc_spark_home`` (the cluster's
SPARK_HOME), ``mysqlcdc_password_file`` (the MySQL password's file on the cluster's nodes),
``mysqlcdc_cluster_provides_password`` and ``mysqlcdc_shared_filesystem``. The operators'
parameters of the same names win over them.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..cdc.coerce import truthy
from ..cdc.state import StateStore
from ..cdc.store.lease import StreamLease
from ..cdc.store.pipeline_file import config_url, follow_connection
from . import spark_job
from .mysql_cdc import MySqlCdcHook
from .object_storage import storage_credentials

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
    "conf",
)
CLUSTER_DRIVER_REL = "stream/cluster_driver.json"
SPARK_EXTRA_PREFIX = "mysqlcdc_"


def spark_connection_extra(conn_id: str) -> dict[str, Any]:
    """The Spark connection's ``mysqlcdc_*`` extras, without the prefix."""
    from airflow.sdk import BaseHook

    extra = BaseHook.get_connection(conn_id).extra_dejson or {}
    return {k[len(SPARK_EXTRA_PREFIX) :]: v for k, v in extra.items() if k.startswith(SPARK_EXTRA_PREFIX)}


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
        return {k: (dict(getattr(self, k)) if k == "conf" else getattr(self, k)) for k in _LAUNCH_KEYS}

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
            hook = self._spark_hook()
            c = hook._connection
            self._master = (c["master"], c["deploy_mode"])
            self._submit_info = {
                "binary": getattr(hook, "spark_binary", None) or c.get("spark_binary"),
                "queue": c.get("queue"),
                "namespace": c.get("namespace"),
            }
        return self._master

    @property
    def is_local(self) -> bool:
        """The driver runs on this host (local mode, or client deploy mode on a cluster)."""
        from ..spark.runtime.cluster_stream import stream_placement

        return stream_placement(*self.master) == "here"

    def cluster_settings(self) -> dict[str, Any]:
        """The Spark connection's ``mysqlcdc_*`` extras, overridden by this control's own values."""
        extra = spark_connection_extra(self.spark_conn_id)
        if self.password_file:
            extra["password_file"] = self.password_file
        if self.cluster_provides_password:
            extra["cluster_provides_password"] = True
        return extra

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
        # A driver on the cluster: its lease, renewed every third of its time to live, is the sign
        # of life (an old status is not: a driver killed on its node leaves its last status behind).
        # One submitted moments ago may not hold it yet: starting, until it wrote its first status
        # (it takes the lease before that; from then on the lease alone tells).
        submitted = self._cluster_driver_record()
        since = float(submitted.get("submitted_at") or 0) if submitted else 0.0
        if since and time.time() - since < self.start_timeout_s and (status is None or status.updated_at < since):
            return _Starting(0, host=submitted.get("driver_id") if submitted else None)
        return None

    def _cluster_driver_record(self) -> dict[str, Any] | None:
        try:
            return self.state.read_json(CLUSTER_DRIVER_REL) if self.state.exists(CLUSTER_DRIVER_REL) else None
        except (OSError, ValueError):
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
        from ..spark.stream.offsets.checkpoint_offsets import check_readable

        check_readable(self.state.checkpoint_url())  # Spark would fail on it with a parser's stack trace
        source = MySqlCdcHook(self.mysql_cdc_conn_id).get_source_config()
        # the stream (local or on a cluster) reads the state's settings: the connection's address first
        config = follow_connection(self.state, source, self.mysql_cdc_conn_id, log)
        mysql_pw, sink_pw = source.password, self._sink_password()
        self.state.write_json(LAUNCH_REL, self.launch_record())
        self.state.clear_stream_requests()  # a stop asked of an earlier stream is not this one's
        since = time.time()
        url = config_url(self.state)
        storage = storage_credentials(self.aws_conn_id or None)
        if self.is_local:
            extra = {**spark_job.python_env(self.master[0]), **(storage.env() if storage else {})}
            if sink_pw is not None:
                extra[spark_job.PG_PASSWORD_ENV] = sink_pw
            proc = launch_local_stream(
                url, self.state, password=mysql_pw, master=local_master_with_retries(self.master[0]), extra_env=extra
            )
            log.info("stream launched locally: pid %s, log %s", proc.pid, proc.log_path)
            return wait_for_first_commit(self.state, since, self.start_timeout_s, proc)
        self._submit_to_cluster(url, config.name)
        return wait_for_first_commit(self.state, since, self.start_timeout_s, None, local=False)

    def _submit_to_cluster(self, url: str, name: str) -> None:
        """The driver to the cluster (cluster deploy mode); the passwords come from the cluster."""
        from ..cdc.errors import ConfigError
        from ..spark.runtime import cluster_stream
        from ..spark.runtime.connect_server import stop_idle_servers

        master, _ = self.master
        settings = self.cluster_settings()
        password_file = settings.get("password_file") or None
        if not password_file and not truthy(settings.get("cluster_provides_password")):
            raise ConfigError(
                f"the binlog stream's driver runs on the cluster ({master}), which cannot be handed the MySQL password "
                "without a command line, Spark conf or the Spark UI showing it. Fix: put it in a file on the "
                "cluster's nodes (mode 600) and set mysqlcdc_password_file in the Spark connection's extra, or have "
                "the cluster set $MYSQLCDC_PASSWORD (and $PGPASSWORD for a sink connection: a PostgreSQL sink or an "
                "Iceberg catalog on PostgreSQL) in its drivers' "
                "environment (spark-env.sh, a Kubernetes secret) and set mysqlcdc_cluster_provides_password: true; "
                "or set deploy-mode: client to run the driver on the Airflow worker."
            )
        if self.sink_conn_id and not truthy(settings.get("cluster_provides_password")):
            raise ConfigError(
                f"the binlog stream's driver runs on the cluster ({master}) and logs in to the sink connection's "
                f"database ({self.sink_conn_id}: the PostgreSQL sink's, or an Iceberg sink's catalog), whose password "
                "only the cluster can hand it. Fix: have the cluster set $PGPASSWORD in its drivers' environment "
                "(and $MYSQLCDC_PASSWORD, unless mysqlcdc_password_file names the MySQL password's file) and set "
                "mysqlcdc_cluster_provides_password: true in the Spark connection's extra; or set deploy-mode: client."
            )
        if self.state.fs.protocol in ("file", "local", ("file", "local")) and not truthy(
            settings.get("shared_filesystem")
        ):
            raise ConfigError(
                f"the binlog stream's driver runs on a node of the cluster ({master}), but the state location "
                f"{self.state.location} is a local path of this Airflow worker: the driver would write its checkpoint "
                "and status where nobody reads them. Fix: put state_location on storage every node reaches (s3://..., "
                "with aws_conn_id), or, if that path is a file system mounted on every node, set "
                "mysqlcdc_shared_filesystem: true in the Spark connection's extra."
            )
        archive, archive_conf = spark_job.archive_conf(self.python_archive)
        info = getattr(self, "_submit_info", {})
        sub = cluster_stream.submission(
            spark_submit=cluster_stream.spark_submit_binary(info.get("binary")),
            master=master,
            name=f"mysqlcdc {name} binlog stream",
            config_url=url,
            conf={**archive_conf, **dict(self.conf)},
            password_file=password_file,
            spark_home=settings.get("spark_home") or None,
            archives=archive,
            queue=info.get("queue"),
            namespace=info.get("namespace"),
        )
        if sub.manager == "standalone" and stop_idle_servers():
            log.info("stopped the idle local Spark Connect server: its executors held the cluster's cores")
        log.info("submitting the binlog stream's driver to %s: %s", master, " ".join(sub.argv))
        submitted = cluster_stream.submit(sub)
        self.state.write_json(
            CLUSTER_DRIVER_REL,
            {"master": master, "driver_id": submitted.driver_id, "submitted_at": time.time(), "manager": sub.manager},
        )
        log.info("the binlog stream's driver runs on the cluster %s as %s", master, submitted.driver_id or "?")


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
