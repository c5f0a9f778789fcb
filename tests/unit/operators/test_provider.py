"""Provider registration, the connection's form fields, the hook's reading of connections,
and the rules that keep secrets off command lines. Real Airflow, connections from env."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from mysqlcdc_harness import airflow_env


def test_airflow_lists_the_provider_and_its_connection_form_fields():
    airflow = str(Path(sys.executable).parent / "airflow")
    out = subprocess.run([airflow, "providers", "list", "-o", "json"], capture_output=True, text=True, check=True)
    names = [p["package_name"] for p in json.loads(out.stdout)]
    assert "airflow-provider-mysqlcdc" in names
    from airflow.providers_manager import ProvidersManager

    pm = ProvidersManager()
    assert pm.hooks["mysql_cdc"].hook_class_name == "airflow_provider_mysqlcdc.hooks.mysql_cdc.MySqlCdcHook"
    from airflow import __version__ as airflow_version
    from packaging.version import Version

    if Version(airflow_version) < Version("3.2"):
        return  # Airflow 3.1 does not read a provider's conn-fields: extras go in the Extra JSON (docs/connection.md)
    fields = {k for k in pm.connection_form_widgets if k.startswith("extra__mysql_cdc__")}
    assert {
        "extra__mysql_cdc__server_id_range",
        "extra__mysql_cdc__server_time_zone",
        "extra__mysql_cdc__ssl_ca",
    } <= fields
    assert pm.field_behaviours["mysql_cdc"]["relabeling"]["schema"] == "Default database"


def test_hook_turns_a_connection_into_the_engine_config():
    from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook

    airflow_env.set_connection(
        "cdc_hook_test",
        "mysql_cdc",
        host="db.example.com",
        port=3307,
        login="cdc",
        password="pw-1",
        schema="shop",
        extra={
            "server_id_range": "6000-6009",
            "server_time_zone": "Europe/Berlin",
            "ssl_ca": "/etc/ca.pem",
            "ssl_verify_identity": False,
            "jdbc_fetch_size": 5000,
        },
    )
    hook = MySqlCdcHook("cdc_hook_test")
    src = hook.get_source_config()
    assert (src.host, src.port, src.user, src.password) == ("db.example.com", 3307, "cdc", "pw-1")
    assert str(src.server_id_range) == "6000-6009" and src.server_time_zone == "Europe/Berlin"
    assert src.ssl == {"ca": "/etc/ca.pem", "check_hostname": False} and src.jdbc_fetch_size == 5000
    assert src.jdbc_tls_params() == "sslMode=verify-ca&serverSslCert=/etc/ca.pem"
    assert hook.default_database() == "shop"
    assert "pw-1" not in repr(src) and "pw-1" not in json.dumps(src.to_dict())


def test_a_plain_mysql_connection_works_too():
    from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook

    airflow_env.set_connection(
        "plain_mysql_test", "mysql", host="10.0.0.5", login="u", password="p", extra={"ssl": {"ca": "/ca.pem"}}
    )
    src = MySqlCdcHook("plain_mysql_test").get_source_config()
    assert (src.host, src.port, src.ssl) == ("10.0.0.5", 3306, {"ca": "/ca.pem"})


def test_client_certificates_are_refused_for_jdbc_with_a_fix():
    from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig

    with pytest.raises(ConfigError, match="ssl_cert"):
        SourceConfig(ssl={"ca": "/ca", "cert": "/c", "key": "/k"}).jdbc_tls_params()


def test_passwords_go_through_the_environment_only_where_it_stays_private():
    from airflow_provider_mysqlcdc.hooks.spark_job import secret_env

    env = secret_env(
        master="local[2]",
        deploy_mode=None,
        mysql_password="s3",
        sink_password="pg",
        password_file=None,
        cluster_provides_password=False,
    )
    assert env == {"MYSQLCDC_PASSWORD": "s3", "PGPASSWORD": "pg"}
    assert secret_env(
        master="spark://m:7077",
        deploy_mode="client",
        mysql_password="s3",
        sink_password=None,
        password_file=None,
        cluster_provides_password=False,
    ) == {"MYSQLCDC_PASSWORD": "s3"}
    for master, mode in (
        ("yarn", "cluster"),
        ("yarn", "client"),
        ("k8s://https://k:443", "cluster"),
        ("spark://m:7077", "cluster"),
    ):
        with pytest.raises(ConfigError, match="password_file"):
            secret_env(
                master=master,
                deploy_mode=mode,
                mysql_password="s3",
                sink_password=None,
                password_file=None,
                cluster_provides_password=False,
            )
    assert (
        secret_env(
            master="yarn",
            deploy_mode="cluster",
            mysql_password="s3",
            sink_password=None,
            password_file="/secrets/mysql",
            cluster_provides_password=False,
        )
        == {}
    )
    # object-storage credentials ride along where the environment is private, and only there
    aws = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    assert secret_env(
        master="local[2]",
        deploy_mode=None,
        mysql_password="s3",
        sink_password=None,
        password_file=None,
        cluster_provides_password=False,
        storage_env=aws,
    ) == {"MYSQLCDC_PASSWORD": "s3", **aws}
    assert (
        secret_env(
            master="local[2]",
            deploy_mode=None,
            mysql_password="s3",
            sink_password=None,
            password_file="/secrets/mysql",
            cluster_provides_password=False,
            storage_env=aws,
        )
        == aws
    )
    assert (
        secret_env(
            master="yarn",
            deploy_mode="cluster",
            mysql_password="s3",
            sink_password=None,
            password_file="/secrets/mysql",
            cluster_provides_password=False,
            storage_env=aws,
        )
        == {}
    )


def test_table_names_from_the_trigger_form():
    from airflow_provider_mysqlcdc.cdc.coerce import as_list
    from airflow_provider_mysqlcdc.cdc.source.table_patterns import qualify_all

    assert as_list("a.b, c.d\ne.f", "tables") == ["a.b", "c.d", "e.f"]
    assert as_list('["a.b"]', "tables") == ["a.b"]
    assert qualify_all(["orders", "x.y", r"shop\.order_.*"], "shop") == ["shop.orders", "x.y", r"shop\.order_.*"]
    with pytest.raises(ConfigError, match="schema"):
        qualify_all(["orders"], None)


def test_local_masters_get_task_retries():
    from airflow_provider_mysqlcdc.hooks.stream import local_master_with_retries

    assert local_master_with_retries("local[2]") == "local[2,4]"
    assert local_master_with_retries("local[*]") == "local[*,4]"
    assert local_master_with_retries("local") == "local[1,4]"
    assert local_master_with_retries("local[2,3]") == "local[2,4]"
    assert local_master_with_retries("yarn") == "yarn"


def test_sink_settings_never_hold_a_password():
    from airflow_provider_mysqlcdc.operators.plan import sink_config

    with pytest.raises(ConfigError, match="sink_conn_id"):
        sink_config("postgres", {"dsn": "host=x", "password": "p"}, None)
    with pytest.raises(ConfigError, match="root"):
        sink_config("delta", {}, None)
    airflow_env.set_connection(
        "pg_sink_test", "postgres", host="pg", port=5433, login="w", password="pgpw", schema="lake"
    )
    cfg = sink_config("postgres", {"schema": "cdc"}, "pg_sink_test")
    assert cfg.options["dsn"] == {"host": "pg", "port": 5433, "dbname": "lake", "user": "w"}
    assert "pgpw" not in json.dumps(dict(cfg.options))


def test_an_iceberg_catalog_on_postgresql_takes_its_password_from_an_existing_sink_connection():
    from airflow_provider_mysqlcdc.operators.plan import sink_config

    catalog = {"type": "sql", "uri": "postgresql+psycopg://cdc@pg:5432/iceberg"}
    options = {"root": "s3://lake/wh", "catalog": catalog}
    with pytest.raises(ConfigError, match=r"sink_conn_id: found none for the iceberg sink's catalog.*Fix:"):
        sink_config("iceberg", options, None)
    with pytest.raises(ConfigError, match=r"sink_conn_id: found 'no_such_iceberg_conn', need an existing.*Fix:"):
        sink_config("iceberg", options, "no_such_iceberg_conn")
    airflow_env.set_connection("ice_catalog_test", "postgres", host="pg", login="cdc", password="ice-pw-3")
    cfg = sink_config("iceberg", options, "ice_catalog_test")
    assert dict(cfg.options) == options, "the connection adds nothing to the stored options (no dsn, no password)"
    assert "ice-pw-3" not in json.dumps(dict(cfg.options))
    # a local warehouse with the default SQLite catalog needs no connection; delta takes none
    assert sink_config("iceberg", {"root": "/tmp/wh"}, None).options == {"root": "/tmp/wh"}
    with pytest.raises(ConfigError, match="sink_conn_id is for the postgres sink or an iceberg sink's catalog"):
        sink_config("delta", {"root": "/tmp/x"}, "ice_catalog_test")


def test_the_dag_template_parses_with_its_params_and_shape():
    dag = airflow_env.load_template_dag()
    assert [t.task_id for t in dag.topological_sort()] == ["validate", "plan", "snapshot", "stream"]
    assert dag.doc_md and "Clear" in dag.doc_md and "Downstream" in dag.doc_md
    watchdog = airflow_env.load_template_dag("mysql_cdc_stream_watchdog")
    assert [t.task_id for t in watchdog.topological_sort()] == [
        "stream_health",
        "sink_maintenance",
        "consistency_check",
    ]
    assert watchdog.is_paused_upon_creation is False
    assert watchdog.task_dict["stream_health"].outlets, "the watchdog records the stream's health as asset events"
    check = watchdog.task_dict["consistency_check"]
    assert check.retries == 0 and watchdog.params["consistency_every_s"] == 3600
    assert "consistency_every_s" in check.min_interval_s
    upkeep = watchdog.task_dict["sink_maintenance"]
    assert upkeep.retries == 0 and watchdog.params["maintenance_every_s"] == 3600
    assert "maintenance_every_s" in upkeep.min_interval_s and upkeep.upstream_task_ids == {"stream_health"}


def test_the_trigger_form_offers_every_setting_with_a_section_and_help():
    """The form is built from the one settings list: every setting, nothing else, each with a
    section, a title and help; optional ones are nullable (a non-nullable empty field blocks
    the Trigger button), and the defaults pass the form's own schema checks."""
    from airflow_provider_mysqlcdc.cdc.settings import SETTINGS

    dag = airflow_env.load_template_dag()
    assert list(dag.params.keys()) == [s.name for s in SETTINGS]
    for s in SETTINGS:
        param = dag.params.get_param(s.name)
        schema = param.schema
        assert schema["section"] and schema["title"] and schema["description_md"], s.name
        if param.value in (None, [], {}, ""):
            assert "null" in schema["type"], f"{s.name}: an empty default must be nullable"
        param.resolve()  # the default validates
    assert "values_display" in dag.params.get_param("sink_type").schema
    assert set(dag.params.get_param("startup_mode").schema["values_display"]) == set(
        dag.params.get_param("startup_mode").schema["enum"]
    )
    assert "Destructive" in dag.params.get_param("reset").schema["description_md"]
    dag.params.validate()


def test_the_form_rejects_what_the_engine_would_refuse():
    try:
        from airflow.sdk.exceptions import ParamValidationError
    except ImportError:  # Airflow 3.1
        from airflow.exceptions import ParamValidationError

    dag = airflow_env.load_template_dag()
    for name, bad in (
        ("chunk_size", 0),
        ("chunk_size", -5),
        ("rows_per_batch", 0),
        ("tables", []),
        ("tables", [" shop.orders"]),
        ("tables", [""]),
        ("sink_type", "mysql"),
        ("startup_mode", "now"),
        ("state_location", ""),
    ):
        with pytest.raises(ParamValidationError):
            dag.params.get_param(name).resolve(bad)
    assert dag.params.get_param("sink_conn_id").resolve(None) is None
    assert dag.params.get_param("startup_timestamp").resolve("2026-11-25T08:00:00Z")


def test_every_setting_reaches_an_operator_of_the_template():
    """Form and operators cannot drift: each setting is passed to a task of the template as
    '{{ params.<name> }}', and each task argument the template renders from params is a setting."""
    import re

    from airflow_provider_mysqlcdc.cdc.settings import SETTINGS

    dag = airflow_env.load_template_dag()
    used: set[str] = set()
    for task in dag.tasks:
        op = getattr(task, "partial_kwargs", None) or {}
        values = [getattr(task, f, None) for f in task.template_fields] + list(op.values())
        for v in values:
            used |= set(re.findall(r"params\.(\w+)", str(v)))
            if "mysqlcdc_source_conn(params, dag_run)" in str(v):  # the setting, or its old name in the conf
                used.add("mysql_cdc_conn_id")
    assert used == {s.name for s in SETTINGS}


def test_operator_argument_names_match_the_settings():
    import inspect

    from airflow_provider_mysqlcdc.cdc.settings import SETTINGS
    from airflow_provider_mysqlcdc.operators.plan import MySqlCdcPlanOperator
    from airflow_provider_mysqlcdc.operators.snapshot import MySqlCdcSnapshotOperator

    accepted = set(inspect.signature(MySqlCdcPlanOperator.__init__).parameters)
    # the connection is the operator's mysql_cdc_conn_id; reread_batches and the Spark runtime are the snapshot tasks'
    snapshot_only = {
        "reread_batches": "reread_batches",
        "spark_runtime": "spark_runtime",
        "spark_connect_conn_id": "connect_conn_id",
    }
    missing = {s.name for s in SETTINGS} - accepted - {"mysql_cdc_conn_id"} - set(snapshot_only)
    assert not missing, missing
    snapshot_args = set(inspect.signature(MySqlCdcSnapshotOperator.__init__).parameters)
    assert set(snapshot_only.values()) <= snapshot_args


def test_startup_timestamp_accepts_the_forms_date_time():
    from airflow_provider_mysqlcdc.cdc.coerce import epoch_seconds

    assert epoch_seconds("2026-11-25T08:00:00Z", "t") == epoch_seconds("2026-11-25T08:00:00", "t") == 1795593600.0
    assert epoch_seconds(1795593600, "t") == 1795593600.0 and epoch_seconds(None, "t") is None
    with pytest.raises(ConfigError, match="Fix"):
        epoch_seconds("next tuesday", "startup_timestamp")


def test_unknown_stream_options_name_the_accepted_ones():
    from airflow_provider_mysqlcdc.cdc.pipeline import StreamOptions

    with pytest.raises(ConfigError, match="Fix: use only max_events_per_batch"):
        StreamOptions.from_mapping({"max_events": 5})


def test_error_messages_read_well_in_the_task_log():
    from airflow_provider_mysqlcdc.fail_fast import readable_lines

    lines = readable_lines(
        "the table list has 2 problems. Fix: correct each.\n  - table 'a.b' matches no table. "
        "Fix: " + "check the name " * 12 + "\n  - table c.d has no key. Fix: set it."
    )
    assert lines[:2] == ["the table list has 2 problems.", "Fix: correct each."]
    assert lines[2] == "  - table 'a.b' matches no table." and lines[3].startswith("    Fix: check the name")
    assert all(len(ln) <= 120 for ln in lines) and lines[4].startswith("        the name")
    assert lines[-2:] == ["  - table c.d has no key.", "    Fix: set it."]


def test_config_errors_fail_the_task_at_once_with_the_fix_first():
    import logging

    from airflow_provider_mysqlcdc._airflow_compat import AirflowFailException
    from airflow_provider_mysqlcdc.cdc.errors import SourceUnreachableError
    from airflow_provider_mysqlcdc.fail_fast import config_errors_fail_at_once

    lines: list[str] = []

    class Op:
        log = logging.getLogger("t")

        @config_errors_fail_at_once
        def execute(self, context, error):
            raise error

    Op.log.error = lambda fmt, *a: lines.append(fmt % a)  # type: ignore[method-assign]
    with pytest.raises(AirflowFailException) as e:
        Op().execute({}, ConfigError("table 'x' matches nothing. Fix: check it."))
    assert lines == ["table 'x' matches nothing.", "Fix: check it."] and e.value.__cause__ is None
    assert str(e.value) == "table 'x' matches nothing. Fix: check it."
    with pytest.raises(SourceUnreachableError):  # a restarting server: retries bring the task through
        Op().execute({}, SourceUnreachableError("down"))
    with pytest.raises(ValueError):
        Op().execute({}, ValueError("a bug is not a configuration error"))
