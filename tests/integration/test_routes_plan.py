"""The plan task checks route and transform rules against the real tables before anything is
written (real MariaDB): a rule the engine cannot apply fails with its fix and leaves no plan or
settings behind; rules that change under a load are refused; reset forgets the merged sink
table a route wrote into."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_mysqlcdc.cdc.state import StateStore
from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.tables import create_int_table

pytestmark = pytest.mark.integration

ROUTE = lambda db: [{"source_table": rf"{db}\.orders_\d+", "sink_table": f"{db}.orders"}]  # noqa: E731


def _plan(tmp_dir, db, **kw):
    from airflow_provider_mysqlcdc.operators.plan import MySqlCdcPlanOperator

    args = {
        "tables": [rf"{db}\.orders_\d+"],
        "state_location": str(tmp_dir / "state"),
        "mysql_cdc_conn_id": "routes_src",
        "chunk_size": 100,
        "parallelism": 1,
        "sink_options": {"root": str(tmp_dir / "lake")},
        "route": ROUTE(db),
    }
    args.update(kw)
    return MySqlCdcPlanOperator(task_id="plan", **args)


@pytest.fixture
def source(mariadb, fresh_db):
    for t in ("orders_1", "orders_2"):
        create_int_table(mariadb, fresh_db, 200, t)
    airflow_env.set_connection(
        "routes_src", "mysql_cdc", host="127.0.0.1", port=mariadb.port, login="root", password=ROOT_PASSWORD
    )
    return fresh_db


@pytest.mark.parametrize(
    "kw, words",
    [
        (
            {"transform": [{"source_table": r".*\.orders_1", "projection": "s, amount"}]},
            "the projection drops id of the row identity (id)",
        ),
        (
            {"transform": [{"source_table": r".*\.orders_1", "projection": "id, nosuch"}]},
            "column 'nosuch' is not a column of",
        ),
        (
            {"transform": [{"source_table": r".*\.orders_1", "projection": "id, CAST(amount AS DOUBLE) AS amount"}]},
            "give it different columns (amount: double in",
        ),
        ({"sink_type": "changelog", "sink_options": {"root": "LAKE", "format": "parquet"}}, "format: parquet"),
        ({"sink_options": {"root": "LAKE", "direct_write": False}}, "direct_write: false"),
    ],
)
def test_a_rule_the_engine_cannot_apply_fails_the_plan_with_nothing_written(source, tmp_dir, kw, words):
    if kw.get("sink_options", {}).get("root") == "LAKE":
        kw = {**kw, "sink_options": {**kw["sink_options"], "root": str(tmp_dir / "lake")}}
    with pytest.raises(AirflowFailException) as e:  # a ConfigError: failed at once, not retried
        _plan(tmp_dir, source, **kw).execute({})
    assert words in str(e.value) and "Fix:" in str(e.value), str(e.value)
    state = StateStore(str(tmp_dir / "state"))
    assert not state.exists("pipeline.json") and state.read_plan() is None
    assert not (tmp_dir / "lake").exists() or not any((tmp_dir / "lake").rglob("_delta_log"))


def test_rules_that_change_under_a_load_are_refused_and_reset_forgets_the_merged_table(source, tmp_dir):
    from airflow_provider_mysqlcdc.cdc.pipeline import load_pipeline_config
    from airflow_provider_mysqlcdc.spark.sinks.routed import pipeline_sink

    db = source
    assert _plan(tmp_dir, db).execute({})
    state = StateStore(str(tmp_dir / "state"))
    config = load_pipeline_config(state.url("pipeline.json"), password="")
    assert config.rules.route == tuple(ROUTE(db))
    sink = pipeline_sink(config, list(state.read_plan().schemas.values()))
    sink.prepare(list(state.read_plan().schemas.values()))
    assert (tmp_dir / "lake" / db / "orders" / "_delta_log").is_dir()
    assert not (tmp_dir / "lake" / db / "orders_1").exists()
    state.write_batch_result(
        {
            "batch_id": state.read_plan().batches[0].batch_id,
            "ranges": [],
            "high_watermark": {"file": "mysql-bin.000001", "position": 4},
        }
    )

    assert _plan(tmp_dir, db).execute({})  # the same rules: a rerun of the plan task
    changed = [{"source_table": rf"{db}\.orders_\d+", "filter": "amount > 0"}]
    with pytest.raises(
        AirflowFailException, match="route/transform rules differ from those its sink tables were loaded"
    ):
        _plan(tmp_dir, db, transform=changed).execute({})

    assert _plan(tmp_dir, db, transform=changed, reset=True).execute({})
    assert not (tmp_dir / "lake" / db / "orders").exists(), "reset drops the merged sink table"


def test_validate_check_source_compiles_the_rules_against_the_tables(source, tmp_dir, monkeypatch):
    """``pipelines validate --check-source`` (a platform repo's CI step) finds what the plan task
    would: here a projection naming a column the shards do not have."""
    import io

    import yaml

    from airflow_provider_mysqlcdc.pipelines.__main__ import main

    monkeypatch.setenv("_AIRFLOW_PROCESS_CONTEXT", "server")
    folder = tmp_dir / "pipelines"
    folder.mkdir()

    def write(name: str, projection: str, route: list | None = None) -> None:
        (folder / f"{name}.yaml").write_text(
            yaml.safe_dump(
                {
                    "source": {"conn_id": "routes_src", "tables": [rf"{source}\.orders_\d+"]},
                    "sink": {"type": "delta", "options": {"root": str(tmp_dir / "lake")}},
                    "route": route or ROUTE(source),
                    "transform": [{"source_table": rf"{source}\.orders_\d+", "projection": projection}],
                    "pipeline": {"name": name, "state_location": str(tmp_dir / name)},
                }
            ),
            encoding="utf-8",
        )

    write("good", "id, upper(s) AS s_uc")
    write("bad", "id, nosuch")
    # a typo in a route's pattern: the tables are a regex, so only the server can tell it matches none
    write("typo", "id", [{"source_table": rf"{source}\.order_\d+", "sink_table": f"{source}.orders"}])
    out, err = io.StringIO(), io.StringIO()
    assert main(["validate", str(folder), "--check-source"], out=out, err=err) == 1
    lines = sorted(out.getvalue().splitlines())
    assert len(lines) == 2, out.getvalue()
    bad_at = next(
        i for i, ln in enumerate((folder / "bad.yaml").read_text().splitlines(), 1) if ln.startswith("transform:")
    )
    assert (
        lines[0].startswith(f"{folder / 'bad.yaml'}:{bad_at}: transform: ")
        and "column 'nosuch' is not a column of" in lines[0]
        and "Fix:" in lines[0]
    ), out.getvalue()
    assert lines[1].startswith(f"{folder / 'typo.yaml'}:") and ": route[0].source_table: " in lines[1], lines[1]
    assert "matches none of the source's captured tables" in lines[1] and f"{source}.orders_1" in lines[1], lines[1]
    assert f"{folder / 'good.yaml'}: source: ok" in err.getvalue()
    assert not (tmp_dir / "lake").exists()


def test_primary_keys_become_the_row_identity_of_a_table_without_a_primary_key(mariadb, fresh_db, tmp_dir):
    """A log table without any key: its identity would be every column; the transform's
    primary_keys make it ``id`` in the plan the snapshot and the stream match rows by."""
    mariadb.execute(
        "CREATE TABLE events (id BIGINT NOT NULL, kind VARCHAR(10), v INT)",
        "INSERT INTO events SELECT seq, 'k', seq FROM seq_1_to_300",
        database=fresh_db,
    )
    airflow_env.set_connection(
        "routes_src", "mysql_cdc", host="127.0.0.1", port=mariadb.port, login="root", password=ROOT_PASSWORD
    )
    kw = {"tables": [f"{fresh_db}.events"], "route": [], "chunk_key_columns": {f"{fresh_db}.events": "id"}}
    assert _plan(tmp_dir, fresh_db, **kw).execute({})
    state = StateStore(str(tmp_dir / "state"))
    (schema,) = state.read_plan().schemas.values()
    assert schema.row_identity == ("id", "kind", "v")  # without primary_keys: every column

    assert _plan(
        tmp_dir, fresh_db, reset=True, transform=[{"source_table": f"{fresh_db}.events", "primary_keys": ["id"]}], **kw
    ).execute({})
    (schema,) = state.read_plan().schemas.values()
    assert schema.row_identity == ("id",) and schema.primary_key == ()
