"""A renamed setting keeps working under its old name, with a warning that names the new one:
in a DAG file's settings and in a run's conf (REST callers, saved trigger bodies); the two
names with different values is refused."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.settings import RENAMED, SETTINGS, current_names, defaults


def test_every_old_name_leads_to_a_current_setting():
    names = {s.name for s in SETTINGS}
    assert all(new in names and old not in names for old, new in RENAMED.items())


def test_the_old_name_in_settings_is_taken_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="mysql_conn_id is deprecated; it is now called mysql_cdc_conn_id"):
        values = defaults(mysql_conn_id="shop_db")
    assert values["mysql_cdc_conn_id"] == "shop_db" and "mysql_conn_id" not in values


def test_both_names_with_different_values_are_refused():
    with pytest.raises(ConfigError, match="keep only mysql_cdc_conn_id"):
        current_names({"mysql_conn_id": "a", "mysql_cdc_conn_id": "b"})
    assert current_names({"mysql_cdc_conn_id": "a"}) == {"mysql_cdc_conn_id": "a"}


def test_a_run_conf_with_the_old_name_reaches_the_operators(caplog):
    from airflow_provider_mysqlcdc.pipelines.dag_builder import source_conn_id

    params = {"mysql_cdc_conn_id": "mysql_cdc_default"}
    with caplog.at_level(logging.WARNING):
        assert source_conn_id(params, SimpleNamespace(conf={"mysql_conn_id": "legacy"})) == "legacy"
    assert "mysql_conn_id is deprecated" in caplog.text
    assert source_conn_id(params, SimpleNamespace(conf={"mysql_cdc_conn_id": "new"})) == "mysql_cdc_default"
    assert source_conn_id(params, SimpleNamespace(conf=None)) == "mysql_cdc_default"
    with pytest.raises(ConfigError):
        source_conn_id(params, SimpleNamespace(conf={"mysql_conn_id": "a", "mysql_cdc_conn_id": "b"}))


def test_the_pipeline_dag_resolves_the_source_connection_through_the_macro():
    from airflow_provider_mysqlcdc.pipelines.dag_builder import build_pipeline_dags

    dag, _ = build_pipeline_dags("renamed_check")
    assert dag.user_defined_macros["mysqlcdc_source_conn"].__name__ == "source_conn_id"
    templated = {t.task_id: getattr(t, "mysql_cdc_conn_id", None) for t in dag.tasks}
    assert templated["validate"] == templated["plan"] == "{{ mysqlcdc_source_conn(params, dag_run) }}"
