"""Server validation against a real MariaDB: each runtime misconfiguration gives its message."""

import contextlib

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError, ServerCheckError
from airflow_provider_mysqlcdc.cdc.source.validation import (
    ServerInfo,
    ServerValidationError,
    check_server,
    validate_server,
)

pytestmark = pytest.mark.integration


@contextlib.contextmanager
def global_setting(mariadb, name, value):
    """SET GLOBAL for the duration of a test, restored whatever happens."""
    old = mariadb.query(f"SELECT @@global.{name}")[0][0]
    mariadb.execute(f"SET GLOBAL {name} = '{value}'")
    try:
        yield
    finally:
        mariadb.execute(f"SET GLOBAL {name} = '{old}'")
    assert mariadb.query(f"SELECT @@global.{name}")[0][0] == old


@contextlib.contextmanager
def user(mariadb, name, *grants):
    mariadb.execute(f"CREATE USER '{name}'@'%' IDENTIFIED BY 'pw-{name}'")
    try:
        for g in grants:
            mariadb.execute(f"GRANT {g} ON *.* TO '{name}'@'%'")
        yield mariadb.source_config(user=name, password=f"pw-{name}")
    finally:
        mariadb.execute(f"DROP USER IF EXISTS '{name}'@'%'")


def test_correctly_configured_server_passes(mariadb):
    info = validate_server(mariadb.source_config())
    assert isinstance(info, ServerInfo)
    assert info.version.is_mariadb and info.version.major >= 10
    assert info.variables["binlog_format"] == "ROW"
    file, pos = mariadb.master_status()
    assert (info.offset.file, info.offset.position) == (file, pos)
    assert ServerInfo.from_dict(info.to_dict()) == info
    with contextlib.closing(mariadb.source_config().connect()) as conn:
        assert check_server(conn, mariadb.source_config()) == []


@pytest.mark.parametrize(
    "name, bad, needed",
    [
        ("binlog_format", "STATEMENT", "ROW"),
        ("binlog_format", "MIXED", "ROW"),
        ("binlog_row_image", "MINIMAL", "FULL"),
        ("binlog_row_image", "NOBLOB", "FULL"),
        ("binlog_row_metadata", "MINIMAL", "FULL"),
    ],
)
def test_runtime_misconfiguration_is_reported(mariadb, name, bad, needed):
    with global_setting(mariadb, name, bad):
        with pytest.raises(ServerValidationError) as ei:
            validate_server(mariadb.source_config())
    errors = ei.value.errors
    assert [e.setting for e in errors] == [name]
    assert (errors[0].found, errors[0].needed) == (bad, needed)
    message = str(ei.value)
    assert f"{name}: found '{bad}', need {needed}" in message
    assert f"SET GLOBAL {name} = '{needed}'" in message and "my.cnf" in message


def test_several_problems_in_one_error(mariadb):
    with global_setting(mariadb, "binlog_format", "MIXED"), global_setting(mariadb, "binlog_row_image", "MINIMAL"):
        with pytest.raises(ConfigError) as ei:
            validate_server(mariadb.source_config(server_time_zone="Asia/Tokyo"))
    assert [e.setting for e in ei.value.errors] == ["binlog_format", "binlog_row_image", "server_time_zone"]
    assert "3 problems" in str(ei.value)


def test_user_with_only_select_misses_replication_privileges(mariadb):
    with user(mariadb, "cdc_select_only", "SELECT") as source:
        with pytest.raises(ServerValidationError) as ei:
            validate_server(source)
    (e,) = ei.value.errors
    assert isinstance(e, ServerCheckError) and e.setting == "privileges"
    assert "REPLICATION SLAVE" in e.found and "BINLOG MONITOR" in e.found
    assert "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'cdc_select_only'" in e.fix
    assert not mariadb.query("SELECT 1 FROM mysql.user WHERE user = 'cdc_select_only'")


def test_user_with_the_documented_grants_passes(mariadb):
    # REPLICATION CLIENT is MariaDB 10.5+'s alias of BINLOG MONITOR; either name works.
    with user(mariadb, "cdc_ok", "SELECT, REPLICATION SLAVE, REPLICATION CLIENT") as source:
        info = validate_server(source)
    assert info.offset.position > 0


def test_wrong_configured_time_zone(mariadb):
    with pytest.raises(ServerValidationError) as ei:
        validate_server(mariadb.source_config(server_time_zone="Asia/Tokyo"))
    (e,) = ei.value.errors
    assert e.setting == "server_time_zone"
    assert "Asia/Tokyo (UTC+09:00)" == e.found and "UTC+00:00" in e.needed


def test_time_zone_is_the_servers_not_the_sessions(mariadb):
    # Engine sessions are UTC (init_command); a server in another zone must still be seen as such.
    with global_setting(mariadb, "time_zone", "+09:00"):
        validate_server(mariadb.source_config(server_time_zone="+09:00"))
        with pytest.raises(ServerValidationError, match="server_time_zone"):
            validate_server(mariadb.source_config(server_time_zone="UTC"))


def test_wrong_password_is_a_config_error(mariadb):
    with pytest.raises(ConfigError, match="access denied"):
        validate_server(mariadb.source_config(password="wrong"))


def test_connection_failures_are_told_apart(mariadb):
    """A wrong port, a host that does not resolve, TLS the server does not offer, a wrong password."""
    from airflow_provider_mysqlcdc.cdc.errors import SourceUnreachableError
    from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig

    good = mariadb.source_config()
    cases = [
        (
            SourceConfig(host="127.0.0.1", port=1, user="root", password="x"),
            SourceUnreachableError,
            "nothing accepts connections at 127.0.0.1:1",
        ),
        (
            SourceConfig(host="no-such-host.invalid", port=3306, user="root", password="x"),
            ConfigError,
            "'no-such-host.invalid' does not resolve",
        ),
        (
            SourceConfig(
                host="127.0.0.1",
                port=good.port,
                user="root",
                password="x",
                ssl={"ca": "/etc/ssl/certs/ca-certificates.crt"},
            ),
            ConfigError,
            "TLS with",
        ),
        (SourceConfig(host="127.0.0.1", port=good.port, user="root", password="wrong"), ConfigError, "access denied"),
    ]
    for source, kind, says in cases:
        with pytest.raises(kind, match=says) as e:
            source.connect()
        assert "Fix:" in str(e.value)


def test_the_servers_binlog_retention_is_read_from_whichever_variable_it_has(mariadb):
    from airflow_provider_mysqlcdc.cdc.binlog.retention import binlog_retention_s

    conn = mariadb.source_config().connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.binlog_expire_logs_seconds, @@GLOBAL.expire_logs_days")
            before = cur.fetchone()
            try:
                cur.execute("SET GLOBAL binlog_expire_logs_seconds = 0")
                assert binlog_retention_s(conn) is None  # 0: kept forever
                cur.execute("SET GLOBAL binlog_expire_logs_seconds = 5400")
                assert binlog_retention_s(conn) == 5400
            finally:
                cur.execute(f"SET GLOBAL binlog_expire_logs_seconds = {int(before[0])}")
    finally:
        conn.close()
