"""reset=true forgets the sink's tables too, not only the state location (real MariaDB,
Delta, PostgreSQL). Before, the sinks kept the rows the old stream had merged and their
record of applied micro-batches, so a new stream's micro-batches 0, 1, ... were skipped as
"already applied" and rows of the old load stayed beside the new snapshot."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.state import StateStore
from tests.support import airflow_env
from tests.support.mariadb import ROOT_PASSWORD
from tests.support.postgres import DATABASE, SUPERUSER
from tests.support.tables import create_int_table

pytestmark = pytest.mark.integration


def _plan(tmp_dir, db, **kw):
    from airflow_provider_mysqlcdc.operators.plan import MySqlCdcPlanOperator

    args = {"tables": [f"{db}.orders"], "state_location": str(tmp_dir / "state"), "mysql_cdc_conn_id": "reset_src",
            "chunk_size": 100, "parallelism": 1}
    args.update(kw)
    return MySqlCdcPlanOperator(task_id="plan", **args)


@pytest.fixture
def source(mariadb, fresh_db):
    create_int_table(mariadb, fresh_db, 300, "orders")
    airflow_env.set_connection("reset_src", "mysql_cdc", host="127.0.0.1", port=mariadb.port, login="root",
                               password=ROOT_PASSWORD)
    return fresh_db


def test_reset_removes_the_delta_table_and_the_stream_checkpoint(source, tmp_dir):
    from airflow_provider_mysqlcdc.spark.sinks.delta import DeltaSink

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
    from airflow_provider_mysqlcdc.spark.sinks.postgres import PostgresSink

    db = source
    schema = postgres.fresh_schema("reset_")
    airflow_env.set_connection("reset_pg", "postgres", host="127.0.0.1", port=postgres.port, login=SUPERUSER,
                               password=postgres.password, schema=DATABASE)
    kw = {"sink_type": "postgres", "sink_options": {"schema": schema}, "sink_conn_id": "reset_pg"}
    assert _plan(tmp_dir, db, **kw).execute({})
    state = StateStore(str(tmp_dir / "state"))
    sink = PostgresSink(postgres.dsn, schema=schema, password=postgres.password)
    sink.prepare(list(state.read_plan().schemas.values()))
    sink.close()
    postgres.execute(f"INSERT INTO \"{schema}\"._mysqlcdc_progress VALUES ('{schema}.{db}__orders', 41, now())")

    assert _plan(tmp_dir, db, reset=True, **kw).execute({})
    assert postgres.query(f"SELECT to_regclass('\"{schema}\".\"{db}__orders\"')") == [(None,)]
    assert postgres.query(f"SELECT count(*) FROM \"{schema}\"._mysqlcdc_progress") == [(0,)]
    assert list(state.read_plan().schemas) == [TableId(db, "orders")]
