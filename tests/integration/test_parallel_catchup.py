"""Parallel catch-up against a real MariaDB: ranges cut where the server says transactions start,
read separately, equal the whole range; and a stream of two tables far behind, SIGKILLed mid
catch-up with writers running, still ends equal to the source with every change exactly once
(this is also the stream job's kill/restart test)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.binlog import catchup
from airflow_provider_mysqlcdc.cdc.binlog.fast.reader import FastBinlogReader
from airflow_provider_mysqlcdc.cdc.events import RowChange
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.pipeline import SinkConfig
from airflow_provider_mysqlcdc.cdc.state import StateStore
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.memory_sink import apply_rows
from mysqlcdc_harness.stream_job import committed, in_flight, kill_job
from mysqlcdc_harness.tables import create_composite_table, create_int_table
from mysqlcdc_harness.verify import diff
from mysqlcdc_harness.writer import ConcurrentWriter
from tests.integration.test_binlog_stream import (
    _assert_exactly_once,
    _config,
    _head,
    _job,
    _schemas,
    _source_rows,
    _wait,
    changes_of,
)

pytestmark = [pytest.mark.integration]


def _backlog(mariadb, db: str, table: str, n: int, first_id: int) -> None:
    """Single-row transactions, a multi-row one, deletes; and the same on an uncaptured table."""
    mariadb.execute(
        f"BEGIN NOT ATOMIC FOR i IN {first_id}..{first_id + n - 1} DO "
        f"INSERT INTO `{table}` (id, a, s, amount, ts) VALUES (i, i, CONCAT('v', i), i / 100, NOW(3)); "
        f"INSERT INTO other (v) VALUES (REPEAT('x', 50)); END FOR; END",
        f"UPDATE `{table}` SET a = a + 1 WHERE id BETWEEN {first_id} AND {first_id + n // 4}",
        f"BEGIN NOT ATOMIC FOR i IN {first_id}..{first_id + n // 10} DO "
        f"DELETE FROM `{table}` WHERE id = i * 2 + 1; END FOR; END",
        database=db,
    )


def _changes(mariadb, server_id: int, start: BinlogOffset, stop: BinlogOffset, table: TableId) -> list[RowChange]:
    with FastBinlogReader(mariadb.source_config(), server_id, start, stop=stop, tables=[table]) as r:
        return [c for c in r.changes() if isinstance(c, RowChange)]


def test_ranges_cut_at_transaction_starts_read_separately_equal_the_whole(mariadb, fresh_db):
    spec = create_int_table(mariadb, fresh_db, 10)
    mariadb.execute("CREATE TABLE other (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)", database=fresh_db)
    t = TableId(fresh_db, spec.table)
    start = _head(mariadb)
    _backlog(mariadb, fresh_db, spec.table, 4000, 100_000)
    mariadb.execute("FLUSH BINARY LOGS")  # the backlog spans two files
    _backlog(mariadb, fresh_db, spec.table, 4000, 200_000)
    head = _head(mariadb)
    with contextlib.closing(mariadb.source_config().connect()) as conn:
        files = catchup.BinlogFiles.read(conn, head)
        total = files.bytes_between(start, head)
        cuts = catchup.split_range(conn, files, start, head, 4, 64 << 10)
        for c in cuts:  # each cut is where the server says a transaction starts
            with conn.cursor() as cur:
                cur.execute(f"SHOW BINLOG EVENTS IN %s FROM {c.position} LIMIT 1", (c.file,))
                typ = cur.fetchone()[2]
            assert typ in ("Gtid", "Format_desc"), (c, typ)
        end = catchup.batch_end(conn, files, start, head, total // 3)
    assert len(cuts) == 3, cuts
    bounds = [start, *cuts, head]
    sizes = [files.bytes_between(a, b) for a, b in zip(bounds, bounds[1:])]
    assert min(sizes) > total / 4 * 0.5 and max(sizes) < total / 4 * 1.5, sizes
    assert start < end < head and files.bytes_between(start, end) < total / 3 * 1.5

    whole = _changes(mariadb, 6301, start, head, t)
    parts = [c for i, (a, b) in enumerate(zip(bounds, bounds[1:])) for c in _changes(mariadb, 6302 + i, a, b, t)]
    assert len(whole) > 9000
    assert parts == whole


def test_plan_batch_finds_the_end_and_the_cuts_in_one_pass(mariadb, fresh_db):
    spec = create_int_table(mariadb, fresh_db, 10)
    mariadb.execute("CREATE TABLE other (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)", database=fresh_db)
    start = _head(mariadb)
    _backlog(mariadb, fresh_db, spec.table, 6000, 100_000)
    head = _head(mariadb)
    with contextlib.closing(mariadb.source_config().connect()) as conn:
        files = catchup.BinlogFiles.read(conn, head)
        total = files.bytes_between(start, head)
        budget = total // 2
        end, cuts = catchup.plan_batch(conn, files, start, head, budget, 3, 64 << 10)
        for c in [*cuts, end]:  # every bound is where the server says a transaction starts
            with conn.cursor() as cur:
                cur.execute(f"SHOW BINLOG EVENTS IN %s FROM {c.position} LIMIT 1", (c.file,))
                assert cur.fetchone()[2] == "Gtid", c
        # the head within the budget: the end is the head, cut as split_range cuts it
        assert catchup.plan_batch(conn, files, start, head, total, 3, 64 << 10) == (
            head,
            catchup.split_range(conn, files, start, head, 3, 64 << 10),
        )
        # a rest beyond the budget smaller than tail_bytes joins the micro-batch; a larger one does not
        short = total - total // 20
        assert catchup.plan_batch(conn, files, start, head, short, 3, 64 << 10, tail_bytes=total // 10)[0] == head
        assert catchup.plan_batch(conn, files, start, head, short, 3, 64 << 10, tail_bytes=total // 40)[0] < head
    assert len(cuts) == 2 and start < cuts[0] < cuts[1] < end < head
    assert abs(files.bytes_between(start, end) - budget) < budget * 0.1
    sizes = [files.bytes_between(a, b) for a, b in zip([start, *cuts], [*cuts, end])]
    assert min(sizes) > budget / 3 * 0.8 and max(sizes) < budget / 3 * 1.2, sizes


def _java_children(pid: int) -> list[str]:
    """The command lines of the Java processes whose parent is ``pid``."""
    out = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if "java" in cmd.split(" ", 1)[0]:
                    out.append(cmd)
        except OSError:
            continue
    return out


@pytest.mark.slow
def test_stream_far_behind_catches_up_in_parallel_and_survives_a_kill(mariadb, fresh_db, tmp_dir):
    spec = create_int_table(mariadb, fresh_db, 100)
    items = create_composite_table(mariadb, fresh_db, 100)
    mariadb.execute("CREATE TABLE other (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)", database=fresh_db)
    start = _head(mariadb)
    cfg = _config(
        mariadb,
        fresh_db,
        tmp_dir,
        [spec.table, items.table],
        "specific-offset",
        {"file": start.file, "position": start.position},
        trigger_interval_s=0.0,
        catchup_parallelism=2,
        catchup_min_bytes=1 << 20,
        catchup_batch_bytes=2 << 20,
    )
    cfg = dataclasses.replace(cfg, sink=SinkConfig("changelog", {"root": str(tmp_dir / "sink")}))
    cfg_path = tmp_dir / "pipeline.json"
    cfg_path.write_text(cfg.to_json())
    schemas = _schemas(cfg, fresh_db, [spec.table, items.table])
    initial = {s.table_id: _source_rows(mariadb, s) for s in schemas}
    _backlog(mariadb, fresh_db, spec.table, 12_000, 100_000)
    checkpoint = Path(StateStore(cfg.state_location).checkpoint_url())
    log = tmp_dir / "job.log"
    top_id = cfg.source.server_id_range.last
    writers = [
        ConcurrentWriter(lambda: mariadb.connect(fresh_db), t, seed=s, threads=1, pause_s=0.01)
        for t, s in ((spec, 5), (items, 6))
    ]
    proc = _job(cfg_path, log)
    head = None
    try:
        for w in writers:
            w.start()
        _wait(lambda: (checkpoint / "metadata").exists(), 120, "the job to start its query")
        _wait(lambda: in_flight(checkpoint), 60, "a micro-batch in flight")
        _wait(lambda: committed(checkpoint) is not None, 120, "a first committed catch-up micro-batch")
        # the sink writes from the source's tasks: the job's driver JVM runs without C2 (runtime/session.py)
        assert any("-XX:TieredStopAtLevel=1" in cmd for cmd in _java_children(proc.pid)), _java_children(proc.pid)
        _wait(lambda: in_flight(checkpoint), 60, "another micro-batch in flight")
        kill_job(proc)  # in the middle of a catch-up micro-batch, the writer still running
        proc = _job(cfg_path, log)
        time.sleep(3.0)
        for w in writers:
            w.stop()
        head = _head(mariadb)
        _wait(
            lambda: (c := committed(checkpoint)) is not None and c[1].at >= head,
            180,
            "the restarted job to reach the head",
        )
    except AssertionError as e:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise AssertionError(f"{e}; committed {committed(checkpoint)}, head {head}; job log:\n{tail}") from None
    finally:
        kill_job(proc)
        for w in writers:
            w.stop()
    text = log.read_text(errors="replace")
    assert "catch-up micro-batch" in text and "in 2 ranges" in text, text[-3000:]
    assert "catch-up range 2/2" in text and f"(server id {top_id})" in text, text[-3000:]
    # micro-batches after the first were planned while the one before ran (spark/stream/planning/plan_ahead.py)
    assert "in 2 ranges (planned while the last one ran)" in text, text[-3000:]
    # the first one was planned by the job's own process while Spark started the source (first_plan.py)
    assert "(planned while the query started)" in text, text[-3000:]
    assert ROOT_PASSWORD not in text
    # the lines were written by the source's tasks, both ranges joined; the killed batch's parts were cleaned
    assert "files written by the source's tasks" in text and "lines from 2 binlog ranges" in text, text[-3000:]
    assert not list((tmp_dir / "sink").rglob(".tmp-*"))
    for s in schemas:
        changes = changes_of(tmp_dir / "sink", s)
        assert changes, f"no changes of {s.table_id}"
        _assert_exactly_once(changes)
        state = dict(initial[s.table_id])
        apply_rows(state, changes, s)
        assert diff(_source_rows(mariadb, s), state) == ""
    assert len(changes_of(tmp_dir / "sink", schemas[0])) > 12_000
