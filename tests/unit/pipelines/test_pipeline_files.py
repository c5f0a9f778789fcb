"""Pipeline files (issue 18): the file format and its messages, the DAGs built from a file (the
template's DAGs for the template's file), a broken file in real Airflow, the validate command.

No MariaDB, no Spark: --check-source is exercised against a connection nothing listens on.
"""

from __future__ import annotations

import copy
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_provider_mysqlcdc.cdc.settings import SETTINGS, SINK, SOURCE
from airflow_provider_mysqlcdc.pipelines import spec as spec_module
from airflow_provider_mysqlcdc.pipelines.__main__ import main
from airflow_provider_mysqlcdc.pipelines.dagfiles import MARKER, check_dag_files, write_dag_files
from airflow_provider_mysqlcdc.pipelines.loader import load_file, load_pipelines, read_file, refuse_unapplied_rules
from airflow_provider_mysqlcdc.pipelines.spec import (
    FILE_KEYS,
    RUN_ONLY,
    PipelineFileError,
    RouteRule,
    TransformRule,
    watchdog_dag_id,
)
from mysqlcdc_harness import airflow_env

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "platform_repo"
AIRFLOW = str(Path(sys.executable).parent / "airflow")

BASE: dict[str, Any] = {
    "source": {"conn_id": "shop_db", "tables": ["shop.orders"]},
    "sink": {"type": "delta", "options": {"root": "/lake"}},
    "pipeline": {"name": "shop", "state_location": "/state/shop"},
}


def write(folder: Path, name: str, data: Any) -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def changed(changes: dict[str, Any]) -> dict[str, Any]:
    """BASE with ``{"pipeline.chunk_size": 0}``-style changes; the value ``...`` removes the key."""
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *parents, key = dotted.split(".")
        node = data
        for p in parents:
            node = node.setdefault(p, {})
        if value is ...:
            node.pop(key, None)
        else:
            node[key] = value
    return data


def unlined(text: str) -> str:
    """Problem text without its line numbers (``test_each_error_names_...`` checks them)."""
    return re.sub(r"(\.ya?ml):\d+: ", r"\1: ", text)


def problem_lines(path: Path) -> list[str]:
    spec, problems = read_file(path)
    assert spec is None or not problems
    return [str(p) for p in problems]


# --------------------------------------------------------------------------------------------
# The format


def test_every_run_setting_has_one_place_in_a_file():
    """The file's source/sink/pipeline keys are the settings of cdc/settings.py, by their form
    section; the two run-only ones are refused with a reason."""
    assert set(FILE_KEYS) | set(RUN_ONLY) == {s.name for s in SETTINGS} and not set(FILE_KEYS) & set(RUN_ONLY)
    assert len(set(FILE_KEYS.values())) == len(FILE_KEYS)
    for s in SETTINGS:
        if s.name in FILE_KEYS:
            section = FILE_KEYS[s.name][0]
            assert section == {SOURCE: "source", SINK: "sink"}.get(s.section, "pipeline"), s.name
    assert FILE_KEYS["mysql_cdc_conn_id"] == ("source", "conn_id") and FILE_KEYS["sink_options"] == ("sink", "options")
    fields = {
        **spec_module.SourceSection.model_fields,
        **spec_module.SinkSection.model_fields,
        **spec_module.PipelineSection.model_fields,
    }
    assert {key for _, key in FILE_KEYS.values()} <= set(fields)


def test_a_minimal_file_takes_the_settings_defaults(tmp_path):
    spec = load_file(write(tmp_path, "shop.yaml", BASE))
    settings = spec.settings()
    defaults = {s.name: s.default for s in SETTINGS if s.name in FILE_KEYS}
    assert settings == {
        **defaults,
        "mysql_cdc_conn_id": "shop_db",
        "tables": ["shop.orders"],
        "sink_options": {"root": "/lake"},
        "state_location": "/state/shop",
    }
    assert (spec.dag_id, spec.watchdog_dag_id) == ("shop", "shop_stream_watchdog")
    assert watchdog_dag_id("mysql_cdc_pipeline") == "mysql_cdc_stream_watchdog"
    assert spec.route == () and spec.transform == ()


def test_yaml_reads_date_times_as_text_and_flink_style_sections_are_typed(tmp_path):
    data = changed({"pipeline.startup_mode": "timestamp"})
    text = (
        yaml.safe_dump(data, sort_keys=False)
        + "  startup_timestamp: 2026-11-25T08:00:00Z\n"
        + r"""
route:
  - source_table: shop\.orders_\d+
    sink_table: shop.orders
    description: the order shards into one table
transform:
  - source_table: shop.orders
    projection: id, upper(name) AS name, __table_name__ AS source_table
    filter: status <> 'deleted' AND amount > 0
    primary_keys: [id]
"""
    )
    spec = load_file(write(tmp_path, "shop.yaml", text))
    assert spec.pipeline.startup_timestamp == "2026-11-25T08:00:00Z"
    assert spec.route == (
        RouteRule(
            source_table=r"shop\.orders_\d+", sink_table="shop.orders", description="the order shards into one table"
        ),
    )
    assert isinstance(spec.transform[0], TransformRule) and spec.transform[0].primary_keys == ("id",)
    assert spec.transform[0].filter == "status <> 'deleted' AND amount > 0"


# Each case: a change to a valid file, the key of the one problem it makes, the value the
# message must quote. Every message names the file and the key, quotes the value, has a fix.
ERROR_CASES = [
    ({"pipeline.chunk_size": 0}, "pipeline.chunk_size", "found 0"),
    ({"pipeline.chunk_size": 100_000_001}, "pipeline.chunk_size", "found 100000001"),
    ({"pipeline.rows_per_batch": "lots"}, "pipeline.rows_per_batch", '"lots"'),
    ({"pipeline.rows_per_batch": True}, "pipeline.rows_per_batch", "true"),
    ({"source.tables": []}, "source.tables", "found []"),
    ({"source.tables": "shop.orders"}, "source.tables", '"shop.orders"'),
    ({"source.tables": [" shop.orders"]}, "source.tables[0]", '" shop.orders"'),
    ({"source.tables": ["shop.orders", "shop.(orders"]}, "source.tables[1]", '"shop.(orders"'),
    ({"source.exclude": ["`shop`.`tmp"]}, "source.exclude[0]", '"`shop`.`tmp"'),
    ({"source.zero_dates": None}, "source.zero_dates", "null"),
    ({"source.zero_dates": "zero"}, "source.zero_dates", '"zero"'),
    ({"source.chunk_key_columns": ["shop.t", "id"]}, "source.chunk_key_columns", '["shop.t", "id"]'),
    ({"source.conn_id": ""}, "source.conn_id", 'found ""'),
    ({"source.password": "s3cret"}, "source.password", "its value is not shown"),
    ({"source.hostname": "db.internal"}, "source.hostname", '"db.internal"'),
    ({"source.server_id_range": "5400-5404"}, "source.server_id_range", '"5400-5404"'),
    ({"source.server-time-zone": "UTC+8"}, "source.server-time-zone", '"UTC+8"'),
    ({"source.type": "mysql"}, "source.type", '"mysql"'),
    ({"sink.type": "mysql"}, "sink.type", '"mysql"'),
    ({"sink.options": {"root": "/lake", "password": "x"}}, "sink.options", "password"),
    (
        {"sink.options": {"root": "s3://lake", "storage_options": {"AWS_SECRET_ACCESS_KEY": "k"}}},
        "sink.options.storage_options",
        "AWS_SECRET_ACCESS_KEY",
    ),
    ({"sink.options": {"storage_options": {}}}, "sink.options.root", "found an empty value"),
    (
        {"sink.type": "postgres", "sink.options": {"dsn": "host=pg user=w password=pw-1"}},
        "sink.options.dsn",
        "found a password",
    ),
    (
        {"sink.type": "postgres", "sink.options": {"dsn": {"host": "pg", "password": "pw-1"}}},
        "sink.options.dsn",
        "found password",
    ),
    ({"sink.conn_id": "lake_pg"}, "sink.conn_id", '"lake_pg"'),
    ({"sink.type": "postgres", "sink.options": {"schema": "cdc"}}, "sink.conn_id", "found none"),
    ({"sink.sink_type": "delta"}, "sink.sink_type", '"delta"'),
    ({"pipeline.name": "shop orders"}, "pipeline.name", '"shop orders"'),
    ({"pipeline.name": ...}, "pipeline.name", "found nothing"),
    ({"pipeline.state_location": ...}, "pipeline.state_location", "found nothing"),
    ({"pipeline.state_location": ""}, "pipeline.state_location", 'found ""'),
    ({"pipeline.schedule": "every day"}, "pipeline.schedule", '"every day"'),
    ({"pipeline.schedule": "@continuous"}, "pipeline.schedule", '"@continuous"'),
    ({"pipeline.snapshot_parallelism": 0}, "pipeline.snapshot_parallelism", "found 0"),
    ({"pipeline.tags": "team-a"}, "pipeline.tags", '"team-a"'),
    ({"pipeline.startup_mode": "now"}, "pipeline.startup_mode", '"now"'),
    ({"pipeline.startup_mode": "specific-offset"}, "pipeline.startup_mode", '"specific-offset"'),
    (
        {"pipeline.startup_mode": "timestamp", "pipeline.startup_timestamp": "next tuesday"},
        "pipeline.startup_timestamp",
        '"next tuesday"',
    ),
    ({"pipeline.stream_options": {"max_events": 5}}, "pipeline.stream_options", "max_events"),
    ({"pipeline.stream_options": {"catchup_parallelism": 100}}, "pipeline.stream_options.catchup_parallelism", "100"),
    ({"pipeline.schema_change_behavior": "yolo"}, "pipeline.schema_change_behavior", '"yolo"'),
    ({"pipeline.spark_runtime": "yarn"}, "pipeline.spark_runtime", '"yarn"'),
    ({"pipeline.chunk_sise": 500}, "pipeline.chunk_sise", "500"),
    ({"pipeline.parallelism": 4}, "pipeline.parallelism", "4"),
    ({"pipeline.tables": ["shop.x"]}, "pipeline.tables", '["shop.x"]'),
    ({"pipeline.reset": True}, "pipeline.reset", "true"),
    ({"pipeline.reread_batches": ["*"]}, "pipeline.reread_batches", '["*"]'),
    ({"sinks": {"type": "delta"}}, "sinks", '{"type": "delta"}'),
    ({"source": "shop.orders"}, "source", '"shop.orders"'),
    ({"route": "shop.orders"}, "route", '"shop.orders"'),
    ({"route": [{"source_table": r"shop\.orders_\d+", "sink_table": "orders"}]}, "route[0].sink_table", '"orders"'),
    (
        {"route": [{"source_table": r"shop\.orders_\d+", "sink_table": r"shop\.o.*"}]},
        "route[0].sink_table",
        r'"shop\\.o.*"',
    ),
    ({"route": [{"source_table": "shop.(x", "sink_table": "shop.x"}]}, "route[0].source_table", '"shop.(x"'),
    (
        {"route": [{"source-table": "shop.x", "source_table": "shop.x", "sink_table": "shop.y"}]},
        "route[0].source-table",
        '"shop.x"',
    ),
    ({"route": [{"sink_table": "shop.y"}]}, "route[0].source_table", "found nothing"),
    ({"transform": [{"source_table": "shop.orders"}]}, "transform[0]", '"shop.orders"'),
    (
        {"transform": [{"source_table": "shop.orders", "projection": "id,, name"}]},
        "transform[0].projection",
        '"id,, name"',
    ),
    (
        {"transform": [{"source_table": "shop.orders", "projection": "id name x"}]},
        "transform[0].projection",
        '"id name x"',
    ),
    (
        {"transform": [{"source_table": "shop.orders", "filter": "a = 1 ORDER BY b"}]},
        "transform[0].filter",
        '"a = 1 ORDER BY b"',
    ),
    ({"transform": [{"source_table": "shop.orders", "filter": "a ="}]}, "transform[0].filter", '"a ="'),
    ({"transform": [{"source_table": "shop.orders", "primary_keys": []}]}, "transform[0].primary_keys", "found []"),
    ({"transform": [{"source_table": "shop.orders", "primary_keys": "id"}]}, "transform[0].primary_keys", '"id"'),
    (
        {"transform": [{"source_table": "shop.orders", "projection": "id", "primary-keys": ["id"]}]},
        "transform[0].primary-keys",
        '["id"]',
    ),
]


@pytest.mark.parametrize("change, key, value", ERROR_CASES, ids=[c[1] + "=" + c[2] for c in ERROR_CASES])
def test_each_error_names_the_file_the_key_the_value_and_the_fix(tmp_path, change, key, value):
    path = write(tmp_path, "shop.yaml", changed(change))
    lines = problem_lines(path)
    assert len(lines) == 1, lines
    line = lines[0]
    # the line of the key (or of the section a missing key belongs in), as editors read it
    at = re.match(rf"{re.escape(str(path))}:(\d+): {re.escape(key)}: ", line)
    assert at, line
    written = path.read_text(encoding="utf-8").splitlines()[int(at.group(1)) - 1]
    names = [part for part in re.findall(r"[A-Za-z_-]+", key) if part in written]
    assert names or ("[" in key and written.lstrip().startswith("- ")), (key, written)  # a key, or a list's item
    line = unlined(line)
    assert value in line.split(": ", 2)[2], line
    assert "Fix: " in line and line.endswith("."), line
    assert "s3cret" not in line and "pw-1" not in line, "a credential is never echoed"


@pytest.mark.parametrize(
    "text, words",
    [
        ("source: {tables: [shop.orders]\npipeline: x\n", "line"),
        (
            "source:\n  tables: [shop.orders]\n  tables: [shop.items]\npipeline: {name: a, state_location: /s}\n",
            "twice",
        ),
        ("", "empty file"),
        ("- source\n- pipeline\n", "found a list"),
        ("42\n", "found a int"),
    ],
)
def test_a_file_that_is_no_pipeline_is_one_problem_of_the_whole_file(tmp_path, text, words):
    path = write(tmp_path, "x.yaml", text)
    lines = problem_lines(path)
    assert len(lines) == 1 and lines[0].startswith(f"{path}: (file): ") and words in lines[0], lines
    assert "Fix: " in lines[0]


def test_a_file_names_every_problem_at_once(tmp_path):
    path = write(
        tmp_path,
        "shop.yaml",
        changed(
            {"pipeline.chunk_size": 0, "sink.type": "mysql", "source.password": "pw", "pipeline.state_location": ...}
        ),
    )
    keys = [line.split(": ")[1] for line in problem_lines(path)]
    assert sorted(keys) == ["pipeline.chunk_size", "pipeline.state_location", "sink.type", "source.password"]
    with pytest.raises(PipelineFileError) as e:
        load_file(path)
    assert str(e.value).splitlines()[0] == f"pipeline file {path} has 4 problems, so its pipeline has no DAGs:"


def test_two_files_with_one_name_or_state_location_both_fail_naming_each_other(tmp_path):
    a = write(tmp_path, "a.yaml", BASE)
    b = write(tmp_path, "b.yaml", changed({"pipeline.state_location": "/state/other"}))
    c = write(tmp_path, "c.yaml", changed({"pipeline.name": "c", "pipeline.state_location": "/state/shop/"}))
    d = write(tmp_path, "d.yaml", changed({"pipeline.name": "shop_stream_watchdog", "pipeline.state_location": "/d"}))
    result = load_pipelines([tmp_path])
    assert result.pipelines == []
    lines = {unlined(str(p)) for p in result.problems}
    assert all(p.line for p in result.problems), "each names its line"
    assert any(ln.startswith(f"{a}: pipeline.name: ") and str(b) in ln for ln in lines)
    assert any(ln.startswith(f"{b}: pipeline.name: ") and str(a) in ln for ln in lines)
    assert any(ln.startswith(f"{a}: pipeline.state_location: ") and str(c) in ln for ln in lines)
    assert any(ln.startswith(f"{c}: pipeline.state_location: ") and str(a) in ln for ln in lines)
    assert any(ln.startswith(f"{d}: pipeline.name: ") and "shop_stream_watchdog" in ln for ln in lines)
    assert all("Fix: " in ln for ln in lines)
    # the factory's view of one file: it checks itself against its folder
    with pytest.raises(PipelineFileError, match=f"{b}"):
        load_file(a, siblings=True)


def test_route_and_transform_reach_the_plan_task_and_are_refused_with_sinks_that_do_not_apply_them(tmp_path):
    rules = {
        "route": [{"source_table": r"shop\.orders_\d+", "sink_table": "shop.orders"}],
        "transform": [{"source_table": "shop.orders", "filter": "amount > 0"}],
    }
    path = write(tmp_path, "shop.yaml", changed(rules))
    spec = load_file(path)
    assert refuse_unapplied_rules(str(path), spec) == []
    args = spec.dag_arguments()
    assert args["route"] == rules["route"] and args["transform"] == rules["transform"]
    log = write(
        tmp_path,
        "log.yaml",
        changed({**rules, "sink.type": "console", "pipeline.name": "log", "pipeline.state_location": "/state/log"}),
    )
    problems = refuse_unapplied_rules(str(log), load_file(log))
    assert [p.key for p in problems] == ["sink.type"]
    assert (
        str(problems[0]).startswith(f"{log}: ")
        and "route and transform are applied by the delta, postgres, changelog, iceberg sinks only"
        in problems[0].message
        and "Fix: " in problems[0].message
    )
    parquet = write(
        tmp_path,
        "pq.yaml",
        changed(
            {
                **rules,
                "sink.type": "changelog",
                "sink.options.format": "parquet",
                "pipeline.name": "pq",
                "pipeline.state_location": "/state/pq",
            }
        ),
    )
    assert [p.key for p in refuse_unapplied_rules(str(parquet), load_file(parquet))] == ["sink.options.format"]
    row = write(
        tmp_path,
        "row.yaml",
        changed(
            {
                **rules,
                "sink.options.direct_write": False,
                "pipeline.name": "row",
                "pipeline.state_location": "/state/row",
            }
        ),
    )
    assert [p.key for p in refuse_unapplied_rules(str(row), load_file(row))] == ["sink.options.direct_write"]
    assert refuse_unapplied_rules(str(path), load_file(write(tmp_path, "plain.yaml", BASE))) == []


# --------------------------------------------------------------------------------------------
# The example repository


def test_the_example_repo_validates_and_its_dag_files_are_in_step():
    out, err = io.StringIO(), io.StringIO()
    code = main(["validate", str(EXAMPLE / "pipelines"), "--dags", str(EXAMPLE / "dags")], out=out, err=err)
    assert (code, out.getvalue()) == (0, ""), out.getvalue()
    assert "2 pipeline files checked: 2 ok, 0 problems" in err.getvalue()
    for dag_file in (EXAMPLE / "dags").glob("*.py"):
        assert len(dag_file.read_text().splitlines()) == 3 and MARKER in dag_file.read_text()


def test_the_example_billing_pipeline_routes_its_shards_and_transforms_invoices():
    spec = load_file(EXAMPLE / "pipelines" / "billing.yaml")
    assert [(r.source_table, r.sink_table) for r in spec.route] == [(r"billing\.payment_\d+", "billing.payments")]
    assert spec.transform[0].projection.startswith("id, customer_id") and spec.transform[0].filter
    assert refuse_unapplied_rules("billing.yaml", spec) == []


def test_the_ci_step_runs_the_validate_command_on_the_example():
    workflow = yaml.safe_load((EXAMPLE / ".github" / "workflows" / "validate.yml").read_text())
    runs = [s["run"] for s in workflow["jobs"]["validate"]["steps"] if "validate" in s.get("run", "")]
    assert runs == ["python -m airflow_provider_mysqlcdc.pipelines validate pipelines/ --dags dags/"]
    argv = runs[0].split()
    p = subprocess.run([sys.executable, *argv[1:]], cwd=EXAMPLE, capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stdout) == (0, ""), p.stdout + p.stderr


# --------------------------------------------------------------------------------------------
# The DAGs of a file


def _serialized(dag) -> dict[str, Any]:
    try:
        from airflow.serialization.serialized_objects import DagSerialization
    except ImportError:  # Airflow 3.1
        from airflow.serialization.serialized_objects import SerializedDAG as DagSerialization

    data = DagSerialization.to_dict(dag)
    for key in ("fileloc", "relative_fileloc", "_processor_dags_folder", "doc_md"):
        data["dag"].pop(key, None)
    return json.loads(json.dumps(data, default=str))


def test_the_template_file_builds_the_templates_dags(monkeypatch):
    """examples/.../mysql_cdc_pipeline.yaml is the template: same DAG ids, tasks, operator
    arguments, params (names, order, values, schemas), docs (plus the file's name)."""
    for var in ("MYSQLCDC_SNAPSHOT_PARALLELISM", "MYSQLCDC_STATE_ROOT", "MYSQLCDC_LAKE_ROOT"):
        monkeypatch.delenv(var, raising=False)
    from airflow_provider_mysqlcdc.pipelines.factory import pipeline_dags

    template = {d: airflow_env.load_template_dag(d) for d in ("mysql_cdc_pipeline", "mysql_cdc_stream_watchdog")}
    namespace: dict[str, Any] = {"__file__": str(EXAMPLE / "dags" / "mysqlcdc_mysql_cdc_pipeline.py")}
    dag, watchdog = pipeline_dags("../pipelines/mysql_cdc_pipeline.yaml", namespace)
    assert namespace["mysql_cdc_pipeline"] is dag and namespace["mysql_cdc_stream_watchdog"] is watchdog
    for built in (dag, watchdog):
        expected = template[built.dag_id]
        assert list(built.params.keys()) == list(expected.params.keys())
        for name in expected.params.keys():
            assert built.params.get_param(name).value == expected.params.get_param(name).value, name
            assert built.params.get_param(name).schema == expected.params.get_param(name).schema, name
        assert _serialized(built) == _serialized(expected)
    assert dag.doc_md.startswith(template["mysql_cdc_pipeline"].doc_md)
    assert "pipelines/mysql_cdc_pipeline.yaml" in dag.doc_md
    assert watchdog.doc_md == template["mysql_cdc_stream_watchdog"].doc_md


def test_a_files_values_reach_the_dags():
    from airflow_provider_mysqlcdc.pipelines.factory import pipeline_dags

    dag, watchdog = pipeline_dags(EXAMPLE / "pipelines" / "billing.yaml", {})
    params = {k: dag.params.get_param(k).value for k in dag.params.keys()}
    assert params["tables"] == ["billing.invoices", r"billing\.payment_\d+"]
    assert (params["sink_type"], params["sink_conn_id"], params["mysql_cdc_conn_id"]) == (
        "postgres",
        "lake_postgres",
        "billing_mysql",
    )
    assert params["stream_options"] == {"max_events_per_batch": 50000} and params["reset"] is False
    assert dag.dag_id == "billing" and watchdog.dag_id == "billing_stream_watchdog"
    assert dag.description.startswith("Billing") and {"mysqlcdc", "cdc", "team-billing"} <= set(dag.tags)
    assert dag.get_task("plan").parallelism == 4
    assert dag.get_task("snapshot").partial_kwargs["max_active_tis_per_dagrun"] == 4
    assert watchdog.params.get_param("state_location").value == "s3://cdc-state/billing"
    assert watchdog.params.get_param("aws_conn_id").value == "cdc_s3"
    assert [getattr(o, "uri", None) or o.name for o in watchdog.tasks[0].outlets] == [
        "mysqlcdc://billing/stream_health",
        "billing_sink_tables",
    ]
    assert [o.name for o in dag.get_task("snapshot").partial_kwargs["outlets"]] == ["billing_sink_tables"]
    assert _serialized(dag)["dag"]["timetable"]["__var"]["expression"] == "0 6 * * *"
    dag.params.validate()


def _broken_repo(tmp_path: Path) -> Path:
    """The example repo, plus a broken pipeline file and one with a route, each with its DAG file."""
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    write(
        repo / "pipelines",
        "broken.yaml",
        changed({"pipeline.name": "broken", "pipeline.state_location": "/b", "pipeline.chunk_size": 0}),
    )
    write(
        repo / "pipelines",
        "routed.yaml",
        changed(
            {
                "pipeline.name": "routed",
                "source.tables": [r"shop\.orders_\d+"],
                "pipeline.state_location": "/r",
                "sink.type": "console",
                "route": [{"source_table": r"shop\.orders_\d+", "sink_table": "shop.orders"}],
            }
        ),
    )
    write(
        repo / "pipelines",
        "merged.yaml",
        changed(
            {
                "pipeline.name": "merged",
                "source.tables": [r"shop\.orders_\d+"],
                "pipeline.state_location": "/m",
                "route": [{"source_table": r"shop\.orders_\d+", "sink_table": "shop.orders"}],
                "transform": [
                    {"source_table": r"shop\.orders_\d+", "projection": "id, amount", "filter": "amount > 0"}
                ],
            }
        ),
    )
    lines = write_dag_files(repo / "pipelines", repo / "dags")
    assert sorted(ln.split()[0] for ln in lines) == ["unchanged", "unchanged", "wrote", "wrote", "wrote"], lines
    return repo


def _dagbag(folder: Path):
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow 3.1
        from airflow.models.dagbag import DagBag
    return DagBag(dag_folder=str(folder), bundle_path=folder)


GOOD_DAGS = {
    "mysql_cdc_pipeline",
    "mysql_cdc_stream_watchdog",
    "billing",
    "billing_stream_watchdog",
    "merged",
    "merged_stream_watchdog",
}


def test_a_broken_file_is_one_import_error_naming_it_and_the_others_load(tmp_path):
    repo = _broken_repo(tmp_path)
    bag = _dagbag(repo / "dags")
    assert set(bag.dags) == GOOD_DAGS
    assert set(bag.import_errors) == {"mysqlcdc_broken.py", "mysqlcdc_routed.py"}
    broken = unlined(bag.import_errors["mysqlcdc_broken.py"])
    assert "pipeline file pipelines/broken.yaml has 1 problem" in broken
    assert "pipelines/broken.yaml: pipeline.chunk_size: found 0" in broken and "Fix: " in broken
    routed = unlined(bag.import_errors["mysqlcdc_routed.py"])
    assert (
        'pipelines/routed.yaml: sink.type: found "console": route is applied by the delta, postgres, '
        "changelog, iceberg sinks only" in routed
    )
    assert "`shop\\.orders_\\d+` → `shop.orders`" in bag.dags["merged"].doc_md  # shown on the DAG page
    plan = bag.dags["merged"].get_task("plan")  # the rules reach the task that checks and stores them
    assert plan.route == [{"source_table": r"shop\.orders_\d+", "sink_table": "shop.orders"}]
    assert plan.transform == [{"source_table": r"shop\.orders_\d+", "projection": "id, amount", "filter": "amount > 0"}]
    assert bag.dags["billing"].params.get_param("chunk_size").value == 20000


def test_in_airflows_metadata_db_only_the_broken_files_dag_file_has_an_error(tmp_path):
    """The scheduler's view, through the CLI in a private AIRFLOW_HOME: parsed as the DAG
    processor does (dags reserialize), one import error (dags list-import-errors), and the other
    pipelines' DAGs neither stale nor flagged with import errors (they are scheduled and can be
    triggered)."""
    repo = _broken_repo(tmp_path)
    home = tmp_path / "home"
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(repo / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
    }
    airflow_env.copy_migrated_db(home)  # what `airflow db migrate` leaves, made once per session
    p = subprocess.run([AIRFLOW, "dags", "reserialize"], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    p = subprocess.run(
        [AIRFLOW, "dags", "list-import-errors", "-o", "json"], env=env, capture_output=True, text=True, timeout=300
    )
    listed = json.loads(next(ln for ln in p.stdout.splitlines() if ln.startswith("[")))
    assert sorted(e["filepath"] for e in listed) == ["mysqlcdc_broken.py", "mysqlcdc_routed.py"]
    assert any("pipelines/broken.yaml: pipeline.chunk_size: found 0" in unlined(e["error"]) for e in listed)
    with sqlite3.connect(home / "airflow.db") as db:
        rows = db.execute("SELECT dag_id, is_stale, has_import_errors FROM dag").fetchall()
    assert {r[0] for r in rows} == GOOD_DAGS
    assert all(r[1:] == (0, 0) for r in rows), rows


# --------------------------------------------------------------------------------------------
# The command


def test_validate_prints_one_line_per_problem_and_exits_1(tmp_path):
    write(tmp_path, "a.yaml", BASE)
    write(
        tmp_path,
        "b.yaml",
        changed(
            {"pipeline.name": "b", "pipeline.state_location": "/b", "pipeline.chunk_size": 0, "sink.type": "mysql"}
        ),
    )
    out, err = io.StringIO(), io.StringIO()
    assert main(["validate", str(tmp_path)], out=out, err=err) == 1
    lines = unlined(out.getvalue()).splitlines()
    assert [ln.split(": ")[:2] for ln in lines] == [
        [str(tmp_path / "b.yaml"), "sink.type"],
        [str(tmp_path / "b.yaml"), "pipeline.chunk_size"],
    ]
    assert "2 pipeline files checked: 1 ok, 2 problems" in err.getvalue()
    out = io.StringIO()
    assert main(["validate", str(tmp_path / "a.yaml")], out=out, err=io.StringIO()) == 0 and out.getvalue() == ""
    out = io.StringIO()
    assert main(["validate", str(tmp_path / "nope")], out=out, err=io.StringIO()) == 1
    assert out.getvalue().startswith(f"{tmp_path / 'nope'}: (file): found no such file or folder.")


def test_validate_reports_route_and_transform_as_the_factory_does(tmp_path):
    write(tmp_path, "a.yaml", changed({"transform": [{"source_table": "shop.orders", "filter": "id > 0"}]}))
    assert main(["validate", str(tmp_path)], out=io.StringIO(), err=io.StringIO()) == 0
    write(
        tmp_path,
        "b.yaml",
        changed(
            {
                "transform": [{"source_table": "shop.orders", "filter": "id > 0"}],
                "sink.type": "console",
                "pipeline.name": "b",
                "pipeline.state_location": "/b",
            }
        ),
    )
    out = io.StringIO()
    assert main(["validate", str(tmp_path)], out=out, err=io.StringIO()) == 1
    assert unlined(out.getvalue()).startswith(
        f'{tmp_path / "b.yaml"}: sink.type: found "console": transform is applied'
    )


def test_dag_files_are_written_kept_in_step_and_checked(tmp_path):
    pipelines, dags = tmp_path / "pipelines", tmp_path / "dags"
    pipelines.mkdir()
    write(pipelines, "shop-orders.yaml", BASE)
    out = io.StringIO()
    assert main(["validate", str(pipelines), "--dags", str(dags)], out=out, err=io.StringIO()) == 1
    assert out.getvalue().startswith(f"{pipelines / 'shop-orders.yaml'}: (dag file): found no DAG file")
    assert f"dag-files {pipelines} {dags}" in out.getvalue()
    out = io.StringIO()
    assert main(["dag-files", str(pipelines), str(dags)], out=out, err=io.StringIO()) == 0
    assert out.getvalue() == f"wrote {dags / 'mysqlcdc_shop_orders.py'} for {pipelines / 'shop-orders.yaml'}\n"
    assert 'pipeline_dags("../pipelines/shop-orders.yaml", globals())' in (dags / "mysqlcdc_shop_orders.py").read_text()
    assert write_dag_files(pipelines, dags) == [f"unchanged {dags / 'mysqlcdc_shop_orders.py'}"]
    assert check_dag_files([(pipelines / "shop-orders.yaml", "x")], dags) == []
    # a DAG file a person wrote for a pipeline file is theirs: kept, and it counts
    (dags / "mysqlcdc_shop_orders.py").unlink()
    (dags / "shop.py").write_text(
        "from airflow_provider_mysqlcdc.pipelines.factory import pipeline_dags\n"
        "pipeline_dags('../pipelines/shop-orders.yaml', globals())  # ours\n"
    )
    assert write_dag_files(pipelines, dags)[0].startswith(f"kept {dags / 'shop.py'}")
    assert main(["validate", str(pipelines), "--dags", str(dags)], out=io.StringIO(), err=io.StringIO()) == 0
    # two DAG files for one pipeline file; a DAG file whose pipeline file is gone
    (dags / "again.py").write_text((dags / "shop.py").read_text())
    write(pipelines, "gone.yaml", changed({"pipeline.name": "gone", "pipeline.state_location": "/g"}))
    write_dag_files(pipelines, dags)
    (pipelines / "gone.yaml").unlink()
    out = io.StringIO()
    assert main(["validate", str(pipelines), "--dags", str(dags)], out=out, err=io.StringIO()) == 1
    text = out.getvalue()
    assert f"{pipelines / 'shop-orders.yaml'}: (dag file): found 2 DAG files that build it" in text
    assert f"{dags / 'mysqlcdc_gone.py'}: (dag file): found it building gone.yaml, which does not exist" in text
    assert f"removed {dags / 'mysqlcdc_gone.py'} (gone.yaml is gone)" in write_dag_files(pipelines, dags)
    assert (dags / "again.py").exists()  # not written by the command: never removed by it


def test_check_source_runs_the_validate_task_against_each_source(tmp_path):
    """Through the real entry point: a server nothing listens on, and a connection that does not
    exist, are each a problem of their file (a live server: tests/integration covers validate)."""
    write(tmp_path, "a.yaml", BASE)
    write(
        tmp_path,
        "b.yaml",
        changed({"source.conn_id": "no_such_conn", "pipeline.name": "b", "pipeline.state_location": "/b"}),
    )
    env = {
        **os.environ,
        "AIRFLOW_CONN_SHOP_DB": json.dumps(
            {"conn_type": "mysql_cdc", "host": "127.0.0.1", "port": 9, "login": "cdc", "password": "pw-12345"}
        ),
    }
    p = subprocess.run(
        [sys.executable, "-m", "airflow_provider_mysqlcdc.pipelines", "validate", str(tmp_path), "--check-source"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    lines = unlined(p.stdout).splitlines()
    assert len(lines) == 2, p.stdout
    assert lines[0].startswith(f"{tmp_path / 'a.yaml'}: source: ") and "127.0.0.1:9" in lines[0]
    assert lines[1].startswith(f"{tmp_path / 'b.yaml'}: source: found no connection 'no_such_conn'")
    assert all("Fix: " in ln for ln in lines) and "pw-12345" not in p.stdout + p.stderr


def test_the_file_checks_import_no_airflow():
    code = (
        "import sys\n"
        "from airflow_provider_mysqlcdc.pipelines import __main__, loader, spec, dagfiles\n"
        f"r = loader.load_pipelines([{str(EXAMPLE / 'pipelines')!r}])\n"
        "assert not r.problems, r.problems\n"
        "assert not [m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')]\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert p.returncode == 0, p.stderr


def test_a_route_matching_none_of_the_listed_tables_is_refused_offline_where_that_can_be_told(tmp_path):
    """Every table listed by name: a route that matches none of them would never apply (a typo in
    the pattern, a shard list forgotten). A regex entry may match tables the server has or creates
    later: then only ``--check-source`` can tell, and the offline check says nothing."""
    route = [{"source_table": r"shop\.order_\d+", "sink_table": "shop.orders"}]
    write(tmp_path, "a.yaml", changed({"route": route, "source.tables": ["shop.orders_1", "shop.orders_2"]}))
    out = io.StringIO()
    assert main(["validate", str(tmp_path)], out=out, err=io.StringIO()) == 1
    line = out.getvalue().strip()
    assert line.startswith(f"{tmp_path / 'a.yaml'}:") and ": route[0].source_table: " in line, line
    assert "matches none of the tables source.tables lists (shop.orders_1, shop.orders_2)" in line and "Fix: " in line
    for tables in (["shop.orders_1", r"shop\.order_\d+"], ["orders_1"]):  # a regex entry; no database named
        write(tmp_path, "a.yaml", changed({"route": route, "source.tables": tables}))
        assert main(["validate", str(tmp_path)], out=io.StringIO(), err=io.StringIO()) == 0, tables
    good = [{"source_table": r"shop\.orders_\d+", "sink_table": "shop.orders"}]
    write(tmp_path, "a.yaml", changed({"route": good, "source.tables": ["shop.orders_1", "shop.orders_2"]}))
    assert main(["validate", str(tmp_path)], out=io.StringIO(), err=io.StringIO()) == 0


def test_help_names_the_exit_codes(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Exit codes: 0" in text and "1 a problem was found" in text and "2 the command line was wrong" in text
