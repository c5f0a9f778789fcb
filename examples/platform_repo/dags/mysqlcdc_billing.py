"""The DAGs of the pipeline file ../pipelines/billing.yaml (written by: python -m airflow_provider_mysqlcdc.pipelines dag-files; edit the pipeline file, not this one)."""
from airflow_provider_mysqlcdc.pipelines.factory import pipeline_dags
pipeline_dags("../pipelines/billing.yaml", globals())
