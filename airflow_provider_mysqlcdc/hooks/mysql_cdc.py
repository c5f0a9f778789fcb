"""The ``mysql_cdc`` connection: where the source server is, as the engine's ``SourceConfig``.

A plain ``mysql`` connection (the MySQL provider's) works too: host, port, login, password
and schema mean the same, and its ``ssl`` extra (a dict with ca/cert/key) is honoured.
"""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk import BaseHook

from ..cdc.errors import CdcError, ConfigError
from ..cdc.source.config import ServerIdRange, SourceConfig


def _truthy(v: Any) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


class MySqlCdcHook(BaseHook):
    """Reads an Airflow connection into a ``SourceConfig`` (password included, never logged).

    :param mysql_cdc_conn_id: id of a ``mysql_cdc`` (or ``mysql``) connection.
    """

    conn_name_attr = "mysql_cdc_conn_id"
    default_conn_name = "mysql_cdc_default"
    conn_type = "mysql_cdc"
    hook_name = "MySQL CDC"

    def __init__(self, mysql_cdc_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mysql_cdc_conn_id = mysql_cdc_conn_id

    @staticmethod
    def _extra(extras: dict[str, Any], name: str, default: Any = None) -> Any:
        """A form field's value: new UIs store the bare name, older ones ``extra__<type>__<name>``."""
        for key in (name, f"extra__mysql_cdc__{name}"):
            v = extras.get(key)
            if v not in (None, ""):
                return v
        return default

    @classmethod
    def _ssl(cls, extras: dict[str, Any]) -> dict[str, Any] | None:
        ssl = extras.get("ssl")  # the MySQL provider's form: a dict or its JSON text
        if isinstance(ssl, str) and ssl.strip():
            try:
                ssl = json.loads(ssl)
            except ValueError:
                raise ConfigError(
                    'connection extra \'ssl\' is not JSON. Fix: {"ca": "/path/ca.pem"} or use the ssl_ca field.'
                ) from None
        out = dict(ssl) if isinstance(ssl, dict) else {}
        for field, key in (("ssl_ca", "ca"), ("ssl_cert", "cert"), ("ssl_key", "key")):
            v = cls._extra(extras, field)
            if v:
                out[key] = v
        mode = cls._extra(extras, "ssl_mode")
        if not out and mode in (None, "", "disabled"):
            return None
        verify = cls._extra(extras, "ssl_verify_identity")
        if verify is not None:
            out["check_hostname"] = _truthy(verify)
        if mode not in (None, ""):
            out["mode"] = str(mode).strip().lower()
        from ..cdc.source.connection import tls_mode

        if tls_mode(out) == "trust":
            import logging

            logging.getLogger(__name__).warning(
                "TLS to the source server does not verify its certificate (ssl_mode trust): whoever sits between "
                "the workers and the server can read everything. Fix: give the TLS CA file and set ssl_mode to "
                "verify-full."
            )
        return out

    def get_source_config(self) -> SourceConfig:
        conn = self.get_connection(self.mysql_cdc_conn_id)
        if not conn.host:
            raise ConfigError(
                f"connection {self.mysql_cdc_conn_id!r} has no host. Fix: set Host to the MySQL server's address."
            )
        extras = conn.extra_dejson or {}
        kw: dict[str, Any] = {
            "host": conn.host,
            "port": int(conn.port or 3306),
            "user": conn.login or "root",
            "password": conn.password or "",
            "server_id_range": ServerIdRange.parse(self._extra(extras, "server_id_range", "5400-5499")),
            "server_time_zone": self._extra(extras, "server_time_zone", "UTC"),
            "ssl": self._ssl(extras),
        }
        fetch = self._extra(extras, "jdbc_fetch_size")
        if fetch is not None:
            kw["jdbc_fetch_size"] = int(fetch)
        reader = self._extra(extras, "snapshot_reader")
        if reader:
            kw["snapshot_reader"] = str(reader)
        timeout = self._extra(extras, "connect_timeout")
        if timeout is not None:
            kw["connect_timeout"] = int(timeout)
        return SourceConfig(**kw)

    def default_database(self) -> str | None:
        """The connection's schema: qualifies table names given without a database."""
        return self.get_connection(self.mysql_cdc_conn_id).schema or None

    def get_conn(self) -> Any:
        """A pymysql connection (autocommit, utf8mb4, session time zone UTC)."""
        return self.get_source_config().connect()

    def test_connection(self) -> tuple[bool, str]:
        """The UI's Test button: log in and run every server check."""
        from ..cdc.source.validation import validate_server

        try:
            info = validate_server(self.get_source_config())
        except CdcError as e:
            return False, str(e)
        return True, f"{info.version} is ready for CDC (binlog at {info.offset})"
