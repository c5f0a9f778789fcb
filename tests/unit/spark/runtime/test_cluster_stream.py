"""The stream's cluster submission as a contract: what reaches spark-submit on each cluster
manager, and what never does (YARN and Kubernetes are not available here; the standalone path
also runs for real in tests/e2e/test_spark_cluster.py)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.spark.runtime import cluster_stream as cs

URL = "s3://lake/p/state/pipeline.json"


def _sub(master: str, **kw):
    kw.setdefault("spark_version", "4.2.0")
    return cs.submission(
        spark_submit="/x/spark-submit", master=master, name="mysqlcdc p binlog stream", config_url=URL, **kw
    )


@pytest.mark.parametrize(
    "master, manager",
    [("local[2]", "local"), ("spark://m:7077", "standalone"), ("yarn", "yarn"), ("k8s://https://k:6443", "kubernetes")],
)
def test_cluster_manager(master, manager):
    assert cs.cluster_manager(master) == manager


@pytest.mark.parametrize("master", ["sc://host:15002", "mesos://m:5050", "nonsense"])
def test_unsupported_masters_say_what_to_use(master):
    with pytest.raises(ConfigError, match="Fix:"):
        cs.cluster_manager(master)


@pytest.mark.parametrize(
    "master, mode, where",
    [
        ("local[2]", None, "here"),
        ("local[2]", "cluster", "here"),
        ("spark://m:7077", None, "cluster"),
        ("spark://m:7077", "client", "here"),
        ("yarn", None, "cluster"),
        ("k8s://https://k:6443", "cluster", "cluster"),
    ],
)
def test_where_the_driver_runs(master, mode, where):
    assert cs.stream_placement(master, mode) == where


def test_a_bad_deploy_mode_is_a_config_error():
    with pytest.raises(ConfigError, match="deploy-mode"):
        cs.stream_placement("yarn", "sideways")


def test_standalone_submission_runs_the_job_module_on_the_node():
    sub = _sub("spark://m:7077", password_file="/etc/mysqlcdc/pw", spark_home="/opt/spark/")
    argv = sub.argv
    assert argv[:2] == ["/x/spark-submit", "--master"] and "spark://m:7077" in argv
    assert argv[argv.index("--deploy-mode") + 1] == "cluster"
    assert argv[argv.index("--class") + 1] == cs.PYTHON_RUNNER
    jar = "file:///opt/spark/jars/spark-core_2.13-4.2.0.jar"
    i = argv.index(jar)
    assert argv[i + 1 :] == ["-m", "", cs.JOB_MODULE, "--config", URL, "--password-file", "/etc/mysqlcdc/pw"]
    assert "--py-files" not in argv, "nothing of the Airflow host is shipped"
    assert sub.conf["spark.cores.max"] == "2"  # room left for a batch read again while streaming
    assert sub.conf["spark.standalone.submit.waitAppCompletion"] == "false"


def test_the_users_conf_wins_over_the_defaults():
    sub = _sub("spark://m:7077", conf={"spark.cores.max": "6", "spark.driver.memory": "4g"})
    assert sub.conf["spark.cores.max"] == "6" and "spark.driver.memory=4g" in sub.argv


def test_a_standalone_driver_jvm_gets_the_module_options_spark_submit_gives_a_client_driver():
    """A standalone worker starts a cluster-mode driver's JVM without them, and Arrow in that JVM
    fails (seen: the stream's take-over of a batch read again died on createDataFrame)."""
    opts = _sub("spark://m:7077").conf["spark.driver.extraJavaOptions"].split()
    assert "--add-opens=java.base/java.nio=ALL-UNNAMED" in opts and "-Dio.netty.tryReflectionSetAccessible=true" in opts
    own = _sub("spark://m:7077", conf={"spark.driver.extraJavaOptions": "-Dmine=1"}).conf
    assert own["spark.driver.extraJavaOptions"].split()[-1] == "-Dmine=1", "the user's options come last (they win)"
    assert "spark.driver.extraJavaOptions" not in _sub("yarn").conf


def test_yarn_uploads_this_hosts_spark_core_jar_and_takes_the_queue():
    sub = _sub("yarn", queue="etl")
    argv = sub.argv
    assert argv[argv.index("--queue") + 1] == "etl"
    jar = next(a for a in argv if a.endswith("spark-core_2.13-4.2.0.jar"))
    assert jar.startswith("file://") and Path(jar.removeprefix("file://")).parent.name == "jars"
    assert "spark.yarn.submit.waitAppCompletion=false" in argv
    assert "spark.cores.max" not in sub.conf


def test_kubernetes_finds_the_jar_in_the_image():
    sub = _sub("k8s://https://k:6443", namespace="cdc")
    assert "local:///opt/spark/jars/spark-core_2.13-4.2.0.jar" in sub.argv
    assert sub.conf["spark.kubernetes.namespace"] == "cdc"
    assert "spark.kubernetes.submission.waitAppCompletion=false" in sub.argv


@pytest.mark.parametrize(
    "key",
    ["spark.hadoop.fs.s3a.secret.key", "spark.driverEnv.MYSQLCDC_PASSWORD", "spark.x.token", "spark.s3.accessKey"],
)
def test_secret_looking_conf_is_refused(key):
    with pytest.raises(ConfigError, match="spark-defaults"):
        _sub("spark://m:7077", conf={key: "v"})


def test_kubernetes_secret_references_are_not_secrets():
    sub = _sub(
        "k8s://https://k:6443", conf={"spark.kubernetes.driver.secretKeyRef.MYSQLCDC_PASSWORD": "mysql:password"}
    )
    assert "spark.kubernetes.driver.secretKeyRef.MYSQLCDC_PASSWORD=mysql:password" in sub.argv


def test_no_password_or_airflow_secret_reaches_the_submission():
    environ = {
        "PATH": "/airflow/venv/bin:/usr/bin",
        "JAVA_HOME": "/usr/lib/jvm/java-17",
        "HADOOP_CONF_DIR": "/etc/hadoop",
        "AIRFLOW_CONN_MYSQL_CDC_DEFAULT": "mysql-cdc://root:hunter2@db",
        "AIRFLOW__CORE__FERNET_KEY": "fernet",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql://a:b@c/d",
        "MYSQLCDC_PASSWORD": "hunter2",
        "PGPASSWORD": "pg-secret",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
    }
    sub = _sub("spark://m:7077", password_file="/etc/pw", environ=environ)
    text = json.dumps(sub.env) + " ".join(sub.argv)
    for secret in ("hunter2", "fernet", "postgresql://", "pg-secret", "aws-secret", "AIRFLOW"):
        assert secret not in text
    assert sub.env["JAVA_HOME"] == "/usr/lib/jvm/java-17" and sub.env["HADOOP_CONF_DIR"] == "/etc/hadoop"
    assert sub.env["PATH"] == cs.SYSTEM_PATH  # the Airflow venv's PATH would become the driver's


def _fake_submit(tmp_path: Path, output: str, code: int) -> str:
    script = tmp_path / "spark-submit"
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}\nEOF\nexit {code}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_submit_returns_the_driver_id(tmp_path):
    out = "INFO ClientEndpoint: Driver successfully submitted as driver-20261206051736-0001\nState of driver-20261206051736-0001 is RUNNING"
    sub = cs.submission(
        spark_submit=_fake_submit(tmp_path, out, 0),
        master="spark://m:7077",
        name="n",
        config_url=URL,
        spark_version="4.2.0",
    )
    assert cs.submit(sub).driver_id == "driver-20261206051736-0001"


def test_a_driver_that_fails_at_once_is_an_error_naming_it(tmp_path):
    out = "Driver successfully submitted as driver-20261206051736-0002\nState of driver-20261206051736-0002 is FAILED, exiting spark-submit JVM."
    sub = cs.submission(
        spark_submit=_fake_submit(tmp_path, out, 0),
        master="spark://m:7077",
        name="n",
        config_url=URL,
        spark_version="4.2.0",
    )
    with pytest.raises(cs.ClusterSubmitError, match="driver-20261206051736-0002 failed on a worker") as e:
        cs.submit(sub)
    assert isinstance(e.value, ConfigError), "not retried"


def test_an_unreachable_master_says_check_host_and_port(tmp_path):
    out = "WARN StandaloneAppClient: Failed to connect to master m:7077\nAll masters are unresponsive! Giving up."
    sub = cs.submission(
        spark_submit=_fake_submit(tmp_path, out, 1),
        master="spark://m:7077",
        name="n",
        config_url=URL,
        spark_version="4.2.0",
    )
    with pytest.raises(cs.ClusterSubmitError, match="host and port"):
        cs.submit(sub)


def test_the_local_connect_server_gives_a_cluster_no_interpreter_of_this_host():
    from airflow_provider_mysqlcdc.spark.runtime.connect_server import _python_env, settings_from

    assert _python_env(settings_from("local[2]")) == {"PYSPARK_PYTHON": sys.executable}
    assert _python_env(settings_from("spark://m:7077")) == {}
    given = settings_from("spark://m:7077", conf={"spark.pyspark.python": "/opt/env/bin/python"})
    assert _python_env(given) == {"PYSPARK_PYTHON": "/opt/env/bin/python"}


def _spark_conn(monkeypatch, extra: dict) -> None:
    body = {"conn_type": "spark", "host": "spark://127.0.0.1", "port": 7999, "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_CL_SPARK", json.dumps(body))


def test_a_cluster_stream_without_a_way_to_its_password_is_refused(monkeypatch, tmp_path):
    from airflow_provider_mysqlcdc.hooks.stream import StreamControl

    _spark_conn(monkeypatch, {"deploy-mode": "cluster"})
    control = StreamControl(str(tmp_path / "state"), "src", "cl_spark")
    assert not control.is_local
    with pytest.raises(ConfigError, match="mysqlcdc_password_file"):
        control._submit_to_cluster(URL, "p")


def test_a_cluster_stream_with_a_local_state_location_is_refused(monkeypatch, tmp_path):
    from airflow_provider_mysqlcdc.hooks.stream import StreamControl

    _spark_conn(monkeypatch, {"mysqlcdc_password_file": "/etc/pw"})
    control = StreamControl(str(tmp_path / "state"), "src", "cl_spark")
    with pytest.raises(ConfigError, match="mysqlcdc_shared_filesystem"):
        control._submit_to_cluster(URL, "p")


def test_a_postgres_sink_on_a_cluster_needs_the_cluster_to_provide_passwords(monkeypatch, tmp_path):
    from airflow_provider_mysqlcdc.hooks.stream import StreamControl

    _spark_conn(monkeypatch, {"mysqlcdc_password_file": "/etc/pw"})
    control = StreamControl(str(tmp_path / "state"), "src", "cl_spark", sink_conn_id="pg")
    with pytest.raises(ConfigError, match="PGPASSWORD"):
        control._submit_to_cluster(URL, "p")


def test_a_postgres_sink_on_a_cluster_takes_the_mysql_password_from_the_file_and_the_sinks_from_the_cluster(
    monkeypatch, tmp_path
):
    """mysqlcdc_password_file with mysqlcdc_cluster_provides_password: the driver gets the file (the
    cluster's environment gives it $PGPASSWORD only); no password reaches the submission."""
    from airflow_provider_mysqlcdc.hooks.stream import StreamControl
    from airflow_provider_mysqlcdc.spark.runtime import connect_server

    _spark_conn(
        monkeypatch,
        {
            "deploy-mode": "cluster",
            "mysqlcdc_password_file": "/etc/pw",
            "mysqlcdc_cluster_provides_password": True,
            "mysqlcdc_shared_filesystem": True,
        },
    )
    monkeypatch.setenv("PGPASSWORD", "pg-secret")
    monkeypatch.setenv("MYSQLCDC_PASSWORD", "hunter2")
    submitted = []
    monkeypatch.setattr(connect_server, "stop_idle_servers", lambda: False)
    monkeypatch.setattr(cs, "submit", lambda sub: submitted.append(sub) or cs.Submitted("driver-1", ""))
    control = StreamControl(str(tmp_path / "state"), "src", "cl_spark", sink_conn_id="pg")
    control._submit_to_cluster(URL, "p")
    (sub,) = submitted
    assert sub.argv[-2:] == ["--password-file", "/etc/pw"], sub.argv
    text = json.dumps(sub.env) + " ".join(sub.argv)
    assert "pg-secret" not in text and "hunter2" not in text
    assert control.state.read_json("stream/cluster_driver.json")["driver_id"] == "driver-1"


def test_client_mode_keeps_the_driver_here(monkeypatch, tmp_path):
    from airflow_provider_mysqlcdc.hooks.stream import StreamControl

    _spark_conn(monkeypatch, {"deploy-mode": "client"})
    assert StreamControl(str(tmp_path / "state"), "src", "cl_spark").is_local
    assert os.environ.get("AIRFLOW_CONN_CL_SPARK")


def test_client_mode_driver_finds_this_python_as_python3_and_gives_executors_none(monkeypatch):
    """Client mode: the driver's own Python workers (the source's planning) resolve python3 on this
    host's PATH (this venv first); no PYSPARK_PYTHON names this host's interpreter to the executors."""
    from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import _child_env

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    env = _child_env("pw", "/venv/bin/python", {}, "spark://m:7077")
    assert "PYSPARK_PYTHON" not in env and env["PATH"].split(":")[0] == "/venv/bin"
    local = _child_env("pw", "/venv/bin/python", {}, "local[2,4]")
    assert local["PYSPARK_PYTHON"] == "/venv/bin/python"
