"""The plan step's checks before any Spark job, against real servers: a PostgreSQL sink whose
credentials are wrong, a start offset the server no longer has, a state location that cannot
be written. Each fails the task at once with its fix, and nothing is written."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc._airflow_compat import AirflowFailException
from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.postgres import DATABASE, SUPERUSER

pytestmark = pytest.mark.integration


def _plan(tmp_dir, **kw):
    from airflow_provider_mysqlcdc.operators.plan import MySqlCdcPlanOperator

    args = {
        "tables": ["x.y"],
        "state_location": str(tmp_dir / "state"),
        "sink_type": "delta",
        "sink_options": {"root": str(tmp_dir / "lake")},
        "mysql_cdc_conn_id": "probe_src",
    }
    args.update(kw)
    return MySqlCdcPlanOperator(task_id="plan", **args)


@pytest.fixture
def source(mariadb):
    airflow_env.set_connection(
        "probe_src", "mysql_cdc", host="127.0.0.1", port=mariadb.port, login="root", password=ROOT_PASSWORD
    )


def test_a_wrong_postgres_sink_password_fails_in_plan(postgres, source, tmp_dir):
    airflow_env.set_connection(
        "probe_pg",
        "postgres",
        host="127.0.0.1",
        port=postgres.port,
        login=SUPERUSER,
        password="not-the-password",
        schema=DATABASE,
    )
    op = _plan(tmp_dir, sink_type="postgres", sink_options={"schema": "cdc"}, sink_conn_id="probe_pg")
    with pytest.raises(
        AirflowFailException,
        match="cannot connect to the PostgreSQL sink of connection 'probe_pg'.*Fix: check that connection's",
    ):
        op.execute({})
    assert not (tmp_dir / "state").exists()
    airflow_env.set_connection(
        "probe_pg",
        "postgres",
        host="127.0.0.1",
        port=postgres.port,
        login=SUPERUSER,
        password=postgres.password,
        schema=DATABASE,
    )
    from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook

    op._probe(op.pipeline_config(MySqlCdcHook("probe_src")))  # the right password passes


def test_a_purged_or_malformed_start_offset_fails_in_plan(source, tmp_dir):
    for offset, message in (
        ({"file": "mysql-bin.000000", "position": 4}, "is not on the server"),
        ({"file": "mysql-bin", "position": 4}, "need a binlog file name"),
    ):
        op = _plan(tmp_dir, startup_mode="specific-offset", startup_offset=offset)
        with pytest.raises(AirflowFailException, match=message):
            op.execute({})
    assert not (tmp_dir / "state").exists() and not (tmp_dir / "lake").exists()


def test_an_unwritable_state_location_fails_in_plan(source, tmp_dir):
    (tmp_dir / "blocker").write_text("a file, not a directory")
    op = _plan(tmp_dir, state_location=str(tmp_dir / "blocker" / "state"))
    with pytest.raises(AirflowFailException, match="state_location .* is not writable"):
        op.execute({})


def test_a_binlog_retention_shorter_than_the_snapshot_is_warned_about_in_plan(mariadb, fresh_db, source, tmp_dir):
    """Not a failure (the load may still make it): a warning with the numbers and the fix."""
    from unittest import mock

    from mysqlcdc_harness.tables import create_int_table

    create_int_table(mariadb, fresh_db, 2_000, "orders")
    conn = mariadb.source_config().connect()
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.binlog_expire_logs_seconds")
        before = cur.fetchone()[0]
        cur.execute("SET GLOBAL binlog_expire_logs_seconds = 60")
    try:
        op = _plan(tmp_dir, tables=[f"{fresh_db}.orders"], parallelism=1)
        with (
            mock.patch("airflow_provider_mysqlcdc.cdc.binlog.retention.ASSUMED_ROWS_PER_S_PER_SLOT", 10),
            mock.patch.object(type(op), "log") as log,
        ):
            op.execute({})
        warned = [c.args for c in log.warning.call_args_list if "binlog retention" in str(c.args[0])]
        assert warned and "keeps binlogs for 1 min" in warned[0][1] and "Fix: keep binlogs at least" in warned[0][1]
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL binlog_expire_logs_seconds = 0")
        with mock.patch.object(type(op), "log") as log:
            op.execute({})
        assert not [c for c in log.warning.call_args_list if "binlog retention" in str(c.args[0])]
    finally:
        with conn.cursor() as cur:
            cur.execute(f"SET GLOBAL binlog_expire_logs_seconds = {int(before)}")
        conn.close()
