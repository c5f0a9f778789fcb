"""Plan the snapshot: chunks, batches, and the pipeline settings every later step reads."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from airflow.sdk import BaseHook, BaseOperator

from ..cdc.batching import BatchSizing, batch_label, short_count
from ..cdc.coerce import as_list, as_mapping, epoch_seconds, truthy, whole_number
from ..cdc.errors import ConfigError
from ..cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from ..cdc.plan import Plan
from ..cdc.sinks import (
    DEFAULT_SINK,
    SinkKind,
    accepts_connection,
    connection_sinks,
    needs_root,
    sink_kind,
    takes_connection,
)
from ..cdc.snapshot.planning import PlanChange, batch_actions, build_plan, check_reread_entries, reconcile_plan
from ..cdc.source.config import SplitOptions
from ..cdc.source.probes import check_startup_offset, probe_writable
from ..cdc.source.table_patterns import qualify_all
from ..cdc.state import StateStore
from ..cdc.store.object_store import refuse_secret_options, use_credentials
from ..cdc.store.pipeline_file import CONFIG_NAME, read_config, write_config
from ..cdc.transform.table_views import Rules, plan_with_primary_keys
from ..fail_fast import config_errors_fail_at_once
from ..hooks.mysql_cdc import MySqlCdcHook
from ..hooks.object_storage import storage_credentials
from ..hooks.spark_job import start_local_connect_early


def _max_map_length() -> int:
    try:
        from airflow.sdk.configuration import conf

        return conf.getint("core", "max_map_length", fallback=1024)
    except Exception:  # pragma: no cover - configuration unavailable outside Airflow
        return 1024


def sink_config(sink_type: str, sink_options: Mapping[str, Any] | str | None, sink_conn_id: str | None) -> SinkConfig:
    """The sink's settings without any password: a PostgreSQL sink's password (or an Iceberg
    catalog's on PostgreSQL) comes from its Airflow connection at run time ($PGPASSWORD, or in
    memory), never from the stored settings."""
    options = as_mapping(sink_options, "sink_options")
    if "password" in options or "password_file" in options:
        raise ConfigError(
            "sink_options must not hold a password. Fix: put the PostgreSQL credentials in an "
            "Airflow connection and pass its id as sink_conn_id."
        )
    if sink_conn_id and not accepts_connection(sink_type):
        raise ConfigError(
            f"sink_conn_id is for the postgres sink or an iceberg sink's catalog; the sink is {sink_type!r}. "
            f"Fix: remove sink_conn_id or set sink_type to one that takes a connection ({connection_sinks()})."
        )
    conn = sink_connection(sink_conn_id) if sink_conn_id else None
    if conn is not None and takes_connection(sink_type):
        options["dsn"] = {
            k: v
            for k, v in {"host": conn.host, "port": conn.port, "dbname": conn.schema, "user": conn.login}.items()
            if v not in (None, "")
        }
    kind = sink_kind(sink_type)
    if kind is not None and kind.catalog_connection and not sink_conn_id:
        _catalog_needs_connection(kind, options)
    config = SinkConfig(sink_type, options)
    if takes_connection(sink_type) and "dsn" not in options:
        raise ConfigError(
            "the postgres sink needs a database. Fix: set sink_conn_id to a postgres connection "
            "(or sink_options={'dsn': 'host=... dbname=... user=...'})."
        )
    if needs_root(sink_type) and not options.get("root"):
        raise ConfigError(
            f"the {sink_type} sink needs a root: where its tables are written. Fix: set "
            f"sink_options={{'root': '<directory or URL>'}}."
        )
    from ..spark.sinks.factory import build_sink

    build_sink(config).close()  # fails on unknown or missing options, before any data is written
    return config


def sink_connection(conn_id: str) -> Any:
    """The ``sink_conn_id`` connection, or a ConfigError that says how to create it."""
    try:
        return BaseHook.get_connection(conn_id)
    except Exception as e:  # the SDK raises its own "not found" type, which differs across releases
        raise ConfigError(
            f"sink_conn_id: found {conn_id!r}, need an existing Airflow connection ({type(e).__name__}). "
            "Fix: create it (Admin > Connections, type postgres: host, port, database, login, password) "
            "or correct sink_conn_id."
        ) from None


def _catalog_needs_connection(kind: SinkKind, options: Mapping[str, Any]) -> None:
    """A catalog on a database that takes a password (an Iceberg SQL catalog on PostgreSQL) takes it
    from ``sink_conn_id``: without one, every job would fail to log in to it, after the snapshot's
    first Spark job started. The sink's class says which options name such a catalog."""
    from ..spark.sinks.factory import sink_class

    sink_type = kind.name
    if sink_class(kind).catalog_takes_password(options):
        raise ConfigError(
            f"sink_conn_id: found none for the {sink_type} sink's catalog (sink_options.catalog.uri: a database "
            "that takes a password), need the Airflow connection whose password is the catalog database's. "
            "Fix: create a postgres connection with that password and set sink_conn_id to its id."
        )


class MySqlCdcPlanOperator(BaseOperator):
    """Discovers the captured tables, splits them into chunks and groups the chunks into batches.

    The plan and the pipeline's settings (``pipeline.json``, no passwords) are kept in
    ``state_location``. Rerunning the task reuses a stored plan made from the same tables and
    chunk settings, so clearing a DAG run neither plans again nor redoes finished batches;
    ``reset=True`` stops the stream, forgets plan, results and checkpoint, and plans afresh.

    Returns one ``{"batch_id", "batch_label", "estimated_rows"}`` per batch, for ``expand_kwargs`` of
    ``MySqlCdcSnapshotOperator``. With a startup mode other than ``initial`` there is no
    snapshot and the list is empty.

    :param mysql_cdc_conn_id: the source's ``mysql_cdc`` (or ``mysql``) connection.
    :param tables: captured tables, ``db.table`` or regular expressions over ``db.table``;
        names without a database take the connection's schema. (templated)
    :param exclude: tables to leave out (same forms). (templated)
    :param state_location: directory or fsspec URL for plan, results, checkpoint; every Spark
        node must reach it. (templated)
    :param pipeline_name: names Spark applications and files. (templated)
    :param sink_type: ``delta`` (default), ``postgres``, ``changelog``, ``iceberg`` or ``console``. (templated)
    :param sink_options: the sink's options, e.g. ``{"root": "s3://lake/cdc"}`` for Delta. (templated)
    :param sink_conn_id: a ``postgres`` connection for the PostgreSQL sink, or the one whose password an
        Iceberg sink's PostgreSQL catalog (``sink_options.catalog``) takes. (templated)
    :param chunk_size: rows per chunk (Flink CDC's default 8096). (templated)
    :param chunk_key_columns: ``{"db.table": "column"}`` for tables without a primary key. (templated)
    :param rows_per_batch: target rows per Spark job; each job costs seconds to start, so
        keep it in the millions. (templated)
    :param parallelism: snapshot tasks that run at once; the batch count is a multiple of it. (templated)
    :param max_batches: upper bound on batches (default: Airflow's ``max_map_length``).
    :param startup_mode: ``initial`` (snapshot, then binlog), ``snapshot``, ``latest-offset``,
        ``earliest-offset``, ``specific-offset`` or ``timestamp``. (templated)
    :param startup_offset: for ``specific-offset``: ``{"file", "position"}`` or ``{"gtid"}``. (templated)
    :param startup_timestamp: for ``timestamp``: epoch seconds or an ISO 8601 date-time (UTC if
        it has no zone). (templated)
    :param stream_options: ``max_events_per_batch``, ``heartbeat_s``, ``trigger_interval_s``,
        ``catchup_parallelism``, ``catchup_min_bytes``, ``catchup_batch_bytes``, ``handoff_piece_rows``,
        ``takeover_rows_per_batch``, ``allow_gtid_gaps``. (templated)
    :param schema_change_behavior: what DDL on a captured table does to the sink: ``lenient``
        (default), ``evolve``, ``try_evolve``, ``ignore`` or ``exception``. (templated)
    :param zero_dates: what a zero or invalid date ('0000-00-00') becomes: ``null`` (default), or
        ``text``: every DATE, DATETIME and TIMESTAMP column is captured as text, literal kept. (templated)
    :param spark_runtime: the snapshot tasks' runtime. ``connect`` without ``connect_conn_id``: this
        task starts the local Spark Connect server they will share (without waiting for it), so its
        JVM is up when the first batch asks; None or ``submit``: nothing is started. (templated)
    :param connect_conn_id: the snapshot tasks' Spark Connect connection (a remote server: nothing
        to start here). (templated)
    :param spark_conn_id: the Spark connection whose master the local server runs (the snapshot
        tasks' ``conn_id``).
    :param connect_idle_s: how long the local Spark Connect server this task may start waits for the next
        snapshot task before it stops by itself (seconds).
    :param aws_conn_id: an ``aws`` connection whose credentials (and endpoint) reach the state location
        and the sink root on object storage (``s3://``); read when the task runs, never written to the
        state location. None: the workers' own credentials (environment, instance role). (templated)
    :param reset: forget the stored plan, batch results and stream checkpoint first. (templated)
    :param route: a pipeline file's ``route`` rules (``source_table`` pattern -> ``sink_table``; tables
        merged into one sink table are keyed by ``_source_table`` and their row identity). (templated)
    :param transform: a pipeline file's ``transform`` rules (``source_table``, ``projection``, ``filter``,
        ``primary_keys``, ``partition_keys``), applied by the snapshot and the stream alike; checked
        against the tables here, before anything is written. (templated)
    :param reread_batches: the snapshot tasks' ``reread_batches`` (batch ids, captured tables, ``*``):
        checked here against the plan (an unknown name fails the run before any batch runs), and
        the batches it names are labelled ``read again`` in the log, the map index names and the
        ``reload`` XCom. (templated)
    """

    template_fields: Sequence[str] = (
        "mysql_cdc_conn_id",
        "tables",
        "exclude",
        "state_location",
        "pipeline_name",
        "sink_type",
        "sink_options",
        "sink_conn_id",
        "chunk_size",
        "chunk_key_columns",
        "rows_per_batch",
        "parallelism",
        "startup_mode",
        "startup_offset",
        "startup_timestamp",
        "stream_options",
        "schema_change_behavior",
        "reset",
        "reread_batches",
        "zero_dates",
        "spark_runtime",
        "connect_conn_id",
        "aws_conn_id",
        "route",
        "transform",
    )
    ui_color = "#e8f4fa"

    def __init__(
        self,
        *,
        tables: Sequence[str] | str,
        state_location: str,
        mysql_cdc_conn_id: str = MySqlCdcHook.default_conn_name,
        exclude: Sequence[str] | str = (),
        pipeline_name: str | None = None,
        sink_type: str = DEFAULT_SINK,
        sink_options: Mapping[str, Any] | str | None = None,
        sink_conn_id: str | None = None,
        chunk_size: int | str = 8096,
        chunk_key_columns: Mapping[str, str] | str | None = None,
        rows_per_batch: int | str = 5_000_000,
        parallelism: int | str = 4,
        max_batches: int | None = None,
        startup_mode: str = "initial",
        startup_offset: Mapping[str, Any] | str | None = None,
        startup_timestamp: float | str | None = None,
        stream_options: Mapping[str, Any] | str | None = None,
        schema_change_behavior: str = "lenient",
        reset: bool | str = False,
        reread_batches: Sequence[str] | str | None = None,
        zero_dates: str = "null",
        spark_runtime: str | None = None,
        connect_conn_id: str | None = None,
        spark_conn_id: str = "spark_default",
        connect_idle_s: float = 300.0,
        aws_conn_id: str | None = None,
        route: Sequence[Mapping[str, Any]] | str | None = None,
        transform: Sequence[Mapping[str, Any]] | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.aws_conn_id = aws_conn_id
        self.route = route
        self.transform = transform
        self.zero_dates = zero_dates
        self.spark_runtime = spark_runtime
        self.connect_conn_id = connect_conn_id
        self.spark_conn_id = spark_conn_id
        self.connect_idle_s = connect_idle_s
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.tables = tables
        self.exclude = exclude
        self.state_location = state_location
        self.pipeline_name = pipeline_name
        self.sink_type = sink_type
        self.sink_options = sink_options
        self.sink_conn_id = sink_conn_id
        self.chunk_size = chunk_size
        self.chunk_key_columns = chunk_key_columns
        self.rows_per_batch = rows_per_batch
        self.parallelism = parallelism
        self.max_batches = max_batches
        self.startup_mode = startup_mode
        self.startup_offset = startup_offset
        self.startup_timestamp = startup_timestamp
        self.stream_options = stream_options
        self.schema_change_behavior = schema_change_behavior
        self.reset = reset
        self.reread_batches = reread_batches

    # --- settings ------------------------------------------------------------------------

    def pipeline_config(self, hook: MySqlCdcHook) -> PipelineConfig:
        source = dataclasses.replace(hook.get_source_config(), zero_dates=str(self.zero_dates or "null"))
        include = qualify_all(as_list(self.tables, "tables"), hook.default_database())
        exclude = qualify_all(as_list(self.exclude, "exclude"), hook.default_database())
        split = SplitOptions(
            chunk_size=whole_number(self.chunk_size, "chunk_size", 8096),
            chunk_key_columns=as_mapping(self.chunk_key_columns, "chunk_key_columns"),
        )
        offset = as_mapping(self.startup_offset, "startup_offset") or None
        return PipelineConfig(
            name=self.pipeline_name or self.dag_id,
            source=source,
            include=tuple(include),
            exclude=tuple(exclude),
            state_location=str(self.state_location),
            sink=sink_config(str(self.sink_type), self.sink_options, self.sink_conn_id or None),
            split=split,
            startup_mode=str(self.startup_mode),
            startup_offset=offset,
            startup_timestamp=epoch_seconds(self.startup_timestamp, "startup_timestamp"),
            stream=StreamOptions.from_mapping(as_mapping(self.stream_options, "stream_options")),
            schema_change_behavior=str(self.schema_change_behavior or "lenient"),
            rules=Rules.from_values(self.route, self.transform),
        )

    def _start_spark_connect(self, config: PipelineConfig) -> None:
        """Usually validate started it already; this covers a plan run on its own (a cleared plan
        task, a DAG of the user's without the validate task)."""
        from ..spark.snapshot.arrow_read import reads_bypass_jvm

        start_local_connect_early(
            self.log,
            self.spark_runtime,
            self.connect_conn_id,
            self.spark_conn_id,
            float(self.connect_idle_s),
            reads_bypass_jvm(config.source, config.sink.type, config.sink.options),
        )

    def _probe(self, config: PipelineConfig) -> None:
        """Storage and start position are checked here, before any Spark job, so a location the
        jobs could not write fails now with its fix (and leaves nothing behind)."""
        probe_writable(config.state_location, "state_location")
        options = dict(config.sink.options)
        if needs_root(config.sink.type) and options.get("root"):
            probe_writable(
                str(options["root"]),
                f"the {config.sink.type} sink's root (sink_options.root)",
                options.get("storage_options"),
            )
        if takes_connection(config.sink.type) and self.sink_conn_id and "dsn" in options:
            self._probe_postgres(options["dsn"], BaseHook.get_connection(self.sink_conn_id).password)
        if config.startup_mode == "specific-offset":
            import contextlib

            from ..cdc.source.server import list_binlogs

            with contextlib.closing(config.source.connect()) as conn:
                files = [name for name, _size in list_binlogs(conn)]
            check_startup_offset(config.startup_offset, files)

    def _probe_postgres(self, dsn: Any, password: str | None) -> None:
        """Log in to the PostgreSQL sink with the connection's credentials, as the jobs will."""
        from ..spark.sinks.postgres.connection import PgConnection

        try:
            conn = PgConnection.resolve(dsn, password=password or None).connect(autocommit=True)
            conn.close()
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ConfigError(
                f"cannot connect to the PostgreSQL sink of connection {self.sink_conn_id!r}: {first}. "
                "Fix: check that connection's host, port, database (schema), login and password, "
                "then trigger again."
            ) from None

    def sizing(self) -> BatchSizing:
        return BatchSizing(
            rows_per_batch=whole_number(self.rows_per_batch, "rows_per_batch", 5_000_000),
            parallelism=whole_number(self.parallelism, "parallelism", 4),
            max_batches=whole_number(self.max_batches or _max_map_length(), "max_batches", 1024),
        )

    # --- run -----------------------------------------------------------------------------

    def _forget(self, state: StateStore) -> None:
        from ..spark.runtime.stream_launcher import stop_stream

        if stop_stream(state, "reset: the pipeline loads again"):
            self.log.info("reset: stopped the running stream")
        self._forget_sink_tables(state)
        for rel in ("plan.json", "batches", "batch_owners", "finished_batches.json", "stream", "handoffs", "staging"):
            state.delete(rel)
        self.log.info("reset: forgot plan, batch results and stream checkpoint in %s", state.location)

    def _forget_sink_tables(self, state: StateStore) -> None:
        """The sink tables the previous load wrote go too: their rows, and the bookkeeping by
        which the sink skips micro-batches it applied (a new stream numbers them from 0 again,
        so kept bookkeeping would skip the new stream's first micro-batches)."""
        from ..hooks.stream import read_launch_record
        from ..spark.sinks.factory import build_sink

        plan = state.read_plan()
        if plan is None or not state.exists(CONFIG_NAME):
            return
        old = read_config(state, password="")
        options = dict(old.sink.options)
        if accepts_connection(old.sink.type):
            conn_id = self.sink_conn_id or (read_launch_record(state) or {}).get("sink_conn_id")
            if conn_id:
                options["password"] = sink_connection(conn_id).password or ""
        sink = build_sink(SinkConfig(old.sink.type, options))
        try:
            from ..cdc.transform.table_views import sink_table_of

            removed = sink.forget_tables(list(dict.fromkeys(sink_table_of(old.rules, t) for t in plan.schemas)))
        finally:
            sink.close()
        self.log.info(
            "reset: removed the %s sink's tables of the previous load: %s",
            old.sink.type,
            ", ".join(removed) or "none existed",
        )

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The planned source tables (the plan reads their sizes and keys; it writes no sink table)."""
        from ..lineage import pipeline_lineage

        return pipeline_lineage(str(self.state_location), self.aws_conn_id, outputs=False)

    @config_errors_fail_at_once
    def execute(self, context: Any) -> list[dict[str, Any]]:
        hook = MySqlCdcHook(self.mysql_cdc_conn_id)
        config = self.pipeline_config(hook)
        refuse_secret_options(config.sink.options.get("storage_options"), "sink_options.storage_options")
        use_credentials(storage_credentials(self.aws_conn_id or None))
        self._probe(config)
        self._start_spark_connect(config)
        state = StateStore(config.state_location)
        if truthy(self.reset):
            self._forget(state)
        change = self._reconcile(config, state)
        plan = change.plan
        entries = as_list(self.reread_batches, "reread_batches")
        fresh = None
        if plan is None and config.startup_mode in ("initial", "snapshot"):
            # planned before anything is written: a table that is missing or has no key fails here
            fresh = plan_with_primary_keys(
                build_plan(config.source, config.include, config.exclude, config.split, sizing=self.sizing()),
                config.rules,
            )
            check_reread_entries(entries, [b.batch_id for b in fresh.batches], [str(t) for t in fresh.schemas])
        self._check_rules(config, state, fresh or plan)
        write_config(state, config)
        if change.removed and state.stream_started():
            state.request_stream_restart(f"tables removed from the pipeline: {', '.join(map(str, change.removed))}")
        if config.startup_mode not in ("initial", "snapshot"):
            self.log.info("startup mode %s: no snapshot, the stream starts from the binlog", config.startup_mode)
            return []
        if plan is None:
            assert fresh is not None  # planned above: no stored plan and a mode that snapshots
            plan = fresh
            state.write_plan(plan)
            self.log.info(
                "planned %d tables, %d chunks, %d batches",
                len(plan.schemas),
                sum(len(b.chunks) for b in plan.batches),
                len(plan.batches),
            )
        else:
            self.log.info("reusing the stored plan: %d batches", len(plan.batches))
        estimates = plan.estimated_rows()
        self._check_retention(config, state, estimates)
        check_reread_entries(entries, [b.batch_id for b in plan.batches], [str(t) for t in plan.schemas])
        actions = batch_actions(plan, state, entries)
        self._log_plan(plan, estimates, actions)
        ti = context.get("ti") if hasattr(context, "get") else None
        if ti is not None:
            ti.xcom_push(key="reload", value=self._reload(plan, state, actions, change))
        return [
            {
                "batch_id": b.batch_id,
                "batch_label": batch_label(b, estimated_rows=estimates[b.batch_id])
                + (" · read again" if actions[b.batch_id].startswith("read again") else ""),
                "estimated_rows": estimates[b.batch_id],
            }
            for b in plan.batches
        ]

    def _reconcile(self, config: PipelineConfig, state: StateStore) -> PlanChange:
        """The stored plan reused or extended to this run's table list (``cdc/snapshot/planning.py``
        decides); what it added and removed is logged here."""
        change = reconcile_plan(
            state,
            config.source,
            config.include,
            config.exclude,
            config.split,
            sizing=self.sizing(),
            keyed=lambda plan: plan_with_primary_keys(plan, config.rules),
        )
        if change.added:
            self.log.info(
                "added %d table(s) to the pipeline: %s; their batches are planned below%s",
                len(change.added),
                ", ".join(map(str, change.added)),
                " and go to the running stream, which captures them from there on" if state.stream_started() else "",
            )
        if change.removed:
            self.log.info(
                "removed %d table(s) from the pipeline: %s; their sink tables stay as they are%s",
                len(change.removed),
                ", ".join(map(str, change.removed)),
                "; the running stream stops capturing them" if state.stream_started() else "",
            )
        return change

    @staticmethod
    def _reload(plan: Plan, state: StateStore, actions: Mapping[str, str], change: PlanChange) -> dict[str, Any]:
        """The ``reload`` XCom: which batches and tables this run reads, reads again, leaves alone."""
        return {
            "read": [b for b, a in actions.items() if a != "left alone"],
            "read_again": [b for b, a in actions.items() if a.startswith("read again")],
            "left_alone": [b for b, a in actions.items() if a == "left alone"],
            "tables_read_again": sorted(
                {str(t) for b in plan.batches if actions[b.batch_id].startswith("read again") for t in b.tables}
            ),
            "tables_added": [str(t) for t in change.added],
            "tables_removed": [str(t) for t in change.removed],
            "stream_running": state.stream_started(),
        }

    def _check_rules(self, config: PipelineConfig, state: StateStore, plan: Plan | None) -> None:
        """Routes and transforms are checked against the tables before anything is written, and may
        not change under a load: the sink tables hold rows shaped by the rules they were loaded with."""
        import contextlib

        from ..cdc.source.discovery import discover_tables
        from ..cdc.transform.table_views import resolve_views

        if state.exists(CONFIG_NAME) and (state.stream_started() or state.batch_results()):
            try:
                old_rules = read_config(state).rules
            except ConfigError:  # unreadable settings: rewritten below, as before routes existed
                old_rules = config.rules
            if old_rules != config.rules:
                raise ConfigError(
                    f"the pipeline's route/transform rules differ from those its sink tables were loaded with (state "
                    f"location {state.location}). Fix: trigger with reset=true to load the tables again with the new "
                    "rules, or restore the previous rules."
                )
        if not config.rules:
            return
        if plan is not None:
            schemas = list(plan.schemas.values())
        else:
            with contextlib.closing(config.source.connect()) as conn:
                schemas = discover_tables(
                    conn, config.include, config.exclude, config.split.chunk_key_columns, config.source.zero_dates
                )
        from ..spark.sinks.factory import build_sink

        sink = build_sink(config.sink)
        try:
            direct = sink.direct_write() is not None
        finally:
            sink.close()
        views = resolve_views(config.rules, schemas, sink_type=config.sink.type, direct_write=direct)
        for v in views.values():
            if not v.identity:
                what = [
                    w
                    for w, on in (
                        ("routed to " + str(v.sink_id), v.sink_id != v.source_id),
                        ("projected", v.projection is not None),
                        ("filtered", v.filter is not None),
                    )
                    if on
                ]
                self.log.info(
                    "%s: %s (sink key %s)", v.source_id, ", ".join(what), ", ".join(v.sink_schema.row_identity)
                )

    def _check_retention(self, config: PipelineConfig, state: StateStore, estimates: Mapping[str, int]) -> None:
        """A warning when the server may purge the binlog the stream will start from before the
        snapshot is done (the rate: this pipeline's batches so far, else an assumed one)."""
        import contextlib

        from ..cdc.binlog.retention import ASSUMED_ROWS_PER_S_PER_SLOT, binlog_retention_s, retention_warning

        done = {r["batch_id"] for r in state.batch_results()}
        rows = sum(int(n) for b, n in estimates.items() if b not in done)
        rates = [float(r["rows_per_s"]) for r in state.batch_results() if r.get("rows_per_s")]
        slots = max(int(self.parallelism), 1)
        rate = (sum(rates) / len(rates) if rates else ASSUMED_ROWS_PER_S_PER_SLOT) * slots
        try:
            with contextlib.closing(config.source.connect()) as conn:
                retention = binlog_retention_s(conn)
        except Exception as e:  # validate checked the server; this is advice, not a gate
            self.log.info("could not read the binlog retention (%s); not checked", e)
            return
        warning = retention_warning(retention, rows, rate)
        if warning:
            self.log.warning("binlog retention: %s", warning)

    def _log_plan(self, plan: Plan, estimates: dict[str, int], actions: dict[str, str]) -> None:
        """The batches as a table: what each snapshot task (map index) will do."""
        rows = [("map index", "batch", "chunks", "est. rows", "tables", "this run")]
        for i, b in enumerate(plan.batches):
            rows.append(
                (
                    str(i),
                    b.batch_id,
                    str(len(b.chunks)),
                    short_count(estimates[b.batch_id]),
                    batch_label(b),
                    actions[b.batch_id],
                )
            )
        widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
        for r in rows:
            self.log.info("  %s", "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        self.log.info(
            "  total: %d batches, %d chunks, ~%s rows over %d table(s)",
            len(plan.batches),
            sum(len(b.chunks) for b in plan.batches),
            short_count(sum(estimates.values())),
            len(plan.schemas),
        )
