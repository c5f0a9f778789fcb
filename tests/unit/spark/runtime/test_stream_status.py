"""stream/status.json: lag math, head samples, throttling, and a listener that never raises."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.runtime.stream_status import (
    STATUS_REL,
    StatusRecorder,
    StreamStatus,
    add_head_sample,
    behind_bytes,
    compute_lag,
    end_offset_of,
    last_committed,
    read_status,
)


def off(file_index: int, position: int, row: int = 0) -> dict:
    """A stream offset dict as the source reports it."""
    return {
        "file": f"mysql-bin.{file_index:06d}",
        "position": position,
        "row": row,
        "txn_file": None,
        "txn_position": None,
        "gtid": None,
    }


def sample(file_index: int, position: int, t: float) -> list:
    return [f"mysql-bin.{file_index:06d}", position, t]


# --- lag ------------------------------------------------------------------------------------------

SAMPLES = [sample(1, 100, 10.0), sample(1, 200, 20.0), sample(1, 300, 30.0), sample(2, 50, 40.0)]


@pytest.mark.parametrize(
    "committed, now, lag, lower",
    [
        (off(2, 50), 40.0, 0.0, False),  # at the current head
        (off(2, 900), 41.0, 1.0, False),  # past the newest sample: that sample's age
        (off(1, 300), 45.0, 15.0, False),  # exactly a sample: everything seen at t=30 is in
        (off(1, 299), 45.0, 25.0, False),  # just before it: only what was seen at t=20
        (off(1, 250, row=3), 45.0, 25.0, False),
        (off(1, 200, row=1), 45.0, 25.0, False),  # a row inside the event at 200 is past 200:0
        (off(1, 10), 45.0, 35.0, True),  # before every sample: lower bound from the oldest
    ],
)
def test_lag_is_the_age_of_the_newest_head_sample_the_stream_has_passed(committed, now, lag, lower):
    assert compute_lag(committed, SAMPLES, now) == (pytest.approx(lag), lower)


def test_lag_is_unknown_without_a_committed_offset_or_samples():
    assert compute_lag(None, SAMPLES, 50.0) == (None, False)
    assert compute_lag(off(1, 100), [], 50.0) == (None, False)


def test_file_index_orders_offsets_not_the_file_name_string():
    samples = [["mysql-bin.999999", 500, 10.0], ["mysql-bin.1000000", 4, 20.0]]
    assert compute_lag({"file": "mysql-bin.1000000", "position": 4}, samples, 25.0) == (5.0, False)
    assert compute_lag({"file": "mysql-bin.999999", "position": 600}, samples, 25.0) == (15.0, False)


def test_lag_now_grows_while_the_stream_is_stuck():
    st = StreamStatus(
        committed_offset=off(1, 200), head_samples=[list(s) for s in SAMPLES], updated_at=40.0, lag_s=20.0
    )
    assert st.lag_now(now=40.0) == pytest.approx(20.0)
    assert st.lag_now(now=100.0) == pytest.approx(80.0)
    assert st.age_s(now=100.0) == pytest.approx(60.0)
    assert st.lag_estimate(now=100.0) == (pytest.approx(80.0), False)


# --- samples --------------------------------------------------------------------------------------


def test_an_unchanged_head_keeps_only_its_first_and_last_sighting():
    samples: list = []
    for t in range(10):
        add_head_sample(samples, BinlogOffset("mysql-bin.000001", 100), float(t))
    assert samples == [sample(1, 100, 0.0), sample(1, 100, 9.0)]
    add_head_sample(samples, BinlogOffset("mysql-bin.000001", 150), 10.0)
    assert samples[-1] == sample(1, 150, 10.0) and len(samples) == 3
    # caught up with the unchanged head: lag 0 at its last sighting; behind it: the first one counts
    assert compute_lag(off(1, 100), samples[:2], 9.0) == (0.0, False)


def test_samples_stay_bounded_and_keep_the_oldest_and_newest():
    samples: list = []
    for i in range(1000):
        add_head_sample(samples, BinlogOffset("mysql-bin.000001", 100 + i), float(i), max_samples=50)
        assert len(samples) <= 50
    assert samples[0] == sample(1, 100, 0.0)
    assert samples[-1] == sample(1, 1099, 999.0)
    times = [s[2] for s in samples]
    assert times == sorted(times)
    assert times[-25:] == [float(t) for t in range(975, 1000)]  # the recent half at full resolution


def test_a_head_that_goes_back_drops_the_history():
    samples = [sample(3, 100, 1.0), sample(3, 200, 2.0)]
    add_head_sample(samples, BinlogOffset("mysql-bin.000001", 4), 3.0)
    assert samples == [sample(1, 4, 3.0)]


def test_behind_bytes_spans_files():
    logs = [("mysql-bin.000001", 1000), ("mysql-bin.000002", 500), ("mysql-bin.000003", 800)]
    head = BinlogOffset("mysql-bin.000003", 300)
    assert behind_bytes(off(3, 100), head, logs) == 200
    assert behind_bytes(off(3, 300), head, logs) == 0
    assert behind_bytes(off(3, 400), head, logs) == 0
    assert behind_bytes(off(1, 900), head, logs) == 100 + 500 + 300
    assert behind_bytes(off(1, 900), None, logs) is None
    assert behind_bytes(None, head, logs) is None


# --- the recorder ---------------------------------------------------------------------------------


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class FakeHead:
    """The server's head; ``fail`` makes reads raise like a lost connection."""

    def __init__(self) -> None:
        self.head = BinlogOffset("mysql-bin.000001", 1000)
        self.fail = False
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.fail:
            raise ConnectionError("server gone")
        return self.head, [("mysql-bin.000001", self.head.position)]


class FakeScheduler:
    def __init__(self) -> None:
        self.pending: list = []

    def __call__(self, delay, fn):
        self.pending.append((delay, fn))
        return SimpleNamespace(cancel=lambda: None)

    def run(self) -> None:
        pending, self.pending = self.pending, []
        for _, fn in pending:
            fn()


@pytest.fixture
def rec(tmp_dir):
    clock, head, sched = FakeClock(), FakeHead(), FakeScheduler()
    r = StatusRecorder(StateStore(str(tmp_dir / "state")), head, clock=clock, schedule=sched)
    return SimpleNamespace(r=r, clock=clock, head=head, sched=sched, state=r.state)


def test_first_progress_is_written_at_once_then_at_most_once_per_second(rec):
    rec.r.started("q", "run1")
    assert read_status(rec.state).state == "starting"
    rec.clock.t += 0.1
    rec.r.progress("q", "run1", 0, off(1, 500), 10)
    st = read_status(rec.state)
    assert (st.batch_id, st.committed_offset, st.rows_last_batch, st.state) == (0, off(1, 500), 10, "running")
    assert rec.r.writes == 2
    for i in range(1, 5):  # four more batches within the same second: no write, one deferred
        rec.clock.t += 0.2
        rec.r.progress("q", "run1", i, off(1, 500 + i), 1)
    assert rec.r.writes == 2 and read_status(rec.state).batch_id == 0
    # scheduled by the first throttled batch (0.2 s after the write) for the end of the second
    assert len(rec.sched.pending) == 1 and rec.sched.pending[0][0] == pytest.approx(0.8)
    rec.clock.t += 0.2
    rec.sched.run()  # the deferred write carries the last progress
    st = read_status(rec.state)
    assert rec.r.writes == 3 and st.batch_id == 4 and st.committed_offset == off(1, 504)
    rec.clock.t += 1.5
    rec.r.progress("q", "run1", 5, off(1, 1000), 0)  # a second later: written at once
    st = read_status(rec.state)
    assert rec.r.writes == 4 and st.batch_id == 5 and st.lag_s == 0.0 and st.behind_bytes == 0


def test_status_document_fields(rec):
    rec.r.started("q", "run1")
    rec.r.progress("q", "run1", 7, off(1, 400), 3)
    d = json.loads((rec.state.fs.open(rec.state.path(STATUS_REL)).read()))
    for key in (
        "query_id",
        "run_id",
        "batch_id",
        "committed_offset",
        "head_offset",
        "updated_at",
        "started_at",
        "pid",
        "host",
        "rows_last_batch",
        "behind_bytes",
        "head_samples",
        "lag_s",
        "lag_is_lower_bound",
    ):
        assert key in d, key
    assert d["head_offset"] == {"file": "mysql-bin.000001", "position": 1000}
    assert d["behind_bytes"] == 600
    assert d["lag_is_lower_bound"] is True and d["lag_s"] == 0.0  # started behind the first sample
    st = StreamStatus.from_dict({**d, "some_future_key": 1})
    assert st.head_samples[-1] == ["mysql-bin.000001", 1000, rec.clock.t]


def test_lower_bound_until_the_stream_passes_a_sampled_head(rec):
    rec.r.started("q", "run1")  # head 1000 seen at t=1000
    rec.clock.t += 5
    rec.head.head = BinlogOffset("mysql-bin.000001", 2000)
    rec.r.progress("q", "run1", 0, off(1, 500), 100)
    st = read_status(rec.state)
    assert st.lag_is_lower_bound and st.lag_s == pytest.approx(5.0)
    rec.clock.t += 2
    rec.head.head = BinlogOffset("mysql-bin.000001", 3000)
    rec.r.progress("q", "run1", 1, off(1, 1000), 100)  # passed the head seen at t=1000
    st = read_status(rec.state)
    assert not st.lag_is_lower_bound and st.lag_s == pytest.approx(7.0)
    rec.clock.t += 2
    rec.r.progress("q", "run1", 2, off(1, 3000), 100)
    st = read_status(rec.state)
    assert st.lag_s == 0.0 and not st.lag_is_lower_bound


def test_head_failures_never_raise_and_the_lag_keeps_ageing(rec, caplog):
    rec.r.started("q", "run1")
    rec.r.progress("q", "run1", 0, off(1, 1000), 1)
    rec.head.fail = True
    rec.clock.t += 10
    rec.r.progress("q", "run1", 1, off(1, 1000), 0)
    st = read_status(rec.state)
    assert st.batch_id == 1 and "server gone" in st.head_error
    assert st.lag_s == pytest.approx(10.0)  # the head could not be re-read: no fresh sample
    rec.head.fail = False
    rec.clock.t += 10
    rec.r.progress("q", "run1", 2, off(1, 1000), 0)
    st = read_status(rec.state)
    assert st.head_error is None and st.lag_s == 0.0
    assert sum("cannot read the binlog head" in r.message for r in caplog.records) == 1


def test_an_unwritable_state_location_never_raises(rec, monkeypatch):
    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(rec.state, "write_json", boom)
    rec.r.started("q", "run1")
    rec.r.progress("q", "run1", 0, off(1, 1), 1)


def test_a_new_run_keeps_the_head_samples_but_not_the_last_runs_commit(rec):
    rec.r.started("q", "run1")
    rec.r.progress("q", "run1", 3, off(1, 1000), 1)
    rec.clock.t += 60
    again = StatusRecorder(rec.state, rec.head, clock=rec.clock, schedule=rec.sched)
    again.started("q", "run2")
    st = read_status(rec.state)
    assert st.run_id == "run2" and st.state == "starting"
    assert st.batch_id is None and st.committed_offset is None and st.lag_s is None
    assert st.head_samples[0] == ["mysql-bin.000001", 1000, 1000.0]
    rec.head.head = BinlogOffset("mysql-bin.000001", 5000)
    rec.clock.t += 1
    again.progress("q", "run2", 4, off(1, 1000), 0)
    st = read_status(rec.state)
    assert not st.lag_is_lower_bound and st.lag_s == pytest.approx(1.0)  # head 1000 last seen at t=1060


def test_termination_and_close(rec):
    rec.r.started("q", "run1")
    rec.r.progress("q", "run1", 0, off(1, 1000), 1)
    rec.r.progress("other-query", "x", 99, off(9, 9), 1)  # not ours: ignored
    rec.r.terminated("q", "BinlogPurgedError: gone")
    st = read_status(rec.state)
    assert (st.state, st.exception, st.batch_id) == ("failed", "BinlogPurgedError: gone", 0)
    rec.r.close()
    assert read_status(rec.state).state == "failed"
    r2 = StatusRecorder(rec.state, None, clock=rec.clock, schedule=rec.sched)
    r2.started("q", "run2")
    r2.close()
    assert read_status(rec.state).state == "stopped"


def test_listener_adapts_pyspark_events(rec):
    from airflow_provider_mysqlcdc.spark.runtime.stream_status import StreamStatusListener

    listener = StreamStatusListener(rec.r)
    listener.onQueryStarted(SimpleNamespace(id="q", runId="run1"))
    progress = {
        "id": "q",
        "runId": "run1",
        "batchId": 2,
        "numInputRows": 12,
        "sources": [{"endOffset": json.dumps(off(1, 900))}],
    }
    listener.onQueryProgress(SimpleNamespace(progress=progress))
    st = read_status(rec.state)
    assert (st.batch_id, st.committed_offset, st.rows_last_batch) == (2, off(1, 900), 12)
    listener.onQueryProgress(SimpleNamespace(progress={"garbage": True}))  # logged, not raised
    listener.onQueryIdle(SimpleNamespace(id="q"))
    listener.onQueryTerminated(SimpleNamespace(id="q", exception=None))
    assert read_status(rec.state).state == "stopped"


def test_end_offset_parsing():
    assert end_offset_of({"sources": []}) is None
    assert end_offset_of({"sources": [{"endOffset": None}]}) is None
    assert end_offset_of({"sources": [{"endOffset": '{"file": "f.000001", "position": 4}'}]}) == {
        "file": "f.000001",
        "position": 4,
    }


def test_read_status_of_an_empty_location(tmp_dir):
    assert read_status(StateStore(str(tmp_dir / "nothing"))) is None


def test_importing_the_module_needs_no_spark():
    import subprocess
    import sys

    code = (
        "import sys; import airflow_provider_mysqlcdc.spark.runtime.stream_status, "
        "airflow_provider_mysqlcdc.spark.runtime.stream_launcher; "
        "print([m for m in sys.modules if m.startswith('pyspark') or m.startswith('airflow.')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _checkpoint(state: StateStore, committed_ids: list[int], offsets: dict[int, dict]) -> None:
    """Spark's checkpoint layout: commits/<id>, offsets/<id> = version, metadata, one source offset."""
    root = Path(state.path("stream", "checkpoint"))
    (root / "commits").mkdir(parents=True)
    (root / "offsets").mkdir(parents=True)
    for i in committed_ids:
        (root / "commits" / str(i)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    for i, o in offsets.items():
        (root / "offsets" / str(i)).write_text(f'v1\n{{"batchWatermarkMs":0,"conf":{{}}}}\n{json.dumps(o)}')
    (root / "commits" / ".0.crc").write_text("")


def test_a_restart_reports_the_checkpoints_last_commit_before_its_first_batch(rec):
    _checkpoint(rec.state, [0, 1, 2], {1: off(1, 500), 2: off(1, 1000), 3: off(1, 1200)})  # 3 in flight
    assert last_committed(rec.state) == (2, off(1, 1000))
    rec.r.started("q", "run2")
    st = read_status(rec.state)
    assert (st.batch_id, st.committed_offset, st.committed_at) == (2, off(1, 1000), None)
    assert st.lag_s == 0.0  # the head (1000) has not moved since
    assert not st.works_since(rec.clock.t - 1)  # nothing of this run yet


def test_an_idle_trigger_confirms_a_run_that_has_nothing_to_read(rec):
    rec.r.started("q", "run1")
    start = rec.clock.t
    rec.clock.t += 0.5
    rec.r.idle("q")  # the first idle trigger is written at once
    st = read_status(rec.state)
    assert st.idle_at == rec.clock.t and st.works_since(start) and not st.has_committed
    rec.clock.t += 0.1
    rec.r.idle("q")
    assert rec.r.writes == 2 and len(rec.sched.pending) == 1  # later ones are throttled
    rec.r.terminated("q", "boom")
    assert not read_status(rec.state).works_since(start)


def test_no_checkpoint_no_last_commit(tmp_dir):
    assert last_committed(StateStore(str(tmp_dir / "s"))) is None


def test_close_records_the_jobs_outcome_and_ignores_late_events(rec):
    rec.r.started("q", "run1")
    rec.r.progress("q", "run1", 0, off(1, 1000), 1)
    rec.r.close("StreamingQueryException: binlog purged")
    st = read_status(rec.state)
    assert st.state == "failed" and "binlog purged" in st.exception
    writes = rec.r.writes
    rec.r.terminated("q", None)  # Spark's late termination event
    rec.r.progress("q", "run1", 1, off(1, 1000), 1)
    assert rec.r.writes == writes and read_status(rec.state).state == "failed"


def test_values_a_sink_stored_otherwise_are_counted_per_table_and_survive_a_restart(rec):
    rec.r.started("q", "run1")
    rec.r.count_replaced("shop.t", "nul_in_text", 2)
    rec.clock.t += 2
    rec.r.count_replaced("shop.t", "nul_in_text", 3)
    rec.r.count_replaced("shop.u", "nul_in_text", 0)  # nothing to count: no entry
    assert read_status(rec.state).replaced_values == {"shop.t": {"nul_in_text": 5}}
    rec.r.close()
    again = StatusRecorder(rec.state, rec.head, clock=rec.clock, schedule=rec.sched)
    again.started("q", "run2")
    again.count_replaced("shop.t", "nul_in_text", 1)
    rec.clock.t += 2
    again.progress("q", "run2", 1, off(1, 1000), 1)
    assert read_status(rec.state).replaced_values == {"shop.t": {"nul_in_text": 6}}


class _Opt:
    def __init__(self, value=None):
        self.value = value

    def isDefined(self):
        return self.value is not None

    def get(self):
        return self.value


class _JEvent:
    """The py4j side of a listener event as ``_JsonEvents`` sees it: ids are Java UUIDs, the
    progress renders itself as Spark's JSON (a source's endOffset is an object there)."""

    def __init__(self, progress=None, exception=None):
        self._progress, self._exception = progress, exception

    def id(self):
        return SimpleNamespace(toString=lambda: "q")

    def runId(self):
        return SimpleNamespace(toString=lambda: "run1")

    def progress(self):
        return SimpleNamespace(json=lambda: json.dumps(self._progress))

    def exception(self):
        return _Opt(self._exception)


def test_the_json_bridge_feeds_the_listener_one_json_document_per_event(rec):
    from airflow_provider_mysqlcdc.spark.runtime.stream_status import StreamStatusListener, _JsonEvents

    bridge = _JsonEvents(StreamStatusListener(rec.r))
    bridge.onQueryStarted(_JEvent())
    progress = {"id": "q", "runId": "run1", "batchId": 3, "numInputRows": 7, "sources": [{"endOffset": off(2, 40)}]}
    bridge.onQueryProgress(_JEvent(progress))
    st = read_status(rec.state)
    assert (st.batch_id, st.committed_offset, st.rows_last_batch) == (3, off(2, 40), 7)
    bridge.onQueryIdle(_JEvent())
    bridge.onQueryTerminated(_JEvent(exception="BinlogPurgedError: gone"))
    st = read_status(rec.state)
    assert (st.state, st.exception) == ("failed", "BinlogPurgedError: gone")
