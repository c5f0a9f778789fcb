"""Validate the server before anything else runs."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.sdk import BaseOperator

from ..cdc.discovery import TablePattern
from ..cdc.model import TableId
from ..cdc.validation import validate_server
from ..hooks.mysql_cdc import MySqlCdcHook
from ._pipeline import qualify_tables


class MySqlCdcValidateOperator(BaseOperator):
    """Checks that the server can be captured: version, binlog settings, privileges, time zone.

    Fails the task with the engine's message, which lists every problem at once with the
    setting, what was found, what is needed and how to fix it. Returns the server version
    and current binlog offset (XCom).

    :param mysql_cdc_conn_id: the ``mysql_cdc`` (or ``mysql``) connection of the source.
    :param tables: the captured tables (``db.table`` or regular expressions); their databases
        are checked for the SELECT privilege. (templated)
    """

    template_fields: Sequence[str] = ("mysql_cdc_conn_id", "tables")
    ui_color = "#e8f4fa"

    def __init__(self, *, mysql_cdc_conn_id: str = MySqlCdcHook.default_conn_name,
                 tables: Sequence[str] | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.tables = tables

    def execute(self, context: Any) -> dict[str, Any]:
        hook = MySqlCdcHook(self.mysql_cdc_conn_id)
        source = hook.get_source_config()
        include = qualify_tables(self.tables or [], hook.default_database()) if self.tables else []
        # Exact names only: a regex's database part is not a database name.
        databases = sorted({TableId.parse(t).database for t in include if TablePattern(t).exact})
        info = validate_server(source, databases)
        self.log.info("%s at %s:%s is ready for CDC; binlog at %s", info.version, source.host, source.port,
                      info.offset)
        return {"version": str(info.version), "offset": info.offset.to_dict(),
                "binlog_format": info.variables.get("binlog_format"),
                "binlog_row_image": info.variables.get("binlog_row_image")}
