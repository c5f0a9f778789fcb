"""Pipeline files with a route and a transform, end to end through the door users use: the YAML
files and their DAG files (written by ``pipelines dag-files``), parsed by Airflow and run with
``dag.test()`` (real MariaDB, real Spark, the Delta, PostgreSQL and changelog sinks), writers on both
shards throughout the snapshots and the streams. One platform repo holds three pipelines of the
same source, one per sink, run one after the other while the earlier ones stream (one flow, one set
of writers; a test per sink checks its pipeline).

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
import os
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

DAG_ID = "shop_orders_merged"  # + _<sink>
KINDS = ("delta", "postgres", "changelog")
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


def _pipeline_file(kind: str, db: str, work: Path, pg_schema: str) -> dict:
    lake, state = work / kind / "lake", work / kind / "state"  # (a PostgreSQL sink leaves lake empty)
    if kind == "postgres":
        sink: dict = {"type": "postgres", "options": {"schema": pg_schema}, "conn_id": "routes_pg"}
    else:
        sink = {"type": kind, "options": {"root": str(lake)}}
    return {
        "source": {"conn_id": f"routes_src_{kind}", "tables": [rf"{db}\.orders_\d+"]},
        "sink": sink,
        "route": [
            {
                "source_table": rf"{db}\.orders_\d+",
                "sink_table": f"{db}.orders",
                "description": "the shards into one table",
            }
        ],
        "transform": [{"source_table": rf"{db}\.orders_\d+", "projection": PROJECTION, "filter": FILTER}],
        "pipeline": {
            "name": f"{DAG_ID}_{kind}",
            "state_location": str(state),
            "chunk_size": 1500,
            "rows_per_batch": 4000,
            "snapshot_parallelism": 2,
            # the default runtime (one Spark Connect application), and spark-submit per batch for
            # PostgreSQL: the transform runs in the Python workers of either
            "spark_runtime": "submit" if kind == "postgres" else "connect",
            "stream_options": {"heartbeat_s": 1.0, "trigger_interval_s": 0.5},
        },
    }


@pytest.fixture(scope="module")
def routes(mariadb, postgres, tmp_path_factory):
    """The three pipelines' DAG runs, a DDL under their streams, a finished batch of the Delta and
    the PostgreSQL pipelines cleared while they stream; what each test checks is recorded."""
    from mysqlcdc_harness.postgres import DATABASE, SUPERUSER

    airflow_env.migrate()
    work = tmp_path_factory.mktemp("routes")
    db = f"routes_{os.getpid()}"
    mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`")
    for i, kind in enumerate(KINDS):  # one server id range per pipeline: their streams run side by side
        airflow_env.set_connection(
            f"routes_src_{kind}",
            "mysql_cdc",
            host="127.0.0.1",
            port=mariadb.port,
            login="root",
            password=ROOT_PASSWORD,
            schema=db,
            extra={"server_id_range": f"{7100 + 50 * i}-{7140 + 50 * i}"},
        )
    airflow_env.set_connection("spark_default", "spark", host="local[2]")
    pg_schema = postgres.fresh_schema("routes_")
    airflow_env.set_connection(
        "routes_pg",
        "postgres",
        host="127.0.0.1",
        port=postgres.port,
        login=SUPERUSER,
        password=postgres.password,
        schema=DATABASE,
    )
    specs = [create_int_table(mariadb, db, 6000, table=t) for t in ("orders_1", "orders_2")]
    repo = work / "repo"
    (repo / "pipelines").mkdir(parents=True)
    for kind in KINDS:
        (repo / "pipelines" / f"shop_orders_{kind}.yaml").write_text(
            yaml.safe_dump(_pipeline_file(kind, db, work, pg_schema), sort_keys=False), encoding="utf-8"
        )
    write_dag_files(repo / "pipelines", repo / "dags")
    dag_files = {kind: next((repo / "dags").glob(f"*{DAG_ID}_{kind}.py")) for kind in KINDS}
    writers = [
        ConcurrentWriter(lambda: mariadb.connect(db), spec, seed=i, threads=1, pause_s=0.02)
        for i, spec in enumerate(specs)
    ]
    for w in writers:
        w.start()
    runs: dict[str, dict] = {kind: {"log": work / kind / "dag.log"} for kind in KINDS}
    try:
        for kind in KINDS:
            run = runs[kind]
            run["log"].parent.mkdir(parents=True, exist_ok=True)
            res = airflow_env.run_template(["dag-file", str(dag_files[kind]), f"{DAG_ID}_{kind}"], run["log"])
            run["run_id"] = res["run_id"]
            run["states"] = airflow_env.task_states(airflow_env.dag_run(f"{DAG_ID}_{kind}", res["run_id"]))
        time.sleep(3)  # the streams take the writers' changes as they come
        # A DDL on one shard that the projection does not reach: the streams follow it, the sink
        # tables keep their columns.
        for w in writers:
            w.pause()
        mariadb.execute("ALTER TABLE orders_1 ADD COLUMN note VARCHAR(10) DEFAULT 'n'", database=db)
        for w in writers:
            w.resume()
        time.sleep(5)
        for kind in ("delta", "postgres"):
            # A finished batch cleared while the stream runs (the UI's Clear, Downstream ticked): read
            # again and handed to the stream, which replaces its key ranges through the same views.
            run = runs[kind]
            rerun_log = work / kind / "rerun.log"
            rerun = airflow_env.run_template(
                [
                    "dag-file-clear",
                    str(dag_files[kind]),
                    f"{DAG_ID}_{kind}",
                    run["run_id"],
                    json.dumps([["snapshot", 0], "stream"]),
                ],
                rerun_log,
            )
            run["rerun_states"] = airflow_env.task_states(airflow_env.dag_run(f"{DAG_ID}_{kind}", rerun["run_id"]))
            run["rerun_log"] = rerun_log.read_text(errors="replace")
        time.sleep(3)
    finally:
        for w in writers:
            w.stop()
    try:
        yield {
            "db": db,
            "work": work,
            "pg": postgres,
            "pg_schema": pg_schema,
            "runs": runs,
            "writers": writers,
            "server": mariadb,
            "database": DATABASE,
        }
    finally:
        from airflow_provider_mysqlcdc.cdc.state import StateStore
        from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import stop_local_stream

        for kind in KINDS:
            stop_local_stream(StateStore(str(work / kind / "state")))


@pytest.mark.parametrize("kind", KINDS)
def test_merged_shards_projected_and_filtered_equal_the_transformed_source(kind, routes):
    mariadb, db, work, run = routes["server"], routes["db"], routes["work"], routes["runs"][kind]
    pg, pg_schema, lake = routes["pg"], routes["pg_schema"], work / kind / "lake"
    assert all(s[0] == "success" for s in run["states"].values()), run["states"]
    if kind != "changelog":
        assert run["rerun_states"][("snapshot", 0)][0] == "success", run["rerun_states"]
        assert "key ranges in micro-batch" in run["rerun_log"], run["rerun_log"][-3000:]
    writers = routes["writers"]
    try:
        assert all(not w.errors for w in writers), [w.errors for w in writers]
        assert sum(w.stats.total for w in writers) > 200, "the writers barely wrote"
        problem = wait_until_equal(
            lambda: _expected(mariadb, db), lambda: _actual(kind, lake, pg, pg_schema, db), timeout_s=180
        )
        assert not problem, problem
        got = _actual(kind, lake, pg, pg_schema, db)
        assert {k[0] for k in got} == {f"{db}.orders_1", f"{db}.orders_2"}
        assert {k[1] for k in got if k[0].endswith("_1")} & {k[1] for k in got if k[0].endswith("_2")}, (
            "the shards share ids: the source column must keep them apart"
        )
        if kind in ("delta", "changelog"):
            assert not (lake / db / "orders_1").exists(), "a routed table has no sink table of its own"
            prefix = (lake / db / "orders").resolve().as_uri().rstrip("/")
        else:
            assert pg.query(f'SELECT to_regclass(\'"{pg_schema}"."{db}__orders_1"\')') == [(None,)]
            prefix = f"postgres://127.0.0.1:{pg.port}/{routes['database']}/{pg_schema}/{db}__orders"
        events = airflow_env.asset_events(prefix)
        assert any(e["task_id"] == "snapshot" for e in events), (prefix, events)
    except AssertionError as e:
        from airflow_provider_mysqlcdc.cdc.state import StateStore

        log = StateStore(str(work / kind / "state")).path("stream", "stream.log")
        raise AssertionError(f"{e}\nstream log:\n{log_tail(log, 60)}") from None
