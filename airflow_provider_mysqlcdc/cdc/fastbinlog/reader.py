"""The fast binlog reader: the dump protocol, the event walk, per-table Arrow batches.

``FastBinlogReader`` reads the same range with the same semantics as
``cdc.binlog.BinlogReader`` (start inclusive, stop exclusive and file-aware, offsets are
where events start, ``row`` numbers the rows of one event, DDL as ``SchemaChange``,
``Heartbeat`` while idle), and produces either

* ``batches()``: ``ChangeBatch`` objects -- one Arrow record batch of one table structure
  with columns ``database, table, op, binlog_file, binlog_pos, binlog_row, gtid,
  event_time, before, after`` (``before``/``after`` are structs with one field per
  column, null where the op has no such image) -- interleaved with ``SchemaChange``,
  ``Heartbeat`` and ``UnsupportedRows``; or
* ``changes()``: ``RowChange`` objects in binlog order, with the canonical values of
  ``cdc/types.py`` -- a drop-in for ``BinlogReader`` and what the differential tests use.

Why it is fast: uncaptured tables are dropped by table id at the event header (their rows
are never parsed and their checksums never computed); TABLE_MAPs are looked up by their
raw bytes, so a captured table's map is parsed and its decoder generated once; rows are
decoded by per-table generated code (``decoder.py``) and turned into Arrow column by
column in bulk.

Batching and order: rows are buffered per table structure and flushed when
``batch_rows`` rows are buffered, before any ``SchemaChange`` / ``Heartbeat`` /
``UnsupportedRows`` is yielded (so a DDL is always ordered after every row before it), at
the end of the read, and whenever the bytes received so far are used up (a blocking
reader then delivers what it has before it waits). Batches of one flush are yielded in
the order of their first rows; rows of different tables interleave in the binlog, so use
the offset columns where a global order matters (``changes()`` merges them back).

What is refused loudly rather than skipped: compressed events (MariaDB
``log_bin_compress``, MySQL ``binlog_transaction_compression``), partial row images
(``binlog_row_image`` MINIMAL/NOBLOB, partial JSON updates), rows events whose TABLE_MAP
was not seen, incidents (the server says events were lost), unknown event types the server
did not mark ignorable, and checksum mismatches.
"""

from __future__ import annotations

import heapq
import logging
import re
import struct
import uuid
from dataclasses import dataclass
from typing import Any, Collection, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pymysql

from ..binlog import check_start_available, ddl_tables, is_ddl
from ..config import SourceConfig
from ..errors import CdcError
from ..events import Heartbeat, RowChange, SchemaChange
from ..model import TableId
from ..offsets import BinlogOffset, split_binlog_file
from . import constants as C
from .connection import DumpConnection
from .decoder import TableDecoder, Unsupported, plan_table
from .errors import (
    CompressedEventError, FastBinlogError, PartialImageError, ProtocolError, UnknownEventError,
    UnsupportedTableError,
)
from .packets import verify_checksum
from .tablemap import parse_table_map, read_lenenc, table_map_names

log = logging.getLogger(__name__)

_ER_MASTER_FATAL_READING_BINLOG = 1236
_HEADER = struct.Struct("<IBIIIH").unpack_from
_GTID = struct.Struct("<QI").unpack_from
_FAR = 1 << 62

META_FIELDS = [
    pa.field("database", pa.string(), nullable=False),
    pa.field("table", pa.string(), nullable=False),
    pa.field("op", pa.string(), nullable=False),
    pa.field("binlog_file", pa.string(), nullable=False),
    pa.field("binlog_pos", pa.int64(), nullable=False),
    pa.field("binlog_row", pa.int32(), nullable=False),
    pa.field("gtid", pa.string(), nullable=True),
    pa.field("event_time", pa.timestamp("us", tz="UTC"), nullable=True),
]


def batch_schema(decoder: TableDecoder) -> pa.Schema:
    """The record batch schema of one table structure: metadata columns, then before/after."""
    return pa.schema(META_FIELDS + [pa.field("before", decoder.image_type, nullable=True),
                                    pa.field("after", decoder.image_type, nullable=True)])


@dataclass(frozen=True)
class ChangeBatch:
    """Decoded row changes of one table structure, as an Arrow record batch (``batch_schema``)."""

    table_id: TableId
    decoder: TableDecoder
    batch: pa.RecordBatch

    @property
    def num_rows(self) -> int:
        return self.batch.num_rows

    def changes(self) -> list[RowChange]:
        """The rows as ``RowChange`` objects (canonical Python values), in batch order."""
        d = self.batch.to_pydict()
        out = []
        for op, f, pos, row, gtid, ts, before, after in zip(
                d["op"], d["binlog_file"], d["binlog_pos"], d["binlog_row"], d["gtid"],
                d["event_time"], d["before"], d["after"]):
            out.append(RowChange(op, self.table_id, before, after, BinlogOffset(f, pos, row=row), gtid,
                                 int(ts.timestamp()) if ts is not None else 0))
        return out


@dataclass(frozen=True)
class UnsupportedRows:
    """A rows event of a captured table the fast path cannot decode: read it with the library.

    ``offset`` is where the event starts; ``transaction_start`` where its transaction
    starts (a library reader must begin there to see the TABLE_MAP).
    """

    table_id: TableId
    offset: BinlogOffset
    transaction_start: BinlogOffset | None
    reason: str


Item = ChangeBatch | SchemaChange | Heartbeat | UnsupportedRows


class _Builder:
    """Rows of one table structure waiting to become a record batch."""

    __slots__ = ("decoder", "events", "befores", "afters", "first_seq")

    def __init__(self, decoder: TableDecoder, first_seq: int) -> None:
        self.decoder = decoder
        self.events: list[tuple] = []   # (op, file, pos, gtid, ts, nrows, first row index)
        self.befores: list[tuple | None] = []
        self.afters: list[tuple | None] = []
        self.first_seq = first_seq

    def build(self) -> ChangeBatch:
        dec = self.decoder
        ops, files, poss, gtids, tss, counts, row0s = zip(*self.events)
        n = len(self.afters)
        counts_a = np.array(counts, dtype=np.int64)
        idx = pa.array(np.repeat(np.arange(len(counts), dtype=np.int64), counts_a))
        starts = np.cumsum(counts_a) - counts_a
        rows = np.arange(n, dtype=np.int64) - np.repeat(starts, counts_a) + np.repeat(
            np.array(row0s, dtype=np.int64), counts_a)
        tid = dec.table_id
        ts = np.repeat(np.array(tss, dtype=np.int64) * 1_000_000, counts_a)
        columns = [
            pa.repeat(pa.scalar(tid.database), n),
            pa.repeat(pa.scalar(tid.table), n),
            pa.array(ops, pa.string()).take(idx),
            pa.array(files, pa.string()).take(idx),
            pa.array(np.repeat(np.array(poss, dtype=np.int64), counts_a)),
            pa.array(rows.astype(np.int32)),
            pa.array(gtids, pa.string()).take(idx),
            pa.array(ts, pa.timestamp("us", tz="UTC")),
            dec.image_struct(self.befores),
            dec.image_struct(self.afters),
        ]
        return ChangeBatch(tid, dec, pa.RecordBatch.from_arrays(columns, schema=batch_schema(dec)))


class FastBinlogReader:
    """Reads the binlog from ``start`` (inclusive) up to ``stop`` (exclusive) or forever.

    Arguments mirror ``cdc.binlog.BinlogReader``: ``tables`` (None = all), ``blocking``
    (default: block when there is no ``stop``), ``dump_from`` (a transaction start at or
    before ``start``; everything before ``start`` is read but not yielded).
    ``on_unsupported``: ``"raise"`` fails with ``UnsupportedTableError`` at the first rows
    event of a captured table the fast path cannot decode; ``"report"`` yields an
    ``UnsupportedRows`` for each such event instead, so the caller can fetch exactly
    those from python-mysql-replication. ``verify_checksum`` checks the CRC32 of every
    event that is used (uncaptured tables' rows events are skipped unchecked).
    ``server_id`` must be unique among the server's replicas.
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
        self.blocking = (stop is None) if blocking is None else blocking
        self.heartbeat_s = heartbeat_s
        self.dump_from = dump_from or BinlogOffset(start.file, start.position)
        self.batch_rows = int(batch_rows)
        self.on_unsupported = on_unsupported
        self.verify = verify_checksum
        self.unsupported: dict[TableId, str] = {}
        self.decoders: dict[bytes, TableDecoder | Unsupported | None] = {}
        self._conn: DumpConnection | None = None
        self._file = self.dump_from.file
        self._pos = self.dump_from.position
        self._gtid: str | None = None
        self._txn: tuple[str, int] | None = None   # where the current transaction starts
        self._in_txn = False
        self._done = False
        self._charsets: dict[int, str] = {}

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
        ctl = self.source.connect()
        try:
            check_start_available(ctl, self.dump_from, self.tables)
            self._charsets = server_charsets(ctl)
        finally:
            ctl.close()
        conn = DumpConnection(self.source, self.server_id, self.dump_from.file, self.dump_from.position,
                              blocking=self.blocking, heartbeat_s=self.heartbeat_s if self.blocking else None)
        conn.open()
        if self._done:  # closed while connecting
            conn.close()
        self._conn = conn
        return conn

    # --- public iteration ------------------------------------------------------------------

    def batches(self) -> Iterator[Item]:
        """Change batches and the other items, see the module docstring."""
        for group in self._groups():
            yield from group

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
        ctl = self.source.connect()
        try:
            check_start_available(ctl, BinlogOffset(self._file, 4), self.tables)
        finally:
            ctl.close()
        raise CdcError(f"the server stopped the binlog dump at {self.position}: {cause}") from cause

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
        """Walk the events. Written for speed: the hot paths (rows and TABLE_MAP events of
        uncaptured tables, GTID and XID) touch as little as possible."""
        reader = conn._reader
        assert reader is not None
        read = reader.read_event
        buffered = reader.buffered
        crc = 4 if conn.checksum_algorithm == "CRC32" else 0
        verify = self.verify
        tid_len, tm_post = 6, 8
        start_pos, stop_pos = self._bounds()
        start_row = self.start.row
        by_id: dict[int, TableDecoder | Unsupported | None] = {}
        tm_cache = self.decoders
        builders: dict[int, _Builder] = {}     # id(decoder) -> builder
        pending = 0
        seq = 0
        gtid_event: bytes | None = None        # checked lazily: only when rows use its GTID
        charsets = self._charsets
        ROWS = C.ROWS_EVENTS
        TABLE_MAP = C.TABLE_MAP_EVENT
        MARIADB_GTID = C.MARIADB_GTID_EVENT
        XID = C.XID_EVENT
        from_bytes = int.from_bytes

        def flush() -> list[Item]:
            nonlocal pending
            out: list[Item] = [b.build() for b in sorted(builders.values(), key=lambda b: b.first_seq)]
            builders.clear()
            pending = 0
            return out

        while True:
            if pending and not buffered():
                yield flush()
            ev = read()
            if ev is None:  # non-blocking dump: caught up with the server
                break
            if self._done:
                return
            ts, typ, server_id, size, log_pos, flags = _HEADER(ev, 0)
            rows_kind = ROWS.get(typ)
            if rows_kind is not None:
                pos = log_pos - size
                if pos >= stop_pos:
                    break
                self._pos = log_pos
                dec = by_id.get(from_bytes(ev[19:19 + tid_len], "little"), _MISSING)
                if dec is None:
                    continue  # not captured
                if not self._in_txn:
                    self._txn = (self._file, pos)
                    self._in_txn = True
                if pos < start_pos:
                    continue
                if dec is _MISSING:
                    raise ProtocolError(
                        f"rows event at {self._file}:{pos} for table id {from_bytes(ev[19:19 + tid_len], 'little')} "
                        "without its TABLE_MAP: a read must start at a transaction boundary (or pass "
                        "dump_from = the transaction's start)")
                if verify and crc:
                    verify_checksum(ev, f"{self._file}:{pos}")
                    if gtid_event is not None:
                        verify_checksum(gtid_event, f"{self._file} (GTID event before {pos})")
                        gtid_event = None
                if dec.__class__ is Unsupported:
                    item = self._unsupported(dec, pos)
                    yield (flush() if pending else []) + [item]
                    continue
                kind, version = rows_kind
                images = self._decode_rows(dec, ev, kind, version, tid_len, len(ev) - crc, pos)
                skip = start_row if pos == start_pos else 0
                b = builders.get(id(dec))
                if b is None:
                    b = builders[id(dec)] = _Builder(dec, seq)
                    seq += 1
                if kind == "update":
                    if len(images) == 2 and not skip:
                        b.befores.append(images[0])
                        b.afters.append(images[1])
                        nrows = 1
                    else:
                        befores, afters = images[skip * 2::2], images[skip * 2 + 1::2]
                        b.befores.extend(befores)
                        b.afters.extend(afters)
                        nrows = len(afters)
                else:
                    if skip:
                        images = images[skip:]
                    nrows = len(images)
                    if kind == "insert":
                        b.befores.extend([None] * nrows)
                        b.afters.extend(images)
                    else:
                        b.befores.extend(images)
                        b.afters.extend([None] * nrows)
                if nrows:
                    b.events.append((kind, self._file, pos, self._gtid, ts, nrows, skip))
                    pending += nrows
                    if pending >= self.batch_rows:
                        yield flush()
                continue

            if typ == TABLE_MAP:
                pos = log_pos - size
                if pos >= stop_pos:
                    break
                self._pos = log_pos
                key = ev[19 + tm_post:len(ev) - crc]
                dec = tm_cache.get(key, _MISSING)
                if dec is _MISSING:
                    if verify and crc:
                        verify_checksum(ev, f"{self._file}:{pos}")
                    dec = self._plan(ev, tid_len, tm_post, crc, charsets, conn.is_mariadb)
                    tm_cache[key] = dec
                elif dec is not None and verify and crc:
                    verify_checksum(ev, f"{self._file}:{pos}")
                by_id[from_bytes(ev[19:19 + tid_len], "little")] = dec
                continue

            if typ == MARIADB_GTID:
                pos = log_pos - size
                if pos >= stop_pos:
                    break
                self._pos = log_pos
                seq_no, domain = _GTID(ev, 19)
                self._gtid = f"{domain}-{server_id}-{seq_no}"
                gtid_event = ev
                if not self._in_txn:
                    self._txn = (self._file, pos)
                    self._in_txn = True
                continue

            if typ == XID:
                pos = log_pos - size
                if pos >= stop_pos:
                    break
                self._pos = log_pos
                self._in_txn = False
                continue

            if typ == C.ROTATE_EVENT:
                if verify and crc:
                    verify_checksum(ev, f"{self._file} (rotate)")
                position = from_bytes(ev[19:27], "little")
                next_file = bytes(ev[27:len(ev) - crc]).decode("utf-8")
                if log_pos and not flags & C.LOG_EVENT_ARTIFICIAL_F and log_pos - size >= stop_pos:
                    break
                self._file = next_file
                self._pos = position
                start_pos, stop_pos = self._bounds()
                if (not log_pos or flags & C.LOG_EVENT_ARTIFICIAL_F) and position >= stop_pos:
                    break  # a fake rotate says "you are at file:position"
                continue

            if typ == C.FORMAT_DESCRIPTION_EVENT:
                crc_alg, tid_len, tm_post = _parse_fde(ev)
                crc = 4 if crc_alg == C.CHECKSUM_CRC32 else 0
                if verify and crc:
                    verify_checksum(ev, f"{self._file} (format description)")
                if log_pos:
                    pos = log_pos - size
                    if pos >= stop_pos:
                        break
                    self._pos = log_pos
                continue

            if typ in (C.HEARTBEAT_LOG_EVENT, C.HEARTBEAT_LOG_EVENT_V2):
                if typ == C.HEARTBEAT_LOG_EVENT and log_pos:
                    self._pos = log_pos
                if self._pos >= stop_pos:
                    break
                if self._pos >= start_pos:
                    yield (flush() if pending else []) + [Heartbeat(self.position)]
                continue

            if not log_pos:
                continue  # an artificial event without a place in the binlog
            pos = log_pos - size
            if pos >= stop_pos:
                break
            self._pos = log_pos
            if typ == C.QUERY_EVENT:
                sc = self._on_query(ev, pos, ts, crc, start_pos)
                if sc is not None:
                    yield (flush() if pending else []) + [sc]
            elif typ == C.GTID_LOG_EVENT:
                if verify and crc:
                    verify_checksum(ev, f"{self._file}:{pos}")
                self._gtid = f"{uuid.UUID(bytes=bytes(ev[20:36]))}:{from_bytes(ev[36:44], 'little')}"
                self._begin(pos)
            elif typ == C.GTID_TAGGED_LOG_EVENT:
                self._gtid = None  # MySQL 8.4 tagged GTIDs: serialized differently; not decoded
                self._begin(pos)
            elif typ == C.XA_PREPARE_LOG_EVENT:
                self._in_txn = False
            elif typ in C.SKIPPED_EVENTS:
                pass
            elif typ in C.COMPRESSED_ROWS_EVENTS or typ in (C.QUERY_COMPRESSED_EVENT, C.TRANSACTION_PAYLOAD_EVENT):
                raise CompressedEventError(
                    f"compressed binlog event (type {typ}) at {self._file}:{pos}: the fast reader does not "
                    "decompress events (MariaDB log_bin_compress / MySQL binlog_transaction_compression). "
                    "Fix: turn binlog compression off on the server; the events must not be skipped, "
                    "the rows inside would be lost.")
            elif typ == C.PARTIAL_UPDATE_ROWS_EVENT:
                raise PartialImageError(
                    f"partial JSON update event at {self._file}:{pos}: rows lack their full after-image. "
                    "Fix: SET GLOBAL binlog_row_value_options = '' (and binlog_row_image = FULL).")
            elif typ == C.INCIDENT_EVENT:
                raise FastBinlogError(
                    f"INCIDENT event at {self._file}:{pos}: the server reports that changes are missing "
                    "from its binlog here; the captured tables must be snapshotted again.")
            elif flags & C.LOG_EVENT_IGNORABLE_F:
                pass
            else:
                raise UnknownEventError(
                    f"unknown binlog event type {typ} at {self._file}:{pos} (not marked ignorable): "
                    "refusing to skip it, it may carry rows.")

        if pending:
            yield flush()
        if self.stop is not None and not self.blocking and self.position < self.stop and not self._done:
            raise CdcError(
                f"the binlog ended at {self.position} before the requested stop {self.stop}: "
                "the stop offset must be one the server has already written (SHOW MASTER STATUS)."
            )

    # --- pieces of the loop ------------------------------------------------------------------

    def _begin(self, pos: int) -> None:
        if not self._in_txn:
            self._txn = (self._file, pos)
            self._in_txn = True

    def _plan(self, ev: bytes, tid_len: int, tm_post: int, crc: int, charsets: Mapping[int, str],
              is_mariadb: bool) -> TableDecoder | Unsupported | None:
        """The decoder for a TABLE_MAP not seen before; None for tables not captured."""
        db, table = table_map_names(ev, tm_post)
        tid = TableId(db, table)
        if self.tables is not None and tid not in self.tables:
            return None
        tm = parse_table_map(ev, tid_len, tm_post, crc, is_mariadb)
        dec = plan_table(tm, charsets)
        if isinstance(dec, Unsupported):
            self.unsupported[tid] = dec.reason
            log.info("fast binlog decoder falls back for %s", dec)
        return dec

    def _unsupported(self, dec: Unsupported, pos: int) -> UnsupportedRows:
        if self.on_unsupported == "raise":
            raise UnsupportedTableError(str(dec.table_id), dec.reason)
        return UnsupportedRows(dec.table_id, BinlogOffset(self._file, pos), self.transaction_start, dec.reason)

    def _decode_rows(self, dec: TableDecoder, ev: bytes, kind: str, version: int, tid_len: int,
                     end: int, pos: int) -> list[tuple]:
        p = 19 + tid_len + 2
        if version == 2:
            p += ev[p] | (ev[p + 1] << 8)  # extra data; the length counts its own two bytes
        ncols = ev[p]
        if ncols < 0xFB:
            p += 1
        else:
            ncols, p = read_lenenc(ev, p)
        nb = (ncols + 7) >> 3
        full = dec.full_bitmap
        if ncols != len(dec.columns) or ev[p:p + nb] != full or (
                kind == "update" and ev[p + nb:p + 2 * nb] != full):
            raise PartialImageError(
                f"rows event at {self._file}:{pos} for {dec.table_id} does not carry every column "
                f"({ncols} of {len(dec.columns)}, present bitmap {bytes(ev[p:p + nb]).hex()}): "
                "binlog_row_image must be FULL. Fix: SET GLOBAL binlog_row_image = FULL; rows "
                "logged before the change cannot be read completely.")
        p += nb * (2 if kind == "update" else 1)
        try:
            images, q = dec.decode_rows(ev, p, end)
        except (IndexError, ValueError, struct.error, KeyError, UnicodeDecodeError) as e:
            raise ProtocolError(
                f"cannot decode rows event at {self._file}:{pos} for {dec.table_id}: {type(e).__name__}: {e}"
            ) from None
        if q != end:
            raise ProtocolError(
                f"rows event at {self._file}:{pos} for {dec.table_id}: row data ends at {q}, event at {end}: "
                "the table map does not describe these rows")
        return images

    def _on_query(self, ev: bytes, pos: int, ts: int, crc: int, start_pos: int) -> SchemaChange | None:
        """Transaction control updates the transaction state; DDL becomes a SchemaChange."""
        db_len = ev[19 + 8]
        status_len = ev[19 + 11] | (ev[19 + 12] << 8)
        p = 19 + 13 + status_len
        database = bytes(ev[p:p + db_len]).decode("utf-8", "replace")
        sql = bytes(ev[p + db_len + 1:len(ev) - crc]).decode("utf-8", "backslashreplace")
        if re.match(r"^\s*BEGIN\b", sql, re.IGNORECASE):
            self._begin(pos)
            return None
        if not is_ddl(sql):
            if re.match(r"^\s*(COMMIT|ROLLBACK)\s*$", sql, re.IGNORECASE):
                self._in_txn = False
            return None
        self._begin(pos)
        self._in_txn = False  # DDL commits implicitly
        named = ddl_tables(sql, database)
        if self.tables is not None:
            captured = [t for t in named if t in self.tables]
            if named and not captured:
                return None
            if not named and database not in (self._databases or ()):
                return None
            named = captured or named
        if pos < start_pos:
            return None
        return SchemaChange(database=database, sql=sql, offset=BinlogOffset(self._file, pos),
                            table_id=named[0] if named else None, gtid=self._gtid, timestamp=int(ts))


class _Missing:
    pass


_MISSING: Any = _Missing()


def _parse_fde(ev: bytes) -> tuple[int, int, int]:
    """(checksum algorithm, table id length, TABLE_MAP post-header length) of an FDE.

    Layout after the header: binlog version (2), server version (50), create time (4),
    header length (1), one post-header length per event type, then (servers since 5.6.1)
    the checksum algorithm (1) and the event's checksum (4).
    """
    p = 19 + 2 + 50 + 4
    header_len = ev[p]
    if header_len != C.EVENT_HEADER_LEN:
        raise ProtocolError(f"format description with a {header_len}-byte event header: not binlog v4")
    lengths = ev[p + 1:len(ev) - 5]
    crc_alg = ev[len(ev) - 5]
    tm_post = lengths[C.TABLE_MAP_EVENT - 1] if len(lengths) >= C.TABLE_MAP_EVENT else 8
    tid_len = 4 if tm_post == 6 else 6
    return crc_alg, tid_len, tm_post


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
