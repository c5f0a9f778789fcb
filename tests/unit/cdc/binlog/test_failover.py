"""``cdc/binlog/failover.relocate`` on MySQL GTID sets (uuid:intervals), through ``SHOW BINLOG EVENTS`` rows as
MySQL prints them. No MySQL server can be installed here: the MariaDB flavour runs against real servers in
``tests/integration/test_failover_relocate.py``; this is the MySQL flavour's protocol-level test."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from airflow_provider_mysqlcdc.cdc.binlog.failover import (
    Event,
    FailoverNotExactError,
    ServerIdentity,
    event_gtid,
    gtid_state_at,
    relocate,
)
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.source.version import ServerVersion

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"  # the old primary
B = "5f2a0b11-0000-11e1-8888-000000000002"  # the promoted replica's own
MYSQL = ServerVersion.parse("8.0.36")
OLD = ServerIdentity("mysql", 1, A)
NEW = ServerIdentity("mysql", 2, B)


def _txn(file: str, pos: int, gtid: str, table: str) -> list[Event]:
    """GTID, BEGIN, TABLE_MAP, rows, XID, 100 bytes each."""
    rows = [
        ("Gtid", f"SET @@SESSION.GTID_NEXT= '{gtid}'"),
        ("Query", "BEGIN"),
        ("Table_map", f"table_id: 108 ({table})"),
        ("Write_rows", "table_id: 108 flags: STMT_END_F"),
        ("Xid", "COMMIT /* xid=9 */"),
    ]
    return [Event(file, pos + 100 * i, t, pos + 100 * (i + 1), info) for i, (t, info) in enumerate(rows)]


def _binlog(extra_before: list[tuple[str, str]] = ()) -> dict[str, list[Event]]:
    """f1: A:4..10 (starts after A:1-3); f2: [extras], A:11..14."""
    f1 = [
        Event("bin.000001", 4, "Format_desc", 126, "Server ver: 8.0.36"),
        Event("bin.000001", 126, "Previous_gtids", 197, f"{A.upper()}:1-3"),
    ]
    pos = 197
    for n in range(4, 11):
        f1 += _txn("bin.000001", pos, f"{A}:{n}", "app.orders")
        pos += 500
    f2 = [
        Event("bin.000002", 4, "Format_desc", 126, "Server ver: 8.0.36"),
        Event("bin.000002", 126, "Previous_gtids", 197, f"{A}:1-10"),
    ]
    pos = 197
    for gtid, table in [*extra_before, *((f"{A}:{n}", "app.orders") for n in range(11, 15))]:
        f2 += _txn("bin.000002", pos, gtid, table)
        pos += 500
    return {"bin.000001": f1, "bin.000002": f2}


def _walk(files: dict[str, list[Event]]):
    names = list(files)

    def walk(file: str, pos: int) -> Iterator[Event]:
        for name in names[names.index(file) :]:
            yield from (e for e in files[name] if name != file or e.pos >= pos)

    return walk


class _Conn:
    def __init__(self, executed: str) -> None:
        self.executed = executed

    def cursor(self) -> Any:
        conn = self

        class Cur:
            def __enter__(self) -> "Cur":
                return self

            def __exit__(self, *a: Any) -> None:
                pass

            def execute(self, sql: str, args: Any = None) -> None:
                if "MASTER STATUS" in sql:  # the head: elsewhere than the offsets asked about
                    self.description = [("File",), ("Position",), ("Executed_Gtid_Set",)]
                    self.row = ("bin.000099", 4, conn.executed)
                    return
                assert "gtid_executed" in sql, sql
                self.row = (conn.executed,)

            def fetchone(self) -> tuple:
                return self.row

        return Cur()


def _relocate(files: dict[str, list[Event]], executed: str, committed_gtid: str):
    committed = BinlogOffset("bin.000009", 777, committed_gtid)  # a position of the old server
    return relocate(
        _Conn(executed),
        MYSQL,
        OLD,
        NEW,
        committed,
        {"app.orders"}.__contains__,
        walk=_walk(files),
        files=list(files),
    )


def test_mysql_gtid_sets_place_the_offset_after_the_last_committed_transaction():
    files = _binlog(extra_before=[(f"{B}:1", "app.replica_local")])
    moved = _relocate(files, f"{A}:1-14,\n{B}:1", f"{A}:1-12")
    # f2 holds B:1 (skipped: not captured), A:11, A:12, then A:13 where the stream goes on
    a13 = next(e for e in files["bin.000002"] if event_gtid(e, "mysql") == f"{A}:13")
    assert moved.offset == BinlogOffset("bin.000002", a13.pos)
    assert moved.skipped == (f"{B}:1",)
    assert moved.offset.gtid == f"{A}:1-12,{B}:1"  # the new server's state there
    assert "mysql" in str(moved.new) and B in moved.describe()


def test_mysql_state_at_an_offset_is_previous_gtids_plus_the_transactions_before_it():
    files = _binlog()
    a6 = next(e for e in files["bin.000001"] if event_gtid(e, "mysql") == f"{A}:6")
    got = gtid_state_at(_Conn(f"{A}:1-14"), MYSQL, BinlogOffset("bin.000001", a6.pos), walk=_walk(files))
    assert got == f"{A}:1-5"
    # from an earlier placed offset of the same file: only the events in between are walked
    a4 = next(e for e in files["bin.000001"] if event_gtid(e, "mysql") == f"{A}:4")
    seen: list[int] = []

    def counting(file: str, pos: int):
        for ev in _walk(files)(file, pos):
            seen.append(ev.pos)
            yield ev

    known = BinlogOffset("bin.000001", a4.pos, f"{A}:1-3")
    assert gtid_state_at(_Conn(""), MYSQL, BinlogOffset("bin.000001", a6.pos), counting, known) == got
    assert min(seen) == a4.pos, "walked from the known offset, not the file's start"
    head = gtid_state_at(_Conn(f"{A}:1-14"), MYSQL, BinlogOffset("bin.000099", 4), walk=_walk(files))
    assert head == f"{A}:1-14"  # at the head: the status row's own executed set


def test_mysql_a_committed_state_that_covers_the_whole_binlog_continues_at_its_end():
    files = _binlog()
    moved = _relocate(files, f"{A}:1-14", f"{A}:1-14")
    assert moved.offset == BinlogOffset("bin.000002", files["bin.000002"][-1].end)


def test_mysql_missing_transactions_are_named():
    with pytest.raises(FailoverNotExactError) as e:
        _relocate(_binlog(), f"{A}:1-11", f"{A}:1-13")
    assert f"{A}:12-13" in str(e.value) and "was behind" in str(e.value)


def test_mysql_an_errant_transaction_on_a_captured_table_stops():
    with pytest.raises(FailoverNotExactError) as e:
        _relocate(_binlog(extra_before=[(f"{B}:1", "app.orders")]), f"{A}:1-14,{B}:1", f"{A}:1-12")
    assert f"errant transactions: {B}:1" in str(e.value)


def test_mysql_purged_transactions_the_sink_has_not_seen_stop():
    files = _binlog()
    del files["bin.000001"]  # purged: the oldest file starts at A:1-10
    with pytest.raises(FailoverNotExactError) as e:
        _relocate(files, f"{A}:1-14", f"{A}:1-8")
    assert "purged" in str(e.value)


def test_an_offset_without_a_gtid_state_cannot_be_placed():
    with pytest.raises(FailoverNotExactError) as e:
        relocate(_Conn(""), MYSQL, OLD, NEW, BinlogOffset("bin.000001", 4), lambda n: True, walk=_walk({}), files=[])
    assert "no GTID state" in str(e.value)


def test_identities_round_trip_as_text():
    for ident in (OLD, ServerIdentity("mariadb", 12)):
        assert ServerIdentity.parse(str(ident)) == ident
    with pytest.raises(ValueError):
        ServerIdentity.parse("postgres:1")
