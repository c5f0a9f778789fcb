"""A pipeline file with a route and a transform, end to end through the door users use: the YAML
file and its DAG file (written by ``pipelines dag-files``), parsed by Airflow and run with
``dag.test()`` (real MariaDB, real Spark, the Delta, PostgreSQL and changelog sinks), writers on both
shards throughout the snapshot and the stream.

Two shards (``orders_1``, ``orders_2``, the same ids in both) merge into one sink table keyed by
``(_source_table, id)``; the projection computes columns and the filter keeps rows with a positive
amount, so the writers' updates move rows into and out of the sink. The sink must equal the
transformed source row by row: the same SQL's values, per shard, nothing missing and nothing left
behind -- also after an ``ADD COLUMN`` on one shard that the projection does not use, which the
stream follows, and (Delta, PostgreSQL) after a finished batch cleared while the stream runs, which
the stream takes over through the same routes and transforms. The merged sink table's asset event
is recorded after the snapshot.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.pipelines.dagfiles import write_dag_files
from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import log_tail
from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.sink_compare import delta_rows, postgres_rows, wait_until_equal
from mysqlcdc_harness.tables import create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

DAG_ID = "shop_orders_merged"
PROJECTION = "id, upper(s) AS s_uc, amount * 2 AS amount2, a"
FILTER = "amount > 0"


def _expected(server, db: str) -> dict[tuple, dict]:
    """The transformed source, computed here from the source rows (not by the code under test)."""
    out = {}
    for shard in ("orders_1", "orders_2"):
        for id_, s, amount, a in server.query(f"SELECT id, s, amount, a FROM `{db}`.`{shard}`"):
            if amount is None or amount <= 0:
                continue
            source = f"{db}.{shard}"
            out[(source, id_)] = {
                "_source_table": source,
                "id": id_,
                "s_uc": None if s is None else s.upper(),
                "amount2": amount * 2,
                "a": a,
            }
    return out


COLUMNS = ("_source_table", "id", "s_uc", "amount2", "a")


def changelog_rows(lake: Path, db: str) -> dict[tuple, dict]:
    """The merged table the changelog describes: its snapshot parts, then its micro-batch files in
    order, applied by (_source_table, id)."""
    import decimal
    import glob
    import json

    base = lake / db / "orders"
    state: dict[tuple, dict] = {}

    def row(data: dict) -> dict:
        return {**data, "amount2": None if data["amount2"] is None else decimal.Decimal(data["amount2"])}

    for path in sorted(glob.glob(str(base / "snapshot" / "*" / "*.jsonl"))):
        for text in Path(path).read_text().splitlines():
            line = json.loads(text)
            state[(line["data"]["_source_table"], line["data"]["id"])] = row(line["data"])
    for path in sorted(glob.glob(str(base / "stream" / "batch-*.jsonl"))):
        for text in Path(path).read_text().splitlines():
            line = json.loads(text)
            if line["op"] == "SC":
                continue
            key = (line["data"]["_source_table"], line["data"]["id"])
            if line["op"] in ("+I", "+U"):
                state[key] = row(line["data"])
            else:
                state.pop(key, None)
    return state


def _actual(kind: str, lake: Path, pg: object, pg_schema: str, db: str) -> dict[tuple, dict]:
    if kind == "delta":
        rows = delta_rows(lake, TableId(db, "orders"), ("_source_table", "id"))
    elif kind == "changelog":
        rows = changelog_rows(lake, db)
    else:
        rows = postgres_rows(pg, f"{db}__orders", COLUMNS, ("_source_table", "id"), schema=pg_schema)
    return {k: {c: r[c] for c in COLUMNS} for k, r in rows.items()}


@pytest.mark.parametrize("kind", ["delta", "postgres", "changelog"])
def test_merged_shards_projected_and_filtered_equal_the_transformed_source(kind, mariadb, fresh_db, tmp_dir, request):
    airflow_env.migrate()
    airflow_env.set_connection(
        "mysql_cdc_default",
        "mysql_cdc",
        host="127.0.0.1",
        port=mariadb.port,
        login="root",
        password=ROOT_PASSWORD,
        schema=fresh_db,
        extra={"server_id_range": "7100-7140"},
    )
    airflow_env.set_connection("spark_default", "spark", host="local[2]")
    pg, pg_schema = None, ""
    sink: dict = {"type": kind if kind != "postgres" else "delta", "options": {"root": str(tmp_dir / "lake")}}
    if kind == "postgres":
        from mysqlcdc_harness.postgres import DATABASE, SUPERUSER

        pg = request.getfixturevalue("postgres")
        pg_schema = pg.fresh_schema("routes_")
        airflow_env.set_connection(
            "routes_pg",
            "postgres",
            host="127.0.0.1",
            port=pg.port,
            login=SUPERUSER,
            password=pg.password,
            schema=DATABASE,
        )
        sink = {"type": "postgres", "options": {"schema": pg_schema}, "conn_id": "routes_pg"}
    specs = [create_int_table(mariadb, fresh_db, 6000, table=t) for t in ("orders_1", "orders_2")]
    repo = tmp_dir / "repo"
    (repo / "pipelines").mkdir(parents=True)
    lake, state = tmp_dir / "lake", tmp_dir / "state"  # (a PostgreSQL sink leaves lake empty)
    (repo / "pipelines" / "shop_orders.yaml").write_text(
        yaml.safe_dump(
            {
                "source": {"conn_id": "mysql_cdc_default", "tables": [rf"{fresh_db}\.orders_\d+"]},
                "sink": sink,
                "route": [
                    {
                        "source_table": rf"{fresh_db}\.orders_\d+",
                        "sink_table": f"{fresh_db}.orders",
                        "description": "the shards into one table",
                    }
                ],
                "transform": [{"source_table": rf"{fresh_db}\.orders_\d+", "projection": PROJECTION, "filter": FILTER}],
                "pipeline": {
                    "name": DAG_ID,
                    "state_location": str(state),
                    "chunk_size": 1500,
                    "rows_per_batch": 4000,
                    "snapshot_parallelism": 2,
                    # the default runtime (one Spark Connect application), and spark-submit per batch for
                    # PostgreSQL: the transform runs in the Python workers of either
                    "spark_runtime": "submit" if kind == "postgres" else "connect",
                    "stream_options": {"heartbeat_s": 1.0, "trigger_interval_s": 0.5},
                },
            },
            sort_keys=False,
        ),
        encoding="utf-8",
    )
    write_dag_files(repo / "pipelines", repo / "dags")
    dag_file = next((repo / "dags").glob("*.py"))

    writers = [
        ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=i, threads=1, pause_s=0.02)
        for i, spec in enumerate(specs)
    ]
    for w in writers:
        w.start()
    log = tmp_dir / "dag.log"
    try:
        res = airflow_env.run_template(["dag-file", str(dag_file), DAG_ID], log)
        dr = airflow_env.dag_run(DAG_ID, res["run_id"])
        states = airflow_env.task_states(dr)
        assert all(s[0] == "success" for s in states.values()), states
        time.sleep(3)  # the stream takes the writers' changes as they come
        # A DDL on one shard that the projection does not reach: the stream follows it, the sink
        # table keeps its columns.
        for w in writers:
            w.pause()
        mariadb.execute("ALTER TABLE orders_1 ADD COLUMN note VARCHAR(10) DEFAULT 'n'", database=fresh_db)
        for w in writers:
            w.resume()
        time.sleep(5)
        if kind != "changelog":
            # A finished batch cleared while the stream runs (the UI's Clear, Downstream ticked): read
            # again and handed to the stream, which replaces its key ranges through the same views.
            rerun = airflow_env.run_template(
                ["dag-file-clear", str(dag_file), DAG_ID, res["run_id"], json.dumps([["snapshot", 0], "stream"])],
                tmp_dir / "rerun.log",
            )
            dr2 = airflow_env.dag_run(DAG_ID, rerun["run_id"])
            assert airflow_env.task_states(dr2)[("snapshot", 0)][0] == "success", airflow_env.task_states(dr2)
            text = (tmp_dir / "rerun.log").read_text(errors="replace")
            assert "key ranges in micro-batch" in text, text[-3000:]
            time.sleep(3)
    finally:
        for w in writers:
            w.stop()
    try:
        assert all(not w.errors for w in writers), [w.errors for w in writers]
        assert sum(w.stats.total for w in writers) > 200, "the writers barely wrote"
        problem = wait_until_equal(
            lambda: _expected(mariadb, fresh_db), lambda: _actual(kind, lake, pg, pg_schema, fresh_db), timeout_s=180
        )
        assert not problem, problem
        got = _actual(kind, lake, pg, pg_schema, fresh_db)
        assert {k[0] for k in got} == {f"{fresh_db}.orders_1", f"{fresh_db}.orders_2"}
        assert {k[1] for k in got if k[0].endswith("_1")} & {k[1] for k in got if k[0].endswith("_2")}, (
            "the shards share ids: the source column must keep them apart"
        )
        if kind in ("delta", "changelog"):
            assert not (lake / fresh_db / "orders_1").exists(), "a routed table has no sink table of its own"
            prefix = (lake / fresh_db / "orders").resolve().as_uri().rstrip("/")
        else:
            assert pg.query(f'SELECT to_regclass(\'"{pg_schema}"."{fresh_db}__orders_1"\')') == [(None,)]
            prefix = f"postgres://127.0.0.1:{pg.port}/{DATABASE}/{pg_schema}/{fresh_db}__orders"
        events = airflow_env.asset_events(prefix)
        assert any(e["task_id"] == "snapshot" for e in events), (prefix, events)
    except AssertionError as e:
        from airflow_provider_mysqlcdc.cdc.state import StateStore

        raise AssertionError(
            f"{e}\nstream log:\n{log_tail(StateStore(str(state)).path('stream', 'stream.log'), 60)}"
        ) from None
    finally:
        from airflow_provider_mysqlcdc.cdc.state import StateStore
        from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import stop_local_stream

        stop_local_stream(StateStore(str(state)))
