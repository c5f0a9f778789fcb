"""mysqlcdc pipeline template: copy this file into your DAGs folder and adjust the defaults.

validate -> plan -> snapshot (one mapped Spark job per batch) -> stream

Every setting is a DAG param, so an initial load can be started from the UI's trigger form.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_mysqlcdc.operators.plan import MySqlCdcPlanOperator
from airflow_provider_mysqlcdc.operators.snapshot import MySqlCdcSnapshotOperator
from airflow_provider_mysqlcdc.operators.stream import MySqlCdcStreamOperator
from airflow_provider_mysqlcdc.operators.validate import MySqlCdcValidateOperator
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

1. **validate** checks the server: binlog ROW / FULL image, privileges, time zone, version.
   A failure lists every problem with the setting to change.
2. **plan** splits the tables into chunks and groups them into batches (millions of rows each),
   kept in `state_location`: rerunning the DAG reuses the plan and skips finished batches.
3. **snapshot** runs one Spark job per batch (`map index` = the batch's tables and chunks) and
   returns its high watermark. A failed batch: clear just that map index and run it again.
4. **stream** starts the long-lived binlog stream from the minimum high watermark and returns
   once it has committed its first micro-batch. Running it again never starts a second stream;
   a dead one resumes from its checkpoint.

Trigger with **reset** to forget the plan and the stream's checkpoint and load everything again.
The `mysql_cdc_stream_watchdog` DAG checks the stream every 5 minutes and relaunches it if it died.
"""

params = {
    "mysql_conn_id": Param("mysql_cdc_default", type="string", title="MySQL connection",
                           description="A mysql_cdc (or mysql) connection to the source server."),
    "tables": Param(["shop.orders"], type="array", title="Tables",
                    description="db.table names or regular expressions over db.table, one per line."),
    "exclude": Param([], type="array", title="Exclude", description="Tables to leave out (same forms)."),
    "state_location": Param(f"{STATE_ROOT}/pipeline", type="string", title="State location",
                            description="Directory or URL for plan, results and checkpoint; every Spark node "
                                        "must reach it."),
    "sink_type": Param("delta", type="string", enum=["delta", "postgres", "changelog", "console"], title="Sink"),
    "sink_options": Param({"root": LAKE_ROOT}, type="object", title="Sink options",
                          description='delta/changelog: {"root": "<dir or URL>"}; postgres: {"schema": "cdc"}.'),
    "sink_conn_id": Param("", type="string", title="PostgreSQL sink connection",
                          description="For the postgres sink: the connection holding its credentials."),
    "chunk_size": Param(8096, type="integer", minimum=1, title="Chunk size (rows)"),
    "rows_per_batch": Param(5_000_000, type="integer", minimum=1, title="Rows per Spark job"),
    "startup_mode": Param("initial", type="string", title="Startup mode",
                          enum=["initial", "snapshot", "latest-offset", "earliest-offset", "specific-offset",
                                "timestamp"]),
    "startup_offset": Param({}, type="object", title="Startup offset",
                            description='specific-offset: {"file": "mysql-bin.000003", "position": 4} '
                                        'or {"gtid": "..."}.'),
    "stream_options": Param({}, type="object", title="Stream options",
                            description='e.g. {"max_events_per_batch": 20000, "trigger_interval_s": 1}.'),
    "reset": Param(False, type="boolean", title="Reset",
                   description="Forget the plan, batch results and stream checkpoint; load everything again."),
}

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
        rows_per_batch="{{ params.rows_per_batch }}",
        parallelism=SNAPSHOT_PARALLELISM,
        startup_mode="{{ params.startup_mode }}",
        startup_offset="{{ params.startup_offset }}",
        stream_options="{{ params.stream_options }}",
        reset="{{ params.reset }}",
    )
    snapshot = MySqlCdcSnapshotOperator.partial(
        task_id="snapshot",
        state_location="{{ params.state_location }}",
        mysql_cdc_conn_id="{{ params.mysql_conn_id }}",
        sink_conn_id="{{ params.sink_conn_id }}",
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
        trigger_rule="none_failed",  # a stream-only startup mode has no snapshot tasks
    )
    validate >> plan >> snapshot >> stream


with DAG(
    dag_id="mysql_cdc_stream_watchdog",
    schedule=timedelta(minutes=5),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    doc_md="Checks the mysql_cdc_pipeline stream: relaunches it from its checkpoint if it died, "
           "and fails when it stays more than 10 minutes behind the binlog head.",
    tags=["mysqlcdc", "cdc"],
    params={"state_location": Param(f"{STATE_ROOT}/pipeline", type="string", title="State location",
                                    description="The pipeline's state_location (scheduled runs use this default).")},
) as watchdog:
    MySqlCdcStreamSensor(
        task_id="stream_health",
        state_location="{{ params.state_location }}",
        mysql_cdc_conn_id="mysql_cdc_default",
        spark_conn_id="spark_default",
        max_lag_s=600,
        relaunch=True,
        poke_interval=30,
        timeout=240,
        mode="reschedule",
    )
