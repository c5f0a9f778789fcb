"""The plan step's checks before any Spark job, against real servers: a PostgreSQL sink whose
credentials are wrong, a start offset the server no longer has, a state location that cannot
be written. Each fails the task at once with its fix, and nothing is written."""

from __future__ import annotations

import pytest
from airflow_provider_mysqlcdc._airflow_compat import AirflowFailException

from tests.support import airflow_env
from tests.support.mariadb import ROOT_PASSWORD
from tests.support.postgres import DATABASE, SUPERUSER

pytestmark = pytest.mark.integration


def _plan(tmp_dir, **kw):
    from airflow_provider_mysqlcdc.operators.plan import MySqlCdcPlanOperator

    args = {"tables": ["x.y"], "state_location": str(tmp_dir / "state"), "sink_type": "delta",
            "sink_options": {"root": str(tmp_dir / "lake")}, "mysql_cdc_conn_id": "probe_src"}
    args.update(kw)
    return MySqlCdcPlanOperator(task_id="plan", **args)


@pytest.fixture
def source(mariadb):
    airflow_env.set_connection("probe_src", "mysql_cdc", host="127.0.0.1", port=mariadb.port, login="root",
                               password=ROOT_PASSWORD)


def test_a_wrong_postgres_sink_password_fails_in_plan(postgres, source, tmp_dir):
    airflow_env.set_connection("probe_pg", "postgres", host="127.0.0.1", port=postgres.port, login=SUPERUSER,
                               password="not-the-password", schema=DATABASE)
    op = _plan(tmp_dir, sink_type="postgres", sink_options={"schema": "cdc"}, sink_conn_id="probe_pg")
    with pytest.raises(AirflowFailException, match="cannot connect to the PostgreSQL sink of connection "
                                                   "'probe_pg'.*Fix: check that connection's"):
        op.execute({})
    assert not (tmp_dir / "state").exists()
    airflow_env.set_connection("probe_pg", "postgres", host="127.0.0.1", port=postgres.port, login=SUPERUSER,
                               password=postgres.password, schema=DATABASE)
    from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook

    op._probe(op.pipeline_config(MySqlCdcHook("probe_src")))  # the right password passes


def test_a_purged_or_malformed_start_offset_fails_in_plan(source, tmp_dir):
    for offset, message in (({"file": "mysql-bin.000000", "position": 4}, "is not on the server"),
                            ({"file": "mysql-bin", "position": 4}, "need a binlog file name")):
        op = _plan(tmp_dir, startup_mode="specific-offset", startup_offset=offset)
        with pytest.raises(AirflowFailException, match=message):
            op.execute({})
    assert not (tmp_dir / "state").exists() and not (tmp_dir / "lake").exists()


def test_an_unwritable_state_location_fails_in_plan(source, tmp_dir):
    (tmp_dir / "blocker").write_text("a file, not a directory")
    op = _plan(tmp_dir, state_location=str(tmp_dir / "blocker" / "state"))
    with pytest.raises(AirflowFailException, match="state_location .* is not writable"):
        op.execute({})
