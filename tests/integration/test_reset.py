"""reset=true forgets the sink's tables too, not only the state location (real MariaDB,
Delta, PostgreSQL). Before, the sinks kept the rows the old stream had merged and their
record of applied micro-batches, so a new stream's micro-batches 0, 1, ... were skipped as
"already applied" and rows of the old load stayed beside the new snapshot."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.state import StateStore
from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.postgres import DATABASE, SUPERUSER
from mysqlcdc_harness.tables import create_int_table

pytestmark = pytest.mark.integration


def _plan(tmp_dir, db, **kw):
    from airflow_provider_mysqlcdc.operators.plan import MySqlCdcPlanOperator

    args = {
        "tables": [f"{db}.orders"],
        "state_location": str(tmp_dir / "state"),
        "mysql_cdc_conn_id": "reset_src",
        "chunk_size": 100,
        "parallelism": 1,
    }
    args.update(kw)
    return MySqlCdcPlanOperator(task_id="plan", **args)


@pytest.fixture
def source(mariadb, fresh_db):
    create_int_table(mariadb, fresh_db, 300, "orders")
    airflow_env.set_connection(
        "reset_src", "mysql_cdc", host="127.0.0.1", port=mariadb.port, login="root", password=ROOT_PASSWORD
    )
    return fresh_db


def test_reset_removes_the_delta_table_and_the_stream_checkpoint(source, tmp_dir):
    from airflow_provider_mysqlcdc.spark.sinks.delta.sink import DeltaSink

    db, lake = source, tmp_dir / "lake"
    assert _plan(tmp_dir, db, sink_options={"root": str(lake)}).execute({})
    state = StateStore(str(tmp_dir / "state"))
    DeltaSink(str(lake)).prepare(list(state.read_plan().schemas.values()))
    (tmp_dir / "state" / "stream" / "checkpoint" / "commits").mkdir(parents=True)
    assert (lake / db / "orders" / "_delta_log").is_dir() and state.stream_started()

    assert _plan(tmp_dir, db, sink_options={"root": str(lake)}, reset=True).execute({})
    assert not (lake / db / "orders").exists(), "the old Delta table (rows and app versions) must go"
    assert not state.stream_started() and state.read_plan() is not None


def test_reset_drops_the_postgres_table_and_its_applied_batches(source, tmp_dir, postgres):
    from airflow_provider_mysqlcdc.spark.sinks.postgres.sink import PostgresSink

    db = source
    schema = postgres.fresh_schema("reset_")
    airflow_env.set_connection(
        "reset_pg",
        "postgres",
        host="127.0.0.1",
        port=postgres.port,
        login=SUPERUSER,
        password=postgres.password,
        schema=DATABASE,
    )
    kw = {"sink_type": "postgres", "sink_options": {"schema": schema}, "sink_conn_id": "reset_pg"}
    assert _plan(tmp_dir, db, **kw).execute({})
    state = StateStore(str(tmp_dir / "state"))
    sink = PostgresSink(postgres.dsn, schema=schema, password=postgres.password)
    sink.prepare(list(state.read_plan().schemas.values()))
    sink.close()
    postgres.execute(f"INSERT INTO \"{schema}\"._mysqlcdc_progress VALUES ('{schema}.{db}__orders', 41, now())")

    assert _plan(tmp_dir, db, reset=True, **kw).execute({})
    assert postgres.query(f'SELECT to_regclass(\'"{schema}"."{db}__orders"\')') == [(None,)]
    assert postgres.query(f'SELECT count(*) FROM "{schema}"._mysqlcdc_progress') == [(0,)]
    assert list(state.read_plan().schemas) == [TableId(db, "orders")]


def test_the_plan_says_which_batches_this_run_reads_again_and_refuses_unknown_names(source, tmp_dir):
    """reread_batches while the stream runs: the plan task labels what this run reloads (log, map
    index names, the ``reload`` XCom) and fails at once on a name that is neither a batch nor a
    captured table, before any snapshot task runs."""

    class TI:
        def __init__(self):
            self.pushed = {}

        def xcom_push(self, key, value):
            self.pushed[key] = value

    db = source
    opts = {"sink_options": {"root": str(tmp_dir / "lake")}, "rows_per_batch": 100}
    first = _plan(tmp_dir, db, **opts).execute({})
    state = StateStore(str(tmp_dir / "state"))
    plan = state.read_plan()
    for b in plan.batches:  # as if every batch finished, and the stream then started
        state.write_batch_result(
            {
                "batch_id": b.batch_id,
                "ranges": [r.to_dict() for r in b.ranges()],
                "high_watermark": {"file": "mysql-bin.000001", "position": 4},
            }
        )
    (tmp_dir / "state" / "stream" / "checkpoint").mkdir(parents=True)
    ti = TI()
    again = _plan(tmp_dir, db, **opts, reread_batches=[f"{db}.orders"]).execute({"ti": ti})
    assert [x["batch_id"] for x in again] == [x["batch_id"] for x in first]
    assert all(x["batch_label"].endswith(" · read again") for x in again)
    reload = ti.pushed["reload"]
    assert reload["tables_read_again"] == [f"{db}.orders"] and reload["stream_running"] is True
    assert reload["read_again"] == [b.batch_id for b in plan.batches] and reload["left_alone"] == []
    ti = TI()
    assert len(plan.batches) > 1
    one = _plan(tmp_dir, db, **opts, reread_batches=[plan.batches[0].batch_id]).execute({"ti": ti})
    assert one[0]["batch_label"].endswith("read again") and not one[-1]["batch_label"].endswith("read again")
    assert ti.pushed["reload"]["left_alone"] == [b.batch_id for b in plan.batches[1:]]
    with pytest.raises(
        Exception,
        match=r"reread_batches: \[.shop.nope.\] is not a batch of the plan nor a "
        r"captured table.*Fix:",
    ):
        _plan(tmp_dir, db, **opts, reread_batches=["shop.nope"]).execute({})


def test_a_longer_table_list_plans_only_the_new_tables_and_a_shorter_one_drops_the_others(source, tmp_dir, mariadb):
    from mysqlcdc_harness.tables import create_int_table as make

    db = source
    make(mariadb, db, 250, "extra")
    opts = {"sink_options": {"root": str(tmp_dir / "lake")}, "rows_per_batch": 100}
    first = _plan(tmp_dir, db, **opts).execute({})
    state = StateStore(str(tmp_dir / "state"))
    before = state.read_plan()

    class TI:
        pushed: dict = {}

        def xcom_push(self, key, value):
            self.pushed[key] = value

    ti = TI()
    grown = _plan(tmp_dir, db, **opts, tables=[f"{db}.orders", f"{db}.extra"]).execute({"ti": ti})
    after = state.read_plan()
    assert after.batches[: len(before.batches)] == before.batches
    assert [x["batch_id"] for x in grown[: len(first)]] == [x["batch_id"] for x in first]
    new = after.batches[len(before.batches) :]
    assert new and all(b.tables == (TableId(db, "extra"),) for b in new)
    assert len({b.batch_id for b in after.batches}) == len(after.batches)
    assert ti.pushed["reload"]["tables_added"] == [f"{db}.extra"]
    # a shorter list: the table and its batches leave the plan (and their results); a running
    # stream is asked to start again without it
    (tmp_dir / "state" / "stream" / "checkpoint").mkdir(parents=True)
    state.write_batch_result({"batch_id": before.batches[0].batch_id, "ranges": [], "high_watermark": {}})
    ti = TI()
    shorter = _plan(tmp_dir, db, **opts, tables=[f"{db}.extra"]).execute({"ti": ti})
    assert [x["batch_id"] for x in shorter] == [b.batch_id for b in new]
    assert list(state.read_plan().schemas) == [TableId(db, "extra")]
    assert ti.pushed["reload"]["tables_removed"] == [f"{db}.orders"]
    assert state.read_batch_result(before.batches[0].batch_id) is None
    assert "orders" in state.take_restart_request()["reason"] and state.take_restart_request() is None
