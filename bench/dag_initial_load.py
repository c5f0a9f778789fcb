"""Initial load through the DAG template, end to end: `airflow dags test mysql_cdc_pipeline`.

Builds a 20,000,000-row table (override with --rows) in a private MariaDB (BIGINT primary key,
INT, VARCHAR(64), DECIMAL(12,2), DATETIME(3), as harness/mysqlcdc_harness/tables.py), then runs the
template DAG (dags/mysql_cdc_pipeline.py) with the real Airflow CLI in a private AIRFLOW_HOME
(SQLite): validate -> plan -> one mapped snapshot task per batch (spark-submit, local[2],
snapshot parallelism 1) into a Delta Lake. The stream task is skipped by default
(--mark-success-pattern, it is not part of an initial load); --stream launch runs it (the
binlog stream starts, commits its first micro-batch) and stops the stream afterwards.

Measured: from launching `airflow dags test` (the trigger) to the end_date of the last
snapshot task instance in the metadata DB; rows = the table's row count. Baseline, in the
same run: the `mariadb` client scanning the table (`--quick -N -e "SELECT * ..." > /dev/null`),
median of 3 runs.

A second baseline, also in the same run: what a Spark user would write instead, one spark-submit of
Spark's JDBC reader with partitionColumn into Parquet (bench/plain_spark_load.py; fast but not
consistent), timed from its launch to its exit.

Several sinks in one run (--sinks delta,iceberg --rounds 3): the table is built once and loaded
into each sink in turn, --rounds times, the order reversed every other round (delta, iceberg,
iceberg, delta, delta, iceberg) so the machine's drift hits both; one set of Airflow services, and
before each load the local Connect server is stopped, so every load starts it as a first load
does. Each load's row counts are checked (the snapshot XComs and the sink table's own count:
Delta's log, Iceberg's data files); the ratio of a sink to the first one is the median of the
rounds' paired ratios (rows/s over rows/s of the same round).

Last line: rows_per_s=<int> ratio_vs_cli=<float> ratio_vs_plain_spark=<float>
(a ratio > 1: the DAG loads faster than that baseline; the first sink's median), then with more
sinks <sink>_rows_per_s=<int> ratio_<sink>_vs_<first>=<float> for each other.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import log_tail
from mysqlcdc_harness.mariadb import ROOT_PASSWORD, MariaDB
from mysqlcdc_harness.tables import VALUE_DDL, VALUE_FILL

ROOT = Path(__file__).resolve().parents[1]

DAG_ID = "mysql_cdc_pipeline"
DB, TABLE = "bench", "orders"
WORK = ROOT / "bench" / ".work" / "dag_initial_load"
AIRFLOW_HOME = WORK / "airflow"
DAG_LOG = WORK / "airflow-dags-test.log"


def say(msg: str) -> None:
    print(msg, flush=True)


def airflow_bin() -> str:
    return str(Path(sys.executable).parent / "airflow")


def airflow_env(server: MariaDB) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
            "AIRFLOW_HOME": str(AIRFLOW_HOME),
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME}/airflow.db",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(AIRFLOW_HOME / "logs"),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__SCHEDULER__STANDALONE_DAG_PROCESSOR": "False",
            "MYSQLCDC_SNAPSHOT_PARALLELISM": "1",
            "MYSQLCDC_STATE_ROOT": str(WORK / "state-root"),
            "MYSQLCDC_LAKE_ROOT": str(WORK / "lake"),
            "MYSQLCDC_RUNTIME_DIR": str(WORK / "connect"),  # the local Spark Connect server's files
            "AIRFLOW_CONN_MYSQL_CDC_DEFAULT": json.dumps(
                {
                    "conn_type": "mysql_cdc",
                    "host": "127.0.0.1",
                    "port": server.port,
                    "login": "root",
                    "password": ROOT_PASSWORD,
                    "schema": DB,
                    "extra": {"server_id_range": "5400-5420"},
                }
            ),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        }
    )
    return env


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


def build_table(server: MariaDB, rows: int, step: int = 5_000_000) -> None:
    """INSERT ... SELECT from the SEQUENCE engine, a few statements, outside the binlog (the load
    is not a change to capture: the snapshot reads the table, the stream starts at its HW)."""
    server.execute(f"CREATE DATABASE {DB}")
    server.execute(f"CREATE TABLE {TABLE} (id BIGINT NOT NULL PRIMARY KEY, {VALUE_DDL}) ENGINE=InnoDB", database=DB)
    stmts = ["SET SESSION sql_log_bin = 0"]
    for lo in range(1, rows + 1, step):
        hi = min(rows, lo + step - 1)
        stmts.append(f"INSERT INTO {TABLE} SELECT seq, {', '.join(VALUE_FILL)} FROM seq_{lo}_to_{hi}")
    stmts.append(f"ANALYZE TABLE {TABLE}")
    server.execute(*stmts, database=DB)


def cli_scan(server: MariaDB) -> float:
    t = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        subprocess.run(
            server.cli("--quick", "-N", "-e", f"SELECT * FROM {DB}.{TABLE}"),
            env=server.cli_env(),
            stdout=devnull,
            check=True,
        )
    return time.perf_counter() - t


def run_with_dags_test(env: dict[str, str], conf: dict, args, rows_per_batch: int):
    """`airflow dags test` of the template (tasks one after another, in one process)."""
    argv = [airflow_bin(), "dags", "test", DAG_ID, "-c", json.dumps(conf)]
    if args.stream == "skip":
        argv += ["--mark-success-pattern", "^stream$"]
    say(
        f"airflow dags test {DAG_ID}: chunk_size {args.chunk_size:,}, rows_per_batch {rows_per_batch:,}, "
        f"snapshot tasks one at a time, Spark local[2] ({args.runtime}), {conf['sink_type']} sink; stream task: "
        + (
            "skipped (--mark-success-pattern '^stream$')"
            if args.stream == "skip"
            else "launched, stopped after the run"
        )
        + f"; output in {DAG_LOG.relative_to(ROOT)}"
    )
    with open(DAG_LOG, "w") as out:
        t_trigger = time.time()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(ROOT),
        )
        peak = PeakRss(process_rss(proc.pid)).start()
        try:
            rc = proc.wait()
        finally:
            peak.stop()
            stop_group(proc)
        total_s = time.perf_counter() - t0
    if rc != 0:
        say(f"FAILED: airflow dags test exited with {rc} after {total_s:.0f}s; last lines of {DAG_LOG}:")
        say(log_tail(DAG_LOG, 60).replace(ROOT_PASSWORD, "***"))
        return None
    run, tis, xcoms = read_run()
    return t_trigger, run, tis, xcoms, peak.peak, total_s


@contextlib.contextmanager
def scheduler_services(server: MariaDB, args):
    """Airflow's real services (api-server, scheduler, dag-processor, triggerer; LocalExecutor)
    with the two connections, the template DAG unpaused: yields them. One set of
    services serves every run of the bench (``run_with_scheduler``)."""
    from mysqlcdc_harness.airflow_services import AirflowServices

    extra = {
        "MYSQLCDC_SNAPSHOT_PARALLELISM": str(args.parallelism),
        "MYSQLCDC_STATE_ROOT": str(WORK / "state-root"),
        "MYSQLCDC_LAKE_ROOT": str(WORK / "lake"),
        "MYSQLCDC_RUNTIME_DIR": str(WORK / "connect"),
    }
    with AirflowServices(ROOT / "dags", extra_env=extra, home=WORK / "airflow-services") as af:
        af.add_connection(
            "mysql_cdc_default",
            "mysql_cdc",
            host="127.0.0.1",
            port=server.port,
            login="root",
            password=ROOT_PASSWORD,
            schema=DB,
            extra={"server_id_range": "5400-5420"},
        )
        af.add_connection("spark_default", "spark", host="local[2]")
        api = af.api()
        api.wait_for_dag(DAG_ID, timeout=180)
        api.unpause(DAG_ID)
        yield af


def run_with_scheduler(af, conf: dict, args, rows_per_batch: int):
    """The template under Airflow's real services (``scheduler_services``), triggered through the
    REST API as the UI does; mapped snapshot tasks overlap up to --parallelism. The stream task
    runs (it launches the stream, stopped afterwards); the figure ends at the last snapshot
    task's end."""
    api = af.api()
    say(
        f"Airflow scheduler + LocalExecutor: chunk_size {args.chunk_size:,}, rows_per_batch {rows_per_batch:,}, "
        f"up to {args.parallelism} snapshot tasks at once, Spark local[2] ({args.runtime}), "
        f"{conf['sink_type']} sink"
    )
    cds = cds_archive() if args.runtime == "connect" else None
    if cds is not None:
        say(
            f"local Connect server's class-data-sharing archive: {cds}: "
            + (
                "present, the server maps it"
                if cds.exists()
                else "none yet: this run's server records its classes, the archive is built after it stops"
            )
        )
    tasks = PeakRss(largest_task_rss).start()
    cpu = CpuByKind().start()
    t_trigger = time.time()
    run_id = api.trigger(DAG_ID, conf)
    try:
        run = dict(api.wait_for_run(DAG_ID, run_id, timeout=3600, poll_s=2.0), run_id=run_id)
    except Exception as e:
        say(f"FAILED: {e}\n{af.logs_tail(40)}")
        return None
    finally:
        tasks.stop()
        cpu.stop()
    tis = [
        {
            "task_id": t["task_id"],
            "map_index": t["map_index"],
            "state": t["state"],
            "start_date": t["start_date"],
            "end_date": t["end_date"],
            "duration": t.get("duration"),
        }
        for t in api.task_instances(DAG_ID, run_id)
    ]
    if args.runtime == "connect":
        starts = [
            line
            for log in sorted((WORK / "connect").glob("server-*.log"))
            if log.stat().st_mtime >= t_trigger  # this load's server, not an earlier load's
            for line in log.read_text(errors="replace").splitlines()
            if "Spark Connect server pid" in line
        ]
        say(
            f"local Connect servers started: {len(starts)}"
            + ("; JIT without C2 (the snapshot rows bypass the JVM)" if any("without C2" in s for s in starts) else "")
        )
    if cds is not None and not cds.exists():
        # As an idle server's supervisor would: stop it, let it build the archive (Airflow's
        # services kill whatever carries their environment when they stop).
        from airflow_provider_mysqlcdc.spark.runtime.connect_server import stop_local_servers

        stop_local_servers(WORK / "connect")
        t = time.perf_counter()
        while time.perf_counter() - t < 300 and not cds.exists():
            time.sleep(1)
        say(
            f"class-data-sharing archive {'built' if cds.exists() else 'NOT built'} "
            f"{time.perf_counter() - t:.0f} s after the server stopped"
        )
    plan = StateStore(conf["state_location"]).read_plan()
    results = {r["batch_id"]: r for r in StateStore(conf["state_location"]).batch_results()}
    xcoms = {}
    for i, b in enumerate(plan.batches):
        r = results.get(b.batch_id, {})
        xcoms[i] = {
            "batch_label": b.batch_id,
            "rows": sum(sum(v.values()) for v in r.get("rows_per_chunk", {}).values()),
            "chunks": len(b.chunks),
            "seconds": r.get("seconds"),
            "rows_per_s": r.get("rows_per_s"),
        }
    snaps = [parse_ts(t["end_date"]) for t in tis if t["task_id"] == "snapshot" and t.get("end_date")]
    if snaps:
        used = cpu.between(t_trigger, max(snaps))
        cores = os.cpu_count() or 1
        offered = cores * (max(snaps) - t_trigger)
        say(
            f"CPU seconds, trigger -> last snapshot ({offered:.0f} core-seconds offered on {cores} cores): "
            + ", ".join(f"{k} {v:.1f}" for k, v in used.items())
            + f"; idle {max(0.0, offered - sum(used.values())):.1f}"
            + " (other: "
            + ", ".join(f"{n} {v:.1f}" for n, v in sorted(cpu.others.items(), key=lambda x: -x[1])[:4])
            + ")"
        )
        if args.cpu_timeline:
            say("cores used per kind, 2 s bins from the trigger:")
            for line in cpu.timeline(t_trigger, max(snaps)):
                say(line)
    return t_trigger, run, tis, xcoms, tasks.peak, 0.0


class PeakRss:
    """The largest resident set ``sample()`` reports, sampled every 0.5 s by a thread."""

    def __init__(self, sample) -> None:
        import threading

        self.sample, self.peak = sample, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "PeakRss":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.peak = max(self.peak, self.sample())


class CpuByKind:
    """CPU seconds per kind of process over a run (the Spark JVM, MariaDB, Airflow's task processes,
    Airflow's services, the rest of this machine), sampled every 0.5 s by a thread: a process
    that ends between two samples loses at most its last 0.5 s. Says where the two cores went."""

    KINDS = ("spark jvm", "mariadbd", "airflow tasks", "airflow services", "other")

    def __init__(self) -> None:
        import threading

        self.samples: list[tuple[float, dict[str, float]]] = []
        self.others: dict[str, float] = {}  # CPU seconds of the "other" processes by name
        self._first: dict[int, float] = {}
        self._last: dict[int, tuple[str, float]] = {}
        self._kinds: dict[int, str] = {}
        self._tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def kind(cmdline: str) -> str:
        if "java" in cmdline.split(" ", 1)[0] or " org.apache.spark" in cmdline:
            return "spark jvm"
        if "mariadbd" in cmdline:
            return "mariadbd"
        if "connect_server serve" in cmdline or "class_sharing build" in cmdline:
            return "other"  # the local Connect server's supervisor (python), not Airflow
        if any(k in cmdline for k in ("task_runner", "supervise", "LocalExecutor", "airflow worker", "[task ")):
            return "airflow tasks"
        if "airflow" in cmdline:
            return "airflow services"
        return "other"

    def start(self) -> "CpuByKind":
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)

    def _sample(self) -> None:
        # /proc directly, each process's kind read once: the sampler must not take the CPU it
        # measures (psutil over every process twice a second cost ~0.15 of a core).
        now = time.time()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            try:
                with open(f"/proc/{pid}/stat") as f:
                    comm_end = (stat := f.read()).rindex(")")
                fields = stat[comm_end + 2 :].split()
                used = (int(fields[11]) + int(fields[12])) / self._tick
                kind = self._kinds.get(pid)
                if kind is None:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
                    kind = self.kind(cmdline)
                    if kind == "other":
                        kind = "other:" + stat[stat.index("(") + 1 : comm_end]
                    if kind != "airflow services":  # a task forked from the scheduler renames itself later
                        self._kinds[pid] = kind
            except (OSError, ValueError, IndexError):
                continue
            if pid not in self._first:
                self._first[pid] = used if not self.samples else 0.0
            self._last[pid] = (kind, used)
        totals = dict.fromkeys(self.KINDS, 0.0)
        others: dict[str, float] = {}
        for pid, (kind, used) in self._last.items():
            spent = max(0.0, used - self._first.get(pid, 0.0))
            if kind.startswith("other:"):
                others[kind[6:]] = others.get(kind[6:], 0.0) + spent
                kind = "other"
            totals[kind] += spent
        self.others = others
        self.samples.append((now, totals))

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self._sample()

    def between(self, t0: float, t1: float) -> dict[str, float]:
        """CPU seconds per kind from the sample nearest ``t0`` to the one nearest ``t1`` (epoch)."""

        def at(t: float) -> dict[str, float]:
            return min(self.samples, key=lambda s: abs(s[0] - t))[1]

        a, b = at(t0), at(t1)
        return {k: b[k] - a[k] for k in self.KINDS}

    def timeline(self, t0: float, t1: float, step_s: float = 2.0) -> list[str]:
        """Cores used per kind in ``step_s`` bins from ``t0`` to ``t1``: one line each."""
        lines, t = [], t0
        while t < t1:
            a = min(self.samples, key=lambda s: abs(s[0] - t))
            b = min(self.samples, key=lambda s: abs(s[0] - (t + step_s)))
            span = max(b[0] - a[0], 1e-9)
            lines.append(
                f"  {t - t0:5.1f}s "
                + " ".join(f"{k.split()[-1][:8]} {(b[1][k] - a[1][k]) / span:4.2f}" for k in self.KINDS)
            )
            t += step_s
        return lines


def cds_archive() -> Path | None:
    """The class-data-sharing archive the local Connect server uses (spark/runtime/class_sharing.py)."""
    from airflow_provider_mysqlcdc.spark.runtime import class_sharing
    from airflow_provider_mysqlcdc.spark.runtime.session import jdbc_jar_path

    if not class_sharing.enabled():
        return None
    jar = jdbc_jar_path()
    key = class_sharing.archive_key((jar,) if jar else ())
    return class_sharing.archive_path(key) if key else None


def process_rss(pid: int):
    """The resident set of one process (0 once it is gone)."""
    import psutil

    def sample() -> int:
        try:
            return psutil.Process(pid).memory_info().rss
        except psutil.Error:
            return 0

    return sample


def largest_task_rss() -> int:
    """The largest resident set of any one Airflow task process (a snapshot task is a Spark Connect
    client in its own process under LocalExecutor); Spark's JVMs are not counted."""
    peak, page = 0, os.sysconf("SC_PAGE_SIZE")
    for name in os.listdir("/proc"):  # /proc directly: cheap enough not to slow the run it samples
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                line = f.read().replace(b"\0", b" ").decode(errors="replace")
            if "java" not in line and (
                "task_runner" in line or "supervise" in line or "LocalExecutor" in line or "airflow worker" in line
            ):
                with open(f"/proc/{name}/statm") as f:
                    peak = max(peak, int(f.read().split()[1]) * page)
        except (OSError, ValueError, IndexError):
            continue
    return peak


def plain_spark_load(server: MariaDB, rows: int, partitions: int) -> tuple[float, int]:
    """One spark-submit of Spark's JDBC reader with partitionColumn into Parquet (bench/plain_spark_load.py),
    timed from the launch to its exit (its JVM start included, as the DAG's includes the Connect server's)."""
    from airflow_provider_mysqlcdc.spark.runtime.session import jdbc_jar_path

    out = WORK / "plain-spark"
    argv = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        "local[2]",
        "--driver-memory",
        "2g",
        "--conf",
        "spark.ui.showConsoleProgress=false",
        "--jars",
        jdbc_jar_path(),
        str(ROOT / "bench" / "plain_spark_load.py"),
        "--url",
        f"jdbc:mysql://127.0.0.1:{server.port}/{DB}",
        "--user",
        "root",
        "--table",
        TABLE,
        "--column",
        "id",
        "--lower",
        "1",
        "--upper",
        str(rows),
        "--partitions",
        str(partitions),
        "--out",
        str(out),
    ]
    env = dict(os.environ, MYSQLCDC_PASSWORD=ROOT_PASSWORD, PYSPARK_PYTHON=sys.executable)
    t = time.perf_counter()
    p = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    got = [ln for ln in p.stdout.splitlines() if ln.startswith("PLAIN_ROWS ")]
    if p.returncode != 0 or not got:
        raise RuntimeError(f"plain Spark load failed ({p.returncode}): {p.stderr[-2000:]}")
    shutil.rmtree(out, ignore_errors=True)
    return elapsed, int(got[0].split()[1])


def parse_ts(value) -> float:
    """An Airflow UTC timestamp from SQLite ('2026-01-01 10:00:00.123456[+00:00]') as epoch seconds."""
    d = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if d.tzinfo is None:
        d = d.replace(tzinfo=dt.timezone.utc)
    return d.timestamp()


def read_run() -> tuple[dict, list[dict], dict[int, dict]]:
    with contextlib.closing(sqlite3.connect(f"file:{AIRFLOW_HOME / 'airflow.db'}?mode=ro", uri=True)) as db:
        cur = db.execute(
            "SELECT run_id, state, start_date, end_date FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1",
            (DAG_ID,),
        )
        run = dict(zip([d[0] for d in cur.description], cur.fetchone()))
        cur = db.execute(
            "SELECT task_id, map_index, state, start_date, end_date, duration, rendered_map_index "
            "FROM task_instance WHERE dag_id = ? AND run_id = ? ORDER BY start_date",
            (DAG_ID, run["run_id"]),
        )
        cols = [d[0] for d in cur.description]
        tis = [dict(zip(cols, r)) for r in cur.fetchall()]
        xcoms = {}
        for map_index, value in db.execute(
            "SELECT map_index, value FROM xcom WHERE dag_id = ? AND run_id = ? AND "
            "task_id = 'snapshot' AND key = 'return_value'",
            (DAG_ID, run["run_id"]),
        ):
            v = json.loads(value.decode() if isinstance(value, bytes) else value)
            xcoms[map_index] = json.loads(v) if isinstance(v, str) else v
    return run, tis, xcoms


def delta_row_count(root: Path) -> int | None:
    """Rows of the Delta table from its log's per-file statistics (no data read)."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        # deltalake >= 1.0 returns an arro3 table: pyarrow takes it through the Arrow C stream interface.
        actions = pa.table(DeltaTable(str(root / DB / TABLE)).get_add_actions(flatten=True))
        return int(pc.sum(actions.column("num_records")).as_py())
    except Exception as e:  # figures only
        say(f"(could not count the Delta table's rows: {type(e).__name__}: {e})")
        return None


def iceberg_row_count(root: Path) -> int | None:
    """Rows of the Iceberg table from its current snapshot's data files (no data read), through
    the sink's own catalog (a SQLite file beside the warehouse)."""
    try:
        from airflow_provider_mysqlcdc.cdc.model import TableId
        from airflow_provider_mysqlcdc.spark.sinks.iceberg.sink import IcebergSink

        table = IcebergSink(str(root)).open_table(TableId(DB, TABLE))
        return sum(task.file.record_count for task in table.scan().plan_files())
    except Exception as e:  # figures only
        say(f"(could not count the Iceberg table's rows: {type(e).__name__}: {e})")
        return None


def sink_row_count(sink: str, root: Path) -> int | None:
    return {"delta": delta_row_count, "iceberg": iceberg_row_count}[sink](root)


def report_load(got, rows: int, sink: str, lake: Path, args) -> dict | None:
    """Print one load's tasks and figures; its seconds, or None when it failed or the counts differ."""
    t_trigger, run, tis, xcoms, peak, cli_total_s = got
    snaps = sorted((ti for ti in tis if ti["task_id"] == "snapshot"), key=lambda ti: ti["map_index"])
    if not snaps or any(ti["state"] != "success" for ti in snaps):
        say(f"FAILED: snapshot task instances: {[(ti['map_index'], ti['state']) for ti in snaps]}")
        return None
    last_end = max(parse_ts(ti["end_date"]) for ti in snaps)
    total_s = last_end - t_trigger
    run_s = last_end - parse_ts(run["start_date"])
    snap_rows = sum(int(x.get("rows") or 0) for x in xcoms.values())
    say(
        f"dag run {run['run_id']}: {run['state']}; "
        + ", ".join(
            f"{ti['task_id']} {ti['state']} {ti['duration'] or 0:.1f}s" for ti in tis if ti["task_id"] != "snapshot"
        )
    )
    for ti in snaps:
        x = xcoms.get(ti["map_index"], {})
        say(
            f"  snapshot[{ti['map_index']}] {x.get('batch_label')}: {int(x.get('rows') or 0):,} rows, "
            f"{x.get('chunks')} chunks, {x.get('seconds') or 0:.1f}s in Spark "
            f"({int(x.get('rows_per_s') or 0):,} rows/s), task {float(ti['duration'] or 0):.1f}s "
            + ("with spark-submit" if args.runtime == "submit" else "as a Spark Connect client")
        )
    sink_rows = sink_row_count(sink, lake)
    if snap_rows != rows or sink_rows != rows:
        say(f"FAILED: the table has {rows:,} rows, the snapshot XComs say {snap_rows:,}, the {sink} table {sink_rows}")
        return None
    say(f"rows: {rows:,} (snapshot XComs {snap_rows:,}, {sink} table {sink_rows:,})")
    say(f"batches: {len(snaps)}")
    task_s = ", ".join(f"{ti['duration'] or 0:.1f}" for ti in snaps)
    spark_s = ", ".join(f"{xcoms.get(ti['map_index'], {}).get('seconds') or 0:.1f}" for ti in snaps)
    say(f"snapshot task seconds: {task_s} (Spark job seconds: {spark_s})")
    say(
        f"total seconds (trigger -> last snapshot task success): {total_s:.1f} = {rows / total_s:,.0f} rows/s into "
        f"{sink} (DAG run start -> last snapshot: {run_s:.1f}; whole `airflow dags test` process: {cli_total_s:.1f})"
    )
    say(
        f"peak RSS: {peak / 2**20:,.0f} MB ("
        + (
            "the largest task process: a snapshot task is a Spark Connect client"
            if args.executor == "scheduler"
            else "the `airflow dags test` process, every task in it"
        )
        + "; the Spark JVMs are not counted)"
    )
    return {"total_s": total_s, "got": got}


def task_spans(t_trigger: float, tis: list[dict], xcoms: dict[int, dict], until_s: float) -> list:
    """The task instances of the initial load, as seconds from the trigger; a snapshot task's Spark
    seconds (its XCom) mark how much of the bar was the job rather than start-up and scheduling.
    Tasks starting at ``until_s`` (the last snapshot's end) or later -- the stream -- are not part
    of the figure measured, and would only stretch the axis."""
    from plots import Span

    spans = []
    for ti in tis:
        if not ti.get("start_date") or not ti.get("end_date"):
            continue  # skipped or still running: nothing to draw
        if parse_ts(ti["start_date"]) - t_trigger >= until_s:
            continue
        mapped = ti.get("map_index") is not None and int(ti["map_index"]) >= 0
        label = f"{ti['task_id']}[{ti['map_index']}]" if mapped else ti["task_id"]
        busy = xcoms.get(ti["map_index"], {}).get("seconds") if ti["task_id"] == "snapshot" else None
        spans.append(
            Span(
                label,
                parse_ts(ti["start_date"]) - t_trigger,
                parse_ts(ti["end_date"]) - t_trigger,
                float(busy) if busy else None,
            )
        )
    return spans


def write_png(
    path: str,
    spans: list,
    rows: int,
    total_s: float,
    cli_s: float,
    plain_s: float,
    plain_rows: int,
    spark_s: float,
    label: str,
) -> None:
    """The run's timeline over rows/s of the DAG and its baselines, one picture (see --png)."""
    import plots

    phases = {
        "mariadb CLI scan (--quick)": rows / cli_s,
        "plain Spark JDBC -> Parquet (not consistent)": plain_rows / plain_s,
        f"DAG, trigger -> last snapshot ({label})": rows / total_s,
    }
    if spark_s > 0:
        phases["snapshot jobs: rows / their summed seconds in Spark"] = rows / spark_s
    title = (
        f"{rows:,} rows: DAG {total_s:.1f} s = {rows / total_s:,.0f} rows/s; "
        f"{cli_s / total_s:.3f}x the mariadb CLI ({cli_s:.1f} s), "
        f"{plain_s / total_s:.3f}x plain Spark ({plain_s:.1f} s); >1: the DAG is faster"
    )
    out = plots.dag_run(
        path,
        spans,
        {"mariadb CLI scan": cli_s, "plain Spark": plain_s},
        phases,
        title=title,
        total_s=total_s,
        highlight=f"DAG, trigger -> last snapshot ({label})",
    )
    say(f"png: {out}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--batches", type=int, default=4, help="snapshot batches to aim for (default 4)")
    ap.add_argument(
        "--rows-per-batch",
        type=int,
        default=None,
        help="the DAG's rows_per_batch (default: --rows / (--batches - 0.5), so row estimates "
        "within about +-12%% still give --batches batches)",
    )
    ap.add_argument("--chunk-size", type=int, default=8096, help="the DAG's chunk_size (template default 8096)")
    ap.add_argument(
        "--stream",
        choices=("skip", "launch"),
        default="skip",
        help="skip: --mark-success-pattern stream; launch: run it, then stop the stream",
    )
    ap.add_argument(
        "--runtime",
        choices=("connect", "submit"),
        default="connect",
        help="the snapshot tasks' spark_runtime: one shared Spark Connect application (default) or a "
        "spark-submit per batch",
    )
    ap.add_argument(
        "--executor",
        choices=("scheduler", "dags-test"),
        default="scheduler",
        help="scheduler: Airflow's services with LocalExecutor, triggered over REST (what users run); "
        "dags-test: `airflow dags test` (tasks one after another)",
    )
    ap.add_argument(
        "--parallelism",
        type=int,
        default=2,
        help="snapshot tasks at once under the scheduler (MYSQLCDC_SNAPSHOT_PARALLELISM)",
    )
    ap.add_argument(
        "--cpu-timeline",
        action="store_true",
        help="also print the cores each kind of process used, in 2 s bins from the trigger (scheduler)",
    )
    ap.add_argument(
        "--sinks",
        default="delta",
        help="the sinks to load into, comma-separated (delta, iceberg): each loads the same table, "
        "the first is the baseline of the others' ratios (default: delta)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="loads per sink; the sinks take turns, in reversed order every other round, and each "
        "ratio is the median of the rounds' (default 1)",
    )
    ap.add_argument("--buffer-pool", default="2G", help="MariaDB innodb_buffer_pool_size")
    ap.add_argument(
        "--keep-log",
        metavar="PATH",
        default=None,
        help="copy the `airflow dags test` output there before the work dir is removed",
    )
    ap.add_argument(
        "--keep-work",
        action="store_true",
        help=f"leave {WORK} (task logs under airflow/logs, the Spark Connect server log) in place",
    )
    ap.add_argument(
        "--png",
        metavar="PATH",
        default=None,
        help="also write a PNG there: the run's task timeline from the trigger to the last snapshot "
        "task (each snapshot task's seconds in Spark darker; the CLI scan and plain Spark seconds "
        "as vertical lines) above "
        "a rows/s bar chart of the DAG vs the CLI vs plain Spark (and the snapshot jobs alone), one "
        "picture (needs matplotlib, "
        "the 'dev' extra)",
    )
    args = ap.parse_args()
    if args.png:
        import plots

        plots.require()  # before the minutes of work, not after
    rows_per_batch = args.rows_per_batch or math.ceil(args.rows / max(args.batches - 0.5, 0.5))

    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    server = MariaDB(
        base_dir=WORK / "mariadb", server_id=1, extra_args=(f"--innodb-buffer-pool-size={args.buffer_pool}",)
    )
    state = StateStore(str(WORK / "state"))
    migrate = dag_proc = None
    final_line = ""
    t_bench = time.perf_counter()
    try:
        server.start()
        env = airflow_env(server)
        AIRFLOW_HOME.mkdir(parents=True)
        migrate = subprocess.Popen(
            [airflow_bin(), "db", "migrate"],
            env=env,
            stdout=open(WORK / "migrate.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        t = time.perf_counter()
        build_table(server, args.rows)
        rows = int(server.query(f"SELECT COUNT(*) FROM {DB}.{TABLE}")[0][0])
        say(
            f"table {DB}.{TABLE}: {rows:,} rows built in {time.perf_counter() - t:.1f}s "
            f"(MariaDB {server.query('SELECT VERSION()')[0][0]}, buffer pool {args.buffer_pool})"
        )
        if migrate.wait() != 0:
            say(f"FAILED: airflow db migrate:\n{log_tail(WORK / 'migrate.log')}")
            return 1

        cli_times = [cli_scan(server) for _ in range(3)]
        cli_s = statistics.median(cli_times)
        say(
            f"mariadb CLI scan: {', '.join(f'{x:.2f}s' for x in cli_times)} -> median {cli_s:.2f}s "
            f"= {rows / cli_s:,.0f} rows/s"
        )
        partitions = max(2, math.ceil(rows / 1_000_000))
        plain_s, plain_rows = plain_spark_load(server, rows, partitions)
        say(
            f"plain Spark (one spark-submit, JDBC partitionColumn id, {partitions} partitions, into Parquet; "
            f"not consistent): {plain_s:.1f}s = {plain_rows / plain_s:,.0f} rows/s ({plain_rows:,} rows)"
        )

        sinks = [k.strip() for k in args.sinks.split(",") if k.strip()]
        order = [(r, sink) for r in range(args.rounds) for sink in (sinks if r % 2 == 0 else list(reversed(sinks)))]
        if len(order) > 1:
            say(f"{len(order)} loads of the same table, in this order: {', '.join(f'{k}#{r + 1}' for r, k in order)}")
        loads: dict[str, list[dict]] = {k: [] for k in sinks}
        with scheduler_services(server, args) if args.executor == "scheduler" else contextlib.nullcontext() as af:
            for r, sink in order:
                tag = f"{sink}-{r + 1}" if len(order) > 1 else ""
                state_location = WORK / (f"state-{tag}" if tag else "state")
                lake = WORK / (f"lake-{tag}" if tag else "lake")
                conf = {
                    "tables": [f"{DB}.{TABLE}"],
                    "state_location": str(state_location),
                    "sink_type": sink,
                    "sink_options": {"root": str(lake)},
                    "chunk_size": args.chunk_size,
                    "rows_per_batch": rows_per_batch,
                    "spark_runtime": args.runtime,
                }
                if tag:
                    say(f"--- load {tag} ---")
                try:
                    got = (
                        run_with_scheduler(af, conf, args, rows_per_batch)
                        if af is not None
                        else run_with_dags_test(env, conf, args, rows_per_batch)
                    )
                    if got is None:
                        return 1
                    result = report_load(got, rows, sink, lake, args)
                finally:
                    with contextlib.suppress(Exception):
                        from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import stop_local_stream

                        if stop_local_stream(StateStore(str(state_location))):
                            say("stream stopped")
                if result is None:
                    return 1
                loads[sink].append(result)
                if len(order) > 1:
                    # the next load starts as this one did: no Connect server yet (its start is part
                    # of a first load's time), and this one's files not taking the disk
                    with contextlib.suppress(Exception):
                        from airflow_provider_mysqlcdc.spark.runtime.connect_server import stop_local_servers

                        stop_local_servers(WORK / "connect")
                    if not args.keep_work:
                        shutil.rmtree(lake, ignore_errors=True)
        first = loads[sinks[0]]
        total_s = statistics.median(x["total_s"] for x in first)
        rps = rows / total_s
        say(f"CLI seconds (mariadb --quick scan, median of 3): {cli_s:.2f} = {rows / cli_s:,.0f} rows/s")
        for sink in sinks:
            secs = [x["total_s"] for x in loads[sink]]
            say(
                f"{sink}: {', '.join(f'{x:.1f}s' for x in secs)} -> median {statistics.median(secs):.1f}s "
                f"= {rows / statistics.median(secs):,.0f} rows/s"
            )
        extra = ""
        if len(sinks) > 1:
            base = sinks[0]
            for sink in sinks[1:]:
                # each round's pair: the two loads next to each other, in alternating order
                pairs = [b["total_s"] / o["total_s"] for b, o in zip(loads[base], loads[sink])]
                ratio = statistics.median(pairs)
                say(f"{sink} / {base} rows/s, per round: {', '.join(f'{x:.3f}' for x in pairs)} -> median {ratio:.3f}")
                extra += (
                    f" {sink}_rows_per_s={int(rows / statistics.median(x['total_s'] for x in loads[sink]))}"
                    f" ratio_{sink}_vs_{base}={ratio:.3f}"
                )
        say(f"bench wall time: {time.perf_counter() - t_bench:.0f}s")
        final_line = (
            f"rows_per_s={int(rps)} ratio_vs_cli={cli_s / total_s:.3f} ratio_vs_plain_spark={plain_s / total_s:.3f}"
            + extra
        )
        if args.png:
            got = first[-1]["got"]
            t_trigger, _, tis, xcoms = got[0], got[1], got[2], got[3]
            snaps = [ti for ti in tis if ti["task_id"] == "snapshot"]
            spark_sum = sum(float(xcoms.get(ti["map_index"], {}).get("seconds") or 0) for ti in snaps)
            write_png(
                args.png,
                task_spans(t_trigger, tis, xcoms, first[-1]["total_s"]),
                rows,
                first[-1]["total_s"],
                cli_s,
                plain_s,
                plain_rows,
                spark_sum,
                args.executor,
            )
    finally:
        stop_group(dag_proc)
        stop_group(migrate)
        with contextlib.suppress(Exception):
            from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import stop_local_stream

            if stop_local_stream(state):
                say("stream stopped")
        with contextlib.suppress(Exception):
            from airflow_provider_mysqlcdc.spark.runtime.connect_server import stop_local_servers

            stop_local_servers(WORK / "connect")
        server.stop()
        if args.keep_log and DAG_LOG.exists():
            with contextlib.suppress(OSError):
                Path(args.keep_log).write_text(DAG_LOG.read_text(errors="replace").replace(ROOT_PASSWORD, "***"))
                say(f"airflow dags test output kept in {args.keep_log}")
        if not args.keep_work:
            shutil.rmtree(WORK, ignore_errors=True)
    say(final_line)  # the last line, after the cleanup's messages
    return 0


if __name__ == "__main__":
    sys.exit(main())
