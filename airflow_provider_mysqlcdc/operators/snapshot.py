"""One mapped task per batch: spark-submit the snapshot job, return the batch's high watermark."""

from __future__ import annotations

import time
from typing import Any, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook

from ..cdc.batching import short_count
from ..cdc.coerce import as_list, truthy
from ..cdc.errors import CdcError
from ..cdc.snapshot.planning import reread_reason
from ..cdc.state import StateStore
from ..cdc.store.object_store import StorageCredentials, use_credentials, with_storage_options
from ..cdc.store.pipeline_file import config_url, follow_connection, read_config
from ..fail_fast import config_errors_fail_at_once
from ..hooks import spark_job
from ..hooks.mysql_cdc import MySqlCdcHook
from ..hooks.object_storage import storage_credentials
from ..spark.runtime.install_check import check_pyspark_install
from ..spark.runtime.package_files import application_path
from ..spark.runtime.session import jdbc_jar_path
from ._spark_output import SparkOutputLog


def result_summary(result: dict[str, Any], label: str | None = None) -> dict[str, Any]:
    """The XCom of a snapshot task: what the stream step needs (ranges, HW) and a few figures."""
    rows = sum(sum(v.values()) for v in result.get("rows_per_chunk", {}).values())
    return {
        "batch_id": result["batch_id"],
        "batch_label": label,
        "ranges": result["ranges"],
        "low_watermark": result["low_watermark"],
        "high_watermark": result["high_watermark"],
        "rows": rows,
        "chunks": len(result.get("chunks", [])),
        "seconds": result.get("seconds"),
        "rows_per_s": result.get("rows_per_s"),
        "handoff": result.get("handoff"),  # read while the stream ran: the stream took the rows over
    }


class MySqlCdcSnapshotOperator(SparkSubmitOperator):
    """Snapshots one batch of chunks with ``jobs/snapshot_chunks.py`` on Spark and returns its
    ranges and high watermark (the XCom the stream step takes the minimum of).

    The job writes the batch into the sink (each table's key range replaced atomically) and
    then its result file in the state location; this task reads that file back. A batch that
    already has a result file from an earlier run is not read again (a new run resumes where
    the last one stopped). It is read again when this task instance wrote it and the user
    cleared it, or when ``reread_batches`` names it. Once the binlog stream runs it is the
    sink's only writer: the job then hands the batch's rows to the stream (``cdc/snapshot/resnapshot.py``),
    which replaces the batch's key ranges exactly at one of its micro-batches, and this task
    waits (``handoff_timeout_s``) until the stream says it did. Configuration errors fail the
    task at once. Killing the task kills spark-submit and the driver it started.

    The MySQL password (and a PostgreSQL sink's) reaches spark-submit through its environment,
    never its command line; see ``spark_job.secret_env`` for cluster modes.

    :param batch_id: the batch of the stored plan (from ``MySqlCdcPlanOperator``). (templated)
    :param batch_label: readable name, e.g. ``shop.orders chunks 0-63``; use it in
        ``map_index_template="{{ task.batch_label }}"``. (templated)
    :param estimated_rows: the plan's row estimate of the batch (for progress). (templated)
    :param state_location: the plan step's state location. (templated)
    :param mysql_cdc_conn_id: the source connection (for its password). (templated)
    :param sink_conn_id: the PostgreSQL sink's connection, if that is the sink. (templated)
    :param conn_id: the Spark connection (``spark_default``; host ``local[*]`` runs locally).
    :param reread_batches: finished batches to read again: batch ids, table names (every batch
        holding the table) or ``*``. (templated)
    :param redo_finished: snapshot the batch again even if it has a result (as ``reread_batches=["*"]``). (templated)
    :param handoff_timeout_s: once the stream runs, how long to wait for it to take the batch's rows
        over (it does at its next micro-batch past the batch's high watermark). (templated)
    :param spark_log_level: the lowest level of Spark's own log lines shown in the task log
        (``WARN``; ``INFO`` shows Spark's start-up chatter too). The job's progress lines always show.
    :param password_file: on a cluster, a file on the driver (mode 600) holding the MySQL password.
    :param cluster_provides_password: the driver's environment has ``$MYSQLCDC_PASSWORD`` from a
        cluster secret; send no password.
    :param python_archive: a packed Python environment (venv-pack / conda-pack) with this
        package's dependencies, for clusters whose nodes lack them.
    :param spark_runtime: ``connect`` (default): the task is a Spark Connect client of one Spark
        application that the run's snapshot tasks share -- the cluster's Connect endpoint given by
        ``connect_conn_id``, else a local Connect server the first task starts and that stops by
        itself once no task used it for ``connect_idle_s``. ``submit``: one ``spark-submit`` per
        batch (clusters without Connect). (templated)
    :param connect_conn_id: a ``spark_connect`` connection (host, port, token) of a running Spark
        Connect server; empty for the local one. (templated)
    :param connect_idle_s: how long a local Connect server waits for the next task before it stops.
    :param aws_conn_id: an ``aws`` connection for a state location or sink on object storage: its
        credentials reach this task and its Spark job (never the command line). (templated)
    :param application: the Spark job to submit; leave it empty: the job of the installed package is
        found by itself (``spark_runtime=submit``) or not needed (``connect``).
    :param kwargs: everything else of ``SparkSubmitOperator`` (conf, executor_memory, ...).
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "batch_id",
        "batch_label",
        "estimated_rows",
        "state_location",
        "mysql_cdc_conn_id",
        "sink_conn_id",
        "reread_batches",
        "redo_finished",
        "handoff_timeout_s",
        "spark_runtime",
        "connect_conn_id",
        "aws_conn_id",
    )
    ui_color = "#fdf2e3"

    def __init__(
        self,
        *,
        batch_id: str,
        state_location: str,
        batch_label: str | None = None,
        estimated_rows: int | None = None,
        mysql_cdc_conn_id: str = MySqlCdcHook.default_conn_name,
        sink_conn_id: str | None = None,
        reread_batches: Sequence[str] | str | None = None,
        redo_finished: bool = False,
        handoff_timeout_s: float | str = 900,
        spark_log_level: str = "WARN",
        password_file: str | None = None,
        cluster_provides_password: bool = False,
        python_archive: str | None = None,
        spark_runtime: str = "connect",
        connect_conn_id: str | None = None,
        connect_idle_s: float = 300.0,
        aws_conn_id: str | None = None,
        conn_id: str = "spark_default",
        application: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__(application=application, conn_id=conn_id, **kwargs)
        self.aws_conn_id = aws_conn_id
        self._storage: StorageCredentials | None = None
        self.batch_id = batch_id
        self.batch_label = batch_label
        self.estimated_rows = estimated_rows
        self.reread_batches = reread_batches
        self.state_location = state_location
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.sink_conn_id = sink_conn_id
        self.redo_finished = redo_finished
        self.handoff_timeout_s = handoff_timeout_s
        self.spark_log_level = spark_log_level
        self.password_file = password_file
        self.cluster_provides_password = cluster_provides_password
        self.python_archive = python_archive
        self.spark_runtime = spark_runtime
        self.connect_conn_id = connect_conn_id
        self.connect_idle_s = connect_idle_s
        self._secret_env: dict[str, str] = {}
        self._connect_session: Any = None

    # The password joins env_vars only inside the hook: env_vars is a template field, and
    # rendered template fields are stored in the metadata database and shown in the UI.
    def _get_hook(self):  # type: ignore[override]
        public = self.env_vars
        self.env_vars = {**(public or {}), **self._secret_env}
        try:
            hook = super()._get_hook()
        finally:
            self.env_vars = public
        hook._log = SparkOutputLog(hook.log, self.spark_log_level)
        return hook

    def _prepare_submit(self, state: StateStore) -> None:
        check_pyspark_install()
        source = MySqlCdcHook(self.mysql_cdc_conn_id).get_source_config()
        config = follow_connection(state, source, self.mysql_cdc_conn_id, self.log)  # the job reads the state's
        probe = super()._get_hook()  # resolves master / deploy mode from the Spark connection
        master, deploy_mode = probe._connection["master"], probe._connection["deploy_mode"]
        if master.lower().startswith("spark://") and (deploy_mode or "client") == "cluster":
            # spark-submit runs no Python application in cluster mode on a standalone master; a
            # batch's driver lives as long as its task anyway (the stream's goes to the cluster).
            self._deploy_mode = deploy_mode = "client"
            self.log.info("a snapshot batch runs its driver in this task (client deploy mode) on %s", master)
        sink_password = None
        if self.sink_conn_id:
            sink_password = BaseHook.get_connection(self.sink_conn_id).password or ""
        mysql_password = source.password
        self._secret_env = {
            **spark_job.python_env(master),
            **spark_job.secret_env(
                master=master,
                deploy_mode=deploy_mode,
                mysql_password=mysql_password,
                sink_password=sink_password,
                password_file=self.password_file,
                cluster_provides_password=bool(self.cluster_provides_password),
                storage_env=self._storage.env() if self._storage else None,
            ),
        }
        archive, archive_conf = spark_job.archive_conf(self.python_archive)
        self.application = self.application or application_path("snapshot_chunks")
        args = ["--config", config_url(state), "--batch-id", self.batch_id]
        if self.password_file:
            args += ["--password-file", self.password_file]
        self.application_args = args
        self.name = f"mysqlcdc {config.name} snapshot {self.batch_label or self.batch_id}"
        self.jars = spark_job.merge_csv(self.jars, jdbc_jar_path())  # spark-submit uploads it to a cluster
        self.py_files = spark_job.merge_csv(self.py_files, spark_job.package_zip())
        if archive:
            self._archives = spark_job.merge_csv(self._archives, archive)
        # Spark's INFO chatter would bury the job's own progress lines in the task log.
        self.conf = {
            "spark.ui.showConsoleProgress": "false",
            "spark.log.level": "WARN",
            **archive_conf,
            **(self.conf or {}),
        }
        self._hook = None  # build the real hook (with the secret env) in execute

    @config_errors_fail_at_once
    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]  # the stub says None; XCom gets our dict
        self._storage = storage_credentials(self.aws_conn_id or None)
        use_credentials(self._storage)
        state = StateStore(self.state_location)
        me = _task_identity(context)
        existing = state.read_batch_result(self.batch_id)
        if existing is not None:
            owner = state.read_batch_owner(self.batch_id) or {}
            why = self._reread_reason(state, me, owner)
            if why is None:
                summary = result_summary(existing, self.batch_label)
                self.log.info(
                    "batch %s (%s) is already in the sink: %d rows, HW %s%s. Not read again; to read it "
                    "again, clear this task in the run that snapshotted it or trigger with "
                    'reread_batches=["%s"] (also while the stream runs).',
                    self.batch_id,
                    self.batch_label,
                    summary["rows"],
                    _fmt(summary["high_watermark"]),
                    f", snapshotted by run {owner['run_id']}" if owner.get("run_id") else "",
                    self.batch_id,
                )
                return summary
            self.log.info(
                "batch %s (%s) is in the sink already; reading it again: %s", self.batch_id, self.batch_label, why
            )
        if state.stream_started():
            self.log.info(
                "the binlog stream of this pipeline runs, so it is the sink's only writer: the batch's rows "
                "go to it, and it replaces the batch's key ranges with them exactly"
            )
        runtime = _runtime(self.spark_runtime)
        t0 = time.monotonic()
        if runtime == "connect":
            self._run_on_connect(state)
        else:
            self._prepare_submit(state)
            self.log.info("snapshotting batch %s (%s) on Spark", self.batch_id, self._label())
            super().execute(context)
        result = state.read_batch_result(self.batch_id)
        if result is None:
            raise CdcError(
                f"the snapshot job for batch {self.batch_id} finished but left no result file at "
                f"{state.url(StateStore.batch_result_rel(self.batch_id))}. Fix: see the Spark output above for why, "
                "then clear this task to read the batch again."
            )
        if result.get("handoff"):
            self._wait_for_stream(state, result["handoff"])
        state.write_batch_owner(self.batch_id, me)
        summary = result_summary(result, self.batch_label)
        self._record_asset_events(context, state, summary)
        elapsed = time.monotonic() - t0
        self.log.info(
            "batch %s done: %d chunks, %s rows in %.1f s (%s rows/s in Spark, the rest %s); high watermark %s",
            self.batch_id,
            summary["chunks"],
            f"{summary['rows']:,}",
            elapsed,
            f"{summary['rows_per_s']:,}" if summary.get("rows_per_s") else "?",
            "Spark start-up" if runtime == "submit" else "attaching to Spark Connect",
            _fmt(summary["high_watermark"]),
        )
        return summary

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The batch's source tables in, their sink tables out (with Airflow's OpenLineage provider)."""
        from ..lineage import pipeline_lineage

        return pipeline_lineage(self.state_location, self.aws_conn_id, batch_id=self.batch_id)

    def _record_asset_events(self, context: Any, state: StateStore, summary: dict[str, Any]) -> None:
        """The batch's sink tables as asset events on the pipeline's alias (``assets.py``)."""
        from ..assets import emit_table_events, table_assets
        from ..cdc.chunks import KeyRange

        if not any(True for _ in self.outlets or ()):
            return
        tables = list(dict.fromkeys(KeyRange.from_dict(r).table_id for r in summary["ranges"]))
        config = read_config(state)
        uris = table_assets(config.sink, tables, config.rules)
        n = emit_table_events(
            context, self.outlets, uris, {k: summary.get(k) for k in ("batch_id", "rows", "high_watermark")}
        )
        if n:
            self.log.info("asset events: %s", ", ".join(uris.values()))

    def _label(self) -> str:
        return self.batch_label or (
            f"~{short_count(int(self.estimated_rows))} rows" if self.estimated_rows not in (None, "") else "?"
        )

    def _run_on_connect(self, state: StateStore) -> None:
        """The batch's job in this process, as a Spark Connect client: the watermarks and the
        binlog window here, the bulk read and the write in the shared Spark application."""
        import contextlib
        from dataclasses import replace

        from ..spark.runtime.connect_server import (
            Lease,
            endpoint_reachable,
            ensure_local_server,
            remote_session,
        )
        from ..spark.snapshot.job import run_snapshot_batch

        check_pyspark_install()
        source = MySqlCdcHook(self.mysql_cdc_conn_id).get_source_config()
        config = follow_connection(state, source, self.mysql_cdc_conn_id, self.log)
        if self.sink_conn_id:
            sink_password = BaseHook.get_connection(self.sink_conn_id).password or ""
            config = replace(
                config, sink=replace(config.sink, options={**config.sink.options, "password": sink_password})
            )
        if self._storage is not None:  # for the server's Python workers, whose environment is the server's
            config = replace(
                config,
                sink=replace(
                    config.sink, options=with_storage_options(config.sink.options, self._storage, config.sink.type)
                ),
            )
        lease: Any = contextlib.nullcontext()
        on_cluster = True
        if self.connect_conn_id:
            from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

            url = SparkConnectHook(self.connect_conn_id).get_connection_url()
            where = f"the Spark Connect server of connection {self.connect_conn_id!r}"
        else:
            from ..spark.snapshot.arrow_read import reads_bypass_jvm

            settings = spark_job.local_connect_settings(
                self._conn_id, self.conf, reads_bypass_jvm(config.source, config.sink.type, config.sink.options)
            )
            master = settings.master
            on_cluster = not master.strip().lower().startswith("local")
            info = ensure_local_server(settings, idle_s=float(self.connect_idle_s))
            url, lease = info.url, Lease(info)
            where = f"the local Spark Connect server at {info.display_url} ({master})"
        self.log.info("snapshotting batch %s (%s) on %s", self.batch_id, self._label(), where)
        down = endpoint_reachable(url)
        if down is not None:
            raise CdcError(
                f"cannot reach {where} ({down}). Fix: start it or correct the connection's host, port "
                "and token; or set spark_runtime='submit'."
            )
        reached = False
        try:
            with lease, remote_session(url) as spark:
                spark.version  # the first call to the server: a wrong or dead endpoint fails here
                reached = True
                if on_cluster:  # the cluster's Python, not this worker's: can it run this package?
                    from ..spark.runtime.executor_check import check_executors

                    check_executors(spark, where)
                self._connect_session = spark
                try:
                    run_snapshot_batch(spark, config, self.batch_id, progress_interval_s=20.0)
                finally:
                    self._connect_session = None
        except Exception as e:
            if reached:
                raise
            raise CdcError(
                f"cannot reach {where}: {type(e).__name__}: {str(e).splitlines()[0][:300]}. Fix: start "
                "it or correct the connection's host, port and token; or set spark_runtime='submit'."
            ) from None

    def _wait_for_stream(self, state: StateStore, handoffs: Sequence[str] | str) -> None:
        """Until the stream has taken every piece of the batch over (or said why it cannot)."""
        from ..cdc.snapshot.resnapshot import read_applied

        ids = [handoffs] if isinstance(handoffs, str) else list(handoffs)
        timeout = float(self.handoff_timeout_s)
        deadline = time.monotonic() + timeout
        next_note = time.monotonic() + 30
        done: dict[str, dict[str, Any]] = {}
        while len(done) < len(ids):
            for hid in ids:
                if hid not in done and (applied := read_applied(state, hid)) is not None:
                    if applied.get("superseded"):
                        raise CdcError(
                            f"batch {self.batch_id}: the stream did not apply its rows: {applied['superseded']}"
                        )
                    done[hid] = applied
            if len(done) == len(ids):
                break
            if time.monotonic() > deadline:
                raise CdcError(
                    f"batch {self.batch_id}: the stream has not taken its rows (hand-off "
                    f"{', '.join(h for h in ids if h not in done)}) within {timeout:.0f} s. Is it running? Fix: see the "
                    "stream watchdog's log and start the stream if it stopped. The rows stay pending and are applied "
                    "when the stream runs; a retry of this task reads the batch again."
                )
            if time.monotonic() > next_note:
                self.log.info(
                    "waiting for the stream to take batch %s over: %d of %d piece(s) taken",
                    self.batch_id,
                    len(done),
                    len(ids),
                )
                next_note = time.monotonic() + 30
            time.sleep(1)
        first = min(done.values(), key=lambda a: a["micro_batch"])
        last = max(done.values(), key=lambda a: a["micro_batch"])
        batches = (
            f"micro-batch {first['micro_batch']}"
            if first is last or first["micro_batch"] == last["micro_batch"]
            else f"micro-batches {first['micro_batch']}-{last['micro_batch']}"
        )
        self.log.info(
            "the stream replaced batch %s's key ranges in %s: %s rows exact at %s, %s rows the sink held "
            "there and the source no longer has deleted",
            self.batch_id,
            batches,
            f"{sum(a['rows'] for a in done.values()):,}",
            _fmt(last["exact_at"]),
            f"{sum(a['deleted'] for a in done.values()):,}",
        )

    def _reread_reason(self, state: StateStore, me: dict[str, Any], owner: dict[str, Any]) -> str | None:
        """Why a finished batch is read again, or None to keep it: it is named in
        ``reread_batches`` (its id, one of its tables, or ``*``), or this very task instance
        wrote it and was cleared by the user (a new run skips what earlier runs finished)."""
        entries = as_list(self.reread_batches, "reread_batches")
        plan = state.read_plan() if entries else None
        tables = [str(t) for t in plan.batch(self.batch_id).tables] if plan is not None else []
        named = reread_reason(entries, self.batch_id, tables)
        if named is not None:
            return named
        if truthy(self.redo_finished):
            return "redo_finished is set"
        if (
            me.get("run_id")
            and all(owner.get(k) == me.get(k) for k in ("dag_id", "run_id", "map_index"))
            and int(me.get("try_number") or 0) > int(owner.get("try_number") or 0)
        ):
            return "this task snapshotted it in this run and was cleared"
        return None

    def on_kill(self) -> None:
        session = self._connect_session
        if session is not None:  # stop this task's Spark work on the shared application
            try:
                session.interruptAll()
            except Exception as e:
                self.log.warning("could not interrupt the Spark Connect operations: %s", e)
        sp = getattr(self._hook, "_submit_sp", None) if self._hook else None
        if sp is not None and sp.poll() is None:
            spark_job.kill_process_tree(sp.pid)
        super().on_kill()


RUNTIMES = ("connect", "submit")


def _runtime(value: Any) -> str:
    runtime = str(value or "connect").strip().lower()
    if runtime not in RUNTIMES:
        from ..cdc.errors import ConfigError

        raise ConfigError(
            f"spark_runtime: {value!r} is not one of {', '.join(RUNTIMES)}. Fix: use 'connect' (one "
            "shared Spark application, the default) or 'submit' (a spark-submit per batch)."
        )
    return runtime


def _task_identity(context: Any) -> dict[str, Any]:
    """dag, run and map index of the running task instance (what a batch owner records)."""
    ti = context.get("ti") if hasattr(context, "get") else None
    return {
        "dag_id": getattr(ti, "dag_id", None),
        "run_id": getattr(ti, "run_id", None),
        "map_index": getattr(ti, "map_index", None),
        "try_number": getattr(ti, "try_number", None),
    }


def _fmt(offset: dict[str, Any]) -> str:
    return f"{offset.get('file')}:{offset.get('position')}"
