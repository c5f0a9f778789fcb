"""Pipelines as files: one YAML file per pipeline, in a data platform repository.

A pipeline file has the shape of Flink CDC 3's pipeline definition (``source``, ``sink``,
``route``, ``transform``, ``pipeline``); its run settings are the trigger form's settings
(``cdc/settings.py``), checked the same way. The docs' "Pipeline files" page
section describes every key.

* ``spec``: the file's sections as pydantic models, and the checks of every value;
* ``loader``: reads one file or a folder, with one ``<file>: <key>: <message>`` per problem;
* ``dag_builder``: the pipeline DAG and its stream watchdog, shared with ``dags/mysql_cdc_pipeline.py``;
* ``factory``: what a DAG file calls to turn one pipeline file into its DAGs;
* ``python -m airflow_provider_mysqlcdc.pipelines validate pipelines/``: the check for CI;
  ``... dag-files pipelines/ dags/`` writes the DAG file of each pipeline file.

``spec``, ``loader`` and the command import no Airflow (``--check-source`` does, when given);
``dag_builder`` and ``factory`` build DAGs, so they do.
"""

from __future__ import annotations
