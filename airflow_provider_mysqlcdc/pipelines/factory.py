"""A pipeline file's DAGs, for the DAG file of that pipeline file.

A platform repository keeps its pipeline files in a folder (``pipelines/``) and, in its DAGs
folder, one three-line DAG file per pipeline file (``python -m airflow_provider_mysqlcdc.pipelines
dag-files pipelines/ dags/`` writes them)::

    \"\"\"The DAGs of the pipeline file ../pipelines/shop_orders.yaml.\"\"\"
    from airflow_provider_mysqlcdc.pipelines.factory import pipeline_dags
    pipeline_dags("../pipelines/shop_orders.yaml", globals())

Why one DAG file per pipeline file and not one for the folder: see ``dagfiles.py`` (Airflow 3
marks every DAG of a file with an import error stale, so one broken pipeline file would stop
all the pipelines of a shared DAG file). Here a broken pipeline file is one import error on its
own DAG file, naming the pipeline file, each key, the value found and the fix.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, MutableMapping

from airflow.sdk import DAG

from .dag_builder import build_pipeline_dags
from .loader import load_file, refuse_unapplied_rules, unmatched_routes, with_lines
from .spec import PipelineFileError, Problem


def _shown(path: Path, dag_dir: Path) -> str:
    """The pipeline file as messages name it: from the folder above the DAGs folder (the
    repository, in the usual layout: ``pipelines/shop_orders.yaml``), else its full path."""
    try:
        return path.resolve().relative_to(dag_dir.resolve().parent).as_posix()
    except ValueError:
        return str(path.resolve())


def pipeline_dags(
    pipeline_file: str | os.PathLike[str], globals_dict: MutableMapping[str, Any] | None = None
) -> tuple[DAG, DAG]:
    """The pipeline DAG and the stream watchdog DAG of one pipeline file, put into ``globals_dict``
    (the calling DAG file's ``globals()``, its own when not given).

    A relative ``pipeline_file`` is relative to the DAG file. Raises ``PipelineFileError``
    (Airflow shows it as the DAG file's import error) when the file has a problem, gives the
    name or the state location of another file of its folder, or pairs route/transform sections with
    a sink that does not apply them.
    """
    if globals_dict is None:
        globals_dict = sys._getframe(1).f_globals
    dag_file = globals_dict.get("__file__")
    dag_dir = Path(dag_file).parent if dag_file else Path.cwd()
    path = Path(pipeline_file)
    path = path if path.is_absolute() else dag_dir / path
    file = _shown(path, dag_dir)
    spec = load_file(path, file, siblings=True)
    refused = with_lines(refuse_unapplied_rules(file, spec) + unmatched_routes(file, spec), path, file)
    if refused:
        raise PipelineFileError(refused)
    try:
        dag, watchdog = build_pipeline_dags(**spec.dag_arguments(), pipeline_file=file)
    except Exception as e:  # whatever Airflow refuses, named with the file
        raise PipelineFileError(
            [
                Problem(
                    file,
                    "pipeline",
                    f"Airflow refused its DAGs ({type(e).__name__}: {e}). Fix: correct the value named there.",
                )
            ]
        ) from e
    globals_dict[dag.dag_id] = dag
    globals_dict[watchdog.dag_id] = watchdog
    return dag, watchdog
