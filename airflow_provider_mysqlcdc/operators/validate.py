"""Validate the server and the table list before anything else runs."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Mapping, Sequence

from airflow.sdk import BaseOperator

from ..cdc.coerce import as_list, as_mapping
from ..cdc.errors import ConfigError, SourceUnreachableError
from ..cdc.model import TableSchema
from ..cdc.source.discovery import discover_tables
from ..cdc.source.old_temporals import old_temporal_problems, show_old_temporals
from ..cdc.source.table_patterns import TablePattern, qualify_all
from ..cdc.source.validation import ServerValidationError, validate_server
from ..fail_fast import config_errors_fail_at_once
from ..hooks.mysql_cdc import MySqlCdcHook
from ..hooks.spark_job import start_local_connect_early
from ..spark.runtime.install_check import check_pyspark_install


class MySqlCdcValidateOperator(BaseOperator):
    """Checks that the server can be captured and that the table list means real tables.

    Server: version, binlog settings, privileges, time zone. Tables: every entry of
    ``tables`` must match at least one base table the connection's user can see, and every
    matched table needs a key to split on (its primary key, or ``chunk_key_columns``).
    All problems are reported at once, each with what to change, and the task fails without
    retries (a misconfiguration does not fix itself). On success it logs each matched table
    with its estimated rows and split key, and returns them with the server version and the
    binlog offset (XCom). What works but should be fixed before a load -- temporal columns
    still in the pre-MySQL-5.6 format, which the stream can only decode slowly -- is logged
    as a warning and returned under ``warnings``.

    :param mysql_cdc_conn_id: the ``mysql_cdc`` (or ``mysql``) connection of the source. (templated)
    :param tables: the captured tables (``db.table``, bare names, `` `quoted`.`names` `` or
        regular expressions over ``db.table``). (templated)
    :param exclude: tables to leave out (same forms). (templated)
    :param chunk_key_columns: ``{"db.table": "column"}`` for tables without a primary key. (templated)
    :param spark_runtime: the snapshot tasks' runtime. ``connect`` without ``connect_conn_id``: this
        task starts the local Spark Connect server they will share, without waiting for it (its
        JVM start is the first batch's critical path), and stops it again if validation fails.
        None or ``submit``: nothing is started. (templated)
    :param connect_conn_id: the snapshot tasks' Spark Connect connection (a remote server: nothing
        to start here). (templated)
    :param spark_conn_id: the Spark connection whose master the local server runs (the snapshot
        tasks' ``conn_id``).
    :param connect_idle_s: the local server stops after this many seconds without a snapshot task.
    :param sink_type: the pipeline's sink type and ``sink_options``: with them the server started
        here is the one the snapshot tasks use (for a Delta sink fed by the Arrow reader, its JVM
        runs without the optimizing JIT); without them the snapshot tasks may start another.
        (templated)
    :param sink_options: see ``sink_type``. (templated)
    """

    template_fields: Sequence[str] = (
        "mysql_cdc_conn_id",
        "tables",
        "exclude",
        "chunk_key_columns",
        "spark_runtime",
        "connect_conn_id",
        "sink_type",
        "sink_options",
    )
    ui_color = "#e8f4fa"

    def __init__(
        self,
        *,
        mysql_cdc_conn_id: str = MySqlCdcHook.default_conn_name,
        tables: Sequence[str] | str | None = None,
        exclude: Sequence[str] | str | None = None,
        chunk_key_columns: Mapping[str, str] | str | None = None,
        spark_runtime: str | None = None,
        connect_conn_id: str | None = None,
        spark_conn_id: str = "spark_default",
        connect_idle_s: float = 300.0,
        sink_type: str | None = None,
        sink_options: Mapping[str, Any] | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.sink_type = sink_type
        self.sink_options = sink_options
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.tables = tables
        self.exclude = exclude
        self.chunk_key_columns = chunk_key_columns
        self.spark_runtime = spark_runtime
        self.connect_conn_id = connect_conn_id
        self.spark_conn_id = spark_conn_id
        self.connect_idle_s = connect_idle_s

    @config_errors_fail_at_once
    def execute(self, context: Any) -> dict[str, Any]:
        check_pyspark_install()  # before anything runs a Spark job on this worker
        started_before = time.time()
        server = start_local_connect_early(
            self.log,
            self.spark_runtime,
            self.connect_conn_id,
            self.spark_conn_id,
            float(self.connect_idle_s),
            self._light_jit(),
        )
        try:
            return self._validate()
        except Exception:
            if server is not None and server.started_at >= started_before:  # ours, and nothing will use it
                from ..spark.runtime.connect_server import stop_server

                self.log.info("validation failed: stopping the Spark Connect server this task started")
                stop_server(server)
            raise

    def _light_jit(self) -> bool:
        """Whether the snapshots' rows bypass the server's JVM (as plan and snapshot decide it);
        False when that cannot be told here (the tasks after report what is wrong)."""
        if not self.sink_type:
            return False
        try:
            from ..spark.snapshot.arrow_read import reads_bypass_jvm

            options = as_mapping(self.sink_options, "sink_options") if self.sink_options else {}
            return reads_bypass_jvm(
                MySqlCdcHook(self.mysql_cdc_conn_id).get_source_config(), str(self.sink_type), options
            )
        except Exception:  # validation reports a bad connection or option itself
            return False

    def _validate(self) -> dict[str, Any]:
        hook = MySqlCdcHook(self.mysql_cdc_conn_id)
        source = hook.get_source_config()
        include = qualify_all(as_list(self.tables, "tables"), hook.default_database())
        exclude = qualify_all(as_list(self.exclude, "exclude"), hook.default_database())
        exact_dbs = sorted({p.table_id.database for p in map(TablePattern, include) if p.table_id is not None})
        # Server and table list are both checked before failing, so one run names every problem.
        problems: list[str] = []
        info = None
        try:
            info = validate_server(source, exact_dbs)
        except ServerValidationError as e:
            problems.append(str(e))
        schemas: list[TableSchema] = []
        if include:
            try:
                with contextlib.closing(source.connect()) as conn:
                    show_old_temporals(conn)
                    schemas = discover_tables(
                        conn, include, exclude, as_mapping(self.chunk_key_columns, "chunk_key_columns")
                    )
            except ConfigError as e:
                if not problems or not isinstance(e, SourceUnreachableError):
                    problems.append(str(e))
        if problems:
            raise ConfigError("\n".join(problems))
        assert info is not None
        self.log.info("%s at %s:%s is ready for CDC; binlog at %s", info.version, source.host, source.port, info.offset)
        if schemas:
            self.log.info("%d table(s) to capture:", len(schemas))
            for line in table_lines(schemas):
                self.log.info("  %s", line)
        warnings = old_temporal_problems(schemas)
        for w in warnings:
            self.log.warning("%s", w)
        return {
            "version": str(info.version),
            "offset": info.offset.to_dict(),
            "binlog_format": info.variables.get("binlog_format"),
            "binlog_row_image": info.variables.get("binlog_row_image"),
            "tables": [
                {"table": str(s.table_id), "estimated_rows": s.approx_rows, "chunk_key": list(s.chunk_key)}
                for s in schemas
            ],
            "warnings": warnings,
        }


def table_lines(schemas: Sequence[TableSchema]) -> list[str]:
    """An aligned table for the task log: name, estimated rows, split key."""
    rows = [
        (
            str(s.table_id),
            f"~{s.approx_rows:,} rows",
            "split on " + ", ".join(s.chunk_key) + ("" if s.chunk_key == s.primary_key else " (chunk_key_columns)"),
        )
        for s in schemas
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    return [f"{a:<{w0}}  {b:>{w1}}  {c}" for a, b, c in rows]
