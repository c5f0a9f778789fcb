"""Sink table maintenance as a task: compaction and snapshot expiry of a pipeline's Iceberg tables.

The watchdog DAG runs it after the stream's health check; ``python -m airflow_provider_mysqlcdc
maintain`` runs the same from a shell. The work itself is ``spark/sinks/iceberg/maintenance.py``;
this module finds the pipeline's sink tables and credentials from its state location.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Sequence

from airflow.sdk import BaseOperator

from ..cdc.coerce import as_list
from ..cdc.errors import ConfigError
from ..cdc.state import StateStore
from ..fail_fast import config_errors_fail_at_once

LAST_REL = "maintenance/last.json"


def _number(name: str, value: Any, kind: type, example: str) -> Any:
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: found {value!r}, need a number. Fix: give e.g. {example}.") from None


def maintain_pipeline(
    state_location: str,
    *,
    sink_password: str | None = None,
    storage: Any = None,
    tables: Sequence[str] | None = None,
    policy: Any = None,
) -> list[dict[str, Any]]:
    """Maintain every Iceberg table of the pipeline at ``state_location`` (or those of ``tables``,
    source ``db.table`` names); returns one report per sink table and records the run in
    ``maintenance/last.json``. Credentials (``sink_password`` for a PostgreSQL catalog, ``storage``
    for an S3 warehouse) are used in memory only."""
    from ..cdc.store.object_store import with_storage_options
    from ..cdc.store.pipeline_file import read_config
    from ..spark.sinks.iceberg.maintenance import MaintenancePolicy, maintain
    from ..spark.sinks.routed import RoutedSink, pipeline_sink

    state = StateStore(state_location)
    config = read_config(state)
    if config.sink.type != "iceberg":
        raise ConfigError(
            f"the pipeline at {state_location} writes a {config.sink.type} sink: table maintenance here is for "
            "Iceberg sinks (compaction and snapshot expiry). Fix: run it for an Iceberg pipeline; a Delta table is "
            "compacted with deltalake's DeltaTable.optimize.compact() and vacuum()."
        )
    plan = state.read_plan()
    if plan is None:
        raise ConfigError(f"no plan in {state_location}: nothing was loaded yet. Fix: trigger the pipeline DAG first.")
    options = dict(config.sink.options)
    if sink_password is not None:
        options["password"] = sink_password
    if storage is not None:
        options = with_storage_options(options, storage, config.sink.type)
    config = replace(config, sink=replace(config.sink, options=options))
    wanted = {t.lower() for t in tables or ()}
    schemas = [s for t, s in plan.schemas.items() if not wanted or str(t).lower() in wanted]
    if wanted and not schemas:
        raise ConfigError(
            f"tables {sorted(wanted)}: none is a table of the pipeline ({', '.join(sorted(map(str, plan.schemas)))}). "
            "Fix: name source tables as db.table, or leave tables out for all."
        )
    sink = pipeline_sink(config, list(plan.schemas.values()))
    inner = sink.inner if isinstance(sink, RoutedSink) else sink
    ids = list(
        dict.fromkeys(sink.view(s.table_id).sink_id if isinstance(sink, RoutedSink) else s.table_id for s in schemas)
    )
    policy = policy or MaintenancePolicy()
    reports = []
    try:
        for table_id in ids:
            reports.append(maintain(inner.open_table(table_id), policy).to_dict())  # type: ignore[attr-defined]
    finally:
        sink.close()
    state.write_json(LAST_REL, {"at": time.time(), "tables": reports})
    return reports


class MySqlCdcSinkMaintenanceOperator(BaseOperator):
    """Compacts the stream's small files and expires old snapshots of a pipeline's Iceberg tables.

    The stream commits once per micro-batch; each commit adds small files and a snapshot, and
    reads (and commits) slow down as they pile up. Per table: the partitions with at least
    ``min_files`` files below 3/4 of ``target_file_mb`` are rewritten as few files in one commit
    (the same rows: readers and the stream's exactly-once record are unaffected; a stream commit
    that lands first is kept and the compaction planned again); snapshots older than
    ``snapshot_max_age_s`` are expired, the newest ``retain_last`` always kept, and the files only
    expired snapshots read are deleted. Safe beside a running stream and a batch read again.

    :param state_location: the pipeline's state location. (templated)
    :param sink_conn_id: the connection whose password a PostgreSQL catalog logs in with (default:
        the one the stream was launched with). (templated)
    :param aws_conn_id: the ``aws`` connection of a warehouse or state location on S3. (templated)
    :param tables: only these source tables (``db.table``); default all. (templated)
    :param min_interval_s: skip while the last run is younger than this; 0 or None: every time; a
        negative value: never. (templated)
    :param target_file_mb: the size compaction writes files at (MiB). (templated)
    :param min_files: a partition is compacted once it has this many small files. (templated)
    :param snapshot_max_age_s: snapshots older than this are expired. (templated)
    :param retain_last: snapshots always kept, newest first. (templated)
    """

    template_fields: Sequence[str] = (
        "state_location",
        "sink_conn_id",
        "aws_conn_id",
        "tables",
        "min_interval_s",
        "target_file_mb",
        "min_files",
        "snapshot_max_age_s",
        "retain_last",
    )
    ui_color = "#e3f0f7"

    def __init__(
        self,
        *,
        state_location: str,
        sink_conn_id: str | None = None,
        aws_conn_id: str | None = None,
        tables: Sequence[str] | str | None = None,
        min_interval_s: float | str | None = None,
        target_file_mb: int | str = 128,
        min_files: int | str = 16,
        snapshot_max_age_s: float | str = 3600,
        retain_last: int | str = 10,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.state_location = state_location
        self.sink_conn_id = sink_conn_id
        self.aws_conn_id = aws_conn_id
        self.tables = tables
        self.min_interval_s = min_interval_s
        self.target_file_mb = target_file_mb
        self.min_files = min_files
        self.snapshot_max_age_s = snapshot_max_age_s
        self.retain_last = retain_last

    @config_errors_fail_at_once
    def execute(self, context: Any) -> list[dict[str, Any]]:
        from airflow.sdk import BaseHook

        from .._airflow_compat import AirflowSkipException
        from ..cdc.store.object_store import use_credentials
        from ..cdc.store.pipeline_file import read_config
        from ..hooks.object_storage import storage_credentials
        from ..hooks.stream import read_launch_record
        from ..spark.sinks.iceberg.maintenance import MaintenancePolicy

        policy = MaintenancePolicy(
            target_file_bytes=_number("target_file_mb", self.target_file_mb, int, "128") * 1024 * 1024,
            min_files=_number("min_files", self.min_files, int, "16"),
            snapshot_max_age_s=_number("snapshot_max_age_s", self.snapshot_max_age_s, float, "3600"),
            retain_last=_number("retain_last", self.retain_last, int, "10"),
        )
        storage = storage_credentials(self.aws_conn_id or None)
        use_credentials(storage)
        state = StateStore(self.state_location)
        kind = read_config(state).sink.type  # no settings there: its error names the fix
        if kind != "iceberg":
            raise AirflowSkipException(f"the pipeline writes a {kind} sink: nothing to maintain here (Iceberg only)")
        self._skip_unless_due(state, AirflowSkipException)
        sink_conn = self.sink_conn_id or (read_launch_record(state) or {}).get("sink_conn_id")
        password = (BaseHook.get_connection(sink_conn).password or "") if sink_conn else None
        reports = maintain_pipeline(
            self.state_location,
            sink_password=password,
            storage=storage,
            tables=as_list(self.tables, "tables") or None,
            policy=policy,
        )
        from ..spark.sinks.iceberg.maintenance import TableMaintenance

        for r in reports:
            self.log.info("%s", TableMaintenance(**r).line())
        return reports

    def _skip_unless_due(self, state: StateStore, skip: type[Exception]) -> None:
        if self.min_interval_s in (None, "", "None"):
            return
        interval = _number("min_interval_s", self.min_interval_s, float, "3600, 0 for every run or -1 for never")
        if interval < 0:
            raise skip("sink maintenance is switched off (min_interval_s < 0)")
        last = state.read_json(LAST_REL) if state.exists(LAST_REL) else None
        age = time.time() - float(last.get("at") or 0) if last else None
        if age is not None and age < interval:
            raise skip(f"the last sink maintenance ran {age:.0f} s ago (min_interval_s={interval:.0f})")
