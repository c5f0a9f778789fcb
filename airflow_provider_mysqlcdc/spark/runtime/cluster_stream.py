"""The binlog stream's driver on a Spark cluster: where it runs for each cluster manager, and
the spark-submit that puts it there without the Airflow worker's files, interpreter or secrets.

Why not the Spark provider's ``SparkSubmitHook.submit``: on a standalone master in cluster
deploy mode it refuses environment variables and then polls the driver until it ends (a stream
never does), and spark-submit refuses Python applications in that mode outright. So:

- **The driver is Spark's own Python runner** (``org.apache.spark.deploy.PythonRunner``, the
  class spark-submit itself uses for ``.py`` files) submitted as a JVM application whose primary
  resource is Spark's core jar *on the cluster* and whose "Python file" is ``-m <job module>``:
  the node's Python runs ``python -m airflow_provider_mysqlcdc.jobs.binlog_stream`` from the
  package installed there. One mechanism for standalone, YARN and Kubernetes; nothing of the
  Airflow host is read by the driver (no job file, no ``--py-files`` zip, no interpreter path).
- **spark-submit runs with a scrubbed environment.** A standalone master's submission client
  sends spark-submit's *whole* environment to the master and into the driver's process
  (measured: a variable set only for spark-submit was readable by the driver on a worker), so
  an Airflow worker's ``AIRFLOW_CONN_*`` URIs, Fernet key or database URL would travel to the
  cluster. Only what spark-submit itself needs (``JAVA_HOME``, ``SPARK_CONF_DIR``, Hadoop and
  Kubernetes client configuration, a system ``PATH``) is passed.
- **Secrets** reach a cluster driver only from the cluster: a password file on its nodes
  (``--password-file``) or variables the cluster injects (``$MYSQLCDC_PASSWORD``,
  ``$PGPASSWORD``: spark-env.sh on standalone workers, a Kubernetes secret, YARN's
  ``spark.yarn.appMasterEnv`` set in the cluster's own spark-defaults). Never a command line
  argument, ``--conf`` or the submitter's environment.

No Airflow and no Spark are imported here (the Airflow layer passes plain values).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from ...cdc.errors import REPORT_BUG, ConfigError

PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"
JOB_MODULE = "airflow_provider_mysqlcdc.jobs.binlog_stream"
SCALA_VERSION = "2.13"
# The official Spark images' SPARK_HOME (Kubernetes); elsewhere the default is this host's path.
IMAGE_SPARK_HOME = "/opt/spark"
# What spark-submit needs from the submitting environment; nothing else is passed on.
SUBMIT_ENV_KEEP = (
    "JAVA_HOME",
    "SPARK_HOME",
    "SPARK_CONF_DIR",
    "HADOOP_CONF_DIR",
    "YARN_CONF_DIR",
    "HADOOP_HOME",
    "KUBECONFIG",
    "KRB5_CONFIG",
    "KRB5CCNAME",
    "LANG",
    "LC_ALL",
    "TZ",
    "SPARK_LOCAL_IP",
)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Spark's own redaction pattern (spark.redaction.regex) plus credential: such keys would show in
# the Spark UI's environment tab and in the launch record the watchdog reads.
# The module options Spark's launcher gives the JVMs it starts on Java 17+ (read off a standalone
# worker's command line, Spark 4.2), for the driver JVM a standalone worker starts without them.
JAVA_MODULE_OPTIONS: tuple[str, ...] = (
    "-XX:+IgnoreUnrecognizedVMOptions",
    *(
        f"--add-opens=java.base/{package}=ALL-UNNAMED"
        for package in (
            "java.lang",
            "java.lang.invoke",
            "java.lang.reflect",
            "java.io",
            "java.net",
            "java.nio",
            "java.util",
            "java.util.concurrent",
            "java.util.concurrent.atomic",
            "jdk.internal.ref",
            "sun.nio.ch",
            "sun.nio.cs",
            "sun.security.action",
            "sun.util.calendar",
        )
    ),
    "--add-opens=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
)
SECRET_CONF = re.compile(r"(?i)secret|password|token|access[.]?key|credential")
_DRIVER_ID = re.compile(r"\b(driver-\d{14}-\d{4,})\b")
_YARN_APP = re.compile(r"\b(application_\d+_\d+)\b")
_K8S_POD = re.compile(r"pod name:\s*(\S+)", re.I)


class ClusterSubmitError(ConfigError):
    """spark-submit could not hand the stream's driver to the cluster (its output says why).
    A configuration error: retrying the same submission meets the same master and nodes."""


def cluster_manager(master: str) -> str:
    """``local``, ``standalone``, ``yarn`` or ``kubernetes``; anything else is refused."""
    m = master.strip().lower()
    if m.startswith("local"):
        return "local"
    if m.startswith("spark://"):
        return "standalone"
    if m == "yarn" or m.startswith("yarn"):
        return "yarn"
    if m.startswith("k8s://"):
        return "kubernetes"
    if m.startswith("sc://"):
        raise ConfigError(
            f"the Spark connection's master is a Spark Connect endpoint ({master}): the binlog stream needs a "
            "driver of its own (its status listener, lease and sink live there). Fix: give the stream a Spark "
            "connection whose host is the cluster's master (spark://..., yarn, k8s://...) and keep the Connect "
            "endpoint for the snapshot (connect_conn_id)."
        )
    raise ConfigError(
        f"unsupported Spark master {master!r} for the binlog stream. Fix: use local[N], spark://host:port, yarn or "
        "k8s://https://host:port as the Spark connection's host."
    )


def stream_placement(master: str, deploy_mode: str | None) -> str:
    """Where the stream's driver runs: ``here`` (a detached process on this host: local mode,
    or client deploy mode, executors on the cluster) or ``cluster`` (the default on every
    cluster manager: the cluster keeps it alive, an Airflow worker may come and go)."""
    manager = cluster_manager(master)
    if manager == "local":
        return "here"
    mode = (deploy_mode or "cluster").strip().lower()
    if mode not in ("client", "cluster"):
        raise ConfigError(
            f"deploy mode {deploy_mode!r} in the Spark connection's extra: Fix: set deploy-mode to 'cluster' (the "
            "stream's driver runs on the cluster) or 'client' (on the Airflow worker that starts it)."
        )
    return "here" if mode == "client" else "cluster"


# Kubernetes secret *references* (name:key, mount paths): how the cluster hands a secret over
# without it passing through Spark conf, so allowed although their keys name a password.
SECRET_REFERENCES = (
    "spark.kubernetes.driver.secretKeyRef.",
    "spark.kubernetes.executor.secretKeyRef.",
    "spark.kubernetes.driver.secrets.",
    "spark.kubernetes.executor.secrets.",
)


def refuse_secret_conf(conf: Mapping[str, str]) -> None:
    """Spark conf is shown in the Spark UI and kept in the launch record: no secrets in it."""
    bad = sorted(k for k in conf if SECRET_CONF.search(k) and not k.startswith(SECRET_REFERENCES))
    if bad:
        raise ConfigError(
            f"the stream's Spark conf holds secret-looking settings ({', '.join(bad)}): Spark shows its conf in the "
            "UI and the watchdog keeps it to relaunch. Fix: set them in the cluster's own spark-defaults.conf or "
            "environment, not in the task's conf."
        )


def spark_core_jar(manager: str, spark_home: str | None, spark_version: str) -> str:
    """The driver's primary resource: Spark's core jar as the cluster sees it. Standalone
    workers copy it (``file:``, a path on every worker); YARN uploads it from this host;
    Kubernetes finds it in the image (``local:``)."""
    name = f"spark-core_{SCALA_VERSION}-{spark_version}.jar"
    if manager == "kubernetes":
        return f"local://{(spark_home or IMAGE_SPARK_HOME).rstrip('/')}/jars/{name}"
    home = (spark_home or _this_spark_home()).rstrip("/")
    return f"file://{home}/jars/{name}"


def _this_spark_home() -> str:
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ConfigError("pyspark is not installed here. Fix: pip install the package's requirements.")
    return str(Path(spec.origin).parent)


def _spark_version() -> str:
    from importlib.metadata import version

    return version("pyspark")


@dataclass
class ClusterSubmission:
    """One spark-submit of the stream's driver (argv and environment hold no secret)."""

    argv: list[str]
    env: dict[str, str]
    manager: str
    conf: dict[str, str] = field(default_factory=dict)


def submission(
    *,
    spark_submit: str,
    master: str,
    name: str,
    config_url: str,
    conf: Mapping[str, str] | None = None,
    password_file: str | None = None,
    spark_home: str | None = None,
    archives: str | None = None,
    spark_version: str | None = None,
    queue: str | None = None,
    namespace: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClusterSubmission:
    """The spark-submit that starts the stream's driver on the cluster (cluster deploy mode)."""
    manager = cluster_manager(master)
    if manager == "local":
        raise ConfigError(
            f"a local master runs the stream on this host, not through a cluster submission. {REPORT_BUG}"
        )
    conf = dict(conf or {})
    refuse_secret_conf(conf)
    merged = {
        # the submission returns once the driver runs: the stream outlives this task
        "spark.yarn.submit.waitAppCompletion": "false",
        "spark.kubernetes.submission.waitAppCompletion": "false",
        "spark.standalone.submit.waitAppCompletion": "false",
        "spark.task.maxFailures": "4",
        "spark.ui.showConsoleProgress": "false",
        **conf,
    }
    if manager == "standalone":
        # A standalone application takes every free core unless capped: the stream would leave none
        # for a batch read again while it runs (its Spark Connect application waits for cores).
        merged.setdefault("spark.cores.max", "2")
        # A standalone worker starts a cluster-mode driver's JVM itself (DriverWrapper), without the
        # module options spark-submit gives a client-mode driver: Arrow in that JVM (createDataFrame
        # from a pyarrow table, toArrow) then fails with "sun.misc.Unsafe or
        # java.nio.DirectByteBuffer.<init>(long, int) not available". The user's own options follow.
        own = merged.get("spark.driver.extraJavaOptions", "")
        merged["spark.driver.extraJavaOptions"] = " ".join([*JAVA_MODULE_OPTIONS, own]).strip()
    argv = [spark_submit, "--master", master, "--deploy-mode", "cluster", "--name", name, "--class", PYTHON_RUNNER]
    if queue and manager == "yarn":
        argv += ["--queue", queue]
    if namespace and manager == "kubernetes":
        merged.setdefault("spark.kubernetes.namespace", namespace)
    if archives:
        argv += ["--archives", archives]
    for k, v in merged.items():
        argv += ["--conf", f"{k}={v}"]
    argv.append(spark_core_jar(manager, spark_home, spark_version or _spark_version()))
    # PythonRunner's arguments: <python file> <py-files> <args...>; the file is "-m" and no
    # py-files, so the node's Python runs the job module of the package installed there.
    argv += ["-m", "", JOB_MODULE, "--config", config_url]
    if password_file:
        argv += ["--password-file", password_file]
    return ClusterSubmission(argv, submit_env(environ), manager, merged)


def submit_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """spark-submit's environment: what it needs, nothing of the Airflow worker's secrets."""
    src = os.environ if environ is None else environ
    env = {k: src[k] for k in SUBMIT_ENV_KEEP if src.get(k)}
    env["PATH"] = SYSTEM_PATH
    if "JAVA_HOME" not in env:
        java = shutil.which("java", path=src.get("PATH"))
        if java:
            env["JAVA_HOME"] = str(Path(os.path.realpath(java)).parent.parent)
    env.setdefault("SPARK_HOME", _this_spark_home())
    return env


def spark_submit_binary(binary: str | None = None) -> str:
    """The spark-submit to run: the connection's binary on PATH, else the one of this venv."""
    name = binary or "spark-submit"
    if os.path.isabs(name):
        return name
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if found:
        return found
    raise ConfigError(f"{name} not found on PATH. Fix: install pyspark in the Airflow worker's Python.")


@dataclass
class Submitted:
    driver_id: str | None
    output: str


def submit(sub: ClusterSubmission, timeout_s: float = 300.0) -> Submitted:
    """Run the submission; returns the driver / application id once the cluster accepted it.

    On a standalone master the submission client waits a few seconds and reports the driver's
    state: a driver that fails at once (the package missing on the node, a wrong Python) is an
    error here, with its reason, not a silent wait for a first commit that never comes."""
    try:
        proc = subprocess.run(
            sub.argv,
            env=sub.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or "") + (e.stderr or "") if isinstance(e.stdout, str) else ""
        raise ClusterSubmitError(
            f"spark-submit did not return within {timeout_s:.0f} s (master {_master_of(sub.argv)}):\n{_tail(out)}\n"
            "Fix: check that the master is reachable from the Airflow worker and has free cores."
        ) from None
    out = (proc.stdout or "") + (proc.stderr or "")
    driver = _DRIVER_ID.search(out) or _YARN_APP.search(out) or _K8S_POD.search(out)
    driver_id = driver.group(1) if driver else None
    failed_state = re.search(r"State of (?:driver )?(driver-\S+) is (FAILED|ERROR|KILLED)", out)
    if proc.returncode != 0 or failed_state:
        raise ClusterSubmitError(_submit_failure(sub, out, driver_id, proc.returncode))
    return Submitted(driver_id, out)


def _master_of(argv: Sequence[str]) -> str:
    return argv[argv.index("--master") + 1] if "--master" in argv else "?"


def _tail(text: str, lines: int = 25) -> str:
    keep = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("\tat ")]
    return "\n".join(keep[-lines:])


def _submit_failure(sub: ClusterSubmission, out: str, driver_id: str | None, code: int) -> str:
    master = _master_of(sub.argv)
    if re.search(r"Failed to connect to master|Connection refused|UnknownHost|All masters are unresponsive", out):
        fix = f"check the Spark connection's host and port: nothing accepted the submission at {master}."
    elif driver_id and sub.manager == "standalone":
        fix = (
            f"the driver {driver_id} failed on a worker: its stdout/stderr are in the worker's work directory "
            "(the master's web UI links them). Most often the worker's Python lacks the package: install this "
            "package's wheel (the same version as the Airflow workers) into the Python the workers run "
            "(PYSPARK_PYTHON in their spark-env.sh, or spark.pyspark.python), or check that Spark's core jar is at "
            "the path given (the Spark connection's extra mysqlcdc_spark_home: the cluster's SPARK_HOME)."
        )
    else:
        fix = "see spark-submit's output above."
    return f"spark-submit of the binlog stream to {master} failed (exit {code}):\n{_tail(out)}\nFix: {fix}"
