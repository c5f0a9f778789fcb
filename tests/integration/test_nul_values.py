"""Text holding U+0000 through snapshot and stream into Delta and the changelog: kept as is.
PostgreSQL cannot store it: with ``nul_in_text: replace`` it gets U+FFFD, and the stream counts
each replacement in ``stream/status.json`` (the 'fail' policy: tests/integration/test_sink_postgres.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.runtime.stream_status import install_status_listener, read_status
from airflow_provider_mysqlcdc.spark.sinks.factory import build_sink
from airflow_provider_mysqlcdc.spark.snapshot.job import run_snapshot_batch
from airflow_provider_mysqlcdc.spark.stream.query import start_stream
from mysqlcdc_harness.sink_compare import (
    delta_rows,
    mysql_rows,
    postgres_for,
    postgres_rows,
    sink_config,
    wait_until_equal,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.mark.parametrize("sink_type", ["delta", "changelog", "postgres"])
def test_nul_in_text_survives_snapshot_and_stream(mariadb, fresh_db, spark, tmp_dir, sink_type, request, monkeypatch):
    mariadb.execute(
        "CREATE TABLE notes (id INT PRIMARY KEY, body VARCHAR(40), b TEXT)",
        "INSERT INTO notes VALUES (1, CONCAT('a', CHAR(0), 'b'), CONCAT(CHAR(0))), (2, 'plain', NULL)",
        database=fresh_db,
    )
    t = TableId(fresh_db, "notes")
    src = mariadb.source_config()
    config = PipelineConfig(
        name=f"nul-{sink_type}",
        source=src,
        include=(str(t),),
        state_location=str(tmp_dir / "state"),
        sink=sink_config(
            sink_type,
            tmp_dir,
            postgres_for(request, sink_type),
            monkeypatch,
            **({"nul_in_text": "replace"} if sink_type == "postgres" else {}),
        ),
        split=SplitOptions(chunk_size=100),
        stream=StreamOptions(max_events_per_batch=1000, heartbeat_s=1.0, trigger_interval_s=0.5),
    )
    plan = build_plan(src, config.include, split=config.split)
    state = StateStore(config.state_location)
    state.write_plan(plan)
    for b in plan.batches:
        run_snapshot_batch(spark, config, b.batch_id, plan=plan)
    state.write_finished(state.finished_from_results())
    sink = build_sink(config.sink)
    sink.prepare(list(plan.schemas.values()))
    listener = install_status_listener(spark, config, state)  # as the stream job does
    sink.observe_replaced_values(listener.recorder.count_replaced)
    query = start_stream(spark, config, sink, list(plan.schemas.values()))
    try:
        time.sleep(2)
        mariadb.execute(
            "INSERT INTO notes VALUES (3, CONCAT(CHAR(0), 'x', CHAR(0)), 'y')",
            "UPDATE notes SET body = CONCAT('p', CHAR(0)) WHERE id = 2",
            database=fresh_db,
        )
        cols = ["id", "body", "b"]
        source = mysql_rows(mariadb, t, cols, ("id",))
        assert source[(3,)]["body"] == "\x00x\x00" and source[(1,)]["b"] == "\x00"
        if sink_type == "delta":
            problem = wait_until_equal(
                lambda: mysql_rows(mariadb, t, cols, ("id",)),
                lambda: {k: {c: r[c] for c in cols} for k, r in delta_rows(tmp_dir / "lake", t, ("id",)).items()},
                timeout_s=90,
            )
            assert not problem, problem
        elif sink_type == "postgres":
            pg = request.getfixturevalue("postgres")
            want = {
                k: {c: (v.replace("\x00", "\ufffd") if isinstance(v, str) else v) for c, v in r.items()}
                for k, r in source.items()
            }
            problem = wait_until_equal(
                lambda: want,
                lambda: postgres_rows(pg, f"{fresh_db}__notes", cols, ("id",), schema=config.sink.options["schema"]),
                timeout_s=90,
            )
            assert not problem, problem
            # two values in the stream (ids 3 and 2; the snapshot's are in its log), counted at commit
            deadline = time.time() + 30
            while time.time() < deadline and not (read_status(state) and read_status(state).replaced_values):
                time.sleep(0.5)
            assert read_status(state).replaced_values == {str(t): {"nul_in_text": 2}}
        else:
            table_dir = Path(tmp_dir / "lake" / fresh_db / "notes")
            deadline = time.time() + 90
            seen: dict[int, dict] = {}
            while time.time() < deadline and len(seen) < 3:
                for f in sorted(table_dir.rglob("*.jsonl")):
                    for line in f.read_text().splitlines():
                        rec = json.loads(line)
                        if rec["op"] in ("+I", "+U"):
                            seen[int(rec["data"]["id"])] = rec["data"]
                time.sleep(1)
            assert seen.get(3, {}).get("body") == "\x00x\x00" and seen.get(1, {}).get("body") == "a\x00b", seen
            assert seen.get(2, {}).get("body") == "p\x00", seen
        assert query.exception() is None
    finally:
        query.stop()
        listener.close()
        spark.streams.removeListener(listener)
