"""`make demo`: the whole pipeline against a live MariaDB, verified row by row.

Starts a private MariaDB (binlog ROW/FULL) under .demo/, creates `shop.orders` (300,000
rows) and `shop.tenant_items` (composite key, 100,000 rows), plans them into chunks and
batches, and -- while writers keep inserting, updating, deleting and moving keys -- runs one
`spark-submit spark_jobs/snapshot_chunks.py` per batch into a Delta Lake under .demo/lake,
then starts `spark_jobs/binlog_stream.py` from the minimum high watermark. After the writers
stop it waits for the stream to catch up and compares every Delta table with its source.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions  # noqa: E402
from airflow_provider_mysqlcdc.cdc.plan import build_plan  # noqa: E402
from airflow_provider_mysqlcdc.cdc.state import StateStore  # noqa: E402
from airflow_provider_mysqlcdc.spark.session import jdbc_jar_path  # noqa: E402
from tests.support.mariadb import MariaDB  # noqa: E402
from tests.support.sink_compare import delta_rows, mysql_rows  # noqa: E402
from tests.support.tables import VALUE_COLS, create_composite_table, create_int_table  # noqa: E402
from tests.support.writer import ConcurrentWriter  # noqa: E402

WRITE_AFTER_SNAPSHOT_S = 30


def say(msg: str) -> None:
    print(f"demo: {msg}", flush=True)


def main() -> int:
    work = ROOT / ".demo"
    shutil.rmtree(work, ignore_errors=True)
    server = MariaDB(base_dir=work / "mariadb", server_id=1)
    say("starting a private MariaDB ...")
    server.start()
    stream = None
    writers: list[ConcurrentWriter] = []
    try:
        server.execute("CREATE DATABASE shop")
        specs = [create_int_table(server, "shop", 300_000, "orders"),
                 create_composite_table(server, "shop", 100_000, "tenant_items")]
        source = server.source_config()
        config = PipelineConfig(
            name="demo", source=source, include=("shop.orders", "shop.tenant_items"),
            state_location=str(work / "state"), sink=SinkConfig("delta", {"root": str(work / "lake")}),
            stream=StreamOptions(max_events_per_batch=20_000, heartbeat_s=2.0, trigger_interval_s=1.0))
        cfg_path = work / "pipeline.json"
        cfg_path.write_text(config.to_json())
        plan = build_plan(source, config.include, split=config.split, chunks_per_batch=20)
        state = StateStore(config.state_location)
        state.write_plan(plan)
        say(f"MariaDB on 127.0.0.1:{server.port}; shop.orders 300,000 rows, shop.tenant_items 100,000 rows; "
            f"{sum(len(b.chunks) for b in plan.batches)} chunks in {len(plan.batches)} batches")

        env = dict(os.environ, MYSQLCDC_PASSWORD=source.password, PYSPARK_PYTHON=sys.executable,
                   PYSPARK_DRIVER_PYTHON=sys.executable)
        for i, spec in enumerate(specs):
            writers.append(ConcurrentWriter(lambda: server.connect("shop"), spec, seed=7 + i, threads=1,
                                            pause_s=0.002).start())
        say("writers started (inserts, updates, deletes, key moves)")

        spark_submit = str(Path(sys.executable).parent / "spark-submit")
        for b in plan.batches:
            t = time.perf_counter()
            p = subprocess.run([spark_submit, "--master", "local[2]", "--jars", jdbc_jar_path() or "",
                                "--conf", "spark.ui.showConsoleProgress=false",
                                str(ROOT / "airflow_provider_mysqlcdc" / "jobs" / "snapshot_chunks.py"),
                                "--config", str(cfg_path), "--batch-id", b.batch_id],
                               env=env, capture_output=True, text=True)
            if p.returncode != 0:
                print(p.stderr[-4000:])
                raise SystemExit(f"snapshot job for {b.batch_id} failed")
            r = state.read_batch_result(b.batch_id)
            rows = sum(sum(v.values()) for v in r["rows_per_chunk"].values())
            say(f"snapshot {b.batch_id}: {rows:,} rows, HW {r['high_watermark']['file']}:"
                f"{r['high_watermark']['position']}, {r['backfill_events']} backfill events, "
                f"{time.perf_counter() - t:.1f}s (spark-submit included)")

        finished = state.finished_from_results()
        state.write_finished(finished)
        say(f"starting the binlog stream from the minimum HW {min(f.high_watermark for f in finished)}")
        log = open(work / "stream.log", "w")
        stream = subprocess.Popen([sys.executable, str(ROOT / "airflow_provider_mysqlcdc" / "jobs" / "binlog_stream.py"),
                                   "--config", str(cfg_path)], env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        time.sleep(WRITE_AFTER_SNAPSHOT_S)
        total = 0
        for w in writers:
            total += w.stop().total
        writers.clear()
        say(f"writers stopped after {total:,} changes; waiting for the stream to catch up")

        tables = [(s, plan.schemas[next(t for t in plan.schemas if t.table == s.table)]) for s in specs]
        deadline = time.time() + 180
        while True:
            if stream.poll() is not None:
                raise SystemExit(f"the stream job exited with {stream.returncode}; see {work / 'stream.log'}")
            diffs, rows = [], 0
            for spec, schema in tables:
                cols = list(spec.key_columns) + list(VALUE_COLS)
                want = mysql_rows(server, schema.table_id, cols, schema.row_identity)
                try:
                    got = delta_rows(work / "lake", schema.table_id, schema.row_identity)
                except Exception as e:  # table not readable yet
                    diffs.append(f"{schema.table_id}: {e}")
                    continue
                rows += len(want)
                if got != want:
                    missing = len(want.keys() - got.keys())
                    extra = len(got.keys() - want.keys())
                    changed = sum(1 for k in want.keys() & got.keys() if want[k] != got[k])
                    diffs.append(f"{schema.table_id}: {missing} missing, {extra} extra, {changed} different")
            if not diffs:
                print(f"VERIFIED: sink equals source ({rows} rows, {len(tables)} tables)", flush=True)
                return 0
            if time.time() > deadline:
                print("FAILED: sink differs from source: " + "; ".join(diffs), flush=True)
                return 1
            time.sleep(3)
    finally:
        for w in writers:
            w.stop()
        if stream is not None and stream.poll() is None:
            os.killpg(stream.pid, signal.SIGTERM)
            try:
                stream.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(stream.pid, signal.SIGKILL)
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
