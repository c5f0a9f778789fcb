"""Columns in the pre-MySQL-5.6 temporal storage format (MariaDB's ``mysql56_temporal_format=OFF``,
a table older than MySQL 5.6 upgraded in place) are named before a stream meets them.

What the binlog carries for them differs from today's format, so the fast decoder refuses such
a table's rows and leaves them to the library decoder, which reads old whole-second
DATETIME/TIMESTAMP values right but not MariaDB's old fractional ones (it died on "year
679817618 is out of range" for a DATETIME(3)) nor a negative old TIME (-01:02:03 came out as
1677:10:13). So discovery refuses tables with old TIME or fractional columns and validate warns
about the others, each naming the columns and the rebuild; a whole-second table then goes
through snapshot and stream into Delta equal to the source, value by value.
"""

from __future__ import annotations

import time

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from airflow_provider_mysqlcdc.cdc.source.discovery import discover_tables
from airflow_provider_mysqlcdc.cdc.source.old_temporals import old_temporal_problems
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.sinks.factory import build_sink
from airflow_provider_mysqlcdc.spark.snapshot.job import run_snapshot_batch
from airflow_provider_mysqlcdc.spark.stream.query import start_stream
from mysqlcdc_harness.sink_compare import delta_rows, sink_config, wait_until_equal

pytestmark = [pytest.mark.integration]

COLUMNS = ["id", "a", "b", "d"]
WHOLE = "CREATE TABLE {name} (id INT PRIMARY KEY, a DATETIME, b TIMESTAMP NULL, d DATE)"
OTHERS = "CREATE TABLE {name} (id INT PRIMARY KEY, a DATETIME, b DATETIME(3), c TIMESTAMP(6) NULL, e TIME(2), f TIME)"


def _create_old_format(mariadb, db: str, ddl: str) -> None:
    """``mysql56_temporal_format`` is global only: switched off for one CREATE, then back on."""
    mariadb.execute("SET GLOBAL mysql56_temporal_format=OFF")
    try:
        with mariadb.connect(db) as conn, conn.cursor() as cur:  # a new session reads the global
            cur.execute(ddl)
    finally:
        mariadb.execute("SET GLOBAL mysql56_temporal_format=ON")


def test_old_time_and_fractional_columns_are_refused_and_whole_second_ones_named_in_a_warning(mariadb, fresh_db):
    _create_old_format(mariadb, fresh_db, WHOLE.format(name="legacy"))
    _create_old_format(mariadb, fresh_db, OTHERS.format(name="legacy_frac"))
    mariadb.execute(WHOLE.format(name="modern"), database=fresh_db)
    with mariadb.connect() as conn:
        with pytest.raises(ConfigError) as refused:
            discover_tables(conn, [f"{fresh_db}\\..*"])
        schemas = discover_tables(conn, [f"{fresh_db}\\..*"], exclude=[f"{fresh_db}.legacy_frac"])
    message = str(refused.value)
    assert f"table {fresh_db}.legacy_frac has 4 TIME or fractional-second column(s)" in message, message
    assert "(`b`, `c`, `e`, `f`)" in message and f"ALTER TABLE `{fresh_db}`.`legacy_frac` FORCE" in message
    assert "Fix:" in message and f"{fresh_db}.legacy " not in message
    # a table coming under the list while the stream runs is read alone, and refused alike
    from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema

    with mariadb.connect() as conn:
        with pytest.raises(ConfigError, match="4 TIME or fractional-second column"):
            read_table_schema(conn, TableId(fresh_db, "legacy_frac"))
        assert read_table_schema(conn, TableId(fresh_db, "legacy")).column_names == ("id", "a", "b", "d")
    (warning,) = old_temporal_problems(schemas)
    assert f"table {fresh_db}.legacy has 2 column(s)" in warning and "(`a`, `b`)" in warning, warning
    assert f"ALTER TABLE `{fresh_db}`.`legacy` FORCE" in warning and "Fix:" in warning


@pytest.mark.spark
def test_old_whole_second_temporals_through_snapshot_and_stream_equal_the_source(
    mariadb, fresh_db, spark, tmp_dir, monkeypatch
):
    _create_old_format(mariadb, fresh_db, WHOLE.format(name="legacy"))
    mariadb.execute(
        "SET SESSION time_zone = '+00:00'",
        "INSERT INTO legacy VALUES (1, '2024-02-29 23:59:59', '2038-01-19 03:14:07', '2024-01-02'), "
        "(2, NULL, NULL, NULL), (3, '1000-01-01 00:00:00', '1970-01-01 00:00:01', '1000-01-01')",
        database=fresh_db,
    )
    t = TableId(fresh_db, "legacy")
    src = mariadb.source_config()
    config = PipelineConfig(
        name="old-temporals",
        source=src,
        include=(str(t),),
        state_location=str(tmp_dir / "state"),
        sink=sink_config("delta", tmp_dir, None, monkeypatch),
        split=SplitOptions(chunk_size=100),
        stream=StreamOptions(max_events_per_batch=1000, heartbeat_s=1.0, trigger_interval_s=0.5),
    )
    plan = build_plan(src, config.include, split=config.split)
    state = StateStore(config.state_location)
    state.write_plan(plan)
    for b in plan.batches:
        run_snapshot_batch(spark, config, b.batch_id, plan=plan)
    state.write_finished(state.finished_from_results())
    sink = build_sink(config.sink)
    sink.prepare(list(plan.schemas.values()))
    query = start_stream(spark, config, sink, list(plan.schemas.values()))
    try:
        time.sleep(2)
        mariadb.execute(
            "SET SESSION time_zone = '+00:00'",
            "INSERT INTO legacy VALUES (4, '2026-03-08 02:30:00', '2020-06-30 23:59:59', '2026-11-27')",
            "UPDATE legacy SET a = '2011-11-11 11:11:11', d = NULL WHERE id = 1",
            "UPDATE legacy SET b = '2002-02-02 02:02:02', d = '9999-12-31' WHERE id = 2",
            "DELETE FROM legacy WHERE id = 3",
            database=fresh_db,
        )
        problem = wait_until_equal(
            lambda: _source_text(mariadb, fresh_db),
            lambda: _sink_text(delta_rows(tmp_dir / "lake", t, ("id",))),
            timeout_s=90,
        )
        assert not problem, problem
        assert query.exception() is None
    finally:
        query.stop()


def _source_text(mariadb, db: str) -> dict:
    """The source as the server prints it (TIMESTAMP in UTC)."""
    sel = ", ".join(f"CAST(`{c}` AS CHAR)" if c != "id" else "id" for c in COLUMNS)
    rows = mariadb.execute("SET SESSION time_zone = '+00:00'", f"SELECT {sel} FROM legacy", database=db)
    return {(r[0],): dict(zip(COLUMNS, r)) for r in rows}


def _sink_text(rows: dict) -> dict:
    """Sink values printed as the server prints them (TIMESTAMP in UTC)."""
    import datetime as dt

    out = {}
    for k, r in rows.items():
        rec = {"id": r["id"]}
        for c in COLUMNS[1:]:
            v = r[c]
            if isinstance(v, dt.datetime):
                if v.tzinfo is not None:
                    v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
                v = v.strftime("%Y-%m-%d %H:%M:%S")
            elif isinstance(v, dt.date):
                v = v.isoformat()
            rec[c] = v
        out[(int(r["id"]),)] = rec
    return out
