"""The snapshot job's progress line, from Spark's status tracker (a fake one here)."""

from __future__ import annotations

from types import SimpleNamespace

from airflow_provider_mysqlcdc.spark.snapshot.progress import SnapshotProgress


class _Tracker:
    def __init__(self, done):
        self.done = done

    def getJobIdsForGroup(self, group):
        return [1, 2] if group == "mysqlcdc-read-batch-0003" else []

    def getJobInfo(self, job_id):
        return SimpleNamespace(stageIds=[job_id * 10])

    def getStageInfo(self, stage_id):
        return SimpleNamespace(numCompletedTasks=self.done[stage_id], numTasks=20)


def _progress(done):
    sc = SimpleNamespace(statusTracker=lambda: _Tracker(done))
    return SnapshotProgress(SimpleNamespace(sparkContext=sc), "batch-0003", total_chunks=40, estimated_rows=4_000_000)


def test_chunks_rows_rate_and_time_left():
    p = _progress({10: 8, 20: 4})
    line = p.line(now=p._t0 + 12.0)
    assert line == "progress: 12/40 chunks read (~1.2M of ~4.0M rows), ~100.0k rows/s, about 28 s left"


def test_later_phases_say_what_runs():
    p = _progress({10: 20, 20: 20})
    p.phase("writing shop.orders to the delta sink")
    assert p.line(now=p._phase_since + 95).startswith("progress: writing shop.orders to the delta sink (1 min 35 s;")


def test_nothing_read_yet_has_no_eta():
    p = _progress({10: 0, 20: 0})
    assert p.line(now=p._t0 + 3).endswith("time left unknown yet")
