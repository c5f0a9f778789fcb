"""Engine connections build a TLS context once per process and settings (no server needed:
pymysql builds the context in the constructor, before connecting)."""

from __future__ import annotations

import ssl

import pytest

from airflow_provider_mysqlcdc.cdc.source import connection
from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig


def _deferred(**kw) -> connection.Connection:
    return connection.connect(host="127.0.0.1", port=1, user="u", defer_connect=True, **kw)


def test_tls_context_is_shared_between_connections_with_the_same_settings():
    a, b = _deferred(), _deferred()
    assert isinstance(a.ctx, ssl.SSLContext) and a.ctx is b.ctx  # PREFERRED TLS: built once
    assert a._ssl_required is False  # and still only preferred
    c = _deferred(ssl={"check_hostname": False})
    assert c.ctx is not a.ctx and c._ssl_required is True and c.ctx.check_hostname is False
    assert _deferred(ssl={"check_hostname": False}).ctx is c.ctx
    assert getattr(_deferred(ssl_disabled=True), "ctx", None) is None


def test_tls_context_is_rebuilt_after_its_ttl(monkeypatch: pytest.MonkeyPatch):
    first = _deferred().ctx
    monkeypatch.setattr(connection, "TLS_CONTEXT_TTL_S", 0.0)
    assert _deferred().ctx is not first


def test_source_config_connects_through_the_engine_class(monkeypatch: pytest.MonkeyPatch):
    made = []
    monkeypatch.setattr(connection, "Connection", lambda **kw: made.append(kw) or "conn")
    cfg = SourceConfig(host="db", port=3306, user="cdc", password="pw")
    assert cfg.connect() == "conn" and made[0]["host"] == "db" and made[0]["init_command"]


def test_a_server_that_goes_silent_is_a_lost_connection_not_a_hang(monkeypatch: pytest.MonkeyPatch):
    """An address that accepts and then says nothing (a failed-over server behind a proxy that
    kept the socket, packets dropped) ends a binlog session after the read timeout, as a
    connection loss the readers retry; without one pymysql waits forever."""
    import socket
    import threading
    import time

    from airflow_provider_mysqlcdc.cdc.source import config
    from airflow_provider_mysqlcdc.cdc.source.connection import is_connection_loss

    assert config.binlog_read_timeout() == config.BINLOG_READ_TIMEOUT_S
    assert config.binlog_read_timeout(30.0) == 120  # four heartbeats when that is longer
    assert SourceConfig(host="h", user="u").connect_kwargs()["read_timeout"] == config.SESSION_READ_TIMEOUT_S
    monkeypatch.setattr(config, "BINLOG_READ_TIMEOUT_S", 1)
    silent = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(silent.accept()[0]), daemon=True).start()
    src = SourceConfig(host="127.0.0.1", port=silent.getsockname()[1], user="u", connect_timeout=5)
    started = time.monotonic()
    with pytest.raises(Exception) as e:
        src.connect_binlog()
    assert time.monotonic() - started < 10
    assert is_connection_loss(e.value), repr(e.value)
    silent.close()
