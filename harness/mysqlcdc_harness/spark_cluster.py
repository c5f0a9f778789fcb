"""A real Spark standalone cluster on this machine whose worker nodes share no files with the host.

Why isolation: on a real cluster the driver (in cluster deploy mode) and the executors run on
nodes that have neither the Airflow worker's files nor its interpreter. A worker started here
in the host's file system would hide every bug that assumes them. So each worker runs in its
own mount namespace (``unshare -m``; the tests run as root): a tmpfs over ``/tmp``, ``/opt`` and
the repository (the source checkout, the Airflow venv, local state directories), ``HOME`` in that
private ``/tmp``, and a *node* Python environment at ``NODE_VENV`` -- a path the Airflow host does
not have, so any use of the Airflow worker's interpreter or Spark home on a node fails, as on a
real cluster. The node environment holds the package installed from a wheel built from this
checkout (not the editable source) and, hard-linked, the other distributions of the Airflow
venv; it is built once per package content. Its workers' environment names it as a cluster
image's spark-env.sh would: ``PYSPARK_PYTHON``, ``SPARK_HOME`` and ``PATH``.

Secrets a cluster provides itself live only inside a node: ``node_secrets`` are written into the
node's private ``/tmp`` (mode 600) before its worker starts, and ``node_env`` (e.g. the storage
credentials an instance role would give) reaches the worker and what it launches through the
environment, never through Spark conf.

The master runs on the host (it runs no user code). Stop with ``close()``: every worker's process
group (its drivers and executors with it) is killed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

REPO = Path(__file__).resolve().parents[2]
NODE_VENV = "/opt/mysqlcdc-node/venv"
NODE_PYTHON = f"{NODE_VENV}/bin/python"
NODE_SECRETS_DIR = "/tmp/mysqlcdc-node-secrets"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent)


def _package_key() -> str:
    from airflow_provider_mysqlcdc.spark.runtime.package_files import package_digest

    return package_digest()


def build_node_venv(cache: Path) -> Path:
    """The cluster nodes' Python environment (cached by package content under ``cache``)."""
    key = hashlib.sha1(f"{_package_key()}:{sys.prefix}".encode()).hexdigest()[:12]
    target = cache / f"node-venv-{key}"
    if (target / ".complete").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(target)], check=True)
    ours = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    theirs = target / "lib" / ours.parent.name / "site-packages"
    for entry in ours.iterdir():
        name = entry.name
        if "mysqlcdc" in name or name.startswith("__editable__") or name == "__pycache__":
            continue  # the package comes from its wheel, not from the checkout
        dest = theirs / name
        if entry.is_dir():
            subprocess.run(["cp", "-al", str(entry), str(dest)], check=True)
        else:
            os.link(entry, dest)
    for script in ("spark-class", "spark-submit", "find-spark-home", "load-spark-env.sh", "pyspark"):
        src = Path(sys.prefix) / "bin" / script
        if src.exists():
            shutil.copy2(src, target / "bin" / script)
    wheels = cache / f"wheel-{key}"
    shutil.rmtree(wheels, ignore_errors=True)
    # Without this process's PYTHONPATH: with the checkout on it (a worktree run as
    # PYTHONPATH=<checkout>), the node's interpreter sees the checkout's egg-info (the wheel build
    # writes it there), pip takes the package as installed and skips the wheel, and every
    # executor then fails to import the package.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)],
        check=True,
        cwd=str(cache),
        env=env,
    )
    wheel = next(wheels.glob("*.whl"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(target / "bin" / "python"),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--no-compile",
            str(wheel),
        ],
        check=True,
        cwd=str(cache),
        env=env,
    )
    if not list(theirs.glob("airflow_provider_mysqlcdc-*.dist-info")):
        raise RuntimeError(f"the node environment {target} did not get the package from {wheel}")
    (target / ".complete").write_text(wheel.name)
    return target


def node_spark_home() -> str:
    """SPARK_HOME on the nodes: pyspark in the node environment."""
    return f"{NODE_VENV}/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages/pyspark"


def _outermost(dirs: list[str]) -> list[str]:
    """The directories to cover, without those inside another one of them: a repository checked out
    under /tmp is hidden with /tmp (mounting over it after /tmp is covered fails: it no longer exists)."""
    norm = list(dict.fromkeys(p.rstrip("/") or "/" for p in dirs))  # in the caller's order
    return [d for d in norm if not any(o != d and d.startswith(o.rstrip("/") + "/") for o in norm)]


def _node_script(
    node_venv: Path, hide: list[str], secrets: Mapping[str, str], argv: list[str], hostname: str, address: str
) -> str:
    """The shell run inside a worker's mount and UTS namespaces: its own host name (so the
    stream's lease and status tell the node from the Airflow host), private mounts, secrets,
    then the worker."""
    venv_path = NODE_VENV
    lines = [
        "set -e",
        "mount --make-rprivate /",
        "H=$(mktemp -d /run/mysqlcdc-node.XXXXXX)",
        'mount -t tmpfs tmpfs "$H"',
        f"hostname {shlex.quote(hostname)}",
        f'cp /etc/hosts "$H/hosts" && echo "{address} {hostname}" >> "$H/hosts"',
        'mount --bind "$H/hosts" /etc/hosts',
        'mkdir "$H/venv"',
        f'mount --bind {shlex.quote(str(node_venv))} "$H/venv"',
    ]
    for d in _outermost(hide):
        lines.append(f"mount -t tmpfs tmpfs {shlex.quote(d)}")
    lines += [
        f"mkdir -p {shlex.quote(venv_path)}",
        f'mount --bind "$H/venv" {shlex.quote(venv_path)}',
        "mkdir -p /tmp/home /tmp/spark-work",
        f"mkdir -m 700 -p {NODE_SECRETS_DIR}",
    ]
    for name, var in secrets.items():
        lines.append(f'(umask 077; printf %s "${var}" > {NODE_SECRETS_DIR}/{shlex.quote(name)}); unset {var}')
    lines.append("exec " + " ".join(shlex.quote(a) for a in argv))
    return "\n".join(lines)


@dataclass
class SparkCluster:
    master_url: str
    ui_url: str
    work: Path
    node_venv: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def close(self) -> None:
        for p in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                p.wait(10)

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as r:
            return json.loads(r.read())

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def drivers(self) -> list[dict[str, Any]]:
        st = self.state()
        return list(st.get("activedrivers", [])) + list(st.get("completeddrivers", []))

    def active_drivers(self) -> list[dict[str, Any]]:
        return list(self.state().get("activedrivers", []))

    def driver_processes(self) -> list[int]:
        """Host pids of the drivers the workers run (the DriverWrapper JVMs)."""
        import psutil

        out = []
        for p in psutil.process_iter(["pid", "cmdline"]):
            cmd = p.info.get("cmdline") or []
            if any("DriverWrapper" in c for c in cmd):
                out.append(p.info["pid"])
        return out

    def worker_logs(self) -> str:
        return "\n".join(f"== {p}\n{p.read_text(errors='replace')[-4000:]}" for p in self.logs if p.exists())


def _common_env() -> dict[str, str]:
    env = dict(os.environ)
    env["SPARK_HOME"] = spark_home()
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PATH"] = str(Path(sys.prefix) / "bin") + os.pathsep + env.get("PATH", "")
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"):
        env.pop(name, None)
    return env


@contextlib.contextmanager
def standalone_cluster(
    work: Path,
    cache: Path,
    *,
    workers: int = 2,
    cores: int = 2,
    memory: str = "3g",
    node_env: Mapping[str, str] | None = None,
    node_secrets: Mapping[str, str] | None = None,
) -> Iterator[SparkCluster]:
    """A master on the host and ``workers`` isolated workers; yields the cluster once all registered."""
    node_venv = build_node_venv(cache)
    work.mkdir(parents=True, exist_ok=True)
    port, ui = _free_port(), _free_port()
    env = _common_env()
    cluster = SparkCluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}", work, node_venv)
    spark_class = str(Path(sys.prefix) / "bin" / "spark-class")
    try:
        log = work / "master.log"
        cluster.logs.append(log)
        with open(log, "wb") as out:
            cluster.procs.append(
                subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
                    + ["--port", str(port), "--webui-port", str(ui)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        hide = ["/tmp", "/opt", str(REPO)]
        for i in range(workers):
            wenv = dict(env)
            wenv.update({k: str(v) for k, v in (node_env or {}).items()})
            wenv["HOME"] = "/tmp/home"
            wenv["SPARK_HOME"] = node_spark_home()
            wenv["PYSPARK_PYTHON"] = NODE_PYTHON
            wenv["PATH"] = f"{NODE_VENV}/bin:/usr/local/bin:/usr/bin:/bin"
            for name in [k for k in wenv if k.startswith(("AIRFLOW", "VIRTUAL_ENV", "PYTHON"))]:
                del wenv[name]  # a node has nothing of the Airflow host's configuration
            secret_vars = {}
            for j, (name, value) in enumerate((node_secrets or {}).items()):
                var = f"MYSQLCDC_NODE_SECRET_{j}"
                wenv[var] = value
                secret_vars[name] = var
            # Its own address, as a node has: Spark reads the shuffle files of an executor on the same
            # host straight from that host's disk, which a node's private /tmp does not share.
            address = f"127.0.0.{i + 2}"
            wenv["SPARK_LOCAL_IP"] = address
            argv = [f"{NODE_VENV}/bin/spark-class", "org.apache.spark.deploy.worker.Worker", cluster.master_url]
            argv += ["--host", address, "--cores", str(cores), "--memory", memory]
            argv += ["--webui-port", str(_free_port()), "--work-dir", "/tmp/spark-work"]
            script = _node_script(node_venv, hide, secret_vars, argv, f"spark-node-{i + 1}", address)
            log = work / f"worker-{i}.log"
            cluster.logs.append(log)
            with open(log, "wb") as out:
                cluster.procs.append(
                    subprocess.Popen(
                        ["unshare", "-m", "-u", "sh", "-c", script],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=wenv,
                        start_new_session=True,
                    )
                )
        deadline = time.monotonic() + 120
        while True:
            try:
                if len(cluster.alive_workers()) >= workers:
                    break
            except (OSError, ValueError):  # not up yet; a master UI still starting serves HTML at /json/
                pass
            dead = [p for p in cluster.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"the Spark cluster did not come up:\n{cluster.worker_logs()}")
            time.sleep(0.5)
        yield cluster
    finally:
        cluster.close()
