"""The local Connect server's class-data-sharing archive: which options a server starts with, and
the dump command built from a recording server's command line (the end-to-end effect -- a
server starting on the archive -- is in tests/integration/test_connect_class_sharing.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.spark.runtime import class_sharing
from airflow_provider_mysqlcdc.spark.runtime.connect_server import ServerSettings, _server_command


@pytest.fixture
def cds_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(class_sharing.CDS_DIR_ENV, str(tmp_path / "cds"))
    monkeypatch.delenv(class_sharing.CDS_ENV, raising=False)
    return tmp_path / "cds"


def test_records_classes_until_an_archive_exists(cds_dir, tmp_path):
    key = class_sharing.archive_key()
    assert key is not None  # this machine has java and pyspark's jars
    lst = tmp_path / "classes.lst"
    assert class_sharing.java_options(key, lst) == [f"-XX:DumpLoadedClassList={lst}"]
    class_sharing.archive_path(key).parent.mkdir(parents=True)
    class_sharing.archive_path(key).write_bytes(b"x")
    assert class_sharing.java_options(key, lst) == [
        f"-XX:SharedArchiveFile={class_sharing.archive_path(key)}",
        "-Xshare:auto",
    ]


def test_switched_off(cds_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(class_sharing.CDS_ENV, "0")
    assert class_sharing.java_options(class_sharing.archive_key(), tmp_path / "l") == []
    assert class_sharing.java_options(None, tmp_path / "l") == []


def test_key_follows_the_jars(cds_dir):
    assert class_sharing.archive_key() == class_sharing.archive_key()
    assert class_sharing.archive_key(("/x/mariadb.jar",)) != class_sharing.archive_key()


def test_dump_command_keeps_the_class_path_and_drops_the_main_class():
    argv = [
        "/usr/bin/java",
        "-cp",
        "/spark/conf:/spark/jars/*",
        "-Xmx2g",
        "-XX:DumpLoadedClassList=/r/c.lst",
        "--add-opens=java.base/java.lang=ALL-UNNAMED",
        "org.apache.spark.deploy.SparkSubmit",
        "--master",
        "local[2]",
        "--conf",
        "spark.x=1",
    ]
    cmd = class_sharing.dump_command(argv, Path("/a/list"), Path("/a/out.jsa"))
    assert cmd == [
        "/usr/bin/java",
        "-cp",
        "/spark/conf:/spark/jars/*",
        "-Xmx2g",
        "--add-opens=java.base/java.lang=ALL-UNNAMED",
        "-Xshare:dump",
        "-XX:SharedClassListFile=/a/list",
        "-XX:SharedArchiveFile=/a/out.jsa",
    ]


def test_one_builder_at_a_time(cds_dir, tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(class_sharing.subprocess, "Popen", lambda cmd, **kw: started.append(cmd))
    lst = tmp_path / "classes.lst"
    assert not class_sharing.start_build("k1", ["java"], lst)  # nothing recorded
    lst.write_text("java/lang/Object\n")
    assert class_sharing.start_build("k1", ["java", "-cp", "x", "Main"], lst)
    assert not class_sharing.start_build("k1", ["java"], lst)  # the first one holds the lock
    assert len(started) == 1
    assert not any("Main" in a for a in started[0]), "the builder's command line names no main class"
    jvm = Path(started[0][started[0].index("--jvm") + 1])
    assert json.loads(jvm.read_text()) == ["java", "-cp", "x"]


def test_server_command_adds_options_to_the_users_driver_options():
    settings = ServerSettings("local[2]", "2g", (), (("spark.driver.extraJavaOptions", "-Dmine=1"),))
    cmd = _server_command(settings, 15002, ["-Xshare:auto", "-XX:SharedArchiveFile=/a.jsa"])
    assert "spark.driver.extraJavaOptions=-Dmine=1 -Xshare:auto -XX:SharedArchiveFile=/a.jsa" in cmd
    plain = _server_command(ServerSettings("local[2]"), 15002)
    assert not any("extraJavaOptions" in a for a in plain)


def test_paths_with_spaces_are_not_given_to_the_jvm(tmp_path, monkeypatch):
    monkeypatch.setenv(class_sharing.CDS_DIR_ENV, str(tmp_path / "my cache"))
    monkeypatch.delenv(class_sharing.CDS_ENV, raising=False)
    key = class_sharing.archive_key()
    assert class_sharing.java_options(key, tmp_path / "classes.lst") == []
    monkeypatch.setenv(class_sharing.CDS_DIR_ENV, str(tmp_path / "cache"))
    assert class_sharing.java_options(key, tmp_path / "run dir" / "classes.lst") == []


def test_the_users_own_class_sharing_options_win(cds_dir, tmp_path):
    key = class_sharing.archive_key()
    assert class_sharing.java_options(key, tmp_path / "c.lst", "-Dmine=1") != []
    assert class_sharing.java_options(key, tmp_path / "c.lst", "-Xshare:off") == []
    assert class_sharing.java_options(key, tmp_path / "c.lst", "-XX:SharedArchiveFile=/mine.jsa") == []


def test_local_jobs_share_the_connect_servers_archive_and_record_when_there_is_none(cds_dir, tmp_path, monkeypatch):
    """The spark-submit / python-launched local drivers (snapshot and stream jobs, the operators'
    local runtime) take the archive under the local Connect server's key; with none yet, only a
    driver that can build one afterwards records (``record``), the others start as before."""
    from airflow_provider_mysqlcdc.spark.runtime import session

    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    lst = tmp_path / "classes.lst"
    assert session.class_sharing_options() == []
    assert session.class_sharing_options(record=lst) == [f"-XX:DumpLoadedClassList={lst}"]
    assert session.class_sharing_for_next_driver(record=lst) is True
    assert f"-XX:DumpLoadedClassList={lst}" in os.environ["SPARK_SUBMIT_OPTS"]
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")

    jar = session.jdbc_jar_path()
    archive = class_sharing.archive_path(class_sharing.archive_key((jar,) if jar else ()))
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(b"x")
    used = [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    assert session.class_sharing_options() == used
    assert session.class_sharing_for_next_driver(record=lst) is False  # nothing to record
    # the user's own class-sharing options win
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xshare:off")
    assert session.class_sharing_options() == []
    monkeypatch.setenv(class_sharing.CDS_ENV, "0")
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    assert session.class_sharing_options() == []


def test_the_operators_local_spark_submit_gets_the_archive(cds_dir, monkeypatch):
    from airflow_provider_mysqlcdc.hooks.spark_job import python_env
    from airflow_provider_mysqlcdc.spark.runtime import session

    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Dmine=1")
    assert "SPARK_SUBMIT_OPTS" not in python_env("local[2]")  # no archive yet
    jar = session.jdbc_jar_path()
    archive = class_sharing.archive_path(class_sharing.archive_key((jar,) if jar else ()))
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(b"x")
    assert python_env("local[2]")["SPARK_SUBMIT_OPTS"] == f"-Dmine=1 -XX:SharedArchiveFile={archive} -Xshare:auto"
    assert python_env("spark://master:7077") == {}  # a cluster's driver is not on this host


def test_key_follows_where_sparks_jars_are(cds_dir, tmp_path, monkeypatch):
    """Two virtualenvs with the same Spark have the same jars at different paths: an archive holds
    the class path it was dumped with, so each gets its own."""
    here = class_sharing.archive_key()
    other = tmp_path / "spark"
    (other / "jars").mkdir(parents=True)
    for jar in sorted((Path(class_sharing._spark_jars_dir()) or Path()).iterdir()):
        (other / "jars" / jar.name).write_bytes(b"")
        os.truncate(other / "jars" / jar.name, jar.stat().st_size)
    monkeypatch.setenv("SPARK_HOME", str(other))
    assert class_sharing.archive_key() != here
