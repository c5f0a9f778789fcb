"""``python -m airflow_provider_mysqlcdc init DIR``: the shipped templates, written where a user wants them.

The DAG template ships twice (``dags/`` for a checkout, ``templates/`` for the wheel); the first
test keeps them byte for byte equal, so an installed provider writes the template the tests run.
"""

from __future__ import annotations

import configparser
import fnmatch
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.__main__ import main
from airflow_provider_mysqlcdc.pipelines.loader import load_pipelines
from airflow_provider_mysqlcdc.scaffold import TEMPLATES, ScaffoldError, template_text, write_templates

REPO = Path(__file__).resolve().parents[2]


def test_the_packaged_template_is_the_dags_template() -> None:
    assert template_text("mysql_cdc_pipeline.py.tmpl") == (REPO / "dags" / "mysql_cdc_pipeline.py").read_text(
        encoding="utf-8"
    ), "airflow_provider_mysqlcdc/templates/mysql_cdc_pipeline.py.tmpl differs from dags/mysql_cdc_pipeline.py: copy it"


def test_every_template_is_package_data() -> None:
    """setup.cfg's package_data takes every shipped file into the wheel (and no pattern is stale)."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    patterns = cfg["options.package_data"]["airflow_provider_mysqlcdc"].split()
    for t in TEMPLATES:
        rel = f"templates/{t.resource}"
        assert (REPO / "airflow_provider_mysqlcdc" / rel).is_file(), rel
        assert any(fnmatch.fnmatch(rel, p) for p in patterns), f"{rel} matches no package_data pattern {patterns}"


def test_init_writes_the_template_and_a_valid_pipeline_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path)]) == 0
    dag_file = tmp_path / "dags" / "mysql_cdc_pipeline.py"
    assert dag_file.read_text(encoding="utf-8") == template_text("mysql_cdc_pipeline.py.tmpl")
    compile(dag_file.read_text(encoding="utf-8"), str(dag_file), "exec")
    loaded = load_pipelines([tmp_path / "pipelines"])
    assert not loaded.problems, loaded.problems
    assert [p.spec.pipeline.name for p in loaded.pipelines] == ["shop_orders"]
    out = capsys.readouterr().out
    assert f"wrote {dag_file}" in out and "dag-files" in out


def test_init_leaves_existing_files_alone(tmp_path: Path) -> None:
    edited = tmp_path / "dags" / "mysql_cdc_pipeline.py"
    edited.parent.mkdir(parents=True)
    edited.write_text("# edited by the team\n", encoding="utf-8")
    with pytest.raises(ScaffoldError, match="already exists; nothing was written. Fix:"):
        write_templates(tmp_path)
    assert edited.read_text(encoding="utf-8") == "# edited by the team\n"
    assert not (tmp_path / "pipelines").exists()
    assert main(["init", str(tmp_path)]) == 1
    write_templates(tmp_path, force=True)
    assert edited.read_text(encoding="utf-8") == template_text("mysql_cdc_pipeline.py.tmpl")


def test_python_dash_m_runs_it(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "airflow_provider_mysqlcdc", "init", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "x" / "pipelines" / "shop_orders.yaml").is_file()
