"""Run the DAG template in a separate process, its whole console output in a file.

    python -m mysqlcdc_harness.airflow_runner test '<run_conf json>'
    python -m mysqlcdc_harness.airflow_runner clear <run_id> '<task ids json>'
    python -m mysqlcdc_harness.airflow_runner watchdog '<run_conf json>'
    python -m mysqlcdc_harness.airflow_runner dag-file <path of a DAG file> <dag id>
    python -m mysqlcdc_harness.airflow_runner dag-file-clear <path of a DAG file> <dag id> <run_id> '<task ids json>'

``dag.test()`` logs to this process's stdout through Airflow's own logging set-up, so a
separate process is the reliable way to keep every line (for the tests that grep them for
secrets) without flooding pytest's output. The last line is ``RESULT {run_id, state}``.
Failures of tasks are kept as task states; retries are off, so a failure stays one.
"""

from __future__ import annotations

import json
import sys

from mysqlcdc_harness import airflow_env


def main(argv: list[str]) -> int:
    airflow_env.configure()
    if argv[0] in ("dag-file", "dag-file-clear"):
        dag = _from_dag_file(argv[1], argv[2])
    elif argv[0] == "watchdog":
        dag = airflow_env.load_template_dag("mysql_cdc_stream_watchdog")
    else:
        dag = airflow_env.load_template_dag()
    for t in dag.tasks:
        t.retries = 0
    if argv[0] == "dag-file":
        dr = dag.test()
    elif argv[0] in ("test", "watchdog"):
        dr = dag.test(run_conf=json.loads(argv[1]))
    elif argv[0] == "dag-file-clear":  # dag-file-clear <path> <dag id> <run id> <task ids as JSON>
        ids = [tuple(x) if isinstance(x, list) else x for x in json.loads(argv[4])]
        dr = airflow_env.clear_and_run(dag, argv[3], ids)
    elif argv[0] == "clear":
        ids = [tuple(x) if isinstance(x, list) else x for x in json.loads(argv[2])]
        dr = airflow_env.clear_and_run(dag, argv[1], ids)
    else:
        raise SystemExit(f"unknown action {argv[0]!r}")
    print("RESULT " + json.dumps({"run_id": dr.run_id, "state": str(dr.state)}), flush=True)
    return 0


def _from_dag_file(path: str, dag_id: str):
    """A DAG of a DAG file outside the template's folder, parsed and stored in the metadata DB as
    the DAG processor would (``dag.test()`` only runs DAGs the DB has; it syncs the template's
    folder itself)."""
    from pathlib import Path

    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    folder = str(Path(path).parent)
    bag = DagBag(dag_folder=path, bundle_path=Path(folder), bundle_name="dags-folder")
    if bag.import_errors:
        raise SystemExit(f"{path}: import errors {bag.import_errors}")
    DagBundlesManager().sync_bundles_to_db()  # the bundle row the DAG's row refers to
    sync_bag_to_db(bag, "dags-folder", None)
    return bag.dags[dag_id]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
