"""``python -m airflow_provider_mysqlcdc check-connection``: the connection's Test from a shell.

Airflow 3 disables connection testing by default; the docs send users to this command instead,
so it must answer for a connection given as a ``mysql-cdc://`` URI in the environment, name a
missing connection with its fix, and exit 0 only when the server is ready.
"""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.__main__ import main
from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook


def test_a_server_that_is_not_there_fails_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # port 1 on localhost: refused at once, no timeout to wait for
    monkeypatch.setenv(
        "AIRFLOW_CONN_CDC_DOCS_CHECK", "mysql-cdc://cdc:change-me@127.0.0.1:1/shop?server_id_range=5400-5499"
    )
    assert main(["check-connection", "cdc_docs_check"]) == 1
    err = capsys.readouterr().err
    assert "cdc_docs_check: FAILED: nothing accepts connections at 127.0.0.1:1" in err and "Fix:" in err
    assert "change-me" not in err


def test_a_missing_connection_is_named_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-connection", "no_such_connection_here"]) == 1
    err = capsys.readouterr().err
    assert "found no connection 'no_such_connection_here'" in err and "AIRFLOW_CONN_NO_SUCH_CONNECTION_HERE" in err


def test_a_ready_server_exits_0(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(MySqlCdcHook, "test_connection", lambda self: (True, "11.4.2-MariaDB is ready for CDC"))
    assert main(["check-connection"]) == 0
    assert "mysql_cdc_default: ok: 11.4.2-MariaDB is ready for CDC" in capsys.readouterr().out
