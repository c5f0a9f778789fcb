"""Finding a committed offset again on a promoted replica, by GTID (``cdc/binlog/failover.relocate``).

A real MariaDB primary and a GTID replica with ``log_slave_updates`` (and a transaction of its
own in another domain, as replicas often have). The offset the stream committed on the primary
is placed in the replica's binlog; reading the replica from there must give exactly the
transactions after it. The ways it cannot be exact stop with what is missing or errant.
"""

from __future__ import annotations

import contextlib

import pytest

from airflow_provider_mysqlcdc.cdc.binlog.failover import (
    FailoverNotExactError,
    ServerIdentity,
    event_gtid,
    gtid_state_at,
    relocate,
    server_identity,
    show_events,
)
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.source.server import current_offset, list_binlogs, server_version
from mysqlcdc_harness.mariadb import MariaDB, primary_and_replica

pytestmark = [pytest.mark.integration]

CAPTURED = {"app.orders"}


@contextlib.contextmanager
def _pair():
    with primary_and_replica(11, 12) as (primary, replica):
        primary.execute(
            "CREATE DATABASE app",
            "CREATE TABLE app.orders (id BIGINT PRIMARY KEY, v INT)",
            "CREATE TABLE app.audit (id BIGINT PRIMARY KEY AUTO_INCREMENT, v INT)",
        )
        yield primary, replica


def _write(server: MariaDB, first: int, n: int) -> None:
    with contextlib.closing(server.connect("app")) as c, c.cursor() as cur:
        for i in range(first, first + n):
            cur.execute("INSERT INTO orders VALUES (%s, %s)", (i, i))
            cur.execute("INSERT INTO audit (v) VALUES (%s)", (i,))
            if i % 3 == 0:
                cur.execute("UPDATE orders SET v = v + 1 WHERE id = %s", (i - 1,))


def _committed(server: MariaDB) -> BinlogOffset:
    with contextlib.closing(server.connect()) as c:
        v = server_version(c)
        off = current_offset(c, v)
        return BinlogOffset(off.file, off.position, gtid_state_at(c, v, off))


def _gtids_from(server: MariaDB, at: BinlogOffset) -> list[str]:
    with contextlib.closing(server.connect()) as c:
        walk = show_events(c, [f for f, _ in list_binlogs(c)])
        return [g for ev in walk(at.file, at.position) if (g := event_gtid(ev, "mariadb"))]


def _relocate(replica: MariaDB, committed: BinlogOffset):
    with contextlib.closing(replica.connect()) as c:
        v = server_version(c)
        return relocate(c, v, ServerIdentity("mariadb", 11), server_identity(c, v), committed, CAPTURED.__contains__)


def test_a_caught_up_replica_continues_exactly_after_the_committed_gtid_state():
    with _pair() as (primary, replica):
        # the replica's own transaction, in a domain of its own, on a table the pipeline does not capture
        replica.execute("SET SESSION gtid_domain_id = 7", "CREATE TABLE app.replica_local (id INT PRIMARY KEY)")
        _write(primary, 1, 40)
        primary.execute("FLUSH BINARY LOGS")  # the committed offset in a later file than the replica's
        _write(primary, 41, 10)
        committed = _committed(primary)
        _write(primary, 51, 30)  # after the commit: the stream must read exactly these on the replica
        after_on_primary = _gtids_from(primary, committed)
        replica.caught_up(primary)
        replica.execute("FLUSH BINARY LOGS")
        primary.kill()
        replica.promote()
        _write(replica, 81, 5)  # the new primary takes writes
        moved = _relocate(replica, committed)
        assert moved.new == ServerIdentity("mariadb", 12)
        got = _gtids_from(replica, moved.offset)
        assert got[: len(after_on_primary)] == after_on_primary, (moved.describe(), got, after_on_primary)
        rest = got[len(after_on_primary) :]  # then only the new primary's own writes (12 transactions)
        assert len(rest) == 12 and all(g.startswith("0-12-") for g in rest), rest
        assert moved.skipped == ("7-12-1",), moved.describe()  # passed over: no captured table
        # the placed offset carries the new server's GTID state there
        with contextlib.closing(replica.connect()) as c:
            assert gtid_state_at(c, server_version(c), moved.offset) == moved.offset.gtid


def test_a_replica_that_was_behind_stops_naming_the_missing_transactions():
    with _pair() as (primary, replica):
        _write(primary, 1, 10)
        replica.caught_up(primary)
        replica.execute("STOP SLAVE")  # falls behind
        _write(primary, 11, 10)
        committed = _committed(primary)  # the sink has these; the replica never got them
        primary.kill()
        replica.promote()
        with pytest.raises(FailoverNotExactError) as e:
            _relocate(replica, committed)
        text = str(e.value)
        assert "lacks transactions the sink already holds" in text and "domain 0: 0-11-" in text, text
        assert "the stream cannot stay exact" in text and "Fix:" in text
        assert "max_allowed_packet" not in text


def test_an_errant_transaction_on_a_captured_table_stops_the_stream():
    with _pair() as (primary, replica):
        _write(primary, 1, 10)
        replica.caught_up(primary)
        # written on the replica only: the old primary (and so the sink) never had it
        replica.execute("SET SESSION gtid_domain_id = 7", "INSERT INTO app.orders VALUES (1000000, 1)")
        _write(primary, 11, 5)
        committed = _committed(primary)
        replica.caught_up(primary)
        primary.kill()
        replica.promote()
        with pytest.raises(FailoverNotExactError) as e:
            _relocate(replica, committed)
        text = str(e.value)
        assert "errant transactions: 7-12-1" in text and "app.orders" in text, text


def _settings(server: MariaDB, finished):
    from airflow_provider_mysqlcdc.cdc.model import TableId
    from airflow_provider_mysqlcdc.spark.stream.settings import StreamSettings

    return StreamSettings(
        source=server.source_config(),
        schemas=(_schema(TableId("app", "orders")),),
        finished=tuple(finished),
        max_events_per_batch=1000,
        heartbeat_s=1.0,
        reconnect_timeout_s=5.0,
        startup_mode="initial",
        startup_offset=None,
        startup_timestamp=None,
        state_location="/nonexistent",
    )


def _schema(table_id):
    """Placement needs only the captured tables' ids."""
    from types import SimpleNamespace

    return SimpleNamespace(table_id=table_id)


def test_snapshot_watermarks_of_the_old_server_are_placed_on_the_new_one_or_dropped_once_passed():
    from airflow_provider_mysqlcdc.cdc.chunks import FinishedBatch, KeyRange
    from airflow_provider_mysqlcdc.cdc.model import TableId
    from airflow_provider_mysqlcdc.spark.stream.offsets.stream_offset import StreamOffset
    from airflow_provider_mysqlcdc.spark.stream.server.placement import Placement

    t = TableId("app", "orders")
    with _pair() as (primary, replica):
        _write(primary, 1, 10)
        early = _committed(primary)  # batch a's high watermark
        _write(primary, 11, 10)
        late = _committed(primary)  # batch b's
        _write(primary, 21, 10)
        replica.caught_up(primary)
        primary.kill()
        replica.promote()
        finished = [
            FinishedBatch("a", (KeyRange(t, None, (100,), True),), early, "mariadb:11"),
            FinishedBatch("b", (KeyRange(t, (100,), None, False),), late, "mariadb:11"),
        ]
        places = Placement(_settings(replica, finished))
        start = StreamOffset.boundary(early, "mariadb:11")
        on_new, server = places.resolve(start)
        assert server == "mariadb:12" and on_new.server == server
        placed = places.handoff(server, on_new)
        # a is behind the stream (dropped: no row of a range from here is before it); b is placed where
        # the new server's binlog holds the same transactions
        assert [b.batch_id for b in placed] == ["b"]
        b = placed[0]
        late_on_new = places.resolve(StreamOffset.boundary(late, "mariadb:11"))[0].at
        assert b.server == server and b.high_watermark == late_on_new and b.high_watermark.gtid == late_on_new.gtid
        assert _gtids_from(replica, late_on_new)[:1] == ["0-11-" + str(int(late.gtid.split("-")[-1]) + 1)]
        # the same server's own watermarks are used as they are
        assert (
            Placement(_settings(replica, [FinishedBatch("c", (), late, "mariadb:12")])).handoff(server, on_new) is None
        )


def test_a_snapshot_batch_whose_window_spans_a_server_change_writes_nothing():
    import dataclasses
    from types import SimpleNamespace

    from airflow_provider_mysqlcdc.cdc.binlog.failover import SourceChangedError
    from airflow_provider_mysqlcdc.spark.snapshot.batch_reader import ConsistentBatchReader
    from mysqlcdc_harness.tcp_forward import TcpForward

    with _pair() as (primary, replica), TcpForward(primary.port) as endpoint:
        replica.caught_up(primary)
        reader = SimpleNamespace(source=dataclasses.replace(primary.source_config(), port=endpoint.port))
        with contextlib.closing(reader.source.connect()) as c:
            v = server_version(c)
            at_low = server_identity(c, v)
        ConsistentBatchReader._same_server(reader, at_low, v)  # same server: fine
        primary.kill()
        replica.promote()
        endpoint.retarget(replica.port)
        with pytest.raises(SourceChangedError) as e:
            ConsistentBatchReader._same_server(reader, at_low, v)
        assert "server_id 11 at the low watermark, server_id 12 now" in str(e.value), str(e.value)
        assert "wrote nothing" in str(e.value)


def test_a_reset_binlog_on_the_same_server_is_never_read_by_position():
    from airflow_provider_mysqlcdc.spark.stream.offsets.stream_offset import StreamOffset
    from airflow_provider_mysqlcdc.spark.stream.server.placement import Placement

    with _pair() as (primary, _replica):
        _write(primary, 1, 10)
        with contextlib.closing(primary.connect()) as c:
            head = current_offset(c, server_version(c))
        places = Placement(_settings(primary, []))
        placed = places.place(StreamOffset.boundary(head), None)
        assert placed.server == "mariadb:11" and placed.at.gtid
        assert places.resolve(placed) == (placed, "mariadb:11")  # a fresh driver checks it once: still there
        assert Placement(_settings(primary, [])).resolve(placed)[0] == placed
        primary.execute("RESET MASTER")
        _write(primary, 100, 60)  # the new binlog grows past the old position: a read by position would "work"
        for driver in (Placement(_settings(primary, [])), places):
            driver.forget(placed)  # (the running driver forgets it when the head goes back before it)
            with pytest.raises(FailoverNotExactError) as e:
                driver.resolve(placed)
            assert "the source's binlog was reset or replaced: server_id 11 no longer has" in str(e.value), str(e.value)
