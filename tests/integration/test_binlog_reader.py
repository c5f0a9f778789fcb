"""BinlogReader against a real MariaDB: exact start, exact stop across rotations, GTIDs, DDL, purge."""

from __future__ import annotations

import re
import threading
import time

import pytest

from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader
from airflow_provider_mysqlcdc.cdc.errors import BinlogPurgedError, CdcError
from airflow_provider_mysqlcdc.cdc.events import Heartbeat, RowChange, SchemaChange
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.schema.detect import captured_ddl_tables

pytestmark = pytest.mark.integration

_ids = iter(range(7000, 8000))


def now(mariadb) -> BinlogOffset:
    f, p = mariadb.master_status()
    return BinlogOffset(f, p)


def read(mariadb, start, stop=None, tables=None, **kw) -> list:
    with BinlogReader(mariadb.source_config(), next(_ids), start, stop, tables=tables, **kw) as r:
        return list(r)


def rows(events) -> list[RowChange]:
    return [e for e in events if isinstance(e, RowChange)]


@pytest.fixture
def table(mariadb, fresh_db) -> TableId:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", database=fresh_db)
    return TableId(fresh_db, "t")


def test_yields_exactly_the_changes_made(mariadb, table):
    db = table.database
    before = now(mariadb)
    mariadb.execute("INSERT INTO t VALUES (1,'a'),(2,'b'),(3,'c')", database=db)
    mid = now(mariadb)
    mariadb.execute("UPDATE t SET v='x' WHERE id=1", "DELETE FROM t WHERE id=2", database=db)
    after = now(mariadb)

    got = rows(read(mariadb, before, after, tables=[table]))
    assert [(c.kind, c.before, c.after) for c in got] == [
        ("insert", None, {"id": 1, "v": "a"}),
        ("insert", None, {"id": 2, "v": "b"}),
        ("insert", None, {"id": 3, "v": "c"}),
        ("update", {"id": 1, "v": "a"}, {"id": 1, "v": "x"}),
        ("delete", {"id": 2, "v": "b"}, None),
    ]
    offsets = [c.offset for c in got]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert [o.row for o in offsets[:3]] == [0, 1, 2]  # one multi-row event
    assert len({(o.file, o.position) for o in offsets[:3]}) == 1
    assert all(before <= o < mid for o in offsets[:3])
    assert all(mid <= o < after for o in offsets[3:])
    assert all(c.table_id == table for c in got)
    assert all(c.gtid and re.fullmatch(r"\d+-1-\d+", c.gtid) for c in got)
    assert got[0].gtid == got[2].gtid != got[3].gtid != got[4].gtid
    assert all(c.timestamp > 1_600_000_000 for c in got)


def test_start_in_the_middle_yields_nothing_before_it(mariadb, table):
    db = table.database
    mariadb.execute("INSERT INTO t VALUES (1,'a')", "INSERT INTO t VALUES (2,'b')", database=db)
    start = now(mariadb)
    mariadb.execute("INSERT INTO t VALUES (3,'c')", "UPDATE t SET v='z' WHERE id=1", database=db)
    stop = now(mariadb)
    mariadb.execute("INSERT INTO t VALUES (4,'d')", database=db)

    with BinlogReader(mariadb.source_config(), next(_ids), start, stop, tables=[table]) as r:
        it = iter(r)
        first = next(it)
        # The first transaction (its GTID event) starts exactly at the watermark.
        assert r.transaction_start == start < first.offset
        got = [first, *it]
    assert [(c.kind, (c.after or c.before)["id"]) for c in got] == [("insert", 3), ("update", 1)]


def test_start_mid_event_skips_earlier_rows(mariadb, table):
    db = table.database
    start = now(mariadb)
    mariadb.execute("INSERT INTO t VALUES (1,'a'),(2,'b'),(3,'c')", database=db)
    stop = now(mariadb)
    first = rows(read(mariadb, start, stop, tables=[table]))
    # Resume after row 1 of the event: dump from the transaction start, yield from row 2.
    resumed = rows(read(mariadb, first[2].offset, stop, tables=[table], dump_from=start))
    assert [c.after["id"] for c in resumed] == [3]


def test_bounded_read_across_rotation_stops_exactly(mariadb, table):
    db = table.database
    start = now(mariadb)
    mariadb.execute("INSERT INTO t VALUES (1,'a')", database=db)
    # Enough data in the old file that its stop position is above the new file's positions:
    # the library's end_log_pos (which ignores the file) would read past it.
    mariadb.execute(*[f"INSERT INTO t VALUES ({i}, REPEAT('x', 20))" for i in range(100, 130)], database=db)
    stop_old = now(mariadb)
    mariadb.execute("FLUSH BINARY LOGS", database=db)
    mariadb.execute("INSERT INTO t VALUES (2,'b')", database=db)
    stop_new = now(mariadb)
    mariadb.execute("INSERT INTO t VALUES (3,'c')", database=db)
    assert stop_new.file_index == stop_old.file_index + 1
    assert stop_new.position < stop_old.position

    ids_old = [c.after["id"] for c in rows(read(mariadb, start, stop_old, tables=[table]))]
    assert ids_old == [1] + list(range(100, 130))

    got = rows(read(mariadb, start, stop_new, tables=[table]))
    assert [c.after["id"] for c in got] == [1] + list(range(100, 130)) + [2]
    assert got[-1].offset.file == stop_new.file and got[-2].offset.file == stop_old.file

    # Starting exactly at the rotation point works too.
    assert [c.after["id"] for c in rows(read(mariadb, stop_old, stop_new, tables=[table]))] == [2]


def test_offsets_lie_between_the_master_status_around_them(mariadb, table):
    db = table.database
    marks = [now(mariadb)]
    for i in range(5):
        mariadb.execute(f"INSERT INTO t VALUES ({i}, 'v')", database=db)
        marks.append(now(mariadb))
    got = rows(read(mariadb, marks[0], marks[-1], tables=[table]))
    assert len(got) == 5
    for i, c in enumerate(got):
        assert marks[i] <= c.offset < marks[i + 1]


def test_other_tables_are_filtered(mariadb, table):
    db = table.database
    mariadb.execute("CREATE TABLE u (id INT PRIMARY KEY)", "CREATE TABLE t2 (id INT PRIMARY KEY)", database=db)
    start = now(mariadb)
    mariadb.execute(
        "INSERT INTO u VALUES (1)", "INSERT INTO t VALUES (1,'a')", "INSERT INTO t2 VALUES (5)", database=db
    )
    got = rows(read(mariadb, start, now(mariadb), tables=[table]))
    assert [(c.table_id, c.after["id"]) for c in got] == [(table, 1)]


def test_ddl_yields_schema_changes(mariadb, table, fresh_db):
    db = table.database
    start = now(mariadb)
    mariadb.execute(
        "ALTER TABLE t ADD COLUMN w INT",
        "INSERT INTO t VALUES (1,'a',7)",
        "CREATE TABLE other (id INT PRIMARY KEY)",
        database=db,
    )
    events = read(mariadb, start, now(mariadb), tables=[table])
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["SchemaChange", "RowChange"]
    sc = events[0]
    assert isinstance(sc, SchemaChange)
    assert sc.table_id == table and sc.database == db and "ADD COLUMN w" in sc.sql
    assert sc.gtid and sc.offset >= start and sc.offset < events[1].offset
    assert events[1].after == {"id": 1, "v": "a", "w": 7}


def test_normalizer_is_applied(mariadb, table):
    start = now(mariadb)
    mariadb.execute("INSERT INTO t VALUES (1,'a')", "UPDATE t SET v='b'", database=table.database)
    norm = {table: lambda row, none_sources=None: {k: (v.upper() if isinstance(v, str) else v) for k, v in row.items()}}
    got = rows(read(mariadb, start, now(mariadb), tables=[table], normalizers=norm))
    assert [(c.before, c.after) for c in got] == [
        (None, {"id": 1, "v": "A"}),
        ({"id": 1, "v": "A"}, {"id": 1, "v": "B"}),
    ]


def test_stop_beyond_the_binlog_end_fails_rather_than_returning_short(mariadb, table):
    start = now(mariadb)
    mariadb.execute("INSERT INTO t VALUES (1,'a')", database=table.database)
    end = now(mariadb)
    with pytest.raises(CdcError, match="before the requested stop"):
        read(mariadb, start, BinlogOffset(end.file, end.position + 100_000), tables=[table])


def test_stream_reader_blocks_and_sends_heartbeats(mariadb, table):
    start = now(mariadb)
    seen: list = []
    reader = BinlogReader(mariadb.source_config(), next(_ids), start, tables=[table], heartbeat_s=0.3)

    def consume():
        for e in reader:
            seen.append(e)
            if isinstance(e, RowChange) and e.after["id"] == 2:
                break

    th = threading.Thread(target=consume, daemon=True)
    th.start()
    mariadb.execute("INSERT INTO t VALUES (1,'a')", database=table.database)
    time.sleep(1.0)
    mariadb.execute("INSERT INTO t VALUES (2,'b')", database=table.database)
    th.join(15)
    reader.close()
    assert not th.is_alive()
    assert [e.after["id"] for e in seen if isinstance(e, RowChange)] == [1, 2]
    beats = [e for e in seen if isinstance(e, Heartbeat)]
    assert beats, "no heartbeat while idle"
    assert all(start <= b.offset for b in beats)


def test_blocking_bounded_read_ends_at_stop_on_an_idle_server(mariadb, table):
    start = now(mariadb)
    mariadb.execute("INSERT INTO t VALUES (1,'a')", database=table.database)
    stop = now(mariadb)
    t0 = time.monotonic()
    got = rows(read(mariadb, start, stop, tables=[table], blocking=True, heartbeat_s=0.3))
    assert [c.after["id"] for c in got] == [1]
    assert time.monotonic() - t0 < 10


def test_two_concurrent_readers_with_distinct_server_ids_both_read_everything(mariadb, table):
    start = now(mariadb)
    n = 200
    results: dict[int, list[int]] = {}

    def consume(server_id: int) -> None:
        out: list[int] = []
        with BinlogReader(mariadb.source_config(), server_id, start, tables=[table], heartbeat_s=0.5) as r:
            for e in r:
                if isinstance(e, RowChange):
                    out.append(e.after["id"])
                    if e.after["id"] == n - 1:
                        break
        results[server_id] = out

    cfg = mariadb.source_config()
    ids = [cfg.server_id_range.pick(0), cfg.server_id_range.pick(1)]
    threads = [threading.Thread(target=consume, args=(i,), daemon=True) for i in ids]
    for th in threads:
        th.start()
    for i in range(0, n, 10):
        mariadb.execute(*[f"INSERT INTO t VALUES ({j}, 'v')" for j in range(i, i + 10)], database=table.database)
    for th in threads:
        th.join(30)
    assert results == {ids[0]: list(range(n)), ids[1]: list(range(n))}


def test_purged_start_file_raises_with_a_useful_message(mariadb, table):
    old = now(mariadb)
    mariadb.execute("INSERT INTO t VALUES (1,'a')", database=table.database)
    # MariaDB keeps a file until its binlog checkpoint is written, so purge until it goes.
    deadline = time.monotonic() + 15
    while True:
        mariadb.execute("FLUSH BINARY LOGS")
        mariadb.execute(f"PURGE BINARY LOGS TO '{now(mariadb).file}'")
        files = [r[0] for r in mariadb.query("SHOW BINARY LOGS")]
        if old.file not in files:
            break
        assert time.monotonic() < deadline, f"{old.file} was not purged: {files}"
        time.sleep(0.2)
    oldest = files[0]
    with pytest.raises(BinlogPurgedError) as ei:
        read(mariadb, old, tables=[table])
    msg = str(ei.value)
    assert old.file in msg and oldest in msg and "snapshotted again" in msg and str(table) in msg


def test_ddl_tables_come_from_the_parser():
    assert captured_ddl_tables("ALTER TABLE t ADD COLUMN x INT", "d", None) == [TableId("d", "t")]
    assert captured_ddl_tables("DROP TABLE IF EXISTS `o`.`a``b` /* generated by server */", "d", None) == [
        TableId("o", "a`b")
    ]
    assert captured_ddl_tables("RENAME TABLE a TO b, c TO x.d", "d", None) == [
        TableId("d", "a"),
        TableId("d", "b"),
        TableId("d", "c"),
        TableId("x", "d"),
    ]
    assert captured_ddl_tables("TRUNCATE TABLE t", "d", None) == [TableId("d", "t")]
    assert captured_ddl_tables("CREATE USER u", "", None) is None
    # an index changes no row shape; statements on other tables are not even parsed
    assert captured_ddl_tables("CREATE INDEX i ON t (x)", "d", None) is None
    captured = [TableId("d", "t")]
    assert captured_ddl_tables("ALTER TABLE other ADD COLUMN x INT", "d", captured) is None
    assert captured_ddl_tables("ALTER TABLE d.t DROP COLUMN x", "e", captured) == [TableId("d", "t")]
    assert captured_ddl_tables("ALTER TABLE e.t DROP COLUMN x", "d", captured) is None
    assert captured_ddl_tables("DROP DATABASE d", "", captured) == [TableId("d", "t")]
    # a statement the parser cannot read still names the captured tables it may concern
    assert captured_ddl_tables("ALTER TABLE t FROBNICATE x", "d", captured) == [TableId("d", "t")]


def test_close_from_another_thread_ends_a_blocking_stream(mariadb, table):
    reader = BinlogReader(mariadb.source_config(), next(_ids), now(mariadb), tables=[table], heartbeat_s=0.3)
    seen: list = []
    th = threading.Thread(target=lambda: seen.extend(reader), daemon=True)
    th.start()
    time.sleep(1.0)
    reader.close()
    th.join(10)
    assert not th.is_alive()
    assert reader.position >= reader.start


def test_missing_column_names_fail_clearly(mariadb, table):
    start = now(mariadb)
    mariadb.execute("SET GLOBAL binlog_row_metadata = MINIMAL")
    try:
        mariadb.execute("INSERT INTO t VALUES (1,'a')", database=table.database)
    finally:
        mariadb.execute("SET GLOBAL binlog_row_metadata = FULL")
    with pytest.raises(CdcError, match="binlog_row_metadata = FULL"):
        read(mariadb, start, now(mariadb), tables=[table])


@pytest.mark.parametrize("on_unsupported", ["raise", "report"])
def test_fast_reader_stops_at_a_table_map_logged_without_names(mariadb, table, on_unsupported):
    """binlog_row_metadata switched to MINIMAL while a stream reads: its table maps carry no
    names. The fast reader does not fall back to names from today's schema (wrong for every
    event logged before a later ALTER): it stops, naming where, why and the fix."""
    from airflow_provider_mysqlcdc.cdc.binlog.fast import FastBinlogReader
    from airflow_provider_mysqlcdc.cdc.binlog.fast.errors import RowMetadataError

    start = now(mariadb)
    mariadb.execute("INSERT INTO t VALUES (1,'a')", database=table.database)
    mid = now(mariadb)
    mariadb.execute("SET GLOBAL binlog_row_metadata = MINIMAL")
    try:
        mariadb.execute("INSERT INTO t VALUES (2,'b')", database=table.database)
    finally:
        mariadb.execute("SET GLOBAL binlog_row_metadata = FULL")
    end = now(mariadb)
    # Before the switch: read as usual.
    with FastBinlogReader(
        mariadb.source_config(), next(_ids), start, mid, tables=[table], on_unsupported=on_unsupported
    ) as r:
        assert [c.after for c in r.changes() if isinstance(c, RowChange)] == [{"id": 1, "v": "a"}]
    with pytest.raises(RowMetadataError) as err:
        with FastBinlogReader(
            mariadb.source_config(), next(_ids), start, end, tables=[table], on_unsupported=on_unsupported
        ) as r:
            list(r.changes())
    msg = str(err.value)
    assert f"{mid.file}:" in msg and str(table) in msg and "the stream cannot stay exact" in msg
    assert "Fix: SET GLOBAL binlog_row_metadata = FULL" in msg


@pytest.mark.parametrize("bulk_min_events", [0, 64])
def test_fast_reader_stops_at_a_gtid_gap(mariadb, table, bulk_min_events):
    """A GTID number skipped (here gtid_seq_no set by hand) stops a read that watches GTIDs, at
    the transaction after the gap, whether the events are walked one by one or with numpy."""
    from airflow_provider_mysqlcdc.cdc.binlog.fast import FastBinlogReader
    from airflow_provider_mysqlcdc.cdc.binlog.gtid_watch import GtidGapError, GtidWatch

    db = table.database
    start = now(mariadb)
    mariadb.execute(*[f"INSERT INTO t VALUES ({i}, 'a')" for i in range(1, 201)], database=db)
    domain, _, seq = (int(x) for x in mariadb.query("SELECT @@gtid_binlog_pos")[0][0].split(",")[0].split("-"))
    gap_at = now(mariadb)
    mariadb.execute(
        f"SET SESSION gtid_seq_no = {seq + 7}",
        "INSERT INTO t VALUES (1000, 'gap')",
        *[f"INSERT INTO t VALUES ({i}, 'b')" for i in range(1001, 1201)],
        database=db,
    )
    end = now(mariadb)
    # without a watch (allow_gtid_gaps) every row is read
    with FastBinlogReader(
        mariadb.source_config(), next(_ids), start, end, tables=[table], bulk_min_events=bulk_min_events
    ) as r:
        assert len([c for c in r.changes() if isinstance(c, RowChange)]) == 401
        assert (r.bulk_events > 0) == bool(bulk_min_events)
    watch = GtidWatch()
    with pytest.raises(GtidGapError) as err:
        with FastBinlogReader(
            mariadb.source_config(),
            next(_ids),
            start,
            end,
            tables=[table],
            bulk_min_events=bulk_min_events,
            gtid_watch=watch,
        ) as r:
            list(r.changes())
    assert (err.value.offset.file, err.value.offset.position) == (gap_at.file, gap_at.position)
    assert (err.value.last, err.value.seq) == (seq, seq + 7) and err.value.source == str(domain)
    # a read that starts after the gap sees none
    with FastBinlogReader(
        mariadb.source_config(),
        next(_ids),
        BinlogOffset(gap_at.file, gap_at.position),
        end,
        tables=[table],
        bulk_min_events=bulk_min_events,
        gtid_watch=GtidWatch(),
    ) as r:
        assert len([c for c in r.changes() if isinstance(c, RowChange)]) == 201
