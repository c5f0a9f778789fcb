"""Failover soak: the source's primary fails over again and again under a running pipeline; no change
may be lost or applied twice.

Two private MariaDB servers take turns as primary and GTID replica (``log_slave_updates``; the first
replica also wrote a transaction of its own in another domain). The pipeline's source connection names
one endpoint that forwards to whichever is primary, as a managed database's endpoint does. The stream
(launched as the stream task launches it) writes a changelog sink, whose every line carries the GTID
of its transaction. Each round:

1. writers (``--writers`` threads, seeded) make single-row INSERT/UPDATE/DELETE transactions on the
   captured table of the current primary for ``--write-s`` seconds, recording each one's GTID;
2. writers off; the replica catches up; the stream (SIGKILL) and the primary (SIGKILL) die;
3. the replica is promoted and the endpoint moves to it; the old primary comes back as its replica;
4. the watchdog (``MySqlCdcStreamSensor.poke``, relaunch on) relaunches the stream; the time from the
   promotion to the relaunched stream's first committed micro-batch is the round's figure. In rounds
   whose seed says so, the relaunched stream is killed again (kill -9 during its first micro-batch
   on the new server) and relaunched once more;
5. a few writes on the new primary; then the changelog must hold every recorded GTID's change exactly
   once (a GTID missing: a lost change; twice: a duplicate) and replay to the source table row by row.

Usage: python bench/failover_soak.py [--rounds 20] [--seed 0] [--write-s 3] [--writers 2]

One line per round, then the last line:
    rounds=N exact=K failed_seeds=[...] median_promoted_to_commit_s=<float> lost=<int> duplicated=<int>
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from mysqlcdc_harness import airflow_env

airflow_env.configure()  # before anything imports airflow

from airflow_provider_mysqlcdc.cdc.binlog.failover import gtid_state_at  # noqa: E402
from airflow_provider_mysqlcdc.cdc.chunks import FinishedBatch, KeyRange  # noqa: E402
from airflow_provider_mysqlcdc.cdc.model import TableId  # noqa: E402
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset  # noqa: E402
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions  # noqa: E402
from airflow_provider_mysqlcdc.cdc.source.server import current_offset, server_version  # noqa: E402
from airflow_provider_mysqlcdc.cdc.state import StateStore  # noqa: E402
from mysqlcdc_harness.mariadb import ROOT_PASSWORD, MariaDB  # noqa: E402
from mysqlcdc_harness.tcp_forward import TcpForward  # noqa: E402

DB, TABLE = "soak", "ledger"
T = TableId(DB, TABLE)
KEYS = 400  # the writers' key space: inserts, updates and deletes collide often


class Writers:
    """Single-row transactions on the captured table, each one's GTID recorded (``@@last_gtid``)."""

    def __init__(self, server: MariaDB, seed: int, threads: int) -> None:
        self.server, self.seed, self.threads = server, seed, threads
        self.gtids: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._workers: list[threading.Thread] = []

    def _run(self, n: int) -> None:
        rng = random.Random(self.seed * 100 + n)
        with contextlib.closing(self.server.connect(DB)) as c, c.cursor() as cur:
            while not self._stop.is_set():
                k = rng.randrange(KEYS)
                op = rng.random()
                if op < 0.45:
                    cur.execute(
                        f"INSERT INTO {TABLE} (id, v, note) VALUES (%s, %s, %s) "
                        "ON DUPLICATE KEY UPDATE v = v + 1, note = VALUES(note)",
                        (k, rng.randrange(1 << 30), f"r{self.seed}"),
                    )
                elif op < 0.8:
                    cur.execute(f"UPDATE {TABLE} SET v = v + 1, note = %s WHERE id = %s", (f"u{self.seed}", k))
                else:
                    cur.execute(f"DELETE FROM {TABLE} WHERE id = %s", (k,))
                if cur.rowcount:
                    cur.execute("SELECT @@last_gtid")
                    g = cur.fetchone()[0]
                    with self._lock:
                        self.gtids.append(g.decode() if isinstance(g, bytes) else g)
                time.sleep(0.002)

    def __enter__(self) -> "Writers":
        self._workers = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(self.threads)]
        for w in self._workers:
            w.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for w in self._workers:
            w.join(30)


def changelog(lake: Path) -> tuple[dict[int, dict], dict[str, int]]:
    """Replay the changelog's stream lines in order: the rows it describes, and the number of
    changes logged per GTID (an UPDATE logs a before and an after line: one change)."""
    rows: dict[int, dict] = {}
    per_gtid: dict[str, int] = {}
    for path in sorted(glob.glob(str(lake / DB / TABLE / "stream" / "batch-*.jsonl"))):
        for text in Path(path).read_text().splitlines():
            if not text.strip():
                continue
            line = json.loads(text)
            op, data = line["op"], line["data"]
            if op in ("+I", "+U"):
                rows[data["id"]] = {"id": data["id"], "v": data["v"], "note": data["note"]}
            elif op == "-D":
                rows.pop(data["id"], None)
            if op in ("+I", "+U", "-D"):
                g = line["meta"].get("gtid")
                per_gtid[g] = per_gtid.get(g, 0) + 1
    return rows, per_gtid


def source_rows(server: MariaDB) -> dict[int, dict]:
    return {r[0]: {"id": r[0], "v": r[1], "note": r[2]} for r in server.query(f"SELECT id, v, note FROM {DB}.{TABLE}")}


def kill_stream(state: StateStore) -> None:
    from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import running_local_stream

    proc = running_local_stream(state)
    if proc is not None:
        os.killpg(proc.pgid, signal.SIGKILL)
    deadline = time.time() + 30
    while running_local_stream(state) is not None and time.time() < deadline:
        time.sleep(0.2)


def follow(new_replica: MariaDB, primary: MariaDB) -> None:
    """The old primary, back from its crash, replicates from the new one from where it stopped."""
    new_replica.execute("STOP SLAVE", "SET GLOBAL gtid_slave_pos = @@global.gtid_binlog_pos")
    new_replica.execute(
        f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, MASTER_USER='root', "
        f"MASTER_PASSWORD='{ROOT_PASSWORD}', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
        "START SLAVE",
    )


@dataclasses.dataclass
class Round:
    seed: int
    promoted_to_commit_s: float
    killed_again: bool
    lost: int
    duplicated: int
    problem: str

    def line(self) -> str:
        status = "exact" if not self.problem else f"FAILED: {self.problem[:300]}"
        again = " (killed again in its first micro-batch, relaunched)" if self.killed_again else ""
        return (
            f"seed={self.seed} promoted->first commit {self.promoted_to_commit_s:.1f} s{again}; "
            f"lost={self.lost} duplicated={self.duplicated}: {status}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write-s", type=float, default=3.0)
    ap.add_argument("--writers", type=int, default=2)
    args = ap.parse_args()
    airflow_env.migrate()
    from airflow_provider_mysqlcdc.cdc.store.pipeline_file import write_config
    from airflow_provider_mysqlcdc.hooks.stream import StreamControl
    from airflow_provider_mysqlcdc.sensors.stream import MySqlCdcStreamSensor
    from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import running_local_stream, stop_local_stream

    work = Path(tempfile.mkdtemp(prefix="mysqlcdc-failover-soak-"))
    a = MariaDB(base_dir=work / "a", server_id=41, extra_args=["--log-slave-updates"])
    b = MariaDB(base_dir=work / "b", server_id=42, extra_args=["--log-slave-updates"])
    state = StateStore(str(work / "state"))
    lake = work / "lake"
    results: list[Round] = []
    recorded: list[str] = []
    endpoint: TcpForward | None = None
    try:
        a.start()
        b.start()
        b.replicate_from(a)
        a.execute(
            f"CREATE DATABASE {DB}",
            f"CREATE TABLE {DB}.{TABLE} (id INT PRIMARY KEY, v BIGINT NOT NULL, note VARCHAR(40)) ENGINE=InnoDB",
        )
        b.caught_up(a)
        b.execute("SET SESSION gtid_domain_id = 9", f"CREATE TABLE {DB}.replica_only (id INT PRIMARY KEY)")
        endpoint = TcpForward(a.port)
        airflow_env.set_connection(
            "soak_src",
            "mysql_cdc",
            host="127.0.0.1",
            port=endpoint.port,
            login="root",
            password=ROOT_PASSWORD,
            extra={"server_id_range": "7300-7320"},
        )
        airflow_env.set_connection("soak_spark", "spark", host="local[2]")
        config = PipelineConfig(
            name="failover_soak",
            source=dataclasses.replace(a.source_config(server_id_range="7300-7320"), port=endpoint.port),
            include=(str(T),),
            state_location=state.location,
            sink=SinkConfig("changelog", {"root": str(lake)}),
            stream=StreamOptions(max_events_per_batch=2000, heartbeat_s=1.0, trigger_interval_s=0.5),
        )
        write_config(state, config)
        with contextlib.closing(a.connect()) as c:
            v = server_version(c)
            hw = current_offset(c, v)
            hw = BinlogOffset(hw.file, hw.position, gtid_state_at(c, v, hw))
        state.write_finished([FinishedBatch("all", (KeyRange(T, None, None, True),), hw, "mariadb:41")])
        control = StreamControl(state.location, "soak_src", "soak_spark", None, start_timeout_s=240)
        control.launch()
        primary, replica = a, b
        for n in range(args.rounds):
            seed = args.seed + n
            rng = random.Random(seed)
            problem = ""
            with Writers(primary, seed, args.writers) as w:
                time.sleep(args.write_s)
            recorded += w.gtids
            replica.caught_up(primary)
            kill_stream(state)
            primary.kill()
            replica.promote()
            endpoint.retarget(replica.port)
            promoted = time.monotonic()
            sensor = MySqlCdcStreamSensor(
                task_id="stream_health", state_location=state.location, relaunch=True, start_timeout_s=240
            )
            killed_again = rng.random() < 0.3
            try:
                sensor.poke({})
                took = time.monotonic() - promoted
                if killed_again:  # kill -9 during its first micro-batch on the new server, then relaunch
                    with Writers(replica, seed + 1000, 1) as w2:
                        time.sleep(0.5)
                        kill_stream(state)
                    recorded += w2.gtids
                    sensor.poke({})
            except Exception as e:
                problem = f"relaunch failed: {e}"
                took = time.monotonic() - promoted
            primary.start()  # the old primary comes back, as the new one's replica
            follow(primary, replica)
            primary, replica = replica, primary
            if not problem:
                with Writers(primary, seed + 2000, 1) as w3:
                    time.sleep(1.0)
                recorded += w3.gtids
                deadline = time.monotonic() + 120
                while True:
                    got, per_gtid = changelog(lake)
                    want = source_rows(primary)
                    lost = [g for g in recorded if g not in per_gtid]
                    dup = {g: c for g, c in per_gtid.items() if c > 1}
                    if got == want and not lost and not dup:
                        break
                    if time.monotonic() > deadline:
                        problem = (
                            f"{len(lost)} recorded GTID(s) not in the changelog {lost[:5]}, {len(dup)} logged twice "
                            f"{list(dup)[:5]}, rows {'equal' if got == want else 'differ'}"
                        )
                        break
                    time.sleep(1.0)
            else:
                lost, dup = [], {}
            r = Round(seed, took, killed_again, len(lost), len(dup), problem)
            results.append(r)
            print(r.line(), flush=True)
            if running_local_stream(state) is None:
                control.launch()
    finally:
        with contextlib.suppress(Exception):
            stop_local_stream(state)
        if endpoint is not None:
            endpoint.close()
        for s in (a, b):
            s.stop()
    exact = [r for r in results if not r.problem]
    failed = [r.seed for r in results if r.problem]
    med = statistics.median(r.promoted_to_commit_s for r in results) if results else float("nan")
    print(
        f"rounds={len(results)} exact={len(exact)} failed_seeds={failed} median_promoted_to_commit_s={med:.1f} "
        f"lost={sum(r.lost for r in results)} duplicated={sum(r.duplicated for r in results)}"
    )
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
