"""The fast binlog reader: the dump protocol, the event walk, per-table Arrow batches.

``FastBinlogReader`` reads the same range with the same semantics as
``cdc.binlog.reader.BinlogReader`` (start inclusive, stop exclusive and file-aware, offsets are
where events start, ``row`` numbers the rows of one event, DDL as ``SchemaChange``,
``Heartbeat`` while idle), and produces either

* ``batches()``: ``ChangeBatch`` objects -- one Arrow record batch of one table structure
  with columns ``database, table, op, binlog_file, binlog_pos, binlog_row, gtid,
  event_time, before, after`` (``before``/``after`` are structs with one field per
  column, null where the op has no such image) -- interleaved with ``SchemaChange``,
  ``Heartbeat`` and ``UnsupportedRows``; or
* ``changes()``: ``RowChange`` objects in binlog order, with the canonical values of
  ``cdc/types.py`` -- a drop-in for ``BinlogReader`` and what the differential tests use.

Why it is fast (measured on the bench workload, see bench/decoder_throughput.py):

* the packet framing is inlined into the event walk, and stretches of plain events
  already received (rows, TABLE_MAP, GTID, XID) are walked with numpy (``bulk.bulk_walk``)
  with no Python step per event: the packets are found by testing every byte offset at
  once and verifying the chain (``frames.packet_chain``), and the checksums of everything
  emitted are verified by one crc32 call (``packets.checksums_valid``);
* uncaptured tables are dropped by table id at the event header -- their rows are never
  parsed or copied, their checksums never computed;
* a TABLE_MAP identical to the last one for its id costs a byte comparison; a new one is
  looked up by its structure bytes, so a table's decoder is generated once;
* rows are not decoded in the walk: a batch (``batches.py``) keeps the raw events of each table structure
  and decodes them at the end all at once, column by column with numpy
  (``columnar.py``), or with the generated per-table row decoder (``decoder.py``) where a
  column cannot be vectorized.

Batching and order: events are buffered per table structure and flushed when about
``batch_rows`` rows events are buffered, before any ``SchemaChange`` / ``Heartbeat`` /
``UnsupportedRows`` is yielded (so a DDL is always ordered after every row before it), at
the end of the read, and whenever the reader would wait for the server (a blocking reader
delivers what it has first). Batches of one flush are yielded in the order of their first
rows; rows of different tables interleave in the binlog, so use the offset columns where a
global order matters (``changes()`` merges them back).

MariaDB's compressed events (``log_bin_compress``: zlib rows and QUERY events) are
inflated and read like the plain ones. What is refused loudly rather than skipped: MySQL's
compressed transactions (``binlog_transaction_compression``, zstd), partial row images
(``binlog_row_image`` MINIMAL/NOBLOB, partial JSON updates), rows events whose TABLE_MAP
was not seen, incidents (the server says events were lost), unknown event types the server
did not mark ignorable, and checksum mismatches.
"""

from __future__ import annotations

import heapq
import logging
import uuid
import zlib
from typing import Any, Callable, Collection, Iterator, Mapping, cast

import pymysql

from ...errors import CdcError
from ...events import Heartbeat, RowChange, SchemaChange
from ...model import TableId
from ...offsets import BinlogOffset, split_binlog_file
from ...schema.detect import BEGIN, END, OTHER, captured_ddl_tables, statement_kind
from ...source.config import SourceConfig
from ...source.server import server_version
from ...source.statements import StatementGuard
from ..gtid_watch import GtidWatch
from ..reader import check_start_available, raise_dump_stopped
from . import constants as C
from .batches import Builder, ChangeBatch, Item, UnsupportedRows
from .bulk import BulkWalk, bulk_walk
from .columnar import columnar_reason
from .connection import DumpConnection
from .decoder import TableDecoder, Unsupported, plan_table
from .errors import (
    CompressedEventError,
    FastBinlogError,
    PartialImageError,
    ProtocolError,
    RowMetadataError,
    UnknownEventError,
    UnsupportedTableError,
)
from .frames import (
    FRAME,
    GTID_BODY,
    HEADER,
    MISSING,
    ROWS_COMPRESSED,
    SIZE_POS,
    U32,
    U64,
    parse_fde,
    uncompress_query_event,
    uncompress_rows_event,
)
from .packets import CRC32_RESIDUE, verify_checksum
from .tablemap import parse_table_map, table_map_names

log = logging.getLogger(__name__)
_ER_MASTER_FATAL_READING_BINLOG = 1236
_FAR = 1 << 62


class FastBinlogReader:
    """Reads the binlog from ``start`` (inclusive) up to ``stop`` (exclusive) or forever.

    Arguments mirror ``cdc.binlog.reader.BinlogReader``: ``tables`` (None = all), ``blocking``
    (default: block when there is no ``stop``), ``dump_from`` (a transaction start at or
    before ``start``; everything before ``start`` is read but not yielded).
    ``batch_rows``: a batch is flushed once about this many rows events are buffered (one
    row each in a stream of small transactions). ``on_unsupported``: ``"raise"`` fails with ``UnsupportedTableError`` at the first rows
    event of a captured table the fast path cannot decode; ``"report"`` yields an
    ``UnsupportedRows`` for each such event instead, so the caller can fetch exactly
    those from python-mysql-replication. ``verify_checksum`` checks the CRC32 of every
    event that is used (uncaptured tables' rows events are skipped unchecked).
    ``columnar`` decodes the rows of a batch column by column with numpy (``columnar.py``)
    for tables where that is possible; False uses the generated row decoders everywhere
    (same values, the differential tests run both). ``bulk_min_events``: stretches of at
    least this many plain events (rows, TABLE_MAP, GTID, XID) already received are walked
    with numpy (``bulk_walk``) instead of one by one; 0 turns that off. ``server_id`` must
    be unique among the server's replicas.
    """

    def __init__(
        self,
        source: SourceConfig,
        server_id: int,
        start: BinlogOffset,
        stop: BinlogOffset | None = None,
        tables: Collection[TableId] | None = None,
        *,
        blocking: bool | None = None,
        heartbeat_s: float | None = 2.0,
        dump_from: BinlogOffset | None = None,
        batch_rows: int = 20_000,
        on_unsupported: str = "raise",
        verify_checksum: bool = True,
        columnar: bool = True,
        bulk_min_events: int = 64,
        new_tables: Callable[[TableId], bool] | None = None,
        gtid_watch: GtidWatch | None = None,
        expect_server: str | None = None,
    ) -> None:
        if stop is not None and stop < start:
            raise ValueError(f"binlog read: stop {stop} is before start {start}")
        if dump_from is not None and dump_from > start:
            raise ValueError(f"binlog read: dump_from {dump_from} is after start {start}")
        if on_unsupported not in ("raise", "report"):
            raise ValueError(f"on_unsupported must be 'raise' or 'report', not {on_unsupported!r}")
        self.source = source
        self.server_id = int(server_id)
        self.start = start
        self.stop = stop
        self.tables = frozenset(tables) if tables is not None else None
        self._databases = frozenset(t.database for t in self.tables) if self.tables is not None else None
        self._statements = StatementGuard(self.tables)
        self.new_tables = new_tables  # DDL that brings a table the patterns would capture is reported too
        self.blocking = (stop is None) if blocking is None else blocking
        self.heartbeat_s = heartbeat_s
        self.dump_from = dump_from or BinlogOffset(start.file, start.position)
        self.batch_rows = int(batch_rows)
        self.on_unsupported = on_unsupported
        self.verify = verify_checksum
        self.columnar = columnar
        self.bulk_min_events = bulk_min_events
        self.bulk_events = 0  # events walked by bulk_walk (observability, tests)
        self.gtid_watch = gtid_watch  # every GTID read goes past it (cdc/binlog/gtid_watch.py): a jump stops the read
        # the server the offsets belong to (cdc/binlog/failover.py), checked per connect
        self.expect_server = expect_server
        self.unsupported: dict[TableId, str] = {}
        self.decoders: dict[bytes, TableDecoder | Unsupported | None] = {}
        self._conn: DumpConnection | None = None
        self._file = self.dump_from.file
        self._pos = self.dump_from.position
        self._gtid: str | None = None
        self._txn: tuple[str, int] | None = None  # where the current transaction starts
        self._in_txn = False
        self._done = False
        self._charsets: dict[int, str] = {}
        # A server that can log column names (binlog_row_metadata) must have: see _plan.
        self._names_expected = False
        self._text_dates = getattr(source, "zero_dates", "null") == "text"  # cdc/types.py

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> "FastBinlogReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; safe from another thread (the reading thread then just ends)."""
        self._done = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    @property
    def position(self) -> BinlogOffset:
        """The next offset to read: every event before it has been received."""
        return BinlogOffset(self._file, self._pos)

    @property
    def transaction_start(self) -> BinlogOffset | None:
        """Where the transaction of the last event read starts (a safe ``dump_from``)."""
        return BinlogOffset(*self._txn) if self._txn else None

    def _open(self) -> DumpConnection:
        ctl = self.source.connect_binlog()
        try:
            version = server_version(ctl)
            if self.expect_server is not None:
                self._check_server(ctl, version)
            check_start_available(ctl, self.dump_from, self.tables)
            self._charsets = server_charsets(ctl)
            self._names_expected = version.has_binlog_row_metadata
        finally:
            ctl.close()
        conn = DumpConnection(
            self.source,
            self.server_id,
            self.dump_from.file,
            self.dump_from.position,
            blocking=self.blocking,
            heartbeat_s=self.heartbeat_s if self.blocking else None,
        )
        conn.open()
        self._conn = conn
        if self._done:  # closed (from another thread) while connecting
            self.close()
        return conn

    def _check_server(self, ctl: Any, version: Any) -> None:
        """Offsets mean something only in the binlog of the server that wrote them: refuse another."""
        from ..failover import SourceChangedError, server_identity

        now = server_identity(ctl, version)
        if str(now) != self.expect_server:
            raise SourceChangedError(
                f"binlog read from {self.dump_from}: those offsets belong to the server {self.expect_server}, and the "
                f"endpoint now reaches {now} (a failover): the range is not read by file and position there. Fix: "
                "nothing, for the stream: its driver places it on the new server by GTID when the query runs "
                "again."
            )

    # --- public iteration ------------------------------------------------------------------

    def batches(self) -> Iterator[Item]:
        """Change batches and the other items, see the module docstring."""
        for group in self._groups():
            yield from group

    def flushes(self) -> Iterator[list[Item]]:
        """The items flush by flush. While a list is being consumed, ``position`` is where the
        walk stopped (every row before it is in this or an earlier list) and
        ``transaction_start`` is at or before the transaction of every row still to come --
        so a caller can cut a range after any flush and resume it without losing a row."""
        yield from self._groups()

    def changes(self) -> Iterator[RowChange | SchemaChange | Heartbeat | UnsupportedRows]:
        """Every captured row change as a ``RowChange``, in binlog order (plus the other items)."""
        for group in self._groups():
            batches = [b for b in group if isinstance(b, ChangeBatch)]
            others = [x for x in group if not isinstance(x, ChangeBatch)]
            if len(batches) == 1:
                yield from batches[0].changes()
            elif batches:
                yield from heapq.merge(*(b.changes() for b in batches), key=lambda c: c.offset.sort_key())
            yield from others

    # --- the event loop --------------------------------------------------------------------

    def _groups(self) -> Iterator[list[Item]]:
        """Lists of items; every list is a flush: batches in first-row order, then one other item."""
        if self._done:
            return
        try:
            conn = self._open()
            if self._done:
                return
            yield from self._loop(conn)
        except Exception as e:
            if self._done and not isinstance(e, FastBinlogError):
                return
            if isinstance(e, pymysql.err.OperationalError) and e.args and e.args[0] == _ER_MASTER_FATAL_READING_BINLOG:
                self._raise_if_purged(e)
            raise
        finally:
            self.close()

    def _raise_if_purged(self, cause: Exception) -> None:
        raise_dump_stopped(self.source, self._file, self.tables, self.position, cause)

    def _bounds(self) -> tuple[int, int]:
        """(start, stop) as positions in the current file: every event is compared as ints."""
        idx = split_binlog_file(self._file)[1]
        s_idx = self.start.file_index
        start = _FAR if idx < s_idx else (self.start.position if idx == s_idx else -1)
        if self.stop is None:
            stop = _FAR
        else:
            e_idx = self.stop.file_index
            stop = _FAR if idx < e_idx else (self.stop.position if idx == e_idx else 0)
        return start, stop

    def _loop(self, conn: DumpConnection) -> Iterator[list[Item]]:
        """Walk the events; every yielded list is one flush (see ``_groups``).

        Written for speed, with the packet framing inlined: an event whose packet is
        complete in the receive buffer is dispatched straight from the buffer, and only
        the events that are used (captured rows, new TABLE_MAPs, DDL, rotations ...) are
        copied out. Rows and TABLE_MAP events of uncaptured tables, GTID and XID events --
        most of a busy binlog -- cost a header unpack and a dict lookup. Everything else
        (partial packets, 16 MB continuations, EOF, errors) goes through
        ``PacketReader.read_event``, after a flush if that call would wait for the server.

        The hot state (framing offsets, position, transaction start) lives in locals and is
        written back to ``self`` before anything leaves the loop (a yield, a rare event, the
        end): the ``position`` / ``transaction_start`` properties are exact between items.

        Kept whole, over the ~120-line limit for functions (issue 38): it runs once per event, and a
        helper call per event is a Python frame per event. ``bench/decoder_throughput.py`` (the
        decoder alone against ``mariadb-binlog``) and ``bench/stream_throughput.py`` measure it:
        332,211 changes/s, 8.21x ``mariadb-binlog``, on 2026-11-29 (docs/performance.md, "The
        stream"). Rerun them side by side with a split version before splitting it.
        """
        R = conn._reader
        assert R is not None
        crc = 4 if conn.checksum_algorithm == "CRC32" else 0
        verify = self.verify
        tid_len, tm_post = 6, 8
        tid_mask = (1 << 48) - 1
        start_pos, stop_pos = self._bounds()
        start_row = self.start.row
        by_id: dict[int, TableDecoder | Unsupported | None] = {}
        last_map: dict[int, tuple[bytes, TableDecoder | Unsupported | None]] = {}
        tm_cache = self.decoders
        builders: dict[int, Builder] = {}  # id(decoder) -> builder
        pending = 0
        seq = 0
        gtid_event: bytes | None = None  # verified lazily: only when rows use its GTID
        gtid_parts: tuple[int, int, int] | None = None
        charsets = self._charsets
        watch = self.gtid_watch
        ROWS = ROWS_COMPRESSED  # rows event type -> True if MariaDB compressed it
        TABLE_MAP = C.TABLE_MAP_EVENT
        MARIADB_GTID = C.MARIADB_GTID_EVENT
        XID = C.XID_EVENT
        MAXP = C.MAX_PACKET_LEN
        from_bytes = int.from_bytes
        sizepos = SIZE_POS
        u64 = U64
        frame = FRAME
        crc32 = zlib.crc32
        RESIDUE = CRC32_RESIDUE

        def flush() -> list[Item]:
            nonlocal pending
            out: list[Item] = [b.build() for b in sorted(builders.values(), key=lambda b: b.first_seq)]
            builders.clear()
            pending = 0
            return out

        rbuf, rstart, rend, rseq, view = R._buf, R._start, R._end, R._seq, R._view
        cur_pos, in_txn, txn = self._pos, self._in_txn, self._txn
        # the current event is buf[o:end]: in the receive buffer (buf is rbuf) or an event
        # read_event() returned (bytes; so "buf if buf is not rbuf" is bytes, cast below)
        buf: bytes | bytearray
        item: Item | None
        bulk_min = self.bulk_min_events
        bulk_bytes = 32 * bulk_min  # ~ the bytes of that many small events
        bulk_target = 1 << 20  # read ahead up to this much for the numpy walk
        bulk_after = 0  # no bulk attempt before this buffer offset
        w = BulkWalk(by_id, last_map, builders, bulk_min, self.start.row, watch, self.columnar)
        try:
            while True:
                # --- framing: the next event is buf[o:end] -------------------------------
                # One unpack reads the packet header (length, sequence id), the status byte,
                # the event's type, size and end position, and the table id a rows event
                # or TABLE_MAP starts with (garbage, unused, for other events).
                o = rstart
                if bulk_min and o >= bulk_after and tid_len == 6:
                    if rend - o < bulk_target // 4:
                        R._start, R._seq = rstart, rseq
                        R.top_up(bulk_target)  # whatever the server has sent already: long stretches
                        rbuf, rstart, rend, rseq, view = R._buf, R._start, R._end, R._seq, R._view
                        o = rstart
                    walked = None
                    if rend - o >= bulk_bytes:
                        w.buf, w.view, w.start, w.end, w.packet_seq = rbuf, view, o, rend, rseq
                        w.start_pos, w.stop_pos, w.crc, w.verify_crc = start_pos, stop_pos, crc, crc if verify else 0
                        w.file, w.gtid = self._file, self._gtid
                        w.seq, w.in_txn, w.txn, w.gtid_parts, w.gtid_event = seq, in_txn, txn, gtid_parts, gtid_event
                        walked = bulk_walk(w, max(self.batch_rows - pending, 1))
                        w.buf = w.view = None  # no reference to the receive buffer outlives the call
                    if walked is None:  # not worth it here: walk one by one for a while
                        bulk_after = min(rend, o + max(bulk_bytes, (rend - o) // 8))
                    else:
                        self.bulk_events += walked
                        rstart, rseq, cur_pos, seq = w.start, w.packet_seq, w.position, w.seq
                        in_txn, txn, gtid_parts, gtid_event = w.in_txn, w.txn, w.gtid_parts, w.gtid_event
                        pending += w.added
                        if pending >= self.batch_rows:
                            self._pos, self._in_txn, self._txn = cur_pos, in_txn, txn
                            yield flush()
                        continue
                if rend - o >= 32:
                    plen, status, typ, size, log_pos, tidq = frame(rbuf, o)
                    length = plen & 0xFFFFFF
                    if status == 0 and size + 1 == length < MAXP and o + 4 + length <= rend and plen >> 24 == rseq:
                        rseq = (rseq + 1) & 0xFF
                        rstart = end = o + 4 + length
                        o += 5
                        buf = rbuf
                    else:
                        o = -1
                else:
                    o = -1
                if o < 0:
                    R._start, R._seq = rstart, rseq
                    if pending and not R.ready():
                        self._pos, self._in_txn, self._txn = cur_pos, in_txn, txn
                        yield flush()  # about to wait for the server: deliver what we have
                    if self._done:
                        return
                    ev = R.read_event()
                    rbuf, rstart, rend, rseq, view = R._buf, R._start, R._end, R._seq, R._view
                    bulk_after = 0
                    if ev is None:  # non-blocking dump: caught up with the server
                        break
                    buf, o, end = ev, 0, len(ev)
                    typ = ev[4]
                    size, log_pos = sizepos(ev, 9)
                    tidq = u64(ev, 19)[0] if len(ev) >= 27 else 0
                if tid_len != 6:
                    tidq = from_bytes(buf[o + 19 : o + 23], "little")

                # --- rows --------------------------------------------------------------------
                rows_kind = ROWS.get(typ)
                if rows_kind is not None:
                    pos = log_pos - size
                    if pos >= stop_pos:
                        break
                    cur_pos = log_pos
                    dec = by_id.get(tidq & tid_mask, MISSING)
                    if dec is None:
                        continue  # not captured
                    if not in_txn:
                        txn = (self._file, pos)
                        in_txn = True
                    if pos < start_pos:
                        continue
                    if dec is MISSING:
                        raise ProtocolError(
                            f"rows event at {self._file}:{pos} for table id "
                            f"{from_bytes(buf[o + 19 : o + 19 + tid_len], 'little')} without its TABLE_MAP: a read "
                            "must start at a transaction boundary. Fix: start it at one, or pass dump_from = the transaction's start."
                        )
                    ev = cast(bytes, buf) if buf is not rbuf else bytes(view[o:end])
                    if verify and crc:
                        if crc32(ev) != RESIDUE:
                            verify_checksum(ev, f"{self._file}:{pos}")
                        if gtid_event is not None:
                            if crc32(gtid_event) != RESIDUE:
                                verify_checksum(gtid_event, f"{self._file} (GTID event before {pos})")
                            gtid_event = None
                    if rows_kind:  # MariaDB log_bin_compress: inflate into the plain event
                        ev = uncompress_rows_event(ev, crc, tid_len)
                    if dec.__class__ is Unsupported:
                        self._pos, self._in_txn, self._txn = cur_pos, in_txn, txn
                        item = self._unsupported(dec, pos)
                        yield (flush() if pending else []) + [item]
                        continue
                    b = builders.get(id(dec))
                    if b is None:
                        b = builders[id(dec)] = Builder(
                            dec, seq, self.columnar and dec.columnar_reason is None, crc, tid_len, self._file
                        )
                        seq += 1
                    # the GTID stays an unformatted (domain, server, seq) triple: formatted per batch
                    b.add(
                        ev,
                        gtid_parts if gtid_parts is not None else self._gtid,
                        self._file,
                        start_row if pos == start_pos else 0,
                    )
                    pending += 1
                    if pending >= self.batch_rows:
                        self._pos, self._in_txn, self._txn = cur_pos, in_txn, txn
                        yield flush()
                    continue

                # --- table maps: the same bytes as last time for this id -> the same decoder ----
                if typ == TABLE_MAP:
                    pos = log_pos - size
                    if pos >= stop_pos:
                        break
                    cur_pos = log_pos
                    tid = tidq & tid_mask
                    last = last_map.get(tid)
                    if last is not None and end - crc - o - 19 == len(last[0]) and buf.startswith(last[0], o + 19):
                        dec = last[1]  # by_id[tid] is dec already
                        if dec is not None and verify and crc and crc32(view[o:end] if buf is rbuf else buf) != RESIDUE:
                            verify_checksum(view[o:end] if buf is rbuf else buf, f"{self._file}:{pos}")
                        continue
                    else:
                        ev = cast(bytes, buf) if buf is not rbuf else bytes(view[o:end])
                        key = ev[19 + tm_post : len(ev) - crc]
                        dec = tm_cache.get(key, MISSING)
                        if dec is MISSING:
                            dec = self._plan(ev, tid_len, tm_post, crc, charsets, conn.is_mariadb)
                            tm_cache[key] = dec
                        if dec is not None and verify and crc:
                            verify_checksum(ev, f"{self._file}:{pos}")
                        last_map[tid] = (ev[19 : len(ev) - crc], dec)
                    by_id[tid] = dec
                    continue

                if typ == MARIADB_GTID:
                    pos = log_pos - size
                    if pos >= stop_pos:
                        break
                    cur_pos = log_pos
                    seq_no, domain = GTID_BODY(buf, o + 19)
                    gtid_parts = (domain, U32(buf, o + 5)[0], seq_no)
                    if verify and crc:
                        gtid_event = bytes(view[o:end]) if buf is rbuf else cast(bytes, buf)
                    if watch is not None:
                        if gtid_event is not None:  # a damaged event must not pass for a gap
                            verify_checksum(gtid_event, f"{self._file}:{pos}")
                            gtid_event = None
                        watch.seen(domain, seq_no, self._file, pos)
                    if not in_txn:
                        txn = (self._file, pos)
                        in_txn = True
                    continue

                if typ == XID:
                    pos = log_pos - size
                    if pos >= stop_pos:
                        break
                    cur_pos = log_pos
                    in_txn = False
                    continue

                # --- everything else: rare, so on a copy and with the state in self -----------
                ev = cast(bytes, buf) if buf is not rbuf else bytes(view[o:end])
                self._pos, self._in_txn, self._txn = cur_pos, in_txn, txn
                if gtid_parts is not None:  # a DDL or a rotation may need the current GTID
                    self._gtid = f"{gtid_parts[0]}-{gtid_parts[1]}-{gtid_parts[2]}"
                    gtid_parts = None
                item, stop_now = self._other_event(ev, crc, start_pos, stop_pos)
                if typ == C.FORMAT_DESCRIPTION_EVENT:
                    crc_alg, new_tid_len, tm_post = parse_fde(ev)
                    new_crc = 4 if crc_alg == C.CHECKSUM_CRC32 else 0
                    if pending and (new_crc, new_tid_len) != (crc, tid_len):
                        yield flush()  # builders read their events with one layout
                    crc, tid_len = new_crc, new_tid_len
                    if verify and crc:
                        verify_checksum(ev, f"{self._file} (format description)")
                elif typ == C.ROTATE_EVENT and not stop_now:
                    start_pos, stop_pos = self._bounds()
                    if not log_pos or ev[17] & C.LOG_EVENT_ARTIFICIAL_F:
                        stop_now = self._pos >= stop_pos  # a fake rotate says "you are at file:position"
                cur_pos, in_txn, txn = self._pos, self._in_txn, self._txn
                if stop_now:
                    break
                if item is not None:
                    yield (flush() if pending else []) + [item]
        finally:
            R._start, R._seq = rstart, rseq
            self._pos, self._in_txn, self._txn = cur_pos, in_txn, txn
            if gtid_parts is not None:
                self._gtid = f"{gtid_parts[0]}-{gtid_parts[1]}-{gtid_parts[2]}"

        if pending:
            yield flush()
        if self.stop is not None and not self.blocking and self.position < self.stop and not self._done:
            raise CdcError(
                f"the binlog ended at {self.position} before the requested stop {self.stop}: "
                "the stop offset must be one the server has already written. Fix: give a stop at or before "
                "the server's current position (SHOW MASTER STATUS)."
            )

    def _other_event(self, ev: bytes, crc: int, start_pos: int, stop_pos: int) -> tuple[Item | None, bool]:
        """The rare events: (item to yield or None, True if the read reached ``stop``).

        Works on ``self`` (position, transaction state), which the loop syncs around it.
        """
        ts, typ, server_id, size, log_pos, flags = HEADER(ev, 0)
        verify = self.verify and crc
        if typ == C.ROTATE_EVENT:
            if verify:
                verify_checksum(ev, f"{self._file} (rotate)")
            position = int.from_bytes(ev[19:27], "little")
            next_file = bytes(ev[27 : len(ev) - crc]).decode("utf-8")
            artificial = not log_pos or flags & C.LOG_EVENT_ARTIFICIAL_F
            if not artificial and log_pos - size >= stop_pos:
                return None, True
            self._file = next_file
            self._pos = position
            return None, False
        if typ == C.FORMAT_DESCRIPTION_EVENT:
            if log_pos:
                if log_pos - size >= stop_pos:
                    return None, True
                self._pos = log_pos
            return None, False
        if typ in (C.HEARTBEAT_LOG_EVENT, C.HEARTBEAT_LOG_EVENT_V2):
            if typ == C.HEARTBEAT_LOG_EVENT and log_pos:
                self._pos = log_pos
            if self._pos >= stop_pos:
                return None, True
            return (Heartbeat(self.position) if self._pos >= start_pos else None), False
        if not log_pos:
            return None, False  # an artificial event without a place in the binlog
        pos = log_pos - size
        if pos >= stop_pos:
            return None, True
        self._pos = log_pos
        if typ == C.QUERY_COMPRESSED_EVENT:  # MariaDB log_bin_compress: the statement is zlib
            if verify:
                verify_checksum(ev, f"{self._file}:{pos}")
            ev = uncompress_query_event(ev, crc)
            typ = C.QUERY_EVENT
        if typ == C.QUERY_EVENT:
            sc = self._on_query(ev, pos, ts, crc, start_pos)
            if sc is not None and verify:
                verify_checksum(ev, f"{self._file}:{pos}")
            return sc, False
        if typ == C.GTID_LOG_EVENT:
            if verify:
                verify_checksum(ev, f"{self._file}:{pos}")
            sid, gno = uuid.UUID(bytes=bytes(ev[20:36])), int.from_bytes(ev[36:44], "little")
            self._gtid = f"{sid}:{gno}"
            if self.gtid_watch is not None:
                self.gtid_watch.seen(str(sid), gno, self._file, pos, "mysql")
            self._begin(pos)
        elif typ == C.GTID_TAGGED_LOG_EVENT:
            self._gtid = None  # MySQL 8.4 tagged GTIDs: serialized differently; not decoded
            self._begin(pos)
        elif typ == C.XA_PREPARE_LOG_EVENT:
            self._in_txn = False
        elif typ in C.SKIPPED_EVENTS or typ in (C.MARIADB_GTID_EVENT, C.XID_EVENT):
            pass
        elif typ == C.TRANSACTION_PAYLOAD_EVENT:
            raise CompressedEventError(
                f"compressed transaction (TRANSACTION_PAYLOAD event) at {self._file}:{pos}: the fast reader "
                "does not decompress MySQL's binlog_transaction_compression (zstd). Fix: SET GLOBAL "
                "binlog_transaction_compression = OFF; the event must not be skipped, the rows inside "
                "would be lost."
            )
        elif typ == C.PARTIAL_UPDATE_ROWS_EVENT:
            raise PartialImageError(
                f"partial JSON update event at {self._file}:{pos}: rows lack their full after-image. "
                "Fix: SET GLOBAL binlog_row_value_options = '' (and binlog_row_image = FULL)."
            )
        elif typ == C.INCIDENT_EVENT:
            raise FastBinlogError(
                f"INCIDENT event at {self._file}:{pos}: the server reports that changes are missing "
                "from its binlog here; the captured tables must be snapshotted again. Fix: trigger the "
                "pipeline with reset=true to load them again."
            )
        elif not flags & C.LOG_EVENT_IGNORABLE_F:
            raise UnknownEventError(
                f"unknown binlog event type {typ} at {self._file}:{pos} (not marked ignorable): "
                "refusing to skip it, it may carry rows. Fix: report this message with the server's version "
                "(SELECT VERSION()): this version of mysqlcdc does not know the event."
            )
        return None, False

    # --- pieces of the loop ------------------------------------------------------------------

    def _begin(self, pos: int) -> None:
        if not self._in_txn:
            self._txn = (self._file, pos)
            self._in_txn = True

    def _plan(
        self, ev: bytes, tid_len: int, tm_post: int, crc: int, charsets: Mapping[int, str], is_mariadb: bool
    ) -> TableDecoder | Unsupported | None:
        """The decoder for a TABLE_MAP not seen before; None for tables not captured."""
        db, table = table_map_names(ev, tm_post)
        tid = TableId(db, table)
        if self.tables is not None and tid not in self.tables:
            return None
        tm = parse_table_map(ev, tid_len, tm_post, crc, is_mariadb)
        if not tm.has_names and self._names_expected:
            # Logged while binlog_row_metadata was MINIMAL: names from today's schema could be wrong.
            size, end = SIZE_POS(ev, 9)
            raise RowMetadataError(str(tid), f"{self._file}:{end - size}")
        dec = plan_table(tm, charsets, self._text_dates)
        if isinstance(dec, TableDecoder):
            dec.columnar_reason = columnar_reason(dec)
        if isinstance(dec, Unsupported):
            self.unsupported[tid] = dec.reason
            log.info("fast binlog decoder falls back for %s", dec)
        return dec

    def _unsupported(self, dec: Unsupported, pos: int) -> UnsupportedRows:
        if self.on_unsupported == "raise":
            raise UnsupportedTableError(str(dec.table_id), dec.reason)
        return UnsupportedRows(dec.table_id, BinlogOffset(self._file, pos), self.transaction_start, dec.reason)

    def _on_query(self, ev: bytes, pos: int, ts: int, crc: int, start_pos: int) -> SchemaChange | None:
        """Transaction control updates the transaction state; DDL becomes a SchemaChange."""
        db_len = ev[19 + 8]
        status_len = ev[19 + 11] | (ev[19 + 12] << 8)
        p = 19 + 13 + status_len
        database = bytes(ev[p : p + db_len]).decode("utf-8", "replace")
        sql = bytes(ev[p + db_len + 1 : len(ev) - crc]).decode("utf-8", "backslashreplace")
        kind = statement_kind(sql)
        if kind == BEGIN:
            self._begin(pos)
            return None
        if pos >= start_pos:  # a statement-logged change of a captured table: stop, never skip it
            self._statements.check(sql, database, f"{self._file}:{pos}")
        if kind == END:
            self._in_txn = False
        if kind != OTHER:
            return None
        self._begin(pos)
        self._in_txn = False  # DDL commits implicitly
        named = captured_ddl_tables(sql, database, self.tables, self.new_tables)
        if not named or pos < start_pos:
            return None
        return SchemaChange(
            database=database,
            sql=sql,
            offset=BinlogOffset(self._file, pos),
            table_id=named[0],
            gtid=self._gtid,
            timestamp=int(ts),
            tables=tuple(named),
        )


def server_charsets(conn: Any) -> dict[int, str]:
    """Collation id -> character set name as the server defines them (pymysql's table as the base)."""
    from pymysql import charset as pc

    out: dict[int, str] = {}
    for i in range(1, 2048):
        try:
            out[i] = pc.charset_by_id(i).name
        except KeyError:
            pass
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
            for cid, name in cur.fetchall():
                out[int(cid)] = str(name)
    except pymysql.err.MySQLError as e:  # pragma: no cover - very old servers
        log.warning("cannot read information_schema.COLLATIONS (%s); using pymysql's table", e)
    return out
