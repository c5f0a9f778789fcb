"""Stream offsets (stable JSON), admission control and the heartbeat logic, without a server."""

from __future__ import annotations

import json

import pymysql
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from airflow_provider_mysqlcdc.cdc.errors import BinlogPurgedError, ConfigError, SourceUnreachableError
from airflow_provider_mysqlcdc.cdc.events import RowChange
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig
from airflow_provider_mysqlcdc.spark.stream import binlog_source as bs
from airflow_provider_mysqlcdc.spark.stream.offsets.stream_offset import StreamOffset
from airflow_provider_mysqlcdc.spark.stream.planning import batch_planning
from airflow_provider_mysqlcdc.spark.stream.server import reconnect, startup
from airflow_provider_mysqlcdc.spark.stream.settings import StreamSettings, settings_from_options

T = TableId("db", "t")


def test_offset_json_has_fixed_keys_and_order():
    a = StreamOffset.boundary(BinlogOffset("mysql-bin.000010", 4, "0-1-5"))
    assert list(a.to_dict()) == ["file", "position", "row", "txn_file", "txn_position", "gtid", "server"]
    assert json.dumps(a.to_dict()) == (
        '{"file": "mysql-bin.000010", "position": 4, "row": 0, "txn_file": null, "txn_position": null, '
        '"gtid": "0-1-5", "server": null}'
    )
    placed = a.placed("0-1-6", "mariadb:7")
    assert StreamOffset.from_dict(placed.to_dict()).server == "mariadb:7"
    assert placed == a and placed.same_place(a)  # equality is the place: server and GTID aside
    mid = StreamOffset(BinlogOffset("mysql-bin.000010", 900, row=3), BinlogOffset("mysql-bin.000010", 700))
    assert list(mid.to_dict()) == list(a.to_dict())
    for o in (a, mid):
        assert StreamOffset.from_dict(json.loads(json.dumps(o.to_dict()))) == o
    assert mid.dump_from == BinlogOffset("mysql-bin.000010", 700)
    assert a.dump_from == BinlogOffset("mysql-bin.000010", 4)


def test_after_and_at_change():
    ch = RowChange("insert", T, None, {"id": 1}, BinlogOffset("mysql-bin.000002", 500, row=2))
    txn = BinlogOffset("mysql-bin.000002", 300)
    assert StreamOffset.after(ch, txn).at == BinlogOffset("mysql-bin.000002", 500, row=3)
    assert StreamOffset.at_change(ch, txn).at == ch.offset
    assert StreamOffset.at_change(ch, txn).txn_start == txn


def test_stop_for_mid_event_end_lets_the_event_through():
    from airflow_provider_mysqlcdc.spark.stream.reading.binlog_read import stop_for

    assert stop_for(BinlogOffset("f.000001", 100)) == BinlogOffset("f.000001", 100)
    assert stop_for(BinlogOffset("f.000001", 100, row=2)) == BinlogOffset("f.000001", 101)


def test_connection_loss_classification():
    assert reconnect.is_connection_loss(pymysql.err.OperationalError(2013, "Lost connection"))
    assert reconnect.is_connection_loss(pymysql.err.OperationalError(2003, "Can't connect"))
    assert reconnect.is_connection_loss(SourceUnreachableError("cannot connect to MySQL at h:1: refused"))
    assert not reconnect.is_connection_loss(ConfigError("cannot log in to h:1 as x: access denied"))
    assert not reconnect.is_connection_loss(BinlogPurgedError("purged"))
    assert not reconnect.is_connection_loss(ConfigError("cannot log in"))
    assert not reconnect.is_connection_loss(pymysql.err.OperationalError(1236, "fatal reading binlog"))


def test_with_reconnect_retries_then_gives_up(monkeypatch):
    monkeypatch.setattr(reconnect.time, "sleep", lambda s: None)
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise pymysql.err.OperationalError(2013, "Lost connection")
        return "ok"

    assert reconnect.with_reconnect(flaky, 60, "test") == "ok"
    with pytest.raises(BinlogPurgedError):
        reconnect.with_reconnect(lambda: (_ for _ in ()).throw(BinlogPurgedError("x")), 60, "test")


def _settings(**kw) -> StreamSettings:
    schema = TableSchema(T, (Column("id", 1, "int", "int", False),), ("id",), ("id",), ("id",))
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


class _Fake:
    """Stands in for the server: a head offset and the captured changes before it."""

    def __init__(self, monkeypatch, head: int, changes: list[int]):
        self.head = head
        self.changes = changes
        self.scans: list[tuple[int, int | None]] = []
        monkeypatch.setattr(bs, "head_offset", lambda src: BinlogOffset("mysql-bin.000001", self.head))
        monkeypatch.setattr(bs, "check_available", lambda *a: None)
        monkeypatch.setattr(bs, "scan_for_end", self.scan)
        monkeypatch.setattr(bs, "plan_catchup", lambda *a: None)  # never far behind here

    def scan(self, settings, start, head, max_rows, gtid_watch=None):
        self.scans.append((start.at.position, max_rows))
        inside = [p for p in self.changes if start.at.position <= p < head.position]
        if max_rows is not None and len(inside) > max_rows:
            p = inside[max_rows]
            return batch_planning.ScanResult(StreamOffset(BinlogOffset("mysql-bin.000001", p)), max_rows, True)
        return batch_planning.ScanResult(StreamOffset.boundary(head), len(inside), False)


def _off(p: int) -> dict:
    return StreamOffset.boundary(BinlogOffset("mysql-bin.000001", p)).to_dict()


def test_default_read_limit_is_max_events_per_batch():
    r = bs.BinlogStreamReader(_settings(max_events_per_batch=50))
    assert r.getDefaultReadLimit() == ReadMaxRows(50)


def test_latest_offset_respects_the_limit(monkeypatch):
    fake = _Fake(monkeypatch, head=1000, changes=list(range(100, 200)))
    r = bs.BinlogStreamReader(_settings())
    end = r.latestOffset(_off(4), ReadMaxRows(30))
    assert end["position"] == 130
    assert fake.scans[-1] == (4, 30)
    assert r.latestOffset(_off(4), ReadAllAvailable())["position"] == 1000
    assert fake.scans[-1] == (4, None)


def test_no_new_binlog_returns_start_unchanged(monkeypatch):
    _Fake(monkeypatch, head=500, changes=[])
    r = bs.BinlogStreamReader(_settings())
    start = _off(500)
    assert r.latestOffset(start, ReadMaxRows(10)) is start


def test_heartbeat_moves_idle_offsets_at_most_every_heartbeat_s(monkeypatch):
    fake = _Fake(monkeypatch, head=1000, changes=[])
    now = [100.0]
    monkeypatch.setattr(bs.time, "monotonic", lambda: now[0])
    r = bs.BinlogStreamReader(_settings(heartbeat_s=5.0))
    start = _off(4)
    assert r.latestOffset(start, ReadMaxRows(10)) == start  # within heartbeat_s: stay
    fake.head = 2000
    now[0] += 2
    assert r.latestOffset(start, ReadMaxRows(10)) == start
    assert fake.scans[-1][0] == 1000  # only the new part was scanned
    now[0] += 4
    end = r.latestOffset(start, ReadMaxRows(10))
    assert end["position"] == 2000  # moved to the head
    assert r.partitions(start, end) == []  # known empty: no task
    assert len(r.partitions(_off(4), _off(2000))) == 1  # unknown (e.g. replay): one task


def test_captured_change_moves_at_once(monkeypatch):
    _Fake(monkeypatch, head=1000, changes=[700])
    now = [100.0]
    monkeypatch.setattr(bs.time, "monotonic", lambda: now[0])
    r = bs.BinlogStreamReader(_settings(heartbeat_s=60.0))
    assert r.latestOffset(_off(4), ReadMaxRows(10))["position"] == 1000


def test_catchup_plan_becomes_one_partition_per_range_with_its_own_server_id(monkeypatch):
    from airflow_provider_mysqlcdc.cdc.source.config import ServerIdRange

    f = "mysql-bin.000003"
    cuts = (BinlogOffset(f, 5000), BinlogOffset("mysql-bin.000004", 4))
    end = StreamOffset.boundary(BinlogOffset("mysql-bin.000004", 9000))
    monkeypatch.setattr(bs, "head_offset", lambda src: BinlogOffset("mysql-bin.000004", 20000))
    monkeypatch.setattr(bs, "check_available", lambda *a: None)
    monkeypatch.setattr(
        bs, "plan_catchup", lambda settings, start, head: batch_planning.CatchupPlan(end, cuts, 1 << 30)
    )
    monkeypatch.setattr(bs, "scan_for_end", lambda *a: pytest.fail("a catch-up batch must not be scanned"))
    src = SourceConfig(password="pw", server_id_range=ServerIdRange(5400, 5409))
    r = bs.BinlogStreamReader(_settings(source=src, catchup_parallelism=3))
    start = StreamOffset(BinlogOffset(f, 300, None, 2), BinlogOffset(f, 120)).to_dict()
    got = r.latestOffset(start, ReadMaxRows(10))
    assert got == end.placed(None, "mariadb:1").to_dict()  # not bounded by the row limit; marked with its server
    parts = r.partitions(start, got)
    assert [(p.start, p.end) for p in parts] == [
        (start, StreamOffset.boundary(cuts[0]).to_dict()),
        (StreamOffset.boundary(cuts[0]).to_dict(), StreamOffset.boundary(cuts[1]).to_dict()),
        (StreamOffset.boundary(cuts[1]).to_dict(), got),
    ]
    assert [p.server_id for p in parts] == [5400, 5409, 5408]  # the stream's id, then from the top
    assert {p.first_file_index for p in parts} == {3}  # one numbering for the whole batch
    assert len(r.partitions(start, got)) == 1  # a replay without the plan: one range


def test_catchup_parallelism_needs_server_ids():
    from airflow_provider_mysqlcdc.cdc.errors import ConfigError
    from airflow_provider_mysqlcdc.cdc.source.config import ServerIdRange

    src = SourceConfig(password="pw", server_id_range=ServerIdRange(5400, 5403))
    bs.BinlogStreamReader(_settings(source=src, catchup_parallelism=2))
    with pytest.raises(ConfigError, match="widen server_id_range or lower catchup_parallelism"):
        bs.BinlogStreamReader(_settings(source=src, catchup_parallelism=3))


def test_one_partition_per_batch():
    r = bs.BinlogStreamReader(_settings())
    assert r.partitions(_off(4), _off(4)) == []
    parts = r.partitions(_off(4), _off(90))
    assert len(parts) == 1 and parts[0].start == _off(4) and parts[0].end == _off(90)


def test_options_are_lower_case_and_password_from_env(monkeypatch):
    from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig

    cfg = PipelineConfig("p", SourceConfig(), ("db.t",), "/tmp/state", startup_mode="latest-offset")
    schemas = json.dumps([_settings().schemas[0].to_dict()])
    monkeypatch.setenv("MYSQLCDC_PASSWORD", "from-env")
    s = settings_from_options({"config": cfg.to_json(), "schemas": schemas})
    assert s.source.password == "from-env"
    s = settings_from_options({"CONFIG": cfg.to_json(), "schemas": schemas, "password": "opt"})
    assert s.source.password == "opt"
    assert "opt" not in repr(s)
    monkeypatch.delenv("MYSQLCDC_PASSWORD")
    with pytest.raises(ConfigError, match="no source password"):
        settings_from_options({"config": cfg.to_json(), "schemas": schemas})


def test_initial_mode_without_finished_batches_fails_clearly():
    with pytest.raises(ConfigError, match="no finished snapshot batches"):
        startup.initial_offset(_settings(startup_mode="initial"))


def test_the_driver_side_source_does_not_load_the_decoder():
    """Every query start runs the source in a new Python process on the driver; the decoder
    and pandas (which a pyarrow list conversion pulls in) are executor-side costs."""
    import subprocess
    import sys

    code = (
        "import sys, airflow_provider_mysqlcdc.spark.stream.binlog_source; "
        "print(sorted(m for m in ('airflow_provider_mysqlcdc.cdc.binlog.fast', "
        "'airflow_provider_mysqlcdc.spark.stream.reading.binlog_read', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_next_catchup_plan_is_made_while_the_micro_batch_runs(monkeypatch):
    """The plan from a catch-up micro-batch's end is made on another thread right away, and the next
    latestOffset from that end takes it; a plan past the head it sees, one that failed, or one made
    from another start is not used: the call plans itself."""
    import pickle
    import threading

    f = "mysql-bin.000002"
    head = [BinlogOffset(f, 100_000)]
    calls: list[tuple[int, str]] = []

    def plan(settings, start, at_head):
        calls.append((start.at.position, threading.current_thread().name))
        end = min(start.at.position + 10_000, at_head.position)
        return batch_planning.CatchupPlan(StreamOffset.boundary(BinlogOffset(f, end)), (), 1 << 30)

    def ahead(r, start: dict, make) -> None:
        r._ahead.take(StreamOffset.from_dict(start))  # the one made ahead, waited for and dropped
        r._ahead.begin(StreamOffset.from_dict(start), make)

    def failing(at):
        raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")

    monkeypatch.setattr(bs, "head_offset", lambda src: head[0])
    monkeypatch.setattr(bs, "check_available", lambda *a: None)
    monkeypatch.setattr(bs, "plan_catchup", plan)
    monkeypatch.setattr(bs, "scan_for_end", lambda *a: pytest.fail("a catch-up batch must not be scanned"))
    me = threading.current_thread().name
    r = bs.BinlogStreamReader(_settings())
    first = r.latestOffset(_off(4), ReadMaxRows(10))
    assert first["position"] == 10_004 and calls[0] == (4, me)
    second = r.latestOffset(first, ReadMaxRows(10))
    assert second["position"] == 20_004
    assert [c for c in calls if c[0] == 10_004] == [(10_004, "mysqlcdc-plan-ahead")]  # made ahead, once
    pickle.loads(pickle.dumps(r))  # the thread does not travel with the reader
    # made ahead while the head was further on; the head Spark's call sees is before its end
    ahead(r, second, lambda at: plan(None, at, BinlogOffset(f, 100_000)))
    head[0] = BinlogOffset(f, 25_000)
    third = r.latestOffset(second, ReadMaxRows(10))
    assert third["position"] == 25_000 and (20_004, me) in calls  # planned in the call
    head[0] = BinlogOffset(f, 100_000)
    ahead(r, third, failing)
    fourth = r.latestOffset(third, ReadMaxRows(10))
    assert fourth["position"] == 35_000 and (25_000, me) in calls
    ahead(r, _off(1), lambda at: plan(None, at, head[0]))  # from another start
    assert r.latestOffset(fourth, ReadMaxRows(10))["position"] == 45_000 and (35_000, me) in calls
