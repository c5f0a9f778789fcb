"""The fast reader's event walk on synthetic binlogs: bounds, rotation, table ids, refusals.

The walk (``FastBinlogReader._loop``) takes any object with the DumpConnection surface
the loop uses, so these tests feed it events directly, without a server.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from pymysql import charset as pc

from airflow_provider_mysqlcdc.cdc.binlog.fast import (
    ChangeBatch,
    ChecksumError,
    CompressedEventError,
    FastBinlogReader,
    PartialImageError,
    ProtocolError,
    UnknownEventError,
    UnsupportedRows,
    UnsupportedTableError,
)
from airflow_provider_mysqlcdc.cdc.binlog.fast import constants as C
from airflow_provider_mysqlcdc.cdc.binlog.fast.frames import packet_chain
from airflow_provider_mysqlcdc.cdc.binlog.fast.packets import PacketReader, frame_packets
from airflow_provider_mysqlcdc.cdc.errors import CdcError
from airflow_provider_mysqlcdc.cdc.events import Heartbeat, RowChange, SchemaChange
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from tests.unit.cdc.binlog.fast.test_fastbinlog_events import (
    Binlog,
    Col,
    event,
    fde_body,
    gtid_body,
    query_body,
    rows_body,
    table_map_body,
)

T = TableId("db", "t")
OTHER = TableId("db", "other")
COLS = [Col(C.T_LONG, name="id", nullable=False), Col(C.T_VARCHAR, struct.pack("<H", 40), name="v", collation=45)]
CHARSETS = {i: pc.charset_by_id(i).name for i in (8, 45, 63)}


def image(i: int, v: str | None) -> bytes:
    if v is None:
        return b"\x02" + struct.pack("<i", i)
    return b"\x00" + struct.pack("<i", i) + bytes([len(v)]) + v.encode()


class FakeConn:
    """The DumpConnection surface the walk uses: a real PacketReader over the framed events."""

    checksum_algorithm = "CRC32"
    is_mariadb = True

    def __init__(self, events, chunk=None):
        data = b"".join(frame_packets(b"\x00" + ev, 1 + i) for i, ev in enumerate(events))
        data += frame_packets(b"\xfe\x00\x00\x02\x00", 1 + len(events))  # EOF: caught up
        pos = 0

        def read_into(view):
            nonlocal pos
            n = min(len(view), len(data) - pos, chunk or len(data))
            view[:n] = data[pos : pos + n]
            pos += n
            return n

        self._reader = PacketReader(read_into, buffer_size=4096)


MODE = {"columnar": True, "bulk_min_events": 1}


@pytest.fixture(
    autouse=True,
    params=[(True, 1), (False, 1), (True, 0), (False, 0)],
    ids=["columnar-bulk", "rows-bulk", "columnar", "rows"],
)
def decode_mode(request):
    """Every walk runs with the columnar and the row decoder, with and without the numpy walk
    (``bulk_min_events=1``: every stretch of plain events, however short, goes through it)."""
    MODE["columnar"], MODE["bulk_min_events"] = request.param
    yield request.param


def walk(events, start, stop=None, tables=(T,), items=False, chunk=None, **kw):
    kw.setdefault("columnar", MODE["columnar"])
    kw.setdefault("bulk_min_events", MODE["bulk_min_events"])
    r = FastBinlogReader(None, 1, start, stop, tables=tables, blocking=False, **kw)
    r._charsets = CHARSETS
    out = []
    for group in r._loop(FakeConn(events, chunk)):
        for x in group:
            if isinstance(x, ChangeBatch) and not items:
                out.extend(x.changes())
            else:
                out.append(x)
    return r, out


def txn(b: Binlog, seq: int, table_id: int, kind: int, images: list[bytes], table: str = "t", update=False):
    """GTID, TABLE_MAP, rows, XID; returns where the rows event starts."""
    b.add(C.MARIADB_GTID_EVENT, gtid_body(seq))
    b.add(C.TABLE_MAP_EVENT, table_map_body(table_id, "db", table, COLS))
    at = b.add(kind, rows_body(table_id, len(COLS), images, update=update))
    b.add(C.XID_EVENT, struct.pack("<Q", seq))
    return at


def base() -> Binlog:
    b = Binlog()
    b.fake_rotate(b.file, 4)
    b.add(C.FORMAT_DESCRIPTION_EVENT, fde_body())
    return b


def test_rows_of_all_kinds_with_offsets_and_gtids():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    w = txn(b, 1, 10, C.WRITE_ROWS_EVENT_V1, [image(1, "a"), image(2, None)])
    u = txn(b, 2, 10, C.UPDATE_ROWS_EVENT_V1, [image(1, "a"), image(1, "b")], update=True)
    d = txn(b, 3, 10, C.DELETE_ROWS_EVENT_V1, [image(2, None)])
    txn(b, 4, 11, C.WRITE_ROWS_EVENT_V1, [image(9, "x")], table="other")
    _, got = walk(b.events, start, BinlogOffset(b.file, b.pos))
    assert [(c.kind, c.before, c.after, c.offset, c.gtid) for c in got] == [
        ("insert", None, {"id": 1, "v": "a"}, BinlogOffset(b.file, w, row=0), "0-1-1"),
        ("insert", None, {"id": 2, "v": None}, BinlogOffset(b.file, w, row=1), "0-1-1"),
        ("update", {"id": 1, "v": "a"}, {"id": 1, "v": "b"}, BinlogOffset(b.file, u), "0-1-2"),
        ("delete", {"id": 2, "v": None}, None, BinlogOffset(b.file, d), "0-1-3"),
    ]
    assert all(c.timestamp == 1_700_000_000 for c in got)


def test_stop_is_file_aware():
    """A stop in file 2 at a position smaller than file 1's positions must not stop inside file 1."""
    b = base()
    start = BinlogOffset(b.file, b.pos)
    for i in range(5):
        txn(b, i + 1, 10, C.WRITE_ROWS_EVENT_V1, [image(i, "x" * 30)])
    assert b.pos > 600
    b.rotate_to("mysql-bin.000002")
    second = txn(b, 9, 10, C.WRITE_ROWS_EVENT_V1, [image(100, "y")])
    stop = BinlogOffset(b.file, b.pos)
    third = txn(b, 10, 10, C.WRITE_ROWS_EVENT_V1, [image(101, "z")])
    assert second < 600 and third < 600
    r, got = walk(b.events, start, stop)
    assert [c.after["id"] for c in got] == [0, 1, 2, 3, 4, 100]
    assert r.position == stop
    # and a stop exactly at the second file's first change
    _, got = walk(b.events, start, BinlogOffset("mysql-bin.000002", 4))
    assert [c.after["id"] for c in got] == [0, 1, 2, 3, 4]


def test_start_row_inside_a_multi_row_event_and_dump_from():
    b = base()
    first = b.pos
    w = txn(b, 1, 10, C.WRITE_ROWS_EVENT_V1, [image(1, "a"), image(2, "b"), image(3, "c")])
    stop = BinlogOffset(b.file, b.pos)
    r, got = walk(b.events, BinlogOffset(b.file, w, row=2), stop, dump_from=BinlogOffset(b.file, first))
    assert [(c.after["id"], c.offset.row) for c in got] == [(3, 2)]
    assert r.transaction_start == BinlogOffset(b.file, first)


def test_table_id_reuse_picks_the_right_structure():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    txn(b, 1, 10, C.WRITE_ROWS_EVENT_V1, [image(1, "a")])
    # after a restart id 10 names another table, and t has id 12 with another structure
    other_cols = [Col(C.T_TINY, name="k", nullable=False)]
    b.add(C.MARIADB_GTID_EVENT, gtid_body(2))
    b.add(C.TABLE_MAP_EVENT, table_map_body(10, "db", "other", COLS))
    b.add(C.TABLE_MAP_EVENT, table_map_body(12, "db", "t", other_cols))
    b.add(C.WRITE_ROWS_EVENT_V1, rows_body(10, 2, [image(5, "zz")]))
    b.add(C.WRITE_ROWS_EVENT_V1, rows_body(12, 1, [b"\x00\x07"]))
    b.add(C.XID_EVENT, struct.pack("<Q", 2))
    _, got = walk(b.events, start, BinlogOffset(b.file, b.pos))
    assert [c.after for c in got] == [{"id": 1, "v": "a"}, {"k": 7}]


def test_ddl_is_ordered_after_earlier_rows_and_filtered_by_table():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    txn(b, 1, 10, C.WRITE_ROWS_EVENT_V1, [image(1, "a")])
    b.add(C.MARIADB_GTID_EVENT, gtid_body(2, flags=1))
    alter = b.add(C.QUERY_EVENT, query_body("ALTER TABLE t ADD COLUMN x INT", "db"))
    b.add(C.MARIADB_GTID_EVENT, gtid_body(3, flags=1))
    b.add(C.QUERY_EVENT, query_body("ALTER TABLE other ADD COLUMN x INT", "db"))
    txn(b, 4, 10, C.WRITE_ROWS_EVENT_V1, [image(2, "b")])
    _, got = walk(b.events, start, BinlogOffset(b.file, b.pos))
    assert [type(x).__name__ for x in got] == ["RowChange", "SchemaChange", "RowChange"]
    sc = got[1]
    assert (sc.sql, sc.table_id, sc.offset, sc.gtid) == (
        "ALTER TABLE t ADD COLUMN x INT",
        T,
        BinlogOffset(b.file, alter),
        "0-1-2",
    )


def test_batches_are_arrow_with_metadata_columns():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    w = txn(b, 1, 10, C.WRITE_ROWS_EVENT_V1, [image(1, "a"), image(2, "b")])
    _, got = walk(b.events, start, BinlogOffset(b.file, b.pos), items=True)
    (batch,) = got
    assert isinstance(batch, ChangeBatch) and batch.table_id == T
    d = batch.batch.to_pydict()
    assert d["database"] == ["db", "db"] and d["table"] == ["t", "t"] and d["op"] == ["insert", "insert"]
    assert d["binlog_file"] == [b.file] * 2 and d["binlog_pos"] == [w, w] and d["binlog_row"] == [0, 1]
    assert d["gtid"] == ["0-1-1"] * 2 and d["before"] == [None, None]
    assert d["after"] == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    assert batch.batch.schema.field("event_time").type.tz == "UTC"


def test_many_rows_flush_in_bounded_batches():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    for i in range(10):
        txn(b, i + 1, 10, C.WRITE_ROWS_EVENT_V1, [image(i, "v")])
    _, got = walk(b.events, start, BinlogOffset(b.file, b.pos), items=True, batch_rows=3)
    assert [x.num_rows for x in got] == [3, 3, 3, 1]


def test_heartbeat_moves_the_position():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    txn(b, 1, 10, C.WRITE_ROWS_EVENT_V1, [image(1, "a")])
    b.events.append(event(C.HEARTBEAT_LOG_EVENT, b.file.encode(), b.pos, ts=0))
    _, got = walk(b.events, start)
    assert isinstance(got[0], RowChange) and got[1] == Heartbeat(BinlogOffset(b.file, b.pos))


def compress(data: bytes) -> bytes:
    """MariaDB's compressed layout: header byte (zlib, 2 length bytes), length big endian, zlib."""
    return bytes([0x82]) + len(data).to_bytes(2, "big") + zlib.compress(data)


def compressed_rows_body(table_id: int, ncols: int, images: list[bytes], update: bool = False) -> bytes:
    plain = rows_body(table_id, ncols, [], update=update)
    return plain + compress(b"".join(images))


def test_mariadb_compressed_events_are_inflated():
    """log_bin_compress: rows and DDL read exactly like the plain events they stand for."""
    plain, comp = base(), base()
    start = BinlogOffset(plain.file, plain.pos)
    rows = [image(1, "a" * 50), image(2, None)]
    upd = [image(1, "a" * 50), image(1, "b")]
    for b_, compressed in ((plain, False), (comp, True)):
        b_.add(C.MARIADB_GTID_EVENT, gtid_body(1))
        b_.add(C.TABLE_MAP_EVENT, table_map_body(10, "db", "t", COLS))
        if compressed:
            at = [
                b_.add(C.WRITE_ROWS_COMPRESSED_EVENT_V1, compressed_rows_body(10, 2, rows)),
                b_.add(C.UPDATE_ROWS_COMPRESSED_EVENT_V1, compressed_rows_body(10, 2, upd, update=True)),
            ]
        else:
            b_.add(C.WRITE_ROWS_EVENT_V1, rows_body(10, 2, rows))
            b_.add(C.UPDATE_ROWS_EVENT_V1, rows_body(10, 2, upd, update=True))
        b_.add(C.XID_EVENT, struct.pack("<Q", 1))
        b_.add(C.MARIADB_GTID_EVENT, gtid_body(2, flags=1))
        sql = "ALTER TABLE t ADD COLUMN x INT"
        if compressed:
            q = query_body(sql, "db")
            b_.add(C.QUERY_COMPRESSED_EVENT, q[: len(q) - len(sql)] + compress(sql.encode()))
        else:
            b_.add(C.QUERY_EVENT, query_body(sql, "db"))
    _, want = walk(plain.events, start, BinlogOffset(plain.file, plain.pos))
    r, got = walk(comp.events, start, BinlogOffset(comp.file, comp.pos))

    def same(x):  # (the compressed binlog's positions differ: its events are smaller)
        return (
            type(x).__name__,
            getattr(x, "kind", None),
            getattr(x, "before", None),
            getattr(x, "after", None),
            x.offset.row,
            x.gtid,
        )

    assert [same(x) for x in got] == [same(x) for x in want]
    assert [x.offset.position for x in got[:3]] == [at[0], at[0], at[1]]
    assert got[-1].sql == "ALTER TABLE t ADD COLUMN x INT"
    assert r.position == BinlogOffset(comp.file, comp.pos)


def test_bad_compressed_data_and_mysql_compression_fail_loudly():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    b.add(C.MARIADB_GTID_EVENT, gtid_body(1))
    b.add(C.TABLE_MAP_EVENT, table_map_body(10, "db", "t", COLS))
    b.add(C.WRITE_ROWS_COMPRESSED_EVENT_V1, rows_body(10, 2, []) + b"\x82\x00\x10not zlib at all")
    with pytest.raises(CompressedEventError, match="does not inflate"):
        walk(b.events, start)
    b = base()
    b.add(C.TRANSACTION_PAYLOAD_EVENT, b"\x01\x02zstd...")
    with pytest.raises(CompressedEventError, match="must not be skipped"):
        walk(b.events, start)


def test_unknown_events_fail_unless_ignorable():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    b.add(200, b"future", flags=C.LOG_EVENT_IGNORABLE_F)
    txn(b, 1, 10, C.WRITE_ROWS_EVENT_V1, [image(1, "a")])
    _, got = walk(b.events, start)
    assert len(got) == 1
    b.add(201, b"future")
    with pytest.raises(UnknownEventError, match="type 201"):
        walk(b.events, start)


def test_partial_row_image_fails():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    b.add(C.MARIADB_GTID_EVENT, gtid_body(1))
    b.add(C.TABLE_MAP_EVENT, table_map_body(10, "db", "t", COLS))
    b.add(C.WRITE_ROWS_EVENT_V1, rows_body(10, 2, [b"\x00" + struct.pack("<i", 1)], present=b"\x01"))
    with pytest.raises(PartialImageError, match="binlog_row_image must be FULL"):
        walk(b.events, start)


def test_rows_without_table_map_fail():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    b.add(C.WRITE_ROWS_EVENT_V1, rows_body(10, 2, [image(1, "a")]))
    with pytest.raises(ProtocolError, match="without its TABLE_MAP"):
        walk(b.events, start)


def test_corrupt_event_fails_the_checksum():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    txn(b, 1, 10, C.WRITE_ROWS_EVENT_V1, [image(1, "abc")])
    rows = b.events[-2]
    b.events[-2] = rows[:-8] + b"X" + rows[-7:]
    with pytest.raises(ChecksumError):
        walk(b.events, start)


def test_unsupported_table_raises_or_reports():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    b.add(C.MARIADB_GTID_EVENT, gtid_body(1))
    b.add(C.TABLE_MAP_EVENT, table_map_body(10, "db", "t", [Col(C.T_TIME, name="old")]))
    at = b.add(C.WRITE_ROWS_EVENT_V1, rows_body(10, 1, [b"\x00\x01\x02\x03"]))
    b.add(C.XID_EVENT, struct.pack("<Q", 1))
    with pytest.raises(UnsupportedTableError, match="pre-MySQL-5.6"):
        walk(b.events, start)
    r, got = walk(b.events, start, on_unsupported="report")
    assert got == [UnsupportedRows(T, BinlogOffset(b.file, at), BinlogOffset(b.file, start.position), got[0].reason)]
    assert T in r.unsupported


def test_ended_before_stop_is_an_error():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    txn(b, 1, 10, C.WRITE_ROWS_EVENT_V1, [image(1, "a")])
    with pytest.raises(CdcError, match="before the requested stop"):
        walk(b.events, start, BinlogOffset(b.file, b.pos + 100))


def test_events_before_start_are_read_not_yielded():
    b = base()
    first = BinlogOffset(b.file, b.pos)
    txn(b, 1, 10, C.WRITE_ROWS_EVENT_V1, [image(1, "a")])
    b.add(C.MARIADB_GTID_EVENT, gtid_body(2, flags=1))
    b.add(C.QUERY_EVENT, query_body("TRUNCATE TABLE t", "db"))
    start = BinlogOffset(b.file, b.pos)
    txn(b, 3, 10, C.WRITE_ROWS_EVENT_V1, [image(2, "b")])
    _, got = walk(b.events, start, dump_from=first)
    assert [c.after["id"] for c in got if isinstance(c, RowChange)] == [2]
    assert not [x for x in got if isinstance(x, SchemaChange)]


@pytest.mark.parametrize("chunk", [1, 13, 200])
def test_events_split_across_socket_reads(chunk):
    b = base()
    start = BinlogOffset(b.file, b.pos)
    for i in range(4):
        txn(b, i + 1, 10, C.WRITE_ROWS_EVENT_V1, [image(i, "v" * i)])
        txn(b, i + 10, 11, C.WRITE_ROWS_EVENT_V1, [image(i, "o")], table="other")
    _, got = walk(b.events, start, BinlogOffset(b.file, b.pos), chunk=chunk)
    assert [(c.after["id"], c.gtid) for c in got] == [(i, f"0-1-{i + 1}") for i in range(4)]


def test_the_numpy_walk_takes_plain_stretches_and_agrees():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    for i in range(30):
        txn(b, 2 * i + 1, 10, C.WRITE_ROWS_EVENT_V1, [image(i, "v" * (i % 5)), image(i + 100, None)])
        txn(b, 2 * i + 2, 11, C.UPDATE_ROWS_EVENT_V1, [image(i, "o"), image(i, "p")], table="other", update=True)
    b.add(C.MARIADB_GTID_EVENT, gtid_body(99, flags=1))
    b.add(C.QUERY_EVENT, query_body("ALTER TABLE t ADD COLUMN x INT", "db"))
    for i in range(30, 40):
        txn(b, 100 + i, 10, C.DELETE_ROWS_EVENT_V1, [image(i, "x")])
    stop = BinlogOffset(b.file, b.pos)
    plain, got_plain = walk(b.events, start, stop, bulk_min_events=0)
    bulk, got_bulk = walk(b.events, start, stop, bulk_min_events=8)
    assert plain.bulk_events == 0 and bulk.bulk_events > 200
    assert [repr(x) for x in got_bulk] == [repr(x) for x in got_plain]
    assert len([x for x in got_bulk if isinstance(x, RowChange)]) == 70
    assert (bulk.position, bulk.transaction_start) == (plain.position, plain.transaction_start)


# what a whole XID packet looks like to the numpy walk's byte test: packet length 0x20, status
# 0, type XID, event size 0x1F -- inside a row value, where the walk must not take it for one
FAKE_PACKET = "\x20\x00\x00\x05\x00" + "\x00" * 4 + "\x10" + "\x01\x00\x00\x00" + "\x1f\x00\x00\x00" + "z" * 20


def test_packet_chain_is_not_fooled_by_packets_inside_row_values():
    b = base()
    for i in range(10):
        txn(b, i + 1, 10, C.WRITE_ROWS_EVENT_V1, [image(i, FAKE_PACKET if i == 4 else "v")])
    data = b"".join(frame_packets(b"\x00" + ev, 1 + i) for i, ev in enumerate(b.events))
    offsets, o = [], 0
    while o < len(data):
        offsets.append(o)
        o += 4 + int.from_bytes(data[o : o + 3], "little")
    B = np.frombuffer(data, dtype=np.uint8)
    fake = offsets[2 + 4 * 4 + 2] + 5 + data[offsets[2 + 4 * 4 + 2] + 5 :].index(FAKE_PACKET.encode())
    assert fake in packet_chain(B, fake, len(data))  # the test does take it for a packet by itself
    # from the first GTID (after the rotate and FDE, which the walk does not take)
    chain = packet_chain(B, offsets[2], len(data)).tolist()
    rows4 = 2 + 4 * 4 + 2  # the rows event holding the fake packet ends the stretch
    assert chain == offsets[2 : rows4 + 1]
    assert packet_chain(B, offsets[rows4 + 1], len(data)).tolist() == offsets[rows4 + 1 :]


def test_the_numpy_walk_agrees_when_row_values_look_like_packets():
    b = base()
    start = BinlogOffset(b.file, b.pos)
    for i in range(40):
        txn(b, i + 1, 10, C.WRITE_ROWS_EVENT_V1, [image(i, FAKE_PACKET if i % 7 == 3 else "v")])
    stop = BinlogOffset(b.file, b.pos)
    plain, got_plain = walk(b.events, start, stop, bulk_min_events=0)
    bulk, got_bulk = walk(b.events, start, stop, bulk_min_events=4)
    assert [repr(x) for x in got_bulk] == [repr(x) for x in got_plain]
    assert [c.after["v"] for c in got_bulk][3] == FAKE_PACKET
    assert bulk.bulk_events > 100


@pytest.mark.parametrize("which", ["gtid", "table_map", "rows"])
def test_a_corrupt_event_in_a_numpy_stretch_is_named(which):
    b = base()
    start = BinlogOffset(b.file, b.pos)
    for i in range(20):
        txn(b, i + 1, 10, C.WRITE_ROWS_EVENT_V1, [image(i, "v")])
    stop = BinlogOffset(b.file, b.pos)
    k = 2 + 4 * 12 + {"gtid": 0, "table_map": 1, "rows": 2}[which]  # the 13th transaction's event
    at = stop.position - sum(len(ev) for ev in b.events[k:])
    ev = b.events[k]
    b.events[k] = ev[:1] + bytes([ev[1] ^ 0x40]) + ev[2:]  # the timestamp: only the CRC can tell
    r = FastBinlogReader(
        None, 1, start, stop, tables=(T,), blocking=False, bulk_min_events=8, columnar=MODE["columnar"]
    )
    r._charsets = CHARSETS
    with pytest.raises(ChecksumError, match=f"checksum mismatch at {b.file}:{at}:") as raised:
        for _ in r._loop(FakeConn(b.events)):
            pass
    assert "bulk_walk" in [entry.name for entry in raised.traceback]  # found by the numpy walk


def test_mysql_flavour_gtids_v2_rows_with_extra_data_and_begin_commit():
    """MySQL writes GTID (33) events, BEGIN/COMMIT queries for non-InnoDB tables, v2 rows events."""
    import uuid as _uuid

    sid = _uuid.UUID("3e11fa47-71ca-11e1-9e33-c80aa9429562")
    b = base()
    start = BinlogOffset(b.file, b.pos)
    b.add(C.GTID_LOG_EVENT, b"\x01" + sid.bytes + struct.pack("<Q", 23) + b"\x02" + bytes(16))
    b.add(C.QUERY_EVENT, query_body("BEGIN", "db"))
    b.add(C.TABLE_MAP_EVENT, table_map_body(10, "db", "t", COLS))
    w = b.add(C.WRITE_ROWS_EVENT_V2, rows_body(10, 2, [image(1, "a")], version=2))
    # extra data: a partition-info block (type 1, partition id 7) -> extra length 2 + 3
    plain = rows_body(10, 2, [image(1, "a"), image(1, "b")], update=True, version=2)
    with_extra = plain[:8] + b"\x05\x00\x01\x07\x00" + plain[10:]
    u = b.add(C.UPDATE_ROWS_EVENT_V2, with_extra)
    b.add(C.QUERY_EVENT, query_body("COMMIT", "db"))
    r, got = walk(b.events, start, BinlogOffset(b.file, b.pos))
    assert [(c.kind, c.before, c.after, c.offset.position, c.gtid) for c in got] == [
        ("insert", None, {"id": 1, "v": "a"}, w, f"{sid}:23"),
        ("update", {"id": 1, "v": "a"}, {"id": 1, "v": "b"}, u, f"{sid}:23"),
    ]
    assert r.transaction_start == start
