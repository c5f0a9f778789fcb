"""The consistency check as a task: the sink against the source, failing with the batches to read again."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from airflow.sdk import BaseOperator

from ..cdc.coerce import as_list
from ..cdc.state import StateStore
from ..cdc.store.object_store import use_credentials, with_storage_options
from ..cdc.store.pipeline_file import read_config
from ..fail_fast import config_errors_fail_at_once, fail_fast
from ..hooks.mysql_cdc import MySqlCdcHook
from ..hooks.object_storage import storage_credentials
from ..hooks.stream import read_launch_record


class MySqlCdcConsistencyCheckOperator(BaseOperator):
    """Compares each captured table's rows in the sink with the source, at one binlog position.

    Per table and per batch range of the plan: the row count and an order-independent checksum
    of the identity key, in the source at the offset the stream last committed and in the sink
    at the same micro-batch, while the stream keeps running. The first check scans the source;
    later ones move the kept source sums forward with the binlog since the last check and scan
    ``rescan_ranges`` ranges of each table again (so every range is re-read from the source over
    a few runs), which is what makes the check cheap enough to schedule.

    The task fails (without retries: a difference does not fix itself) when a table differs,
    naming the batches whose ranges differ: clear those snapshot tasks in the pipeline DAG and
    the stream takes the re-read batches over. It returns the report (XCom) and keeps it in
    ``consistency/last.json`` of the state location, which the watchdog's health line shows.

    :param state_location: the pipeline's state location. (templated)
    :param mysql_cdc_conn_id: the source connection (default: the one the stream was launched with). (templated)
    :param sink_conn_id: the PostgreSQL sink's connection (default: as launched). (templated)
    :param tables: check only these tables (``db.table``); default every table of the plan. (templated)
    :param rescan_ranges: ranges of each table read again from the source per check. (templated)
    :param aws_conn_id: the ``aws`` connection of a state location or sink on object storage. (templated)
    :param pipeline_dag_id: named in the failure message (where to clear the batches).
    :param min_interval_s: skip the check while the last one is younger than this (a watchdog that
        runs every 5 minutes checks once an hour with 3600); None or 0: check every time; a negative
        value: never (the task is skipped). (templated)
    """

    template_fields: Sequence[str] = (
        "state_location",
        "mysql_cdc_conn_id",
        "sink_conn_id",
        "tables",
        "rescan_ranges",
        "aws_conn_id",
        "min_interval_s",
    )
    ui_color = "#fdf3d8"

    def __init__(
        self,
        *,
        state_location: str,
        mysql_cdc_conn_id: str | None = None,
        sink_conn_id: str | None = None,
        tables: Sequence[str] | str | None = None,
        rescan_ranges: int | str = 1,
        aws_conn_id: str | None = None,
        pipeline_dag_id: str | None = None,
        min_interval_s: float | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.min_interval_s = min_interval_s
        self.state_location = state_location
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.sink_conn_id = sink_conn_id
        self.tables = tables
        self.rescan_ranges = rescan_ranges
        self.aws_conn_id = aws_conn_id
        self.pipeline_dag_id = pipeline_dag_id

    @config_errors_fail_at_once
    def execute(self, context: Any) -> dict[str, Any]:
        from airflow.sdk import BaseHook

        from ..cdc.errors import ConfigError
        from ..spark.consistency import failure_message, run_check
        from ..spark.sinks.routed import pipeline_sink

        storage = storage_credentials(self.aws_conn_id or None)
        use_credentials(storage)
        state = StateStore(self.state_location)
        self._skip_unless_due(state)
        launched = read_launch_record(state) or {}
        source_conn = self.mysql_cdc_conn_id or launched.get("mysql_cdc_conn_id") or MySqlCdcHook.default_conn_name
        sink_conn = self.sink_conn_id or launched.get("sink_conn_id")
        source = MySqlCdcHook(source_conn).get_source_config()
        config = read_config(state, password=source.password)
        config = replace(config, source=config.source.following(source)[0])  # where the connection says
        options = dict(config.sink.options)
        if sink_conn:
            options["password"] = BaseHook.get_connection(sink_conn).password or ""
        if storage is not None:
            options = with_storage_options(options, storage, config.sink.type)
        config = replace(config, sink=replace(config.sink, options=options))
        plan = state.read_plan()
        if plan is None:
            raise ConfigError(
                f"no plan in {self.state_location}: nothing was loaded yet. Fix: trigger the pipeline DAG first."
            )
        try:
            rescan = int(self.rescan_ranges)
        except (TypeError, ValueError):
            raise ConfigError(
                f"rescan_ranges: found {self.rescan_ranges!r}, need a whole number >= 0. Fix: give "
                "e.g. 1 (one range of each table read again from the source per check)."
            ) from None
        sink = pipeline_sink(config, list(plan.schemas.values()))
        try:
            report = run_check(config, sink, tables=as_list(self.tables, "tables") or None, rescan_ranges=rescan)
        finally:
            sink.close()
        for line in report.summary().split("; "):
            self.log.info("%s", line)
        if not report.consistent:
            raise fail_fast(self.log, ConfigError(failure_message(report, self.pipeline_dag_id)))
        return report.to_dict()

    def _skip_unless_due(self, state: StateStore) -> None:
        import time

        from .._airflow_compat import AirflowSkipException
        from ..cdc.errors import ConfigError
        from ..spark.consistency import read_report

        if self.min_interval_s in (None, "", "None"):
            return
        try:
            interval = float(self.min_interval_s)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ConfigError(
                f"min_interval_s: found {self.min_interval_s!r}, need a number of seconds. Fix: give "
                "e.g. 3600, 0 to check every time, or -1 to switch the check off."
            ) from None
        if interval < 0:
            raise AirflowSkipException("the consistency check is switched off (min_interval_s < 0)")
        last = read_report(state)
        age = time.time() - float(last.get("checked_at") or 0) if last else None
        if last and age is not None and age < interval:
            raise AirflowSkipException(
                f"the last consistency check ran {age:.0f} s ago (min_interval_s={interval:.0f}): {last.get('summary')}"
            )
