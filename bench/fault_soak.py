"""Fault soak: kill -9 at a random moment, recover as the docs say, check the sink is exact.

Every round runs the pipeline's own jobs as processes (as the operators and spark-submit do)
against one long-lived private MariaDB, in a fresh database with a fresh state location and
sink, while writers insert, update, delete and move keys in four tables of different shapes:
an integer key (``orders``), a composite key (``tenant_items``), a case-insensitive string
key (``codes``, keys differing only in case) and a table without a primary key whose row
identity is a NOT NULL unique column (``keyless``, split on it with ``chunk_key_columns``).

1. Plan (the Airflow plan step's batch sizing, ``--batches`` batches across the tables), then
   each batch as a ``jobs/snapshot_chunks.py`` process, then ``write_finished`` and the stream
   as a ``jobs/binlog_stream.py`` process (a 64 KiB catch-up threshold and catch-up
   micro-batches of 512 KiB, so the backlog the snapshot leaves is caught up in steps).
2. One kill -9 (SIGKILL), its kind from the round's seed (``seed % 4``), its moment from
   ``random.Random(seed)``:
   ``snapshot``  a batch's job, a random time into its work (after its "reading N chunks");
   ``stream``    the stream with a micro-batch in flight, once it is near the head;
   ``catchup``   the stream with a catch-up micro-batch in flight;
   ``mariadb``   the server itself, during a batch's job or while the stream runs.
3. Recovery as a user does it (docs/ui.md "Rerun a batch", docs/stream.md "Stream behaviour"): the
   killed batch's job is run again; the stream job is started again (it resumes from its
   checkpoint); the server is started again on the same data dir and port, and whatever died
   with it (a batch's job, the stream) is run again. The writers reconnect by themselves.
4. Once the recovered job has committed, the writers stop; then every table of the sink is
   compared with its source row by row until equal (``--timeout``): Delta and PostgreSQL read
   directly (a key twice is a difference), the changelog replayed (snapshot parts, then the
   micro-batch files). The changelog's stream lines must also be strictly ordered by
   (binlog file, position, row, before/after image) per table (``meta.seq`` only orders the
   lines of one micro-batch): a change written twice, or out of order, fails
   the round even when the replay ends equal. Recovery time: from the kill to the first
   poll at which every table is equal.

Sinks rotate with the seed (``seed % len(--sinks)``); with the four kinds and three sinks every
pair comes round every 12 seeds. ``--seeds 7,19`` runs just those rounds again.

Usage: python bench/fault_soak.py [--rounds 100] [--rows 20000] [--sinks delta,postgres,changelog]
                                  [--seed 0 | --seeds 7,19] [--max-minutes M] [--png PATH]

One line per round, then the last line:
    rounds=N exact=K failed_seeds=[...] median_recovery_s=<float>
A round that is not exact keeps its directory under ``--work`` (job logs, state, sink) and
writes the whole difference to ``failure.txt`` there; its line holds the first one.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import decimal
import glob
import json
import math
import random
import re
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import pymysql

from airflow_provider_mysqlcdc.cdc.batching import BatchSizing
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.offsets import split_binlog_file
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from mysqlcdc_harness.mariadb import ROOT_PASSWORD, MariaDB
from mysqlcdc_harness.sink_compare import mysql_rows
from mysqlcdc_harness.stream_job import committed, in_flight, kill_job, start_job, start_snapshot_job
from mysqlcdc_harness.tables import (
    VALUE_COLS,
    VALUE_DDL,
    VALUE_FILL,
    _values,
    create_composite_table,
    create_int_table,
    create_string_table,
)
from mysqlcdc_harness.verify import diff
from mysqlcdc_harness.writer import ConcurrentWriter, TableSpec

ROOT = Path(__file__).resolve().parents[1]

KINDS = ("snapshot", "stream", "catchup", "mariadb")
SINKS = ("delta", "postgres", "changelog")
SERVER_IDS = "6400-6499"
CATCHUP_MIN_BYTES = 64 << 10  # the smallest catch-up threshold StreamOptions accepts
CATCHUP_BATCH_BYTES = 512 << 10  # so the snapshot's backlog is caught up in several micro-batches
BACKLOG_FOR_CATCHUP = 6 * CATCHUP_BATCH_BYTES  # the catchup kind waits for this much binlog before the stream
# MySQL client errors meaning "the server went away": the writers reconnect on these.
LOST_CONNECTION = {2002, 2003, 2006, 2013, 2055, 1053, 1927, 4031}


class RoundError(Exception):
    """The round could not go on (a job failed, a wait timed out): it counts as not exact."""


# --- the fourth table shape: no primary key, a NOT NULL unique column -------------------------


def create_keyless_table(server: MariaDB, db: str, rows: int, table: str = "keyless") -> TableSpec:
    """No PRIMARY KEY; ``uid`` is NOT NULL UNIQUE (so it is the row identity) and its values do
    not follow the insertion order (a multiplicative scatter over 4x the row count)."""
    modulus = 4 * rows + 1
    if modulus % 7919 == 0:
        modulus += 2
    server.execute(
        f"CREATE TABLE `{table}` (uid BIGINT NOT NULL, {VALUE_DDL}, UNIQUE KEY uq_uid (uid)) ENGINE=InnoDB",
        f"INSERT INTO `{table}` SELECT seq * 7919 % {modulus} + 1, {', '.join(VALUE_FILL)} FROM seq_1_to_{rows}",
        f"ANALYZE TABLE `{table}`",
        database=db,
    )
    top = modulus + 500
    return TableSpec(
        db,
        table,
        ("uid",),
        VALUE_COLS,
        new_key=lambda rng: (rng.randint(1, top),),
        values=_values,
        near=lambda k, rng: (max(1, k[0] + rng.randint(-3, 3)),),
    )


SHAPES: tuple[tuple[str, Callable[..., TableSpec]], ...] = (
    ("orders", create_int_table),
    ("tenant_items", create_composite_table),
    ("codes", create_string_table),
    ("keyless", create_keyless_table),
)


# --- writers that survive the server's crash ---------------------------------------------------


@dataclasses.dataclass
class SurvivingWriter(ConcurrentWriter):
    """ConcurrentWriter whose threads reconnect when the server goes away, as an application's
    connection pool would: the transaction in flight is lost or committed, the source decides."""

    reconnects: int = 0

    def _run(self, rng: random.Random) -> None:
        conn = None
        try:
            while not self._stop.is_set():
                if conn is None:
                    try:
                        conn = self.connect()
                        conn.autocommit(False)
                    except pymysql.err.OperationalError:
                        conn = None
                        time.sleep(0.2)
                        continue
                try:
                    with conn.cursor() as cur:
                        for _ in range(rng.randint(1, self.max_statements_per_tx)):
                            self._one(cur, rng)
                    conn.commit()
                    self.stats.transactions += 1
                except pymysql.err.IntegrityError:
                    conn.rollback()
                    self.stats.conflicts += 1
                except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as e:
                    code = e.args[0] if e.args else None
                    if isinstance(e, pymysql.err.OperationalError) and code in (1213, 1205):
                        conn.rollback()  # deadlock / lock wait: try again
                        self.stats.conflicts += 1
                        continue
                    if isinstance(e, pymysql.err.InterfaceError) or code in LOST_CONNECTION:
                        with contextlib.suppress(Exception):
                            conn.close()
                        conn = None
                        self.reconnects += 1
                        time.sleep(0.1)
                        continue
                    raise
                if self.pause_s:
                    time.sleep(self.pause_s)
        except BaseException as e:
            self.errors.append(e)
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()


# --- reading the sinks ---------------------------------------------------------------------------


def _keyed(rows, key: tuple[str, ...], cols: list[str], where: str) -> dict[tuple, dict]:
    out: dict[tuple, dict] = {}
    for r in rows:
        k = tuple(r[c] for c in key)
        if k in out:
            raise RoundError(f"{where}: key {k} is there twice ({out[k]} and {r})")
        out[k] = {c: r[c] for c in cols}
    return out


def delta_table(lake: Path, t: TableId, key, cols) -> dict[tuple, dict]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(lake / t.database / t.table)).to_pyarrow_table(columns=cols).to_pylist()
    return _keyed(rows, key, cols, f"delta {t}")


def postgres_table(pg, schema: str, t: TableId, key, cols) -> dict[tuple, dict]:
    names = ", ".join(f'"{c}"' for c in cols)
    rows = [dict(zip(cols, r)) for r in pg.query(f'SELECT {names} FROM "{schema}"."{t.database}__{t.table}"')]
    return _keyed(rows, key, cols, f"postgres {t}")


def _logged(v):
    """A source value as the changelog writes it (DECIMAL as its string, DATETIME in ISO form)."""
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return v


BEFORE, AFTER = ("-U", "-D"), ("+I", "+U")


def changelog_table(lake: Path, t: TableId, key, cols) -> dict[tuple, dict]:
    """The rows the changelog describes: the snapshot parts of every batch (not the hidden
    directories a killed run leaves), then the micro-batch files in order. Each stream line's
    (binlog file, position, row, before/after) must come after the previous line's: a change
    logged twice or out of order raises."""
    from airflow_provider_mysqlcdc.cdc.chunks import KeyRange

    base = lake / t.database / t.table
    state: dict[tuple, dict] = {}
    for path in sorted(glob.glob(str(base / "snapshot" / "*" / "*.jsonl"))):
        for text in Path(path).read_text().splitlines():
            if text.strip():
                line = json.loads(text)
                k = tuple(line["data"][c] for c in key)
                if k in state:
                    raise RoundError(f"changelog {t}: snapshot row {k} is there twice ({path})")
                state[k] = {c: line["data"].get(c) for c in cols}
    last: tuple[int, int] | None = None
    last_where = ""
    for path in sorted(glob.glob(str(base / "stream" / "batch-*.jsonl"))):
        for n, text in enumerate(Path(path).read_text().splitlines(), 1):
            if not text.strip():
                continue
            line = json.loads(text)
            op = line["op"]
            if op == "RS":  # a batch read again while streaming (none in this bench, but replay it right)
                for d in line["resnapshot"]["ranges"]:
                    r = KeyRange.from_dict(d)
                    for k in [
                        k
                        for k in state
                        if (r.start is None or k >= tuple(r.start)) and (r.end is None or k < tuple(r.end))
                    ]:
                        del state[k]
                continue
            if op not in BEFORE + AFTER:
                raise RoundError(f"changelog {t}: unexpected line {text[:200]} ({Path(path).name}:{n})")
            # The binlog position orders changes across micro-batches: ``seq`` counts from the
            # first binlog file of its own micro-batch, so it restarts when one spans a rotation.
            meta = line["meta"]
            order = (
                split_binlog_file(meta["binlog_file"])[1],
                int(meta["binlog_pos"]),
                int(meta["binlog_row"]),
                0 if op in BEFORE else 1,
            )
            where = f"{Path(path).name}:{n}"
            if last is not None and order <= last:
                raise RoundError(
                    f"changelog {t}: {where} ({meta['binlog_file']}:{order[1]}#{order[2]}, {op}) does "
                    f"not follow {last_where} (file #{last[0]}:{last[1]}#{last[2]}): a change logged "
                    "twice or out of order"
                )
            last, last_where = order, where
            k = tuple(line["data"][c] for c in key)
            if op in AFTER:
                state[k] = {c: line["data"].get(c) for c in cols}
            else:
                state.pop(k, None)
    return state


# --- one round ------------------------------------------------------------------------------------


@dataclasses.dataclass
class RoundResult:
    seed: int
    sink: str
    kind: str
    moment: str = ""
    recovery_s: float = math.nan
    exact: bool = False
    changes: int = 0
    reconnects: int = 0
    problem: str = ""
    notes: list[str] = dataclasses.field(default_factory=list)

    def line(self, index: int) -> str:
        first = self.problem.splitlines()[0][:300] if self.problem else ""
        notes = f' notes="{"; ".join(self.notes)}"' if self.notes else ""
        tail = "" if self.exact else f' diff="{first}"'
        return (
            f'round={index} seed={self.seed} sink={self.sink} kill={self.kind} at="{self.moment}" '
            f"recovery_s={self.recovery_s:.1f} writer_changes={self.changes} "
            f"exact={'yes' if self.exact else 'no'}{notes}{tail}"
        )


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def reading(log: Path) -> bool:
    """The batch's job has its Spark session and starts reading (SnapshotProgress's first line)."""
    return re.search(r"reading \d+ chunks", _text(log)) is not None


def wait_for(
    pred: Callable[[], bool], timeout_s: float, what: str, proc=None, log: Path | None = None, every_s: float = 0.05
) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if proc is not None and proc.poll() is not None:
            raise RoundError(f"{what}: the job exited with {proc.returncode}\n{_tail(log) if log else ''}")
        if time.monotonic() > deadline:
            raise RoundError(
                f"timed out after {timeout_s:.0f} s waiting for {what}" + (f"\n{_tail(log)}" if log else "")
            )
        time.sleep(every_s)


class Round:
    def __init__(
        self, args, server: MariaDB, pg, seed: int, kind: str, sink: str, work: Path, work_ref: list[float]
    ) -> None:
        self.args, self.server, self.pg, self.seed, self.kind, self.sink = args, server, pg, seed, kind, sink
        self.rng = random.Random(seed)
        self.dir = work / f"round-{seed:04d}"
        self.db = f"soak_{seed}"
        self.result = RoundResult(seed, sink, kind)
        self.work_ref = work_ref  # seconds of a batch's work after "reading N chunks", from earlier jobs
        self.stream = None
        self.jobs: list = []
        self.pg_schema: str | None = None
        self.t_kill: float | None = None

    # --- set-up ---

    def setup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.server.execute(f"DROP DATABASE IF EXISTS `{self.db}`", f"CREATE DATABASE `{self.db}`")
        self.specs = [make(self.server, self.db, self.args.rows, table) for table, make in SHAPES]
        src = self.server.source_config(server_id_range=SERVER_IDS)
        self.source = src
        self.lake = self.dir / "lake"
        self.env: dict[str, str] = {}
        if self.sink == "postgres":
            self.pg_schema = self.pg.fresh_schema("soak")
            sink = SinkConfig("postgres", {"dsn": self.pg.dsn, "schema": self.pg_schema})
            self.env["PGPASSWORD"] = self.pg.password
        else:
            sink = SinkConfig(self.sink, {"root": str(self.lake)})
        include = tuple(f"{self.db}.{s.table}" for s in self.specs)
        self.config = PipelineConfig(
            name=f"soak-{self.seed}",
            source=src,
            include=include,
            state_location=str(self.dir / "state"),
            sink=sink,
            split=SplitOptions(
                chunk_size=max(100, self.args.rows // 4), chunk_key_columns={f"{self.db}.keyless": "uid"}
            ),
            stream=StreamOptions(
                max_events_per_batch=500,
                heartbeat_s=1.0,
                trigger_interval_s=0.2,
                catchup_min_bytes=CATCHUP_MIN_BYTES,
                catchup_batch_bytes=CATCHUP_BATCH_BYTES,
            ),
        )
        self.cfg_path = self.dir / "pipeline.json"
        self.cfg_path.write_text(self.config.to_json())
        total = len(self.specs) * self.args.rows
        self.plan = build_plan(
            src,
            include,
            split=self.config.split,
            sizing=BatchSizing(
                rows_per_batch=math.ceil(total / self.args.batches), parallelism=1, min_rows_per_batch=1
            ),
        )
        self.state = StateStore(self.config.state_location)
        self.state.write_plan(self.plan)
        self.checkpoint = self.dir / "state" / "stream" / "checkpoint"
        self.writers = []
        for i, spec in enumerate(self.specs):
            t = TableId(self.db, spec.table)
            keys = ", ".join(f"`{c}`" for c in spec.key_columns)
            desc = ", ".join(f"`{c}` DESC" for c in spec.key_columns)
            edges = self.server.query(
                f"(SELECT {keys} FROM `{spec.table}` ORDER BY {keys} LIMIT 3) UNION ALL "
                f"(SELECT {keys} FROM `{spec.table}` ORDER BY {desc} LIMIT 3)",
                database=self.db,
            )
            hot = [c.start for b in self.plan.batches for c in b.chunks if c.table_id == t and c.start is not None]
            hot += [tuple(r) for r in edges]
            self.writers.append(
                SurvivingWriter(
                    lambda: self.server.connect(self.db),
                    spec,
                    seed=self.seed * 10 + i,
                    threads=1,
                    hot_keys=hot,
                    hot_ratio=0.3,
                    pause_s=self.args.writer_pause,
                )
            )

    # --- jobs ---

    def start_batch(self, batch_id: str, attempt: int):
        log = self.dir / f"snapshot-{self.plan.batches.index(self.plan.batch(batch_id))}-{attempt}.log"
        proc = start_snapshot_job(self.cfg_path, batch_id, log, ROOT_PASSWORD, extra_env=self.env)
        self.jobs.append(proc)
        return proc, log

    def finish_batch(self, proc, log: Path, batch_id: str) -> None:
        try:
            rc = proc.wait(self.args.job_timeout)
        except Exception:
            kill_job(proc)
            raise RoundError(f"batch {batch_id}: its job ran over {self.args.job_timeout} s\n{_tail(log)}")
        if rc != 0:
            raise RoundError(f"batch {batch_id}: its job exited with {rc}\n{_tail(log)}")

    def run_batch_plain(self, batch_id: str) -> None:
        proc, log = self.start_batch(batch_id, 1)
        wait_for(
            lambda: reading(log) or proc.poll() is not None,
            self.args.job_timeout,
            f"batch {batch_id} to start reading",
            every_s=0.1,
        )
        mark = time.monotonic()
        self.finish_batch(proc, log, batch_id)
        self.work_ref.append(max(0.2, time.monotonic() - mark))  # aims later kills into a batch's work

    def kill_in_batch(self, batch_id: str, what: str) -> tuple:
        """Start the batch's job and, a random time into its work, SIGKILL ``what`` (the job or
        the server). Returns (proc, log)."""
        proc, log = self.start_batch(batch_id, 1)
        wait_for(
            lambda: reading(log),
            self.args.job_timeout,
            f"batch {batch_id} to start reading",
            proc=proc,
            log=log,
            every_s=0.02,
        )
        ref = statistics.median(self.work_ref[-9:]) if self.work_ref else 3.0
        delay = self.rng.uniform(0.05, 0.85) * ref
        time.sleep(delay)
        done = proc.poll() is not None
        self.t_kill = time.monotonic()
        if what == "job":
            kill_job(proc)
        else:
            self.server.kill()
        self.result.moment = (
            f"batch {self.plan.batches.index(self.plan.batch(batch_id)) + 1}/"
            f"{len(self.plan.batches)}, {delay:.2f} s into its work"
            + (" (the job had already ended: the kill missed)" if done else "")
        )
        return proc, log

    def start_stream(self, attempt: int):
        log = self.dir / f"stream-{attempt}.log"
        self.stream = start_job(self.cfg_path, log, ROOT_PASSWORD, extra_env=self.env)
        self.stream_log = log
        return self.stream, log

    def commits(self) -> int:
        c = committed(self.checkpoint)
        return -1 if c is None else c[0]

    def catchups(self) -> int:
        return sum(_text(p).count("catch-up micro-batch to") for p in self.dir.glob("stream-*.log"))

    def wait_new_commit(self, after: int, what: str) -> None:
        wait_for(
            lambda: self.commits() > after,
            self.args.job_timeout,
            what,
            proc=self.stream,
            log=self.stream_log,
            every_s=0.1,
        )

    # --- the round ---

    def run(self) -> RoundResult:
        r = self.result
        try:
            self.setup()
            for w in self.writers:
                w.start()
            time.sleep(0.5)
            self.body()
            self.stop_writers()
            self.compare()
        except RoundError as e:
            r.problem = str(e)
        except Exception as e:  # a bug of the bench or of the product: the round is not exact either way
            import traceback

            r.problem = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
        finally:
            self.cleanup()
        return r

    def body(self) -> None:
        r = self.result
        batches = [b.batch_id for b in self.plan.batches]
        mariadb_phase = "snapshot" if self.rng.random() < 0.5 else "stream"
        victim = (
            self.rng.choice(batches)
            if self.kind == "snapshot" or (self.kind == "mariadb" and mariadb_phase == "snapshot")
            else None
        )
        for b in batches:
            if b != victim:
                self.run_batch_plain(b)
                continue
            if self.kind == "snapshot":
                proc, log = self.kill_in_batch(b, "job")
                r.notes.append("batch job rerun")
                proc, log = self.start_batch(b, 2)  # as a cleared task would run it again
                self.finish_batch(proc, log, b)
            else:
                proc, log = self.kill_in_batch(b, "server")
                r.moment = "server, " + r.moment
                time.sleep(self.rng.uniform(0.2, 2.0))
                self.server.start()
                try:
                    rc = proc.wait(self.args.job_timeout)
                except Exception:
                    kill_job(proc)
                    rc = "hung"
                if rc != 0:
                    r.notes.append(f"batch job died with the server ({rc}): rerun")
                    proc, log = self.start_batch(b, 2)
                    self.finish_batch(proc, log, b)
                else:
                    r.notes.append("batch job survived the server's restart")
        self.state.write_finished(self.state.finished_from_results())
        if self.kind == "catchup":
            self.wait_backlog()
        self.start_stream(1)
        if self.kind != "catchup":  # the catch-up kind may kill micro-batch 0 already
            wait_for(
                lambda: self.commits() >= 0,
                self.args.job_timeout,
                "the stream's first commit",
                proc=self.stream,
                log=self.stream_log,
                every_s=0.1,
            )
        if self.kind == "stream":
            self.kill_stream_near_head()
        elif self.kind == "catchup":
            self.kill_stream_in_catchup()
        elif self.kind == "mariadb" and victim is None:
            self.kill_server_under_stream()
        if self.kind in ("stream", "catchup"):
            killed_at = self.commits()
            self.start_stream(2)
            self.wait_new_commit(killed_at, "a commit of the restarted stream")
        elif self.kind != "mariadb" or victim is not None:
            self.wait_new_commit(self.commits(), "a commit of the stream")
        if self.t_kill is None:
            raise RoundError("no kill happened (bench bug)")

    def wait_backlog(self) -> None:
        """The catchup kind starts the stream only once the writers left enough binlog behind the
        smallest high watermark for several catch-up micro-batches (as after downtime)."""
        low = min(f.high_watermark for f in self.state.finished_from_results())

        def behind() -> int:
            file, pos = self.server.master_status()
            return pos - low.position if file == low.file else 1 << 40

        try:
            wait_for(lambda: behind() >= BACKLOG_FOR_CATCHUP, 120, "a catch-up backlog", every_s=0.5)
        except RoundError:
            self.result.notes.append(f"backlog only {behind()} bytes")

    def kill_stream_near_head(self) -> None:
        """Once the stream is past its catch-up (two commits since the last catch-up plan), wait a
        random while, then SIGKILL it with a micro-batch in flight (offsets logged, no commit)."""
        seen = {"catchups": self.catchups(), "at": self.commits()}

        def caught_up() -> bool:
            c = self.catchups()
            if c != seen["catchups"]:
                seen["catchups"], seen["at"] = c, self.commits()
            return self.commits() >= seen["at"] + 2

        wait_for(
            caught_up,
            self.args.job_timeout,
            "the stream to reach the head",
            proc=self.stream,
            log=self.stream_log,
            every_s=0.1,
        )
        time.sleep(self.rng.uniform(0.0, 3.0))
        before = self.catchups()
        wait_for(
            lambda: in_flight(self.checkpoint),
            60,
            "a micro-batch in flight",
            proc=self.stream,
            log=self.stream_log,
            every_s=0.01,
        )
        self.t_kill = time.monotonic()
        kill_job(self.stream)
        batch = self.commits() + 1
        self.result.moment = f"micro-batch {batch} in flight, near the head" + (
            " (a catch-up one)" if self.catchups() != before else ""
        )

    def kill_stream_in_catchup(self) -> None:
        """SIGKILL the stream right after its k-th catch-up plan (k from the seed), with that
        micro-batch in flight; if the catch-up ends sooner, at the last one seen."""
        target = self.rng.randint(1, 4)
        seen = {"catchups": self.catchups(), "at": self.commits()}

        def ready() -> bool:
            c = self.catchups()
            if c != seen["catchups"]:
                seen["catchups"], seen["at"] = c, self.commits()
            over = self.commits() >= seen["at"] + 2  # two commits since the last catch-up plan: at the head
            return (c >= target and in_flight(self.checkpoint)) or over

        wait_for(
            ready, self.args.job_timeout, "a catch-up micro-batch", proc=self.stream, log=self.stream_log, every_s=0.01
        )
        if not in_flight(self.checkpoint):
            wait_for(
                lambda: in_flight(self.checkpoint),
                60,
                "a micro-batch in flight",
                proc=self.stream,
                log=self.stream_log,
                every_s=0.01,
            )
        self.t_kill = time.monotonic()
        kill_job(self.stream)
        c = self.catchups()
        self.result.moment = f"micro-batch {self.commits() + 1} in flight after catch-up plan {c}" + (
            "" if c >= target else f" (catch-up ended before plan {target})"
        )
        if c == 0:
            self.result.notes.append("no catch-up happened: the kill hit a near-head micro-batch")

    def kill_server_under_stream(self) -> None:
        """SIGKILL the server a random while after the stream's first commit, start it again on
        the same data dir and port; start the stream again only if it died."""
        time.sleep(self.rng.uniform(0.0, 6.0))
        self.t_kill = time.monotonic()
        before = self.commits()
        self.server.kill()
        inflight = in_flight(self.checkpoint)
        self.result.moment = f"server, stream at commit {before}" + (
            " with a micro-batch in flight" if inflight else ""
        )
        time.sleep(self.rng.uniform(0.2, 2.0))
        self.server.start()
        deadline = time.monotonic() + self.args.job_timeout
        while self.commits() <= before and self.stream.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.stream.poll() is not None:
            self.result.notes.append(f"stream died with the server ({self.stream.returncode}): restarted")
            self.start_stream(2)
        else:
            self.result.notes.append("stream reconnected by itself")
        self.wait_new_commit(before, "a commit of the stream after the server's restart")

    def stop_writers(self) -> None:
        problems = []
        for w in self.writers:
            try:
                w.stop()
            except Exception as e:
                problems.append(f"writer of {w.spec.table}: {e!r}")
        self.result.changes = sum(w.stats.total for w in self.writers)
        self.result.reconnects = sum(w.reconnects for w in self.writers)
        if self.result.reconnects:
            self.result.notes.append(f"writers reconnected {self.result.reconnects} times")
        if problems:
            raise RoundError("; ".join(problems))

    def compare(self) -> None:
        """Poll until every table of the sink equals its source; the recovery time ends there."""
        tables = []
        for spec in self.specs:
            t = TableId(self.db, spec.table)
            key = tuple(spec.key_columns)
            cols = list(key) + list(VALUE_COLS)
            tables.append((t, key, cols))
        expected = {}
        for t, key, cols in tables:
            rows = mysql_rows(self.server, t, cols, key)
            if self.sink == "changelog":
                rows = {k: {c: _logged(v) for c, v in r.items()} for k, r in rows.items()}
            expected[t] = rows

        def read(t, key, cols):
            if self.sink == "delta":
                return delta_table(self.lake, t, key, cols)
            if self.sink == "postgres":
                return postgres_table(self.pg, self.pg_schema, t, key, cols)
            return changelog_table(self.lake, t, key, cols)

        deadline = time.monotonic() + self.args.timeout
        while True:
            problems = []
            for t, key, cols in tables:
                try:
                    got = read(t, key, cols)
                except RoundError:
                    raise  # a duplicate is not something time repairs
                except Exception as e:  # not readable yet
                    problems.append(f"{t}: sink not readable: {e!r}")
                    continue
                d = diff(expected[t], got)
                if d:
                    problems.append(f"{t}: {d}")
            if not problems:
                self.result.recovery_s = time.monotonic() - self.t_kill
                self.result.exact = True
                return
            if time.monotonic() > deadline:
                alive = self.stream is not None and self.stream.poll() is None
                raise RoundError(
                    f"sink != source {self.args.timeout:.0f} s after the writers stopped "
                    f"(stream {'running' if alive else 'not running'}): " + "\n".join(problems)
                )
            time.sleep(0.5)

    def cleanup(self) -> None:
        for p in self.jobs + ([self.stream] if self.stream is not None else []):
            with contextlib.suppress(Exception):
                kill_job(p)
        for w in getattr(self, "writers", []):
            with contextlib.suppress(Exception):
                w.stop()
        if self.server.proc is None:  # a failed round may leave the server down
            with contextlib.suppress(Exception):
                self.server.start()
        with contextlib.suppress(Exception):
            self.server.execute(f"DROP DATABASE IF EXISTS `{self.db}`")
        if self.pg_schema:
            with contextlib.suppress(Exception):
                self.pg.execute(f'DROP SCHEMA "{self.pg_schema}" CASCADE')
        if self.result.exact:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                (self.dir / "failure.txt").write_text(f"{self.result.line(0)}\n\n{self.result.problem}\n")


# --- the picture ------------------------------------------------------------------------------------


def recovery_png(path: str, results: list[RoundResult], kinds, sinks) -> Path:
    """Recovery seconds per round, one column per kill kind, coloured by sink; rounds that were
    not exact as red crosses at the top; each kind's median as a bar."""
    import plots

    plt = plots.require()
    fig, ax = plt.subplots(figsize=(9, 4.8))
    colors = dict(zip(SINKS, ("#3182bd", "#31a354", "#e6550d")))
    jitter = random.Random(0)
    finite = [r.recovery_s for r in results if r.exact]
    top = max(finite, default=1.0) * 1.12
    for x, kind in enumerate(kinds):
        times = [r.recovery_s for r in results if r.kind == kind and r.exact]
        if times:
            m = statistics.median(times)
            ax.plot([x - 0.3, x + 0.3], [m, m], color="black", linewidth=1.5)
            ax.text(x + 0.32, m, f"{m:.1f} s", va="center", fontsize=8)
        for r in results:
            if r.kind != kind:
                continue
            dx = jitter.uniform(-0.2, 0.2)
            if r.exact:
                ax.plot(x + dx, r.recovery_s, "o", color=colors.get(r.sink, "grey"), alpha=0.8, markersize=5)
            else:
                ax.plot(x + dx, top, "x", color="#d62728", markersize=8)
    for sink in sinks:
        ax.plot([], [], "o", color=colors.get(sink, "grey"), label=sink)
    if any(not r.exact for r in results):
        ax.plot([], [], "x", color="#d62728", label="not exact")
    ax.set_xticks(range(len(kinds)), [f"kill -9 {k}" for k in kinds])
    ax.set_xlim(-0.6, len(kinds) - 0.4)
    ax.set_ylim(0, top * 1.06)
    ax.set_ylabel("kill -> sink equal to source (s)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    exact = sum(r.exact for r in results)
    ax.set_title(f"fault soak: {exact}/{len(results)} rounds exact; recovery time per round", fontsize=10)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=plots.DPI)
    plt.close(fig)
    return out


# --- main ---------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0, help="the first round's seed; round i has seed+i")
    ap.add_argument("--seeds", default="", help="comma-separated seeds to run instead (e.g. the failed ones)")
    ap.add_argument("--rows", type=int, default=20_000, help="rows in each of the four tables at the start")
    ap.add_argument("--batches", type=int, default=2, help="snapshot batches (jobs) per round")
    ap.add_argument("--sinks", default=",".join(SINKS))
    ap.add_argument("--kinds", default=",".join(KINDS), help="kill kinds; round seed s gets kinds[s %% len]")
    ap.add_argument("--writer-pause", type=float, default=0.1, help="seconds each writer sleeps between commits")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds for the sink to equal the source")
    ap.add_argument("--job-timeout", type=float, default=300.0)
    ap.add_argument("--work", default=str(ROOT / "bench" / ".work" / "fault_soak"))
    ap.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="stop after the round that ends past this many minutes (the summary says which seed "
        "to go on from with --seed), so a long soak can run in slices",
    )
    ap.add_argument(
        "--png",
        metavar="PATH",
        default=None,
        help="also write a PNG there: recovery time per round by kill kind, coloured by sink "
        "(needs matplotlib, the 'dev' extra)",
    )
    args = ap.parse_args()
    sinks = [s for s in args.sinks.split(",") if s]
    kinds = [k for k in args.kinds.split(",") if k]
    if bad := [s for s in sinks if s not in SINKS]:
        ap.error(f"--sinks: unknown {bad}; choose from {', '.join(SINKS)}")
    if bad := [k for k in kinds if k not in KINDS]:
        ap.error(f"--kinds: unknown {bad}; choose from {', '.join(KINDS)}")
    if args.png:
        import plots

        plots.require()  # before the hour of work, not after
    seeds = (
        [int(s) for s in args.seeds.split(",") if s.strip()]
        if args.seeds
        else list(range(args.seed, args.seed + args.rounds))
    )

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    server = MariaDB(base_dir=work / "mariadb", server_id=1).start()
    results: list[RoundResult] = []
    work_ref: list[float] = []
    with contextlib.ExitStack() as stack:
        stack.callback(server.stop)
        pg = None
        if "postgres" in sinks:
            from mysqlcdc_harness.postgres import running_postgres

            pg = stack.enter_context(running_postgres())
        t0 = time.monotonic()
        for i, seed in enumerate(seeds, 1):
            kind, sink = kinds[seed % len(kinds)], sinks[seed % len(sinks)]
            r = Round(args, server, pg, seed, kind, sink, work, work_ref).run()
            results.append(r)
            print(r.line(i), flush=True)
            if args.max_minutes is not None and time.monotonic() - t0 > 60 * args.max_minutes and i < len(seeds):
                print(
                    f"stopped after {i} of {len(seeds)} rounds (--max-minutes {args.max_minutes:g}); go on with "
                    f"--seeds {','.join(map(str, seeds[i:]))}"
                    if args.seeds
                    else f"stopped after {i} of {len(seeds)} rounds (--max-minutes {args.max_minutes:g}); go on with "
                    f"--seed {seeds[i]} --rounds {len(seeds) - i}",
                    flush=True,
                )
                break
        elapsed = time.monotonic() - t0
    exact = sum(r.exact for r in results)
    failed = [r.seed for r in results if not r.exact]
    times = [r.recovery_s for r in results if r.exact]
    for kind in kinds:
        ts = [r.recovery_s for r in results if r.kind == kind and r.exact]
        n = sum(r.kind == kind for r in results)
        if n:
            print(
                f"kill={kind}: {len(ts)}/{n} exact, recovery median "
                f"{statistics.median(ts) if ts else math.nan:.1f} s, max {max(ts) if ts else math.nan:.1f} s",
                flush=True,
            )
    print(f"wall time {elapsed:.0f} s ({elapsed / max(len(results), 1):.0f} s a round)", flush=True)
    if args.png:
        print(f"png: {recovery_png(args.png, results, kinds, sinks)}", flush=True)
    median = statistics.median(times) if times else math.nan
    print(f"rounds={len(results)} exact={exact} failed_seeds={failed} median_recovery_s={median:.1f}", flush=True)
    return 0 if exact == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
