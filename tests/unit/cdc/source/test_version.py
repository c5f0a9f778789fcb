"""Version strings as servers and pymysql print them, and what each version implies."""

import pytest

from airflow_provider_mysqlcdc.cdc.source.version import ServerVersion


@pytest.mark.parametrize(
    "raw, flavor, parts",
    [
        ("5.6.51", "mysql", (5, 6, 51)),
        ("5.7.44-log", "mysql", (5, 7, 44)),
        ("8.0.36", "mysql", (8, 0, 36)),
        ("8.4.2", "mysql", (8, 4, 2)),
        ("9.1.0-commercial", "mysql", (9, 1, 0)),
        ("10.11.19-MariaDB-0+deb12u1-log", "mariadb", (10, 11, 19)),
        ("5.5.5-10.11.19-MariaDB-0+deb12u1-log", "mariadb", (10, 11, 19)),
        ("5.5.5-10.4.34-MariaDB", "mariadb", (10, 4, 34)),
        ("11.4.3-MariaDB", "mariadb", (11, 4, 3)),
    ],
)
def test_parse(raw, flavor, parts):
    v = ServerVersion.parse(raw)
    assert (v.flavor, v.major, v.minor, v.patch) == (flavor, *parts)
    assert v.raw == raw
    assert v.is_mariadb == (flavor == "mariadb")
    assert v.gtid_flavor == flavor


def test_garbage_is_rejected():
    with pytest.raises(ValueError):
        ServerVersion.parse("not a version")


@pytest.mark.parametrize(
    "raw, new_statement",
    [
        ("5.7.44-log", False),
        ("8.0.36", False),
        ("8.1.0", False),
        ("8.2.0", True),
        ("8.4.2", True),
        ("9.0.1", True),
        ("10.11.19-MariaDB", False),
        ("11.4.3-MariaDB", False),
    ],
)
def test_binlog_status_statement(raw, new_statement):
    v = ServerVersion.parse(raw)
    assert v.supports_show_binary_log_status is new_statement
    assert v.binlog_status_sql == ("SHOW BINARY LOG STATUS" if new_statement else "SHOW MASTER STATUS")


@pytest.mark.parametrize(
    "raw, supported, reason_part",
    [
        ("5.6.51", False, "MySQL 5.7 or later"),
        ("5.7.44-log", True, None),
        ("8.0.36", True, None),
        ("8.4.2", True, None),
        ("10.1.48-MariaDB", False, "too old"),
        ("10.2.44-MariaDB", False, "binlog_row_metadata"),
        ("10.4.34-MariaDB", False, "column names"),
        ("10.5.0-MariaDB", True, None),
        ("10.11.19-MariaDB-0+deb12u1-log", True, None),
    ],
)
def test_supported_versions(raw, supported, reason_part):
    v = ServerVersion.parse(raw)
    assert v.is_supported is supported
    reason = v.unsupported_reason()
    if supported:
        assert reason is None
    else:
        assert reason_part in reason


def test_privilege_naming_and_metadata_capabilities():
    assert ServerVersion.parse("10.5.2-MariaDB").has_binlog_monitor_privilege
    assert not ServerVersion.parse("10.4.2-MariaDB").has_binlog_monitor_privilege
    assert not ServerVersion.parse("8.4.2").has_binlog_monitor_privilege
    assert ServerVersion.parse("8.0.14").has_binlog_row_metadata
    assert not ServerVersion.parse("8.0.13").has_binlog_row_metadata
    assert not ServerVersion.parse("5.7.44").has_binlog_row_metadata


def test_dict_round_trip():
    v = ServerVersion.parse("5.5.5-10.11.19-MariaDB-log")
    assert ServerVersion.from_dict(v.to_dict()) == v
    assert str(v) == "MariaDB 10.11.19"
