"""The DAGs of one pipeline: the pipeline DAG and its stream watchdog.

One function builds them for the DAG template (``dags/mysql_cdc_pipeline.py``) and for every
pipeline file (``factory.py``), so both have the same shape, trigger form, docs and map index
labels:

    validate -> plan -> snapshot (one mapped Spark job per batch) -> stream

and a watchdog DAG that checks the stream every 5 minutes, relaunches it if it died and
records its health as an Asset event. Every setting is a param of the pipeline DAG
(``params.pipeline_params``), so a load can be started from the UI's trigger form; the
operators read them as ``{{ params.<name> }}``.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any, Mapping, Sequence

import pendulum
from airflow.sdk import DAG, Asset, Param

from ..assets import sink_tables_alias
from ..cdc.settings import current_names, defaults
from ..cdc.sinks import sink_kind
from ..operators.consistency import MySqlCdcConsistencyCheckOperator
from ..operators.maintenance import MySqlCdcSinkMaintenanceOperator
from ..operators.plan import MySqlCdcPlanOperator
from ..operators.snapshot import MySqlCdcSnapshotOperator
from ..operators.stream import MySqlCdcStreamOperator
from ..operators.validate import MySqlCdcValidateOperator
from ..params import pipeline_params
from ..sensors.stream import MySqlCdcStreamSensor
from .dag_docs import pipeline_doc, streams_watchdog_doc, watchdog_doc
from .spec import watchdog_dag_id as default_watchdog_dag_id

log = logging.getLogger(__name__)

START_DATE = pendulum.datetime(2026, 1, 1, tz="UTC")
TAGS = ("mysqlcdc", "cdc")
RETRIES = 2
RETRY_DELAY = timedelta(minutes=1)
SNAPSHOT_TIMEOUT = timedelta(hours=6)
WATCHDOG_INTERVAL = timedelta(minutes=5)
WATCHDOG_MAX_LAG_S = 600
CONSISTENCY_EVERY_S = 3600  # the watchdog's consistency check: at most hourly by default
MAINTENANCE_EVERY_S = 3600  # an Iceberg sink's compaction and snapshot expiry: at most hourly by default


def _sink_words(sink_type: str) -> str:
    kind = sink_kind(sink_type)
    return kind.described_as if kind else sink_type


def stream_health_asset(dag_id: str) -> Asset:
    """Every watchdog check records the stream's health (alive, lag, last commit) as an event of
    this asset: the Assets view shows them, and a DAG scheduled on it runs after every check."""
    return Asset(name=f"{dag_id}_stream_health", uri=f"mysqlcdc://{dag_id}/stream_health", group="mysqlcdc")


def source_conn_id(params: Mapping[str, Any], dag_run: Any) -> str:
    """The source connection of a run: ``mysql_cdc_conn_id``, or the run's conf under the setting's
    old name ``mysql_conn_id`` (REST callers and saved trigger bodies still send it), which logs a
    deprecation warning into the task's log. Both in the conf with different values fails the task."""
    conf = dict(getattr(dag_run, "conf", None) or {})
    given = {k: conf[k] for k in ("mysql_conn_id", "mysql_cdc_conn_id") if k in conf}
    if "mysql_conn_id" in given:
        import warnings

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            resolved = current_names(given, "the run's conf")
        for w in seen:
            log.warning("%s", w.message)
        return str(resolved["mysql_cdc_conn_id"])
    return str(params["mysql_cdc_conn_id"])


def build_pipeline_dags(
    dag_id: str,
    *,
    settings: Mapping[str, Any] | None = None,
    snapshot_parallelism: int = 1,
    schedule: str | None = None,
    watchdog_dag_id: str | None = None,
    description: str | None = None,
    tags: Sequence[str] = (),
    pipeline_file: str | None = None,
    route: Sequence[Mapping[str, Any]] = (),
    transform: Sequence[Mapping[str, Any]] = (),
) -> tuple[DAG, DAG]:
    """The pipeline DAG ``dag_id`` and its watchdog DAG.

    :param settings: the form's defaults (``cdc/settings.py`` names; the others keep the
        shipped defaults). Scheduled runs use them as they are.
    :param snapshot_parallelism: snapshot tasks that run at once; the plan makes the batch count
        a multiple of it, so keep it equal to what the Spark cluster runs side by side.
    :param schedule: the pipeline DAG's schedule (None: triggered by hand).
    :param watchdog_dag_id: default ``<dag_id>_stream_watchdog`` (a trailing ``_pipeline`` dropped).
    :param pipeline_file: the pipeline file the DAGs come from, named in the docs.
    :param route: the pipeline file's route rules (mappings with ``source_table``, ``sink_table``).
    :param transform: its transform rules (``source_table``, ``projection``, ``filter``, ``primary_keys``,
        ``partition_keys``).
    """
    settings = dict(settings or {})
    values = defaults(**settings)
    watchdog_id = watchdog_dag_id or default_watchdog_dag_id(dag_id)
    with DAG(
        dag_id=dag_id,
        description=description,
        schedule=schedule,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        params=pipeline_params(**settings),
        render_template_as_native_obj=True,
        user_defined_macros={"mysqlcdc_source_conn": source_conn_id},
        doc_md=pipeline_doc(
            watchdog_id, values["tables"], _sink_words(values["sink_type"]), pipeline_file, route, transform
        ),
        tags=[*TAGS, *(t for t in tags if t not in TAGS)],
        default_args={"retries": RETRIES, "retry_delay": RETRY_DELAY},
    ) as dag:
        validate = MySqlCdcValidateOperator(
            task_id="validate",
            mysql_cdc_conn_id="{{ mysqlcdc_source_conn(params, dag_run) }}",
            tables="{{ params.tables }}",
            exclude="{{ params.exclude }}",
            chunk_key_columns="{{ params.chunk_key_columns }}",
            spark_runtime="{{ params.spark_runtime }}",
            connect_conn_id="{{ params.spark_connect_conn_id }}",
            sink_type="{{ params.sink_type }}",
            sink_options="{{ params.sink_options }}",
            retries=0,  # a misconfigured server does not fix itself
        )
        plan = MySqlCdcPlanOperator(
            task_id="plan",
            mysql_cdc_conn_id="{{ mysqlcdc_source_conn(params, dag_run) }}",
            tables="{{ params.tables }}",
            exclude="{{ params.exclude }}",
            state_location="{{ params.state_location }}",
            pipeline_name="{{ dag.dag_id }}",
            sink_type="{{ params.sink_type }}",
            sink_options="{{ params.sink_options }}",
            sink_conn_id="{{ params.sink_conn_id }}",
            chunk_size="{{ params.chunk_size }}",
            chunk_key_columns="{{ params.chunk_key_columns }}",
            rows_per_batch="{{ params.rows_per_batch }}",
            parallelism=snapshot_parallelism,
            startup_mode="{{ params.startup_mode }}",
            startup_offset="{{ params.startup_offset }}",
            startup_timestamp="{{ params.startup_timestamp }}",
            stream_options="{{ params.stream_options }}",
            schema_change_behavior="{{ params.schema_change_behavior }}",
            zero_dates="{{ params.zero_dates }}",
            spark_runtime="{{ params.spark_runtime }}",
            connect_conn_id="{{ params.spark_connect_conn_id }}",
            aws_conn_id="{{ params.aws_conn_id }}",
            reset="{{ params.reset }}",
            reread_batches="{{ params.reread_batches }}",
            route=[dict(r) for r in route],
            transform=[dict(t) for t in transform],
        )
        snapshot = MySqlCdcSnapshotOperator.partial(
            task_id="snapshot",
            state_location="{{ params.state_location }}",
            mysql_cdc_conn_id="{{ mysqlcdc_source_conn(params, dag_run) }}",
            sink_conn_id="{{ params.sink_conn_id }}",
            reread_batches="{{ params.reread_batches }}",
            spark_runtime="{{ params.spark_runtime }}",
            connect_conn_id="{{ params.spark_connect_conn_id }}",
            aws_conn_id="{{ params.aws_conn_id }}",
            conn_id="spark_default",
            map_index_template="{{ task.batch_label }}",
            max_active_tis_per_dagrun=snapshot_parallelism,
            outlets=[sink_tables_alias(dag_id)],  # an event per sink table its batch wrote (assets.py)
            execution_timeout=SNAPSHOT_TIMEOUT,
        ).expand_kwargs(plan.output)
        stream = MySqlCdcStreamOperator(
            task_id="stream",
            snapshot_results=snapshot.output,
            state_location="{{ params.state_location }}",
            mysql_cdc_conn_id="{{ mysqlcdc_source_conn(params, dag_run) }}",
            spark_conn_id="spark_default",
            sink_conn_id="{{ params.sink_conn_id }}",
            aws_conn_id="{{ params.aws_conn_id }}",
            trigger_rule="none_failed",  # a stream-only startup mode has no snapshot tasks
        )
        validate >> plan >> snapshot >> stream

    return dag, _watchdog_dag(watchdog_id, dag_id, values, tags)


def _watchdog_dag(watchdog_id: str, dag_id: str, values: Mapping[str, Any], tags: Sequence[str]) -> DAG:
    """The pipeline's watchdog DAG: its stream's health (relaunching it) and the consistency check,
    every ``WATCHDOG_INTERVAL``."""
    with DAG(
        dag_id=watchdog_id,
        schedule=WATCHDOG_INTERVAL,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=False,  # a stream nobody watches dies unnoticed; skipped while none runs
        doc_md=watchdog_doc(dag_id),
        tags=[*TAGS, *(t for t in tags if t not in TAGS)],
        params={
            "state_location": Param(
                values["state_location"],
                type="string",
                title="State location",
                description="The pipeline's state location (scheduled runs use this default).",
            ),
            "aws_conn_id": Param(
                values["aws_conn_id"],
                type=["null", "string"],
                title="Object storage connection",
                description="The pipeline's aws connection when its state location is on S3.",
            ),
            "consistency_every_s": Param(
                values.get("consistency_every_s", CONSISTENCY_EVERY_S),
                type=["null", "integer"],
                title="Consistency check interval (s)",
                description="Compare the sink with the source (row counts and key "
                "checksums per batch) at most this often; 0: at every "
                "watchdog run; -1: never.",
            ),
            "maintenance_every_s": Param(
                values.get("maintenance_every_s", MAINTENANCE_EVERY_S),
                type=["null", "integer"],
                title="Sink maintenance interval (s)",
                description="Iceberg sinks: compact the stream's small files and expire snapshots older "
                "than an hour at most this often; 0: at every watchdog run; -1: never. Other sinks: skipped.",
            ),
            "stop_stream": Param(
                False,
                type="boolean",
                title="Stop the stream",
                description="Stop the stream (between micro-batches, wherever its driver runs) instead of "
                "watching it. It stays stopped until the pipeline's stream task runs again (clear it).",
            ),
        },
    ) as watchdog:
        health = MySqlCdcStreamSensor(
            task_id="stream_health",
            state_location="{{ params.state_location }}",
            aws_conn_id="{{ params.aws_conn_id or '' }}",  # no native rendering here: None would be 'None'
            max_lag_s=WATCHDOG_MAX_LAG_S,
            relaunch=True,
            stop="{{ params.stop_stream }}",
            poke_interval=30,
            timeout=240,
            mode="reschedule",
            outlets=[stream_health_asset(dag_id), sink_tables_alias(dag_id)],
        )
        health >> MySqlCdcSinkMaintenanceOperator(
            task_id="sink_maintenance",
            state_location="{{ params.state_location }}",
            aws_conn_id="{{ params.aws_conn_id or '' }}",
            min_interval_s="{{ params.maintenance_every_s if params.maintenance_every_s is not none else -1 }}",
            retries=0,
        )
        health >> MySqlCdcConsistencyCheckOperator(
            task_id="consistency_check",
            state_location="{{ params.state_location }}",
            aws_conn_id="{{ params.aws_conn_id or '' }}",
            min_interval_s="{{ params.consistency_every_s if params.consistency_every_s is not none else -1 }}",
            pipeline_dag_id=dag_id,
            retries=0,
        )
    return watchdog


def build_streams_watchdog(
    dag_id: str = "mysql_cdc_streams_watchdog",
    *,
    state_locations: Sequence[str] = (),
    search_roots: Sequence[str] = (),
    aws_conn_id: str | None = None,
    schedule: Any = WATCHDOG_INTERVAL,
    max_lag_s: float | None = WATCHDOG_MAX_LAG_S,
    relaunch: bool = True,
    tags: Sequence[str] = (),
) -> DAG:
    """One watchdog DAG for many pipelines: a task that lists their state locations (given, or
    found under ``search_roots``), then one mapped stream sensor per pipeline.

    A platform with tens of pipelines gets one DAG to look at instead of one watchdog each, and
    a pipeline whose state location lands under a search root is watched without a new DAG.

    :param state_locations: the defaults of the DAG's ``state_locations`` param.
    :param search_roots: the defaults of its ``search_roots`` param (local folders or ``s3://``).
    :param aws_conn_id: the ``aws`` connection for state locations on object storage.
    """
    from ..operators.find_pipelines import MySqlCdcFindPipelinesOperator

    with DAG(
        dag_id=dag_id,
        schedule=schedule,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=False,
        doc_md=streams_watchdog_doc(),
        tags=[*TAGS, *(t for t in tags if t not in TAGS)],
        render_template_as_native_obj=True,
        params={
            "state_locations": Param(
                list(state_locations),
                type="array",
                items={"type": "string"},
                title="State locations",
                description="Pipelines' state locations to watch, one per line.",
            ),
            "search_roots": Param(
                list(search_roots),
                type="array",
                items={"type": "string"},
                title="Search roots",
                description="Folders (local or s3://) whose pipelines are all watched: every "
                "folder holding a pipeline.json, up to three levels down.",
            ),
            "aws_conn_id": Param(
                aws_conn_id,
                type=["null", "string"],
                title="Object storage connection",
                description="The aws connection for state locations on S3.",
            ),
        },
    ) as watchdog:
        found = MySqlCdcFindPipelinesOperator(
            task_id="find_pipelines",
            state_locations="{{ params.state_locations }}",
            search_roots="{{ params.search_roots }}",
            aws_conn_id="{{ params.aws_conn_id }}",
            retries=0,
        )
        MySqlCdcStreamSensor.partial(
            task_id="stream_health",
            aws_conn_id="{{ params.aws_conn_id }}",
            max_lag_s=max_lag_s,
            relaunch=relaunch,
            poke_interval=30,
            timeout=240,
            mode="reschedule",
            map_index_template="{{ task.state_location }}",
            outlets=[sink_tables_alias(dag_id)],
        ).expand_kwargs(found.output)
    return watchdog
