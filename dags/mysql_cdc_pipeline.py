"""mysqlcdc pipeline template: copy this file into your DAGs folder and adjust the defaults.

validate -> plan -> snapshot (one mapped Spark job per batch) -> stream, and the stream's watchdog

Every setting is a DAG param, so an initial load can be started from the UI's trigger form.
The DAGs are built by ``build_pipeline_dags``, as those of a pipeline file are (docs/pipeline-files.md): ``examples/platform_repo/pipelines/mysql_cdc_pipeline.yaml``
is this template as a file.
"""

from __future__ import annotations

import os

from airflow_provider_mysqlcdc.pipelines.dag_builder import build_pipeline_dags

# How many snapshot Spark jobs run at once. The plan makes the batch count a multiple of it,
# so keep it equal to what your Spark cluster can run side by side.
SNAPSHOT_PARALLELISM = int(os.environ.get("MYSQLCDC_SNAPSHOT_PARALLELISM", "1"))
STATE_ROOT = os.environ.get("MYSQLCDC_STATE_ROOT", "/tmp/mysqlcdc")
LAKE_ROOT = os.environ.get("MYSQLCDC_LAKE_ROOT", "/tmp/mysqlcdc-lake")

# The trigger form: every setting of the pipeline with its section, help and checks
# (airflow_provider_mysqlcdc/cdc/settings.py). Change the shipped defaults here.
dag, watchdog = build_pipeline_dags(
    "mysql_cdc_pipeline",  # its watchdog DAG: mysql_cdc_stream_watchdog
    settings=dict(
        tables=["shop.orders"],
        state_location=f"{STATE_ROOT}/pipeline",
        sink_options={"root": LAKE_ROOT},
    ),
    snapshot_parallelism=SNAPSHOT_PARALLELISM,
)
