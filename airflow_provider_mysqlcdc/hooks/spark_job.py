"""What every Spark job of the pipeline needs from Airflow: secrets, the package, the master.

Secrets travel only through the spark-submit process's environment, and only where that
environment stays private: local mode and standalone client mode. On YARN and Kubernetes
the Spark provider turns ``env_vars`` into ``--conf spark.*Env.NAME=value`` arguments, which
would put the password on a command line and in the Spark UI's environment tab, so there
the driver must find the password itself (``password_file`` or a cluster-side secret).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Mapping

from ..cdc.errors import ConfigError
from ..cdc.source.config import PASSWORD_ENV
from ..spark.runtime.package_files import package_zip  # noqa: F401  (the operators' way to it)

PG_PASSWORD_ENV = "PGPASSWORD"


def env_is_private(master: str, deploy_mode: str | None) -> bool:
    """True when spark-submit's own environment reaches the driver without becoming ``--conf``."""
    m = master.lower()
    if m.startswith("local"):
        return True
    if m.startswith("spark://") and (deploy_mode or "client") == "client":
        return True
    return False


def secret_env(
    *,
    master: str,
    deploy_mode: str | None,
    mysql_password: str,
    sink_password: str | None,
    password_file: str | None,
    cluster_provides_password: bool,
    storage_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment variables that carry the passwords (and the object-storage credentials
    of ``aws_conn_id``) to the job, or a ConfigError that says how to provide them when the
    environment would leak them. Where it would, storage credentials are not sent: the
    cluster's nodes reach the storage with their own (instance role, cluster config)."""
    storage = dict(storage_env or {}) if env_is_private(master, deploy_mode) else {}
    if password_file or cluster_provides_password:
        return storage
    if not env_is_private(master, deploy_mode):
        raise ConfigError(
            f"cannot hand the MySQL password to a Spark driver on {master} (deploy mode {deploy_mode or 'client'}) "
            "safely: spark-submit would put it on its command line. Fix: store it where the driver can read it "
            "and set password_file='<path on the driver, mode 600>', or inject $MYSQLCDC_PASSWORD (and $PGPASSWORD "
            "for a PostgreSQL sink) from a cluster secret (e.g. spark.kubernetes.driver.secretKeyRef.*) and set "
            "cluster_provides_password=True."
        )
    env = {**storage, PASSWORD_ENV: mysql_password}
    if sink_password is not None:
        env[PG_PASSWORD_ENV] = sink_password
    return env


def python_env(master: str) -> dict[str, str]:
    """In local mode the executors are this machine's Python workers: use this interpreter,
    which has the package's dependencies, and put spark-submit of this environment on PATH."""
    if not master.lower().startswith("local"):
        return {}
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    if bindir not in path.split(os.pathsep):
        env["PATH"] = bindir + os.pathsep + path
    from ..spark.runtime.session import class_sharing_options, with_class_sharing

    cds = class_sharing_options()  # the driver runs here: Spark's classes from this host's archive
    if cds:
        env["SPARK_SUBMIT_OPTS"] = with_class_sharing(os.environ.get("SPARK_SUBMIT_OPTS", ""), cds)
    return env


def archive_conf(python_archive: str | None) -> tuple[str | None, dict[str, str]]:
    """``--archives env.tar.gz#mysqlcdc_env`` plus the conf that makes executors use it."""
    if not python_archive:
        return None, {}
    return (f"{python_archive}#mysqlcdc_env", {"spark.pyspark.python": "./mysqlcdc_env/bin/python"})


def merge_csv(*values: str | None) -> str | None:
    parts = [p for v in values if v for p in str(v).split(",") if p]
    seen: list[str] = []
    for p in parts:
        if p not in seen:
            seen.append(p)
    return ",".join(seen) or None


def kill_process_tree(pid: int) -> None:
    """Kill spark-submit and what it started (in local mode the Python driver is its child)."""
    import psutil

    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    procs = root.children(recursive=True) + [root]
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


def spark_binary_on_path(binary: str) -> bool:
    return shutil.which(binary) is not None


def redact(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: ("***" if any(s in k.lower() for s in ("password", "secret", "token")) else v) for k, v in mapping.items()
    }


def local_connect_settings(spark_conn_id: str, conf: Mapping[str, Any] | None = None, light_jit: bool = False) -> Any:
    """The settings of the local Spark Connect server for the Spark connection's master: one
    function for the tasks that start it early (validate, plan) and the snapshot tasks (which use
    it), so all name the same server. ``light_jit``: the rows bypass the JVM (``reads_bypass_jvm``)."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from ..spark.runtime.connect_server import settings_from
    from ..spark.runtime.session import jdbc_jar_path, with_light_jit

    master = SparkSubmitHook(conn_id=spark_conn_id)._connection["master"]
    jar = jdbc_jar_path()
    settings = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        **{str(k): str(v) for k, v in (conf or {}).items()},
    }
    if light_jit:  # the snapshot's rows bypass the JVM (spark/runtime/session.py)
        settings["spark.driver.extraJavaOptions"] = with_light_jit(settings.get("spark.driver.extraJavaOptions", ""))
    return settings_from(master, (jar,) if jar else (), settings)


def start_local_connect_early(
    log: Any, spark_runtime: Any, connect_conn_id: Any, spark_conn_id: str, idle_s: float, light_jit: bool = False
) -> Any:
    """Start the snapshot tasks' local Spark Connect server now, without waiting for it, so its
    JVM comes up while validate and plan run and the scheduler maps the batches (its start is
    the first batch's critical path). Nothing for ``spark_runtime`` other than ``connect`` or for
    a remote endpoint (``connect_conn_id``). A failure is only logged: the first snapshot task
    starts the server itself and reports what goes wrong. Returns the server's info, or None."""
    if str(spark_runtime or "").strip().lower() != "connect" or connect_conn_id:
        return None
    try:
        from ..spark.runtime.connect_server import ensure_local_server

        info = ensure_local_server(
            local_connect_settings(spark_conn_id, light_jit=light_jit), idle_s=float(idle_s), wait=False
        )
        log.info("the snapshot tasks' Spark Connect server is starting at %s", info.display_url)
        return info
    except Exception as e:  # the snapshot tasks will try and tell
        log.warning(
            "could not start the local Spark Connect server early (%s: %s); the first snapshot task starts it",
            type(e).__name__,
            e,
        )
        return None
