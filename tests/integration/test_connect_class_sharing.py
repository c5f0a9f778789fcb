"""The local Spark Connect server's class-data-sharing archive, end to end: a first server records
its classes, its supervisor builds the archive after it stops, and the next server's JVM maps it
(seen in /proc/<pid>/maps, not only in the options it was given)."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from airflow_provider_mysqlcdc.spark.runtime import class_sharing
from airflow_provider_mysqlcdc.spark.runtime.connect_server import (
    ensure_local_server,
    remote_session,
    settings_from,
    stop_local_servers,
)

pytestmark = pytest.mark.skipif(not class_sharing.enabled(), reason="class-data sharing is Linux only")


def _server_jvm(supervisor_pid: int) -> psutil.Process:
    for child in psutil.Process(supervisor_pid).children(recursive=True):
        if child.name().startswith("java"):
            return child
    raise AssertionError("no JVM under the supervisor")


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_second_server_starts_on_the_archive(tmp_path, monkeypatch):
    monkeypatch.setenv(class_sharing.CDS_DIR_ENV, str(tmp_path / "cds"))
    monkeypatch.delenv(class_sharing.CDS_ENV, raising=False)
    runtime = tmp_path / "runtime"
    settings = settings_from("local[1]", driver_memory="1g")
    key = class_sharing.archive_key(settings.jars)
    archive = class_sharing.archive_path(key)

    info = ensure_local_server(settings, idle_s=60, directory=runtime)
    try:
        jvm = _server_jvm(info.supervisor_pid)
        assert any(a.startswith("-XX:DumpLoadedClassList=") for a in jvm.cmdline())
        with remote_session(info.url) as spark:
            assert spark.range(10).count() == 10
        time.sleep(2.5)  # the supervisor reads the JVM's command line on its next 2 s tick
    finally:
        assert stop_local_servers(runtime) == 1
    deadline = time.monotonic() + 240
    while not archive.exists() and time.monotonic() < deadline:
        time.sleep(1)
    log = archive.with_suffix(".log")
    assert archive.exists(), f"no archive after 240 s; builder log:\n{log.read_text() if log.exists() else '-'}"
    assert not [p for p in archive.parent.iterdir() if p.suffix.startswith((".building", ".classes", ".jvm", ".tmp"))]

    info = ensure_local_server(settings, idle_s=60, directory=runtime)
    try:
        jvm = _server_jvm(info.supervisor_pid)
        assert f"-XX:SharedArchiveFile={archive}" in " ".join(jvm.cmdline())
        assert str(archive) in _maps(jvm.pid), "the JVM was given the archive but did not map it"
        with remote_session(info.url) as spark:
            assert spark.range(10).count() == 10
    finally:
        stop_local_servers(runtime)
