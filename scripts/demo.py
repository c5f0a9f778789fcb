"""`make demo`: the DAG template, run by the real Airflow CLI against a live MariaDB, verified row by row.

Starts a private MariaDB (binlog ROW/FULL) under .demo/mariadb, creates `shop.orders` (300,000
rows) and `shop.tenant_items` (composite key, 100,000 rows) and starts writers that keep
inserting, updating, deleting and moving keys. Meanwhile a private Airflow (AIRFLOW_HOME
.demo/airflow, SQLite metadata DB, connections from AIRFLOW_CONN_* variables) is migrated.

Then `airflow dags test mysql_cdc_pipeline -c '<conf>'` runs dags/mysql_cdc_pipeline.py as a
user would: validate -> plan -> one mapped snapshot task per batch (a client of one local Spark
Connect server, local[2]; its tasks read the rows into Arrow and write the Delta files)
into a Delta Lake under .demo/lake -> stream (the binlog stream, launched as a detached local
process; the task returns after its first committed micro-batch). Its console output goes
to .demo/airflow-dags-test.log. The writers go on for 30 s more while the stream follows,
then stop; once the stream has caught up every Delta table is compared with its source, row
by row. The stream and the server are stopped at the end, also on failure.

`make demo SINK=iceberg` (`--sink iceberg`) runs the same into the Apache Iceberg sink instead:
one Iceberg table per source table in a warehouse under .demo/warehouse, with the sink's default
catalog (SQLite, .demo/warehouse/catalog.db), read back through that catalog for the comparison.
The demo takes a setting on its command line, as the Makefile's other targets do, so that the
default run (`make demo`, Delta) stays the one the README quotes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from airflow_provider_mysqlcdc.cdc.batching import batch_label
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import log_tail
from mysqlcdc_harness.mariadb import ROOT_PASSWORD, MariaDB
from mysqlcdc_harness.sink_compare import delta_rows, iceberg_rows, mysql_rows
from mysqlcdc_harness.tables import VALUE_COLS, create_composite_table, create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

ROOT = Path(__file__).resolve().parents[1]

DAG_ID = "mysql_cdc_pipeline"
WRITE_AFTER_SNAPSHOT_S = 30
CATCH_UP_TIMEOUT_S = 300  # a shared 2-core machine can be slow
CATCH_UP_REPORT_EVERY_S = 15
DAG_RUN_TIMEOUT_S = 45 * 60
TABLES = (("orders", 300_000, create_int_table), ("tenant_items", 100_000, create_composite_table))
# 400,000 rows / 120,000 per Spark job -> 4 batches (3 if the row estimates come out low).
ROWS_PER_BATCH = 120_000
CHUNK_SIZE = 8096

WORK = ROOT / ".demo"
AIRFLOW_HOME = WORK / "airflow"
DAG_LOG = WORK / "airflow-dags-test.log"
MIGRATE_LOG = WORK / "airflow-db-migrate.log"


@dataclass(frozen=True)
class DemoSink:
    """A sink the demo can load into: where its tables go, how the run describes it, and how the
    verification reads a table back (identity -> row, as ``mysql_rows`` gives the source's)."""

    type: str
    root: Path
    described: str
    read: Callable[..., dict]


SINKS = {
    "delta": DemoSink("delta", WORK / "lake", "Delta Lake under .demo/lake", delta_rows),
    "iceberg": DemoSink(
        "iceberg",
        WORK / "warehouse",
        "Iceberg tables under .demo/warehouse (SQLite catalog .demo/warehouse/catalog.db)",
        iceberg_rows,
    ),
}


def say(msg: str) -> None:
    print(f"demo: {msg}", flush=True)


def rel(p: Path | str) -> str:
    try:
        return str(Path(p).relative_to(ROOT))
    except ValueError:
        return str(p)


def redacted(text: str) -> str:
    return text.replace(ROOT_PASSWORD, "***")


def airflow_env(server: MariaDB, sink: DemoSink) -> dict[str, str]:
    """A private Airflow: nothing AIRFLOW* of the caller's environment leaks in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    bindir = str(Path(sys.executable).parent)
    env.update(
        {
            "PATH": bindir + os.pathsep + env.get("PATH", ""),
            "AIRFLOW_HOME": str(AIRFLOW_HOME),
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME}/airflow.db",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(AIRFLOW_HOME / "logs"),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__SCHEDULER__STANDALONE_DAG_PROCESSOR": "False",
            "MYSQLCDC_SNAPSHOT_PARALLELISM": "1",
            "MYSQLCDC_STATE_ROOT": str(WORK / "state-root"),  # the template's defaults (watchdog DAG)
            "MYSQLCDC_LAKE_ROOT": str(sink.root),
            "MYSQLCDC_RUNTIME_DIR": str(WORK / "connect"),  # the demo's own local Spark Connect server
            "AIRFLOW_CONN_MYSQL_CDC_DEFAULT": json.dumps(
                {
                    "conn_type": "mysql_cdc",
                    "host": "127.0.0.1",
                    "port": server.port,
                    "login": "root",
                    "password": ROOT_PASSWORD,
                    "schema": "shop",
                    "extra": {"server_id_range": "5400-5420"},
                }
            ),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        }
    )
    return env


def airflow_bin() -> str:
    return str(Path(sys.executable).parent / "airflow")


def start_migrate(env: dict[str, str]) -> subprocess.Popen:
    AIRFLOW_HOME.mkdir(parents=True, exist_ok=True)
    out = open(MIGRATE_LOG, "w")
    return subprocess.Popen(
        [airflow_bin(), "db", "migrate"], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )


def stop_group(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def print_log_tail(path: Path, lines: int = 60) -> None:
    print(f"--- last {lines} lines of {rel(path)} ---", flush=True)
    print(redacted(log_tail(path, lines)), flush=True)
    print("---", flush=True)


# --- reading the run back: metadata DB (task instances, XComs) and the state location -----------


def metadata_db() -> sqlite3.Connection:
    return sqlite3.connect(f"file:{AIRFLOW_HOME / 'airflow.db'}?mode=ro", uri=True)


def last_run_id(db: sqlite3.Connection) -> str:
    return db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (DAG_ID,)).fetchone()[0]


def task_instances(db: sqlite3.Connection, run_id: str) -> list[dict]:
    cur = db.execute(
        "SELECT task_id, map_index, state, duration, rendered_map_index, try_number FROM task_instance "
        "WHERE dag_id = ? AND run_id = ? ORDER BY start_date",
        (DAG_ID, run_id),
    )
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def xcoms(db: sqlite3.Connection, run_id: str, task_id: str) -> dict[int, object]:
    out = {}
    for map_index, value in db.execute(
        "SELECT map_index, value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = ? AND key = 'return_value'",
        (DAG_ID, run_id, task_id),
    ):
        if isinstance(value, bytes):
            value = value.decode()
        v = json.loads(value) if isinstance(value, str) else value
        if isinstance(v, str):  # stored JSON text of a JSON document
            try:
                v = json.loads(v)
            except ValueError:
                pass
        out[map_index] = v
    return out


def fmt_offset(o: dict | None) -> str:
    return f"{o.get('file')}:{o.get('position')}" if o else "?"


class Progress:
    """Prints what the DAG run has done so far, from the state location (the run itself logs to a file)."""

    def __init__(self, state: StateStore) -> None:
        self.state = state
        self.plan_seen = False
        self.batches_seen: set[str] = set()
        self.labels: dict[str, str] = {}
        self.stream_seen = False

    def poll(self) -> None:
        try:
            if not self.plan_seen and self.state.exists("plan.json"):
                plan = self.state.read_plan()
                self.plan_seen = True
                self.labels = {b.batch_id: batch_label(b) for b in plan.batches}
                say(
                    f"plan: {len(plan.schemas)} tables, {sum(len(b.chunks) for b in plan.batches)} chunks of "
                    f"{CHUNK_SIZE:,} rows, {len(plan.batches)} snapshot batches (mapped tasks)"
                )
            for r in sorted(self.state.batch_results(), key=lambda r: r["batch_id"]):
                if r["batch_id"] in self.batches_seen:
                    continue
                self.batches_seen.add(r["batch_id"])
                rows = sum(sum(v.values()) for v in r["rows_per_chunk"].values())
                say(
                    f"  snapshot {r['batch_id']} ({self.labels.get(r['batch_id'], '?')}): {rows:,} rows, "
                    f"HW {fmt_offset(r['high_watermark'])}, {r.get('backfill_events', 0):,} backfill events, "
                    f"{r.get('seconds') or 0:.1f}s in Spark"
                )
            if not self.stream_seen and self.state.exists("stream/process.json"):
                self.stream_seen = True
                say(
                    f"  stream: launched (pid {self.state.read_json('stream/process.json')['pid']}), "
                    "waiting for its first committed micro-batch"
                )
        except Exception:  # a file being written: next poll
            pass


def run_dag(env: dict[str, str], conf: dict, state: StateStore) -> int:
    """`airflow dags test` with the console output in DAG_LOG; live progress from the state location."""
    argv = [airflow_bin(), "dags", "test", DAG_ID, "-c", json.dumps(conf)]
    progress = Progress(state)
    with open(DAG_LOG, "w") as out:
        proc = subprocess.Popen(
            argv,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(ROOT),
        )
        try:
            deadline = time.monotonic() + DAG_RUN_TIMEOUT_S
            while proc.poll() is None:
                progress.poll()
                if time.monotonic() > deadline:
                    say(f"the DAG run took longer than {DAG_RUN_TIMEOUT_S}s: stopping it")
                    stop_group(proc)
                    return -1
                time.sleep(1)
            progress.poll()
            return proc.returncode
        finally:
            stop_group(proc)


def report_run() -> None:
    """Task durations and the snapshot/stream XComs of the run, from the metadata DB."""
    with metadata_db() as db:
        run_id = last_run_id(db)
        tis = task_instances(db, run_id)
        snaps = xcoms(db, run_id, "snapshot")
        stream = xcoms(db, run_id, "stream").get(-1)
    by_map = {ti["map_index"]: ti for ti in tis if ti["task_id"] == "snapshot"}
    other = ", ".join(f"{ti['task_id']} {ti['duration'] or 0:.1f}s" for ti in tis if ti["task_id"] != "snapshot")
    say(f"run {run_id}: {other}")
    for i, x in sorted(snaps.items()):
        ti = by_map.get(i, {})
        say(
            f"  snapshot[{i}] {x.get('batch_label')}: {x.get('rows', 0):,} rows in {x.get('chunks')} chunks, "
            f"{x.get('seconds') or 0:.1f}s in Spark ({x.get('rows_per_s') or 0:,} rows/s), task "
            f"{ti.get('duration') or 0:.1f}s as a Spark Connect client, HW {fmt_offset(x.get('high_watermark'))}"
        )
    if isinstance(stream, dict):
        say(
            f"  stream: running={stream.get('running')}, micro-batch {stream.get('batch_id')} committed at "
            f"{fmt_offset(stream.get('committed_offset'))}, pid {stream.get('pid')}"
        )


def stream_progress(state: StateStore) -> str:
    from airflow_provider_mysqlcdc.spark.runtime.stream_status import read_status

    st = read_status(state)
    if st is None:
        return "  stream: no status yet"
    behind = f", {st.behind_bytes / 1e6:.1f} MB of binlog behind the head" if st.behind_bytes is not None else ""
    return f"  stream: micro-batch {st.batch_id} committed at {fmt_offset(st.committed_offset)}{behind}"


def compare(server: MariaDB, sink: DemoSink, specs, schemas) -> tuple[list[str], int]:
    diffs, rows = [], 0
    for spec, schema in zip(specs, schemas):
        cols = list(spec.key_columns) + list(VALUE_COLS)
        want = mysql_rows(server, schema.table_id, cols, schema.row_identity)
        try:
            got = sink.read(sink.root, schema.table_id, schema.row_identity)
        except Exception as e:  # table not readable yet
            diffs.append(f"{schema.table_id}: {type(e).__name__}: {e}")
            continue
        rows += len(want)
        if got != want:
            missing = len(want.keys() - got.keys())
            extra = len(got.keys() - want.keys())
            changed = sum(1 for k in want.keys() & got.keys() if want[k] != got[k])
            diffs.append(f"{schema.table_id}: {missing} missing, {extra} extra, {changed} different")
    return diffs, rows


class Demo:
    """The resources the demo owns, so that cleanup() can always release them."""

    def __init__(self, sink: DemoSink) -> None:
        self.sink = sink
        self.server = MariaDB(base_dir=WORK / "mariadb", server_id=1)
        self.state = StateStore(str(WORK / "state"))
        self.writers: list[ConcurrentWriter] = []
        self.migrate: subprocess.Popen | None = None

    def run(self) -> str:
        """Everything up to the verdict: 'VERIFIED: ...' or 'FAILED: ...' (diagnostics printed before)."""
        from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import running_local_stream

        server, state, sink = self.server, self.state, self.sink
        say("starting a private MariaDB ...")
        server.start()
        env = airflow_env(server, sink)
        say(f"private Airflow in {rel(AIRFLOW_HOME)} (SQLite); `airflow db migrate` running in the background")
        self.migrate = start_migrate(env)

        server.execute("CREATE DATABASE shop")
        specs = [make(server, "shop", n, name) for name, n, make in TABLES]
        say(f"MariaDB on 127.0.0.1:{server.port}; " + ", ".join(f"shop.{name} {n:,} rows" for name, n, _ in TABLES))
        for i, spec in enumerate(specs):
            self.writers.append(
                ConcurrentWriter(lambda: server.connect("shop"), spec, seed=7 + i, threads=1, pause_s=0.002).start()
            )
        say("writers started (inserts, updates, deletes, key moves)")

        t = time.monotonic()
        if self.migrate.wait() != 0:
            print_log_tail(MIGRATE_LOG)
            return f"FAILED: airflow db migrate exited with {self.migrate.returncode} (output: {rel(MIGRATE_LOG)})"
        say(f"airflow db migrate done (waited {time.monotonic() - t:.0f}s more)")

        conf = {
            "tables": [f"shop.{name}" for name, _, _ in TABLES],
            "state_location": str(WORK / "state"),
            "sink_type": sink.type,
            "sink_options": {"root": str(sink.root)},
            "chunk_size": CHUNK_SIZE,
            "rows_per_batch": ROWS_PER_BATCH,
            "stream_options": {"max_events_per_batch": 20_000, "heartbeat_s": 2.0, "trigger_interval_s": 1.0},
        }
        say(
            f"airflow dags test {DAG_ID} (rows_per_batch {ROWS_PER_BATCH:,}, snapshot parallelism 1, "
            f"Spark local[2], {sink.described}); Airflow output: {rel(DAG_LOG)}"
        )
        t = time.monotonic()
        rc = run_dag(env, conf, state)
        if rc != 0:
            print_log_tail(DAG_LOG)
            return (
                f"FAILED: `airflow dags test {DAG_ID}` exited with {rc} after {time.monotonic() - t:.0f}s; "
                f"full output in {rel(DAG_LOG)}"
            )
        say(f"DAG run succeeded in {time.monotonic() - t:.0f}s: snapshot done, stream running")
        try:
            report_run()
        except Exception as e:  # figures only; the verification below is what counts
            say(f"(could not read the run's task instances / XComs: {type(e).__name__}: {e})")

        proc = running_local_stream(state)
        if proc is None:
            print_log_tail(Path(state.path("stream", "stream.log")))
            return "FAILED: the DAG run succeeded but no binlog stream is running"
        say(f"stream pid {proc.pid}, log {rel(proc.log_path)}; writers keep going for {WRITE_AFTER_SNAPSHOT_S}s")
        time.sleep(WRITE_AFTER_SNAPSHOT_S)
        stats = [w.stop() for w in self.writers]
        self.writers.clear()
        say(
            f"writers stopped after {sum(s.total for s in stats):,} changes "
            f"({sum(s.inserts for s in stats):,} inserts, {sum(s.updates for s in stats):,} updates, "
            f"{sum(s.deletes for s in stats):,} deletes, {sum(s.key_moves for s in stats):,} key moves); "
            "waiting for the stream to catch up"
        )

        plan = state.read_plan()
        schemas = [next(s for t_id, s in plan.schemas.items() if t_id.table == spec.table) for spec in specs]
        deadline = time.time() + CATCH_UP_TIMEOUT_S
        next_report = time.time() + CATCH_UP_REPORT_EVERY_S
        while True:
            if time.time() >= next_report:
                next_report = time.time() + CATCH_UP_REPORT_EVERY_S
                say(stream_progress(state))
            if running_local_stream(state) is None:
                print_log_tail(Path(proc.log_path))
                return "FAILED: the binlog stream stopped running before the sink caught up"
            diffs, rows = compare(server, sink, specs, schemas)
            if not diffs:
                say("sink caught up")
                return f"VERIFIED: sink equals source ({rows} rows, {len(specs)} tables)"
            if time.time() > deadline:
                print_log_tail(Path(proc.log_path), 30)
                return f"FAILED: sink differs from source after {CATCH_UP_TIMEOUT_S}s: " + "; ".join(diffs)
            time.sleep(3)

    def cleanup(self) -> None:
        from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import stop_local_stream

        for w in self.writers:
            try:
                w.stop()
            except Exception as e:  # a writer's own failure: already reported by the run if it mattered
                say(f"writer: {type(e).__name__}: {e}")
        self.writers.clear()
        stop_group(self.migrate)
        try:
            if stop_local_stream(self.state):
                say("stream stopped")
        except Exception as e:
            say(f"could not stop the stream: {type(e).__name__}: {e}")
        try:  # else it would idle on for its connect_idle_s (5 min) after the demo
            from airflow_provider_mysqlcdc.spark.runtime.connect_server import stop_local_servers

            if stop_local_servers(WORK / "connect"):
                say("Spark Connect server stopped")
        except Exception as e:
            say(f"could not stop the Spark Connect server: {type(e).__name__}: {e}")
        self.server.stop()
        say("MariaDB stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The DAG template against a live MariaDB, verified row by row.")
    parser.add_argument(
        "--sink",
        choices=sorted(SINKS),
        default="delta",
        help="where the demo loads: a Delta Lake (default) or Apache Iceberg tables (`make demo SINK=iceberg`)",
    )
    sink = SINKS[parser.parse_args(argv).sink]
    t_start = time.monotonic()
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    demo = Demo(sink)
    try:
        verdict = demo.run()
    except BaseException as e:
        import traceback

        print(redacted(traceback.format_exc()), file=sys.stderr, flush=True)
        verdict = f"FAILED: {type(e).__name__}: {redacted(str(e))}"
    finally:
        demo.cleanup()
    say(f"total {time.monotonic() - t_start:.0f}s")
    print(verdict, flush=True)
    return 0 if verdict.startswith("VERIFIED") else 1


if __name__ == "__main__":
    sys.exit(main())
