"""Run the DAG template in a separate process, its whole console output in a file.

    python -m tests.support.airflow_runner test '<run_conf json>'
    python -m tests.support.airflow_runner clear <run_id> '<task ids json>'

``dag.test()`` logs to this process's stdout through Airflow's own logging set-up, so a
separate process is the reliable way to keep every line (for the tests that grep them for
secrets) without flooding pytest's output. The last line is ``RESULT {run_id, state}``.
Failures of tasks are kept as task states; retries are off, so a failure stays one.
"""

from __future__ import annotations

import json
import sys

from tests.support import airflow_env


def main(argv: list[str]) -> int:
    airflow_env.configure()
    dag = airflow_env.load_template_dag()
    for t in dag.tasks:
        t.retries = 0
    if argv[0] == "test":
        dr = dag.test(run_conf=json.loads(argv[1]))
    elif argv[0] == "clear":
        ids = [tuple(x) if isinstance(x, list) else x for x in json.loads(argv[2])]
        dr = airflow_env.clear_and_run(dag, argv[1], ids)
    else:
        raise SystemExit(f"unknown action {argv[0]!r}")
    print("RESULT " + json.dumps({"run_id": dr.run_id, "state": str(dr.state)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
