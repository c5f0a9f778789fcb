"""The stream workload of issue 5 and its timer, shared by the decoder and stream benchmarks.

``rows`` autocommit single-row UPDATEs alternating between a captured table ``bench.events``
(BIGINT, VARCHAR(64), DECIMAL(12,2), DATETIME(3), TEXT) and an uncaptured one of the same
shape, written by a server-side loop (so the client is not the limit).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Callable

from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from mysqlcdc_harness.mariadb import MariaDB

SHAPE = "(id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(64), amount DECIMAL(12,2), ts DATETIME(3), note TEXT)"
KEYS = 1000


def load(server: MariaDB, rows: int) -> tuple[BinlogOffset, BinlogOffset, int]:
    """Create both tables, then ``rows`` single-row UPDATEs alternating between them (a server-side loop)."""
    server.execute("CREATE DATABASE bench")
    server.execute(f"CREATE TABLE events {SHAPE}", f"CREATE TABLE other {SHAPE}", database="bench")
    for t in ("events", "other"):
        server.execute(
            f"INSERT INTO {t} SELECT seq, CONCAT('v', seq), seq / 100, NOW(3), REPEAT('n', 40) FROM seq_1_to_{KEYS}",
            database="bench",
        )
    server.execute("FLUSH BINARY LOGS")
    start = BinlogOffset(*server.master_status())
    pairs = rows // 2
    server.execute(
        f"BEGIN NOT ATOMIC FOR i IN 1..{pairs} DO "
        f"UPDATE events SET v = CONCAT('value-', i), amount = i / 100, ts = NOW(3), note = REPEAT('x', 40 + i % 7) "
        f"WHERE id = i % {KEYS} + 1; "
        f"UPDATE other SET v = CONCAT('other-', i), amount = i / 100, ts = NOW(3), note = 'o' WHERE id = i % {KEYS} + 1; "
        "END FOR; END",
        database="bench",
    )
    end = BinlogOffset(*server.master_status())
    return start, end, pairs


def binlog_files(server: MariaDB, start: BinlogOffset, end: BinlogOffset) -> list[str]:
    """The binlog files the range ``[start, end)`` spans, in order (a large workload rotates
    the log at ``max_binlog_size``, at most 1 GiB)."""
    names = [str(r[0]) for r in server.query("SHOW BINARY LOGS")]
    return [n for n in names if start.file <= n <= end.file]


def binlog_bytes(server: MariaDB, start: BinlogOffset, end: BinlogOffset) -> int:
    """Bytes of binlog in ``[start, end)``, across files."""
    sizes = {str(r[0]): int(r[1]) for r in server.query("SHOW BINARY LOGS")}
    files = binlog_files(server, start, end)
    if len(files) == 1:
        return end.position - start.position
    return (sizes[files[0]] - start.position) + sum(sizes[f] for f in files[1:-1]) + end.position


def timed(fn: Callable[[], int], expect: int, repeat: int) -> float:
    """Median seconds of ``repeat`` runs of ``fn`` (which returns the changes it saw)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        n = fn()
        times.append(time.perf_counter() - t)
        if n != expect:
            raise AssertionError(f"{getattr(fn, '__name__', fn)}: {n} changes, expected {expect}")
    return statistics.median(times)


def cpu_seconds() -> dict[str, float]:
    """CPU seconds used so far by this machine's processes of each kind (Linux /proc): the
    server, the JVM, Spark's Python workers and this (driver) process. Differences over a run
    say where its time went, and how much of the two cores it left idle."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if "mariadbd" in cmd:
            kind = "mariadbd"
        elif "java" in cmd.split(" ", 1)[0]:
            kind = "jvm"
        elif "pyspark" in cmd:
            kind = "python workers"
        elif int(pid) == os.getpid():
            kind = "driver (python)"
        else:
            continue
        out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out
