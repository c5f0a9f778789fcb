"""The server checks as pure rules over (version, variables, grants, UTC offset).

MySQL 5.7 / 8.0 / 8.4 and MariaDB paths are covered here without servers; the integration
test covers what a real MariaDB reports.
"""

from datetime import datetime, timezone

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.source import server
from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig
from airflow_provider_mysqlcdc.cdc.source.validation import (
    ServerValidationError,
    check_privileges,
    check_server_id,
    check_time_zone,
    check_variables,
    check_version,
    evaluate,
    parse_grants,
)
from airflow_provider_mysqlcdc.cdc.source.version import ServerVersion

MYSQL57 = ServerVersion.parse("5.7.44-log")
MYSQL80 = ServerVersion.parse("8.0.36")
MYSQL84 = ServerVersion.parse("8.4.2")
MARIA = ServerVersion.parse("10.11.19-MariaDB-log")

GOOD_MARIA = {
    "log_bin": "ON",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
    "binlog_checksum": "CRC32",
    "server_id": "1",
    "time_zone": "SYSTEM",
    "system_time_zone": "UTC",
}
GOOD_MYSQL80 = {**GOOD_MARIA, "binlog_row_value_options": ""}
GOOD_MYSQL57 = {k: v for k, v in GOOD_MARIA.items() if k != "binlog_row_metadata"}

MARIA_GRANTS = ["GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%` IDENTIFIED BY PASSWORD '*X'"]
MYSQL_GRANTS = ["GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`"]
SRC = SourceConfig(user="cdc")


def settings(errors):
    return [e.setting for e in errors]


# --- version ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, ok",
    [
        ("5.6.51", False),
        ("5.7.44", True),
        ("8.0.36", True),
        ("8.4.2", True),
        ("10.4.34-MariaDB", False),
        ("10.5.0-MariaDB", True),
    ],
)
def test_version_rule(raw, ok):
    errors = check_version(ServerVersion.parse(raw))
    assert (errors == []) is ok
    if not ok:
        assert errors[0].setting == "version" and errors[0].found == raw
        assert "upgrade" in errors[0].fix


# --- binlog variables ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "version, variables",
    [(MARIA, GOOD_MARIA), (MYSQL80, GOOD_MYSQL80), (MYSQL84, GOOD_MYSQL80), (MYSQL57, GOOD_MYSQL57)],
)
def test_good_variables_pass(version, variables):
    assert check_variables(version, variables) == []


@pytest.mark.parametrize(
    "name, bad, needed",
    [
        ("binlog_format", "STATEMENT", "ROW"),
        ("binlog_format", "MIXED", "ROW"),
        ("binlog_row_image", "MINIMAL", "FULL"),
        ("binlog_row_image", "NOBLOB", "FULL"),
        ("binlog_row_metadata", "MINIMAL", "FULL"),
        ("binlog_row_metadata", "NO_LOG", "FULL"),
        ("log_bin", "OFF", "ON"),
    ],
)
def test_each_bad_variable_names_setting_found_needed_fix(name, bad, needed):
    errors = check_variables(MARIA, {**GOOD_MARIA, name: bad})
    assert settings(errors) == [name]
    e = errors[0]
    assert (e.found, e.needed) == (bad, needed)
    text = str(e)
    assert name in text and bad in text and needed in text and "Fix:" in text
    if name != "log_bin":
        assert f"SET GLOBAL {name} = '{needed}'" in e.fix and "my.cnf" in e.fix
    else:
        assert "restart" in e.fix


def test_lowercase_values_are_accepted():
    assert check_variables(MARIA, {**GOOD_MARIA, "binlog_format": "row", "binlog_row_image": "full"}) == []


def test_all_problems_are_reported_together():
    bad = {**GOOD_MARIA, "binlog_format": "MIXED", "binlog_row_image": "MINIMAL", "binlog_row_metadata": "MINIMAL"}
    assert settings(check_variables(MARIA, bad)) == ["binlog_format", "binlog_row_image", "binlog_row_metadata"]


def test_row_metadata_only_where_the_server_has_it():
    # MySQL 5.7 has no binlog_row_metadata: nothing to require.
    assert check_variables(MYSQL57, GOOD_MYSQL57) == []
    # MySQL 8.0.14+ has it, and the binlog reader needs it as much as on MariaDB.
    assert settings(check_variables(MYSQL80, {**GOOD_MYSQL80, "binlog_row_metadata": "MINIMAL"})) == [
        "binlog_row_metadata"
    ]


def test_partial_json_is_rejected_on_mysql8():
    errors = check_variables(MYSQL80, {**GOOD_MYSQL80, "binlog_row_value_options": "PARTIAL_JSON"})
    assert settings(errors) == ["binlog_row_value_options"]


@pytest.mark.parametrize("checksum", ["NONE", "CRC32"])
def test_checksum_none_or_crc32(checksum):
    assert check_variables(MARIA, {**GOOD_MARIA, "binlog_checksum": checksum}) == []


def test_server_id_inside_reader_range_is_rejected():
    assert check_server_id({"server_id": "5400"}, SRC) != []
    assert check_server_id({"server_id": "1"}, SRC) == []


# --- privileges ---------------------------------------------------------------------------


def test_mariadb_needs_binlog_monitor_mysql_replication_client():
    assert check_privileges(MARIA, MARIA_GRANTS) == []
    assert check_privileges(MYSQL80, MYSQL_GRANTS) == []
    assert check_privileges(MYSQL84, MYSQL_GRANTS) == []
    assert check_privileges(MYSQL57, MYSQL_GRANTS) == []
    # MariaDB < 10.5 (not supported, but the rule is right): REPLICATION CLIENT.
    assert check_privileges(ServerVersion.parse("10.4.1-MariaDB"), MYSQL_GRANTS) == []
    # MySQL has no BINLOG MONITOR.
    only_monitor = ["GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%`"]
    errors = check_privileges(MYSQL80, only_monitor, "cdc")
    assert settings(errors) == ["privileges"]
    assert "REPLICATION CLIENT" in errors[0].fix


def test_replication_client_is_an_alias_of_binlog_monitor_on_mariadb():
    assert check_privileges(MARIA, ["GRANT SELECT, REPLICATION CLIENT, REPLICATION SLAVE ON *.* TO `cdc`@`%`"]) == []


def test_all_privileges_covers_everything():
    assert check_privileges(MARIA, ["GRANT ALL PRIVILEGES ON *.* TO `root`@`%` WITH GRANT OPTION"]) == []
    assert check_privileges(MYSQL84, ["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"]) == []


def test_only_select_misses_replication_privileges():
    errors = check_privileges(MARIA, ["GRANT USAGE ON *.* TO `cdc`@`%`", "GRANT SELECT ON *.* TO `cdc`@`%`"], "cdc")
    assert settings(errors) == ["privileges"]
    e = errors[0]
    assert "REPLICATION SLAVE" in e.found and "BINLOG MONITOR" in e.found and "SELECT" not in e.found.split("(")[0]
    assert e.fix.startswith("GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'cdc'")


def test_replication_privileges_must_be_global():
    grants = ["GRANT USAGE ON *.* TO `cdc`@`%`", "GRANT ALL PRIVILEGES ON `shop`.* TO `cdc`@`%`"]
    errors = check_privileges(MYSQL80, grants, "cdc")
    assert "REPLICATION SLAVE, REPLICATION CLIENT" in errors[0].fix
    assert "SELECT" not in errors[0].fix.split(" ON ")[0]  # db-level ALL covers SELECT


def test_database_level_select_must_cover_every_captured_database():
    grants = [
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`",
        "GRANT SELECT ON `shop`.* TO `cdc`@`%`",
        "GRANT SELECT ON `log\\_%`.* TO `cdc`@`%`",
    ]
    assert check_privileges(MYSQL80, grants, databases=["shop", "log_2024"]) == []
    assert check_privileges(MYSQL80, grants, databases=["shop", "logx2024"]) != []  # \_ is a literal _
    assert settings(check_privileges(MYSQL80, grants, databases=["shop", "billing"])) == ["privileges"]


def test_table_level_select_is_not_enough():
    grants = [
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`",
        "GRANT SELECT (`id`, `name`) ON `shop`.`orders` TO `cdc`@`%`",
    ]
    assert settings(check_privileges(MYSQL80, grants)) == ["privileges"]


def test_super_counts_as_replication_client_on_mysql():
    assert check_privileges(MYSQL57, ["GRANT SELECT, SUPER, REPLICATION SLAVE ON *.* TO `cdc`@`%`"]) == []


def test_parse_grants_shapes():
    parsed = parse_grants(
        [
            "GRANT `r1` TO `u2`@`%`",
            "GRANT PROXY ON ''@'%' TO 'root'@'localhost' WITH GRANT OPTION",
            "GRANT SELECT (`a`, `b`), INSERT ON `db`.`t` TO `u`@`%`",
            "GRANT EXECUTE ON PROCEDURE `db`.`p` TO `u`@`%`",
            "GRANT REPLICATION REPLICA ON *.* TO `u`@`%`",
            "SET DEFAULT ROLE `r1` FOR `u2`@`%`",
        ]
    )
    assert parsed == {"db.t": {"SELECT", "INSERT"}, "db.p": {"EXECUTE"}, "*.*": {"REPLICATION SLAVE"}}


# --- time zone ----------------------------------------------------------------------------

WINTER = datetime(2025, 1, 15, 12, tzinfo=timezone.utc)
SUMMER = datetime(2025, 7, 15, 12, tzinfo=timezone.utc)


@pytest.mark.parametrize("configured", ["UTC", "+00:00", "Etc/UTC", "Europe/London"])
def test_time_zone_matches_by_offset(configured):
    assert check_time_zone(0, "'SYSTEM'", configured, WINTER) == []


def test_wrong_time_zone():
    errors = check_time_zone(0, "'+00:00'", "Asia/Tokyo", WINTER)
    assert settings(errors) == ["server_time_zone"]
    e = errors[0]
    assert "Asia/Tokyo" in e.found and "UTC+09:00" in e.found and "UTC+00:00" in e.needed
    assert "server_time_zone" in e.fix


def test_time_zone_is_compared_now_across_dst():
    assert check_time_zone(3600, "'Europe/Berlin'", "Europe/Berlin", WINTER) == []
    assert check_time_zone(7200, "'Europe/Berlin'", "Europe/Berlin", SUMMER) == []
    assert check_time_zone(3600, "'+01:00'", "Europe/Berlin", SUMMER) != []
    assert check_time_zone(-5 * 3600 - 1800, "'-05:30'", "-05:30", WINTER) == []


def test_unknown_configured_zone():
    assert settings(check_time_zone(0, "'UTC'", "Mars/Olympus", WINTER)) == ["server_time_zone"]


# --- everything at once -------------------------------------------------------------------


def test_evaluate_good_servers_pass():
    assert evaluate(MARIA, GOOD_MARIA, MARIA_GRANTS, 0, SRC) == []
    assert evaluate(MYSQL84, GOOD_MYSQL80, MYSQL_GRANTS, 0, SRC) == []
    assert evaluate(MYSQL57, GOOD_MYSQL57, MYSQL_GRANTS, 0, SRC) == []


def test_evaluate_lists_every_failure_and_the_exception_shows_them_all():
    variables = {**GOOD_MARIA, "binlog_format": "STATEMENT", "binlog_row_image": "NOBLOB"}
    errors = evaluate(
        MARIA,
        variables,
        ["GRANT SELECT ON *.* TO `cdc`@`%`"],
        0,
        SourceConfig(user="cdc", server_time_zone="Asia/Tokyo"),
    )
    assert settings(errors) == ["binlog_format", "binlog_row_image", "privileges", "server_time_zone"]
    exc = ServerValidationError("MariaDB 10.11.19 at h:3306", errors)
    assert isinstance(exc, ConfigError)
    assert "4 problems" in str(exc)
    for e in errors:
        assert str(e) in str(exc)


# --- statement choice per version (fake connection) ---------------------------------------


class FakeCursor:
    def __init__(self, conn):
        self.conn = conn
        self.description = None
        self._rows = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args=None):
        self.conn.statements.append(sql)
        if sql not in self.conn.answers:
            raise AssertionError(f"unexpected statement {sql!r}")
        names, rows = self.conn.answers[sql]
        self.description = [(n,) for n in names]
        self._rows = rows

    def fetchall(self):
        return list(self._rows)


class FakeConn:
    def __init__(self, answers):
        self.answers = answers
        self.statements = []

    def cursor(self):
        return FakeCursor(self)


STATUS_COLS = ["File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB", "Executed_Gtid_Set"]
UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_mysql_84_reads_show_binary_log_status_with_gtid():
    conn = FakeConn({"SHOW BINARY LOG STATUS": (STATUS_COLS, [("binlog.000012", 157, "", "", f"{UUID}:1-5,\n")])})
    off = server.current_offset(conn, MYSQL84)
    assert conn.statements == ["SHOW BINARY LOG STATUS"]
    assert (off.file, off.position, off.gtid) == ("binlog.000012", 157, f"{UUID}:1-5")


def test_mysql_80_reads_show_master_status_without_gtid():
    conn = FakeConn({"SHOW MASTER STATUS": (STATUS_COLS, [("binlog.000003", 4711, "", "", "")])})
    off = server.current_offset(conn, MYSQL80)
    assert conn.statements == ["SHOW MASTER STATUS"]
    assert (off.file, off.position, off.gtid) == ("binlog.000003", 4711, None)


def test_binlog_off_is_a_config_error():
    conn = FakeConn({"SHOW MASTER STATUS": (STATUS_COLS, [])})
    with pytest.raises(ConfigError, match="log_bin"):
        server.current_offset(conn, MYSQL57)


def test_consistent_snapshot_offset_is_none_on_mysql():
    conn = FakeConn({"SELECT VERSION()": (["VERSION()"], [("8.0.36",)])})
    assert server.consistent_snapshot_offset(conn) is None
    assert conn.statements == ["SELECT VERSION()"]


def test_list_binlogs_sorted_by_index_not_name():
    conn = FakeConn(
        {
            "SHOW BINARY LOGS": (
                ["Log_name", "File_size", "Encrypted"],
                [("b.1000000", 10, "No"), ("b.999999", 20, "No")],
            )
        }
    )
    assert server.list_binlogs(conn) == [("b.999999", 20), ("b.1000000", 10)]
    assert server.earliest_offset(conn) == BinlogOffset("b.999999", 4)
