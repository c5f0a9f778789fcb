"""The first catch-up plan made by the launching process (spark/stream/planning/first_plan.py) and its use
by the source's first latestOffset."""

from __future__ import annotations

import json
import os
import threading
import time
from types import SimpleNamespace

import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig
from airflow_provider_mysqlcdc.spark.stream import binlog_source as bs
from airflow_provider_mysqlcdc.spark.stream.offsets.stream_offset import StreamOffset
from airflow_provider_mysqlcdc.spark.stream.planning import first_plan
from airflow_provider_mysqlcdc.spark.stream.planning.batch_planning import CatchupPlan
from airflow_provider_mysqlcdc.spark.stream.settings import StreamSettings

F = "mysql-bin.000002"


def _at(pos: int, file: str = F) -> StreamOffset:
    return StreamOffset.boundary(BinlogOffset(file, pos))


def _plan(start: int, end: int, *cuts: int) -> CatchupPlan:
    return CatchupPlan(_at(end), tuple(BinlogOffset(F, c) for c in cuts), 1 << 30)


def _wait_for(where: str, name: str) -> None:
    deadline = time.monotonic() + 10
    while not os.path.exists(os.path.join(where, name)):
        assert time.monotonic() < deadline, f"{name} never written"
        time.sleep(0.01)


def _begin(make) -> str:
    where = first_plan.new_directory()
    first_plan.begin(where, make)
    return where


def test_a_plan_survives_its_file():
    start, plan = _at(4), _plan(4, 9_000, 3_000, 6_000)
    assert first_plan.decode(first_plan.encode(start, plan)) == (start, plan)
    assert first_plan.decode(first_plan.encode(start, None)) == (start, None)
    assert "pw" not in first_plan.encode(start, plan)


def test_the_plan_is_taken_only_for_its_start_and_its_directory_goes():
    where = _begin(lambda: (_at(4), _plan(4, 9_000, 4_500)))
    _wait_for(where, first_plan.PLAN_FILE)
    assert first_plan.take(where, _at(4)) == _plan(4, 9_000, 4_500)
    assert not os.path.exists(where)
    assert first_plan.take(where, _at(4)) is None  # taken once
    where = _begin(lambda: (_at(4), _plan(4, 9_000)))
    _wait_for(where, first_plan.PLAN_FILE)
    assert first_plan.take(where, _at(5)) is None and not os.path.exists(where)  # made from another start


def test_the_source_waits_while_the_plan_is_being_made():
    release = threading.Event()

    def slow():
        release.wait(5)
        return _at(4), _plan(4, 9_000)

    where = _begin(slow)
    threading.Timer(0.2, release.set).start()
    began = time.monotonic()
    assert first_plan.take(where, _at(4)) == _plan(4, 9_000)
    assert time.monotonic() - began >= 0.15


@pytest.mark.parametrize(
    "make",
    [lambda: None, lambda: (_ for _ in ()).throw(OSError("server gone"))],
    ids=["no start known", "planning failed"],
)
def test_no_plan_is_said_at_once(make):
    where = _begin(make)
    _wait_for(where, first_plan.FAILED_FILE)
    began = time.monotonic()
    assert first_plan.take(where, _at(4), wait_s=20) is None
    assert time.monotonic() - began < 1 and not os.path.exists(where)


def test_no_directory_means_another_host_and_no_wait(tmp_path):
    began = time.monotonic()
    assert first_plan.take(str(tmp_path / "elsewhere"), _at(4), wait_s=20) is None
    assert first_plan.take(None, _at(4)) is None
    assert time.monotonic() - began < 1


def _offsets_entry(checkpoint, batch_id: int, end: StreamOffset) -> None:
    d = checkpoint / "offsets"
    d.mkdir(parents=True, exist_ok=True)
    (d / str(batch_id)).write_text("v1\n" + json.dumps({"batchWatermarkMs": 0}) + "\n" + json.dumps(end.to_dict()))


def test_a_restart_is_expected_at_the_last_offsets_entry_committed_or_not(tmp_path):
    settings = SimpleNamespace(startup_mode="timestamp", startup_offset=None)
    _offsets_entry(tmp_path, 0, _at(500))
    _offsets_entry(tmp_path, 1, _at(900))  # not committed: Spark replays it, then asks from its end
    (tmp_path / "commits").mkdir()
    (tmp_path / "commits" / "0").write_text("v1\n{}")
    assert first_plan.expected_start(settings, str(tmp_path)) == _at(900)


@pytest.mark.parametrize(
    "mode, offset",
    [("timestamp", None), ("latest-offset", None), ("earliest-offset", None), ("specific-offset", {"gtid": "0-1-5"})],
)
def test_a_new_query_whose_start_needs_a_scan_or_moves_is_left_to_the_source(tmp_path, mode, offset):
    settings = SimpleNamespace(startup_mode=mode, startup_offset=offset)
    assert first_plan.expected_start(settings, str(tmp_path / "checkpoint")) is None


def _settings(**kw) -> StreamSettings:
    schema = TableSchema(TableId("db", "t"), (Column("id", 1, "int", "int", False),), ("id",), ("id",), ("id",))
    d = dict(
        source=SourceConfig(password="pw"),
        schemas=(schema,),
        finished=(),
        max_events_per_batch=50,
        heartbeat_s=5.0,
        reconnect_timeout_s=1.0,
        startup_mode="latest-offset",
        startup_offset=None,
        startup_timestamp=None,
        state_location="/tmp/x",
    )
    d.update(kw)
    return StreamSettings(**d)


def test_the_first_latest_offset_takes_the_launchers_plan(monkeypatch):
    """The source uses the plan left for its first start (and plans the next one ahead from its
    end); a plan past the head it sees is not used."""
    calls: list[int] = []

    def plan(settings, start, head):
        calls.append(start.at.position)
        return _plan(start.at.position, min(start.at.position + 10_000, head.position))

    head = [BinlogOffset(F, 100_000)]
    monkeypatch.setattr(bs, "head_offset", lambda src: head[0])
    monkeypatch.setattr(bs, "check_available", lambda *a: None)
    monkeypatch.setattr(bs, "plan_catchup", plan)
    where = _begin(lambda: (_at(4), _plan(4, 7_000, 3_500)))
    _wait_for(where, first_plan.PLAN_FILE)
    r = bs.BinlogStreamReader(_settings(first_plan_dir=where))
    end = r.latestOffset(_at(4).to_dict(), ReadMaxRows(10))
    assert end["position"] == 7_000 and 4 not in calls  # the launcher's plan
    assert [p.start["position"] for p in r.partitions(_at(4).to_dict(), end)] == [4, 3_500]
    assert r.latestOffset(end, ReadMaxRows(10))["position"] == 17_000  # planned ahead from its end
    # a plan that ends past the head the call sees is made again
    where = _begin(lambda: (_at(4), _plan(4, 200_000)))
    _wait_for(where, first_plan.PLAN_FILE)
    r = bs.BinlogStreamReader(_settings(first_plan_dir=where))
    assert r.latestOffset(_at(4).to_dict(), ReadMaxRows(10))["position"] == 10_004 and 4 in calls


def test_a_plan_the_source_does_not_need_is_removed(monkeypatch):
    """At the head already (or with a plan made ahead): the launcher's directory goes at the first call."""
    monkeypatch.setattr(bs, "head_offset", lambda src: BinlogOffset(F, 4))
    monkeypatch.setattr(bs, "check_available", lambda *a: None)
    where = _begin(lambda: (_at(4), None))
    _wait_for(where, first_plan.PLAN_FILE)
    r = bs.BinlogStreamReader(_settings(first_plan_dir=where))
    assert r.latestOffset(_at(4).to_dict(), ReadMaxRows(10)) == _at(4).to_dict()
    assert not os.path.exists(where) and r._first_plan_dir is None
