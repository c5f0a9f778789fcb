"""One mapped snapshot task fails (its Spark job is killed mid-read); clearing that map index
alone reruns only its chunks, and the stream then starts from the right minimum.

This is the UI's "clear this map index" (or the REST API's clearTaskInstances with a map
index), done with ``DAG.clear`` and run with the loop ``dag.test()`` uses.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.e2e.test_pipeline_dag import _conf, _sink_equals_source, _stop_stream, _use_source, clear_and_run, run_dag
from tests.support import airflow_env
from tests.support.processes import CommandLineWatcher
from tests.support.tables import create_composite_table, create_int_table
from tests.support.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

VICTIM = "batch-0001"


def test_clearing_one_failed_map_index_reruns_only_its_batch(mariadb, tmp_path):
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from airflow_provider_mysqlcdc.operators._spark import kill_process_tree

    db = f"e2e_rerun_{os.getpid()}"
    mariadb.execute(f"CREATE DATABASE `{db}`")
    specs = [create_int_table(mariadb, db, 60_000, "orders"), create_composite_table(mariadb, db, 20_000)]
    _use_source(mariadb, db)
    conf = _conf(db, tmp_path)
    killed: list[str] = []

    def kill_victim_once(pid: int, line: str) -> None:
        # The first time batch-0001's Spark job runs, kill it (and its driver) a few seconds
        # in: a lost node, an OOM kill, a preempted container.
        if not killed and "SparkSubmit" in line and f"--batch-id {VICTIM}" in line:
            killed.append(line)
            time.sleep(4)
            kill_process_tree(pid)

    watcher = CommandLineWatcher(("SparkSubmit",), on_new=kill_victim_once).start()
    writers = [ConcurrentWriter(lambda: mariadb.connect(db), s, seed=21 + i, threads=1, pause_s=0.003).start()
               for i, s in enumerate(specs)]
    state = StateStore(conf["state_location"])
    try:
        dr = run_dag(conf, tmp_path / "first_run.log")
        states = airflow_env.task_states(dr)
        assert killed, "the victim batch's Spark job was never seen"
        failed = [k for k, v in states.items() if v[0] == "failed"]
        assert len(failed) == 1 and failed[0][0] == "snapshot", states
        victim_index = failed[0][1]
        assert states[("stream", -1)][0] == "upstream_failed", states
        assert state.read_batch_result(VICTIM) is None  # a failed job leaves no result file
        others = {b: state.read_batch_result(b) for b in (r["batch_id"] for r in state.batch_results())}
        assert others and VICTIM not in others

        dr = clear_and_run(dr.run_id, [["snapshot", victim_index], "stream"], tmp_path / "rerun.log")
        states = airflow_env.task_states(dr)
        assert dr.state == "success", states
        assert states[("snapshot", victim_index)] == ("success", 2)
        assert all(v == ("success", 1) for k, v in states.items() if k[0] == "snapshot" and k[1] != victim_index)

        # Only the victim's chunks were read again: one Spark job per other batch in all.
        jobs = [c for c in watcher.seen if "SparkSubmit" in c]
        per_batch = {b: sum(f"--batch-id {b}" in c for c in jobs) for b in [*others, VICTIM]}
        assert per_batch[VICTIM] == 2 and all(n == 1 for b, n in per_batch.items() if b != VICTIM), per_batch
        for b, before in others.items():
            assert state.read_batch_result(b) == before  # untouched

        time.sleep(3)
        for w in writers:
            w.stop()
        writers.clear()
        finished = state.read_finished()
        assert VICTIM in {f.batch_id for f in finished}
        assert not _sink_equals_source(mariadb, tmp_path, specs)
    finally:
        for w in writers:
            w.stop()
        watcher.stop()
        _stop_stream(conf["state_location"])
