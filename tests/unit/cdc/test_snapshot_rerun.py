"""When a snapshot task reads its batch again, skips it, or refuses: decided from the state
location alone, before any Spark job (no servers needed)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_provider_mysqlcdc.cdc.chunks import Batch, Chunk
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.plan import Plan
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.operators.snapshot import MySqlCdcSnapshotOperator

T = TableId("shop", "orders")
RESULT = {
    "batch_id": "batch-0000",
    "ranges": [],
    "low_watermark": {"file": "b.000001", "position": 4},
    "high_watermark": {"file": "b.000001", "position": 900},
    "rows_per_chunk": {"shop.orders": {"0": 7}},
    "chunks": [{}],
    "seconds": 1.0,
    "rows_per_s": 7,
}


def _context(run_id="run-1", map_index=0, try_number=1):
    return {
        "ti": SimpleNamespace(dag_id="mysql_cdc_pipeline", run_id=run_id, map_index=map_index, try_number=try_number)
    }


@pytest.fixture
def state(tmp_path):
    s = StateStore(str(tmp_path / "state"))
    s.write_plan(Plan({}, (Batch("batch-0000", (Chunk(T, 0, None, None),)),)))
    s.write_batch_result(RESULT)
    return s


def _op(state, **kw):
    return MySqlCdcSnapshotOperator(
        task_id="snapshot",
        batch_id="batch-0000",
        batch_label="shop.orders chunk 0",
        state_location=state.location,
        **kw,
    )


class Submitted(Exception):
    """Stands for the Spark job: reaching it means the batch would be read again."""


def _no_spark(monkeypatch):
    for runtime in ("_prepare_submit", "_run_on_connect"):  # spark-submit or Spark Connect
        monkeypatch.setattr(MySqlCdcSnapshotOperator, runtime, lambda self, state: (_ for _ in ()).throw(Submitted()))


def test_a_batch_an_earlier_run_finished_is_skipped(state, monkeypatch):
    _no_spark(monkeypatch)
    state.write_batch_owner(
        "batch-0000", {"dag_id": "mysql_cdc_pipeline", "run_id": "run-0", "map_index": 0, "try_number": 1}
    )
    summary = _op(state).execute(_context(run_id="run-1"))
    assert summary["rows"] == 7 and summary["high_watermark"]["position"] == 900


def test_clearing_the_task_that_wrote_it_reads_it_again_before_the_stream(state, monkeypatch):
    _no_spark(monkeypatch)
    state.write_batch_owner(
        "batch-0000", {"dag_id": "mysql_cdc_pipeline", "run_id": "run-1", "map_index": 0, "try_number": 1}
    )
    with pytest.raises(Submitted):
        _op(state).execute(_context(run_id="run-1", try_number=2))
    # the same try again (no clear happened) is not a request to read it again
    assert _op(state).execute(_context(run_id="run-1", try_number=1))["rows"] == 7


@pytest.mark.parametrize("entry", ["*", "batch-0000", "shop.orders"])
def test_reread_batches_names_it(state, monkeypatch, entry):
    _no_spark(monkeypatch)
    with pytest.raises(Submitted):
        _op(state, reread_batches=[entry]).execute(_context())
    assert _op(state, reread_batches=["batch-0001", "shop.items"]).execute(_context())["rows"] == 7


def test_once_the_stream_started_a_reread_is_submitted_and_handed_to_the_stream(state, monkeypatch):
    """The refusal is gone: the job hands the rows over (tests/integration/test_resnapshot_while_streaming.py);
    a batch that is simply done is still reported as done without a job."""
    _no_spark(monkeypatch)
    state.fs.makedirs(state.path("stream", "checkpoint"), exist_ok=True)
    with pytest.raises(Submitted):
        _op(state, reread_batches=["*"]).execute(_context())
    state.write_batch_result(RESULT)
    assert _op(state).execute(_context())["rows"] == 7


def test_the_task_waits_for_the_stream_to_take_the_handoff_and_reports_it(state, monkeypatch):
    from airflow_provider_mysqlcdc.cdc.snapshot.resnapshot import mark_applied

    op = _op(state, handoff_timeout_s=5)
    mark_applied(
        state,
        "h-1",
        {"micro_batch": 12, "exact_at": {"file": "mysql-bin.000002", "position": 99}, "rows": 3, "deleted": 1},
    )
    op._wait_for_stream(state, "h-1")  # returns at once: applied
    mark_applied(state, "h-2", {"superseded": "shop.orders changed after batch batch-0000 read it"})
    with pytest.raises(Exception, match="did not apply its rows: shop.orders changed"):
        op._wait_for_stream(state, "h-2")
    op.handoff_timeout_s = 0.5
    with pytest.raises(Exception, match="has not taken its rows .* Is it running"):
        op._wait_for_stream(state, "h-3")


def test_a_submitted_batch_on_a_standalone_cluster_runs_its_driver_in_the_task(state, monkeypatch):
    """spark-submit refuses Python applications in cluster mode on a standalone master: a batch
    keeps its driver in its task (client mode), where the passwords stay in a private environment."""
    import json

    from airflow_provider_mysqlcdc.operators import snapshot as mod

    body = {"conn_type": "spark", "host": "spark://m", "port": 7077, "extra": {"deploy-mode": "cluster"}}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_STANDALONE", json.dumps(body))
    monkeypatch.setattr(mod, "check_pyspark_install", lambda: None)
    monkeypatch.setattr(
        mod, "MySqlCdcHook", lambda conn_id: SimpleNamespace(get_source_config=lambda: SimpleNamespace(password="pw"))
    )
    monkeypatch.setattr(mod, "follow_connection", lambda *a: SimpleNamespace(name="p"))
    op = _op(state, conn_id="spark_standalone")
    op._storage = None
    op._prepare_submit(state)
    assert op._deploy_mode == "client"
    assert op._secret_env["MYSQLCDC_PASSWORD"] == "pw"
