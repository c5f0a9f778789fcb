"""Binlog offsets as a real MariaDB reports them: current, consistent-snapshot, retained files."""

import contextlib
import time

import pytest

from airflow_provider_mysqlcdc.cdc.errors import BinlogPurgedError
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.source import server
from airflow_provider_mysqlcdc.cdc.source.gtid import MariadbGtidSet

pytestmark = pytest.mark.integration


@pytest.fixture
def conn(mariadb):
    with contextlib.closing(mariadb.source_config().connect()) as c:
        yield c


def purge_to(mariadb, conn, newest):
    """PURGE until it took: MariaDB keeps a file until InnoDB's binlog checkpoint has passed it."""
    deadline = time.monotonic() + 20
    while True:
        mariadb.execute(f"PURGE BINARY LOGS TO '{newest}'")
        if server.list_binlogs(conn)[0][0] == newest:
            return
        assert time.monotonic() < deadline, f"could not purge binlogs before {newest}"
        time.sleep(0.1)


def test_server_version(conn):
    v = server.server_version(conn)
    assert v.is_mariadb and v.is_supported and not v.supports_show_binary_log_status


def test_current_offset_moves_forward_after_an_insert(mariadb, fresh_db, conn):
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)", database=fresh_db)
    version = server.server_version(conn)
    before = server.current_offset(conn, version)
    assert (before.file, before.position) == mariadb.master_status()
    mariadb.execute("INSERT INTO t VALUES (1)", database=fresh_db)
    after = server.current_offset(conn, version)
    assert after > before
    assert (after.file, after.position) == mariadb.master_status()
    # One more transaction in domain 0: the GTID position advanced by one.
    g_before, g_after = MariadbGtidSet.parse(before.gtid), MariadbGtidSet.parse(after.gtid)
    assert g_after.contains(g_before) and not g_before.contains(g_after)
    assert g_after.domains[0][1] == g_before.domains[0][1] + 1
    assert after.gtid == mariadb.query("SELECT @@gtid_binlog_pos")[0][0]


def test_consistent_snapshot_offset_equals_current_offset_when_idle(conn):
    version = server.server_version(conn)
    snap = server.consistent_snapshot_offset(conn)
    assert snap is not None
    assert snap == server.current_offset(conn, version)
    # It committed its transaction: the connection is usable and autocommit as before.
    assert conn.get_autocommit()


def test_consistent_snapshot_offset_is_after_committed_writes(mariadb, fresh_db, conn):
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)", database=fresh_db)
    first = server.consistent_snapshot_offset(conn)
    mariadb.execute("INSERT INTO t VALUES (1)", database=fresh_db)
    second = server.consistent_snapshot_offset(conn)
    assert second > first
    assert (second.file, second.position) == mariadb.master_status()


def test_binlog_gtid_pos_matches_the_offset(mariadb, fresh_db, conn):
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)", database=fresh_db)
    current = server.current_offset(conn, server.server_version(conn))
    assert server.binlog_gtid_pos(conn, current) == current.gtid


def test_list_binlogs_and_earliest_offset(mariadb, conn):
    mariadb.execute("FLUSH BINARY LOGS")
    logs = server.list_binlogs(conn)
    assert len(logs) >= 2
    assert [BinlogOffset(f, 0) for f, _ in logs] == sorted(BinlogOffset(f, 0) for f, _ in logs)
    assert logs[-1][0] == mariadb.master_status()[0]
    assert server.earliest_offset(conn) == BinlogOffset(logs[0][0], 4)


def test_check_offset_available_raises_for_a_purged_file(mariadb, fresh_db, conn):
    version = server.server_version(conn)
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)", database=fresh_db)
    old = server.current_offset(conn, version)
    server.check_offset_available(conn, old)  # still there: no error
    mariadb.execute("FLUSH BINARY LOGS")
    mariadb.execute("INSERT INTO t VALUES (2)", database=fresh_db)
    newest = mariadb.master_status()[0]
    purge_to(mariadb, conn, newest)
    with pytest.raises(BinlogPurgedError) as ei:
        server.check_offset_available(conn, old, tables=[f"{fresh_db}.t"])
    message = str(ei.value)
    assert old.file in message and newest in message
    assert f"{fresh_db}.t must be snapshotted again" in message
    server.check_offset_available(conn, server.current_offset(conn, version))


def test_check_offset_available_raises_past_the_end_of_a_file(mariadb, conn):
    file, pos = mariadb.master_status()
    with pytest.raises(BinlogPurgedError, match="past the end"):
        server.check_offset_available(conn, BinlogOffset(file, pos + 10_000_000))
    index = BinlogOffset(file, 0).file_index
    with pytest.raises(BinlogPurgedError, match="newer than the newest"):
        server.check_offset_available(conn, BinlogOffset(f"mysql-bin.{index + 5:06d}", 4))
