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
from ..operators.plan import MySqlCdcPlanOperator
from ..operators.snapshot import MySqlCdcSnapshotOperator
from ..operators.stream import MySqlCdcStreamOperator
from ..operators.validate import MySqlCdcValidateOperator
from ..params import pipeline_params
from ..sensors.stream import MySqlCdcStreamSensor
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


def _sink_words(sink_type: str) -> str:
    kind = sink_kind(sink_type)
    return kind.described_as if kind else sink_type


def pipeline_doc(
    watchdog_dag_id: str,
    tables: Sequence[str],
    sink_type: str,
    pipeline_file: str | None = None,
    route: Sequence[Mapping[str, Any]] = (),
    transform: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The pipeline DAG's docs (the DAG page's *Docs*)."""
    loads = ", ".join(f"`{t}`" for t in tables)
    doc = f"""
### MySQL CDC pipeline

Lock-free, parallel initial load of MySQL/MariaDB tables, handed off to a binlog stream with
nothing lost and nothing duplicated (the Flink CDC incremental snapshot algorithm, on Spark).

**Start a load:** *Trigger* (top right), fill the **Source** section (connection, tables) and
press *Trigger*. The defaults load {loads} into {_sink_words(sink_type)}.

1. **validate** checks the server (binlog ROW / FULL image, privileges, time zone, version)
   and the table list: every entry that matches no table, and tables without a key, are named
   with the fix. It fails at once, without retries.
2. **plan** splits the tables into chunks and groups them into batches (millions of rows each);
   its log shows a table of the batches. Kept in the *State location*: a new run of the DAG
   reuses the plan and skips finished batches.
3. **snapshot** runs one Spark job per batch; each map index is named after its tables, chunks
   and estimated rows. Its log shows progress every 20 s and a summary.
4. **stream** starts the long-lived binlog stream from the minimum high watermark and returns
   once it has committed its first micro-batch. The stream then runs outside this DAG run:
   the **{watchdog_dag_id}** DAG checks it every 5 minutes (alive, lag, last commit,
   the tail of its log), relaunches it if it died, and records its health as an Asset event.

**Rerun a failed batch:** in the grid, open the failed *snapshot* map index, press *Clear*,
keep *Downstream* ticked in the dialog (so *stream* runs again too) and confirm. Only that
batch's Spark job runs again. Clearing a batch that **finished** reads it again, before or
after the stream started: once the stream runs it is the only writer of the sink, so the batch
hands its rows to the stream, which replaces the batch's key ranges exactly in one of its
micro-batches (the task ends once it did). `reread_batches` in a new run's form reads batches
or whole tables again the same way.

**Reset** (last section of the form) stops the stream, drops the sink tables of the previous
load and forgets the plan, the batch results and the stream's checkpoint: everything is loaded
again into empty tables.
"""
    if pipeline_file:
        doc += f"""
**Defined by the pipeline file** `{pipeline_file}`: its values are the form's defaults (and
those of scheduled runs). Change them there; `python -m airflow_provider_mysqlcdc.pipelines
validate` checks the file.
"""
    if route or transform:
        lines = [f"- `{r['source_table']}` → `{r['sink_table']}`" for r in route]
        for t in transform:
            parts = [f"{k} `{t[k]}`" for k in ("projection", "filter") if t.get(k)]
            lines.append(f"- `{t['source_table']}`: {'; '.join(parts) or 'primary keys ' + str(t.get('primary_keys'))}")
        doc += (
            "\n**Routes and transforms** (from the pipeline file; the snapshot and the stream apply them alike, "
            "a table merged from several keeps each row's source in `_source_table`):\n\n" + "\n".join(lines) + "\n"
        )
    return doc


def watchdog_doc(dag_id: str) -> str:
    return f"""
### Stream watchdog for `{dag_id}`

The binlog stream runs outside the pipeline's DAG run. Every 5 minutes this DAG checks it and
logs **alive** (pid, host), its **last commit** (micro-batch, offset, how long ago), its
**lag** behind the binlog head and the **tail of its log**: open the latest run's
`stream_health` task log. The same figures are in the task's XCom and in the
`{dag_id}_stream_health` asset's events (*Assets* view).

A dead stream is relaunched from its checkpoint (nothing lost, nothing twice). The check fails
when the stream stays more than 10 minutes behind. While no stream was ever started at the
state location, the check is skipped. It runs unpaused from the start; point its
`state_location` at the pipeline's.

Once an hour (param `consistency_every_s`; 0 = every run, -1 = never) the
`consistency_check` task compares the sink with the source: per table and per batch, the row
count and a checksum of the keys, both at the offset the stream last committed. It fails when
they differ and names the batches to read again (clear those snapshot tasks in `{dag_id}`);
the `stream_health` log shows the last result.
"""


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
    :param transform: its transform rules (``source_table``, ``projection``, ``filter``, ``primary_keys``).
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
        doc_md=pipeline_doc(watchdog_id, values["tables"], values["sink_type"], pipeline_file, route, transform),
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
        health >> MySqlCdcConsistencyCheckOperator(
            task_id="consistency_check",
            state_location="{{ params.state_location }}",
            aws_conn_id="{{ params.aws_conn_id or '' }}",
            min_interval_s="{{ params.consistency_every_s if params.consistency_every_s is not none else -1 }}",
            pipeline_dag_id=dag_id,
            retries=0,
        )
    return watchdog


def streams_watchdog_doc() -> str:
    return """
### Stream watchdog for many pipelines

Every 5 minutes **find_pipelines** lists the pipelines to watch: the *state locations* given,
and every state location found under the *search roots* (a folder holding a `pipeline.json`,
up to three levels down), each once; pipelines whose stream has not been started yet are
logged and left out. Then one **stream_health** map index per pipeline, named after its state
location, checks that pipeline's stream (alive, last commit, lag, the tail of its log) and
relaunches it from its checkpoint if it died. One pipeline's failed check does not stop the
others'. Each check records the stream's progress per sink table on this DAG's asset alias.

Use it instead of the pipelines' own watchdog DAGs (pause those), so each stream is checked
once. Should two watchdogs relaunch one dead stream at the same moment, the stream's lease lets
one stream start and the other check watches that one.
"""


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
