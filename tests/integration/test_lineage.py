"""OpenLineage of the pipeline's operators (Airflow's OpenLineage provider, the optional
``[openlineage]`` extra): the plan task reads the source tables; a snapshot task reads its
batch's tables and writes their sink tables; the stream task every captured table."""

from __future__ import annotations

import pytest

from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.tables import create_composite_table, create_int_table

pytestmark = pytest.mark.integration


def test_each_operator_reports_what_it_reads_and_writes(mariadb, fresh_db, tmp_dir):
    from airflow.providers.openlineage.extractors.base import DefaultExtractor
    from airflow.providers.openlineage.extractors.manager import ExtractorManager

    from airflow_provider_mysqlcdc.operators.plan import MySqlCdcPlanOperator
    from airflow_provider_mysqlcdc.operators.snapshot import MySqlCdcSnapshotOperator
    from airflow_provider_mysqlcdc.operators.stream import MySqlCdcStreamOperator

    create_int_table(mariadb, fresh_db, 3_000, "orders")
    create_composite_table(mariadb, fresh_db, 1_000, "tenant_items")
    airflow_env.set_connection(
        "lineage_src", "mysql_cdc", host="127.0.0.1", port=mariadb.port, login="root", password=ROOT_PASSWORD
    )
    state, lake = str(tmp_dir / "state"), tmp_dir / "lake"
    plan = MySqlCdcPlanOperator(
        task_id="plan",
        mysql_cdc_conn_id="lineage_src",
        state_location=state,
        tables=[f"{fresh_db}.orders", f"{fresh_db}.tenant_items"],
        sink_type="delta",
        sink_options={"root": str(lake)},
        chunk_size=500,
        rows_per_batch=2_000,
    )
    batches = plan.execute({})
    assert len(batches) >= 2
    source = f"mysql://127.0.0.1:{mariadb.port}"
    tables = {f"{fresh_db}.orders", f"{fresh_db}.tenant_items"}

    got = plan.get_openlineage_facets_on_complete(None)
    assert {(d.namespace, d.name) for d in got.inputs} == {(source, t) for t in tables} and not got.outputs

    first = batches[0]
    snap = MySqlCdcSnapshotOperator(
        task_id="snapshot", state_location=state, batch_id=first["batch_id"], mysql_cdc_conn_id="lineage_src"
    )
    assert ExtractorManager().get_extractor_class(snap) is DefaultExtractor, "the provider asks the operator"
    got = snap.get_openlineage_facets_on_complete(None)
    read = {d.name for d in got.inputs}
    assert read and read <= tables and {d.namespace for d in got.inputs} == {source}
    assert {(d.namespace, d.name) for d in got.outputs} == {
        ("file", str(lake.resolve() / fresh_db / t.split(".")[1])) for t in read
    }

    stream = MySqlCdcStreamOperator(task_id="stream", state_location=state, mysql_cdc_conn_id="lineage_src")
    got = stream.get_openlineage_facets_on_complete(None)
    assert {d.name for d in got.inputs} == tables and len(got.outputs) == 2


def test_sink_uris_become_openlineage_names():
    from airflow_provider_mysqlcdc.lineage import dataset_name

    assert dataset_name("s3://lake/shop/orders") == ("s3://lake", "shop/orders")
    assert dataset_name("file:///data/lake/shop/orders") == ("file", "/data/lake/shop/orders")
    assert dataset_name("postgres://pg:5432/analytics/cdc/shop__orders") == (
        "postgres://pg:5432",
        "analytics.cdc.shop__orders",
    )
