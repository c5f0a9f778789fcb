"""mysqlcdc pipeline template: copy this file into your DAGs folder and adjust the defaults.

validate -> plan -> snapshot (one mapped Spark job per batch) -> stream

Every setting is a DAG param, so an initial load can be started from the UI's trigger form.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Asset, Param

from airflow_provider_mysqlcdc.operators.plan import MySqlCdcPlanOperator
from airflow_provider_mysqlcdc.operators.snapshot import MySqlCdcSnapshotOperator
from airflow_provider_mysqlcdc.operators.stream import MySqlCdcStreamOperator
from airflow_provider_mysqlcdc.operators.validate import MySqlCdcValidateOperator
from airflow_provider_mysqlcdc.params import pipeline_params
from airflow_provider_mysqlcdc.sensors.stream import MySqlCdcStreamSensor

# How many snapshot Spark jobs run at once. The plan makes the batch count a multiple of it,
# so keep it equal to what your Spark cluster can run side by side.
SNAPSHOT_PARALLELISM = int(os.environ.get("MYSQLCDC_SNAPSHOT_PARALLELISM", "1"))
STATE_ROOT = os.environ.get("MYSQLCDC_STATE_ROOT", "/tmp/mysqlcdc")
LAKE_ROOT = os.environ.get("MYSQLCDC_LAKE_ROOT", "/tmp/mysqlcdc-lake")

DOC = """
### MySQL CDC pipeline

Lock-free, parallel initial load of MySQL/MariaDB tables, handed off to a binlog stream with
nothing lost and nothing duplicated (the Flink CDC incremental snapshot algorithm, on Spark).

**Start a load:** *Trigger* (top right), fill the **Source** section (connection, tables) and
press *Trigger*. The defaults load `shop.orders` into a Delta Lake.

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
   the **mysql_cdc_stream_watchdog** DAG checks it every 5 minutes (alive, lag, last commit,
   the tail of its log), relaunches it if it died, and records its health as an Asset event.

**Rerun a failed batch:** in the grid, open the failed *snapshot* map index, press *Clear*,
keep *Downstream* ticked in the dialog (so *stream* runs again too) and confirm. Only that
batch's Spark job runs again. Clearing a batch that **finished** reads it again, but only
before the stream has started; once the stream runs it is the only writer of the sink, and a
snapshot task refuses with a message instead of overwriting newer changes.

**Reset** (last section of the form) stops the stream, drops the sink tables of the previous
load and forgets the plan, the batch results and the stream's checkpoint: everything is loaded
again into empty tables.
"""

# The trigger form: every setting of the pipeline with its section, help and checks
# (airflow_provider_mysqlcdc/cdc/settings.py). Change the shipped defaults here.
params = pipeline_params(
    tables=["shop.orders"],
    state_location=f"{STATE_ROOT}/pipeline",
    sink_options={"root": LAKE_ROOT},
)

with DAG(
    dag_id="mysql_cdc_pipeline",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params=params,
    render_template_as_native_obj=True,
    doc_md=DOC,
    tags=["mysqlcdc", "cdc"],
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
) as dag:
    validate = MySqlCdcValidateOperator(
        task_id="validate",
        mysql_cdc_conn_id="{{ params.mysql_conn_id }}",
        tables="{{ params.tables }}",
        exclude="{{ params.exclude }}",
        chunk_key_columns="{{ params.chunk_key_columns }}",
        retries=0,  # a misconfigured server does not fix itself
    )
    plan = MySqlCdcPlanOperator(
        task_id="plan",
        mysql_cdc_conn_id="{{ params.mysql_conn_id }}",
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
        parallelism=SNAPSHOT_PARALLELISM,
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
    )
    snapshot = MySqlCdcSnapshotOperator.partial(
        task_id="snapshot",
        state_location="{{ params.state_location }}",
        mysql_cdc_conn_id="{{ params.mysql_conn_id }}",
        sink_conn_id="{{ params.sink_conn_id }}",
        reread_batches="{{ params.reread_batches }}",
        spark_runtime="{{ params.spark_runtime }}",
        connect_conn_id="{{ params.spark_connect_conn_id }}",
        aws_conn_id="{{ params.aws_conn_id }}",
        conn_id="spark_default",
        map_index_template="{{ task.batch_label }}",
        max_active_tis_per_dagrun=SNAPSHOT_PARALLELISM,
        execution_timeout=timedelta(hours=6),
    ).expand_kwargs(plan.output)
    stream = MySqlCdcStreamOperator(
        task_id="stream",
        snapshot_results=snapshot.output,
        state_location="{{ params.state_location }}",
        mysql_cdc_conn_id="{{ params.mysql_conn_id }}",
        spark_conn_id="spark_default",
        sink_conn_id="{{ params.sink_conn_id }}",
        aws_conn_id="{{ params.aws_conn_id }}",
        trigger_rule="none_failed",  # a stream-only startup mode has no snapshot tasks
    )
    validate >> plan >> snapshot >> stream


# Every watchdog check records the stream's health (alive, lag, last commit) as an event of
# this asset: the Assets view shows them, and a DAG scheduled on it runs after every check.
STREAM_HEALTH = Asset(name="mysql_cdc_pipeline_stream_health", uri="mysqlcdc://mysql_cdc_pipeline/stream_health",
                      group="mysqlcdc")

with DAG(
    dag_id="mysql_cdc_stream_watchdog",
    schedule=timedelta(minutes=5),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,  # a stream nobody watches dies unnoticed; skipped while none runs
    doc_md="""
### Stream watchdog for `mysql_cdc_pipeline`

The binlog stream runs outside the pipeline's DAG run. Every 5 minutes this DAG checks it and
logs **alive** (pid, host), its **last commit** (micro-batch, offset, how long ago), its
**lag** behind the binlog head and the **tail of its log**: open the latest run's
`stream_health` task log. The same figures are in the task's XCom and in the
`mysql_cdc_pipeline_stream_health` asset's events (*Assets* view).

A dead stream is relaunched from its checkpoint (nothing lost, nothing twice). The check fails
when the stream stays more than 10 minutes behind. While no stream was ever started at the
state location, the check is skipped. It runs unpaused from the start; point its
`state_location` at the pipeline's.
""",
    tags=["mysqlcdc", "cdc"],
    params={"state_location": Param(f"{STATE_ROOT}/pipeline", type="string", title="State location",
                                    description="The pipeline's state location (scheduled runs use this default)."),
            "aws_conn_id": Param(None, type=["null", "string"], title="Object storage connection",
                                 description="The pipeline's aws connection when its state location is on S3.")},
) as watchdog:
    MySqlCdcStreamSensor(
        task_id="stream_health",
        state_location="{{ params.state_location }}",
        aws_conn_id="{{ params.aws_conn_id or '' }}",   # no native rendering here: None would be 'None'
        max_lag_s=600,
        relaunch=True,
        poke_interval=30,
        timeout=240,
        mode="reschedule",
        outlets=[STREAM_HEALTH],
    )
