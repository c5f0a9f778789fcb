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
  already received (rows, TABLE_MAP, GTID, XID) are walked with numpy (``_bulk_walk``)
  with no Python step per event: the packets are found by testing every byte offset at
  once and verifying the chain (``_packet_chain``), and the checksums of everything
  emitted are verified by one crc32 call (``packets.checksums_valid``);
* uncaptured tables are dropped by table id at the event header -- their rows are never
  parsed or copied, their checksums never computed;
* a TABLE_MAP identical to the last one for its id costs a byte comparison; a new one is
  looked up by its structure bytes, so a table's decoder is generated once;
* rows are not decoded in the walk: a batch keeps the raw events of each table structure
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
import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterable, Iterator, Mapping, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pymysql

from ...errors import CdcError
from ...events import Heartbeat, RowChange, SchemaChange
from ...model import TableId
from ...offsets import BinlogOffset, split_binlog_file
from ...schema.detect import BEGIN, END, OTHER, captured_ddl_tables, statement_kind
from ...source.config import SourceConfig
from ...source.server import server_version
from ...source.statements import StatementGuard
from ..gtid_watch import GtidGapError, GtidWatch
from ..reader import check_start_available, raise_dump_stopped
from . import constants as C
from .columnar import columnar_reason, decode_events, gather_slices, select
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
from .packets import CRC32_RESIDUE, checksums_valid, mariadb_uncompress, verify_checksum
from .tablemap import parse_table_map, read_lenenc, table_map_names

if TYPE_CHECKING:
    from typing_extensions import Buffer

log = logging.getLogger(__name__)

_ER_MASTER_FATAL_READING_BINLOG = 1236
_HEADER = struct.Struct("<IBIIIH").unpack_from
_GTID = struct.Struct("<QI").unpack_from
_SIZE_POS = struct.Struct("<II").unpack_from  # event_size, log_pos at offset 9 of the header
_U64 = struct.Struct("<Q").unpack_from  # a 6-byte table id plus the 2 flag bytes after it
_U32 = struct.Struct("<I").unpack_from
# packet length+sequence id, status byte, [timestamp], type, [server id], event size, log_pos,
# [flags], then 8 bytes: a rows event's / TABLE_MAP's 6-byte table id and 2 flag bytes
_FRAME = struct.Struct("<IB4xB4xII2xQ").unpack_from
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
    return pa.schema(
        META_FIELDS
        + [pa.field("before", decoder.image_type, nullable=True), pa.field("after", decoder.image_type, nullable=True)]
    )


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
            d["op"],
            d["binlog_file"],
            d["binlog_pos"],
            d["binlog_row"],
            d["gtid"],
            d["event_time"],
            d["before"],
            d["after"],
        ):
            out.append(
                RowChange(
                    op,
                    self.table_id,
                    before,
                    after,
                    BinlogOffset(f, pos, row=row),
                    gtid,
                    int(ts.timestamp()) if ts is not None else 0,
                )
            )
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
    """Rows events of one table structure waiting to become a record batch.

    The walk only keeps each event's bytes, its GTID and (rarely) a file change or a start
    row: everything else -- op, position, timestamp, where the row data starts, the
    full-image check -- is read back from the joined event bytes with numpy in ``build``,
    where the rows are decoded column by column (``columnar.decode_events``) or, for
    tables that cannot be, by the generated row decoder.
    """

    __slots__ = ("decoder", "first_seq", "columnar", "crc", "tid_len", "pieces", "n", "gtids", "files", "skips")

    def __init__(
        self, decoder: TableDecoder, first_seq: int, columnar: bool, crc: int, tid_len: int, file: str
    ) -> None:
        self.decoder = decoder
        self.first_seq = first_seq
        self.columnar = columnar
        self.crc = crc
        self.tid_len = tid_len
        # event bytes: one event (bytes, None) or several back to back (bytes, their lengths)
        self.pieces: list[tuple[bytes | np.ndarray, np.ndarray | None]] = []
        self.n = 0  # events so far
        # per event, in runs: a list of str / (domain, server id, seq) / None, or a uint64 (n, 3) array
        self.gtids: list[list[Any] | np.ndarray] = []
        self.files: list[tuple[int, str]] = [(0, file)]  # (first event index, file name)
        self.skips: dict[int, int] = {}  # event index -> rows to drop (the start row)

    def add(self, ev: bytes, gtid: Any, file: str, skip: int) -> None:
        if file != self.files[-1][1]:
            self.files.append((self.n, file))
        if skip:
            self.skips[self.n] = skip
        self.pieces.append((ev, None))
        run = self.gtids[-1] if self.gtids else None
        if not isinstance(run, list):
            run = []
            self.gtids.append(run)
        run.append(gtid)
        self.n += 1

    def add_many(self, blob: bytes | np.ndarray, lengths: np.ndarray, gtids: list[Any] | np.ndarray, file: str) -> None:
        if file != self.files[-1][1]:
            self.files.append((self.n, file))
        self.pieces.append((blob, lengths))
        self.gtids.append(gtids)
        self.n += len(lengths)

    def build(self) -> ChangeBatch:
        dec = self.decoder
        n_ev = self.n
        pieces = self.pieces
        if all(lens is None for _, lens in pieces):
            lengths = np.fromiter((len(b) for b, _ in pieces), dtype=np.int64, count=n_ev)
        else:
            lengths = np.concatenate(
                [np.array([len(b)], dtype=np.int64) if lens is None else lens for b, lens in pieces]
            )
        base = np.cumsum(lengths) - lengths
        blob = b"".join(cast("Iterable[Buffer]", (b for b, _ in pieces)))  # bytes and uint8 arrays
        B = np.frombuffer(blob, dtype=np.uint8)
        typ = B[base + 4]
        size = _gather_u32(B, base + 9)
        pos = _gather_u32(B, base + 13) - size
        ts = _gather_u32(B, base)
        kind = _KIND_OF_TYPE[typ]  # 0 insert, 1 update, 2 delete
        if (kind < 0).any():
            raise ProtocolError(f"not a rows event in the batch of {dec.table_id}")
        starts = self._data_starts(B, base, typ, kind, pos)
        ends = base + lengths - self.crc
        if self.columnar:
            decoded = decode_events(dec, blob, starts, ends)
            columns, ev_of, image = decoded.columns, decoded.event, decoded.image
        else:
            columns, ev_of, image = self._decode_rows(blob, starts, ends, pos)
        skips = np.zeros(n_ev, dtype=np.int64)
        for i, k in self.skips.items():
            skips[i] = k
        update = kind == 1
        n_images = np.bincount(ev_of, minlength=n_ev)
        if (update & (n_images % 2 == 1)).any():
            raise ProtocolError(f"an UPDATE rows event of {dec.table_id} has an odd number of row images")
        img_update = update[ev_of]
        row_in_event = np.where(img_update, image // 2, image)
        is_after = np.where(img_update, image % 2 == 1, kind[ev_of] == 0)
        keep = row_in_event >= skips[ev_of]
        per_event = np.maximum(np.where(update, n_images // 2, n_images) - skips, 0)
        row_base = np.cumsum(per_event) - per_event
        total = int(per_event.sum())
        row_id = row_base[ev_of] + row_in_event - skips[ev_of]
        before = np.full(total, -1, dtype=np.int64)
        after = np.full(total, -1, dtype=np.int64)
        img = np.arange(len(ev_of), dtype=np.int64)
        sel = keep & is_after
        after[row_id[sel]] = img[sel]
        sel = keep & ~is_after
        before[row_id[sel]] = img[sel]
        fields = list(dec.image_type)
        # per-row metadata: every event's values repeated for its rows
        ev_row = np.repeat(np.arange(n_ev, dtype=np.int64), per_event)
        take = pa.array(ev_row)
        rows = _row_numbers(per_event, skips)
        file_idx = np.zeros(n_ev, dtype=np.int64)
        for k, (first, _) in enumerate(self.files[1:], 1):
            file_idx[first:] = k
        tid = dec.table_id
        columns_out = [
            pa.repeat(pa.scalar(tid.database), total),
            pa.repeat(pa.scalar(tid.table), total),
            _ops().take(pa.array(kind[ev_row])),
            pa.array([f for _, f in self.files], pa.string()).take(pa.array(file_idx[ev_row])),
            pa.array(pos[ev_row]),
            pa.array(rows.astype(np.int32)),
            _gtid_array(self.gtids).take(take),
            pa.array(ts[ev_row] * 1_000_000, pa.timestamp("us", tz="UTC")),
            select(columns, before, fields),
            select(columns, after, fields),
        ]
        return ChangeBatch(tid, dec, pa.RecordBatch.from_arrays(columns_out, schema=batch_schema(dec)))

    def _data_starts(
        self, B: np.ndarray, base: np.ndarray, typ: np.ndarray, kind: np.ndarray, pos: np.ndarray
    ) -> np.ndarray:
        """Where each event's row images start; checks the column count and the full-image bitmaps."""
        dec = self.decoder
        p = base + 19 + self.tid_len + 2
        v2 = typ >= C.WRITE_ROWS_EVENT_V2
        if v2.any():
            p = p + np.where(v2, _gather_u16(B, p), 0)  # extra data; its length counts its own 2 bytes
        ncols = len(dec.columns)
        if ncols < 0xFB:
            ok = B[p] == ncols
            p = p + 1
        else:
            ok = (B[p] == 0xFC) & (_gather_u16(B, p + 1) == ncols)
            p = p + 3
        nb = (ncols + 7) // 8
        full = np.frombuffer(dec.full_bitmap, dtype=np.uint8)
        for i in range(nb):
            ok &= B[p + i] == full[i]
        upd = kind == 1
        if upd.any():
            q = p + nb
            for i in range(nb):
                ok &= ~upd | (B[q + i] == full[i])
        if not ok.all():
            bad = int(np.argmin(ok))
            raise PartialImageError(
                f"rows event at {self._file_of(bad)}:{int(pos[bad])} for {dec.table_id} does not carry every "
                "column (or not the table map's column count): binlog_row_image must be FULL. Fix: SET GLOBAL "
                "binlog_row_image = FULL; rows logged before the change cannot be read completely."
            )
        return p + nb * np.where(upd, 2, 1)

    def _file_of(self, event_index: int) -> str:
        name = self.files[0][1]
        for first, f in self.files:
            if first <= event_index:
                name = f
        return name

    def _decode_rows(
        self, blob: bytes, starts: np.ndarray, ends: np.ndarray, pos: np.ndarray
    ) -> tuple[list[pa.Array], np.ndarray, np.ndarray]:
        """The row decoder over every event: (columns, event index, image index) of every image."""
        dec = self.decoder
        images: list[tuple] = []
        ev_of: list[int] = []
        image: list[int] = []
        decode = dec.decode_rows
        for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
            try:
                got, q = decode(blob, s, e)
            except (IndexError, ValueError, struct.error, KeyError, UnicodeDecodeError) as err:
                raise ProtocolError(
                    f"cannot decode rows event at {self._file_of(i)}:{int(pos[i])} for {dec.table_id}: "
                    f"{type(err).__name__}: {err}"
                ) from None
            if q != e:
                raise ProtocolError(
                    f"rows event at {self._file_of(i)}:{int(pos[i])} for {dec.table_id}: row data ends at "
                    f"{q - s}, the event's at {e - s}: the table map does not describe these rows"
                )
            images.extend(got)
            ev_of.extend([i] * len(got))
            image.extend(range(len(got)))
        return dec.image_arrays(images), np.array(ev_of, dtype=np.int64), np.array(image, dtype=np.int64)


_OP_NAMES = ("insert", "update", "delete")
_ops_array: pa.Array | None = None


def _ops() -> pa.Array:
    """The op names as an Arrow array, built on first use: ``pa.array`` at import time makes
    pyarrow import pandas (0.18 s measured, in every process that imports the decoder: each of
    Spark's Python workers), which nothing here needs."""
    global _ops_array
    if _ops_array is None:
        _ops_array = pa.array(list(_OP_NAMES), pa.string())
    return _ops_array


_ROWS_COMPRESSED = {**{t: False for t in C.ROWS_EVENTS}, **{t: True for t in C.COMPRESSED_ROWS_EVENTS}}


def _uncompress_rows_event(ev: bytes, crc: int, tid_len: int) -> bytes:
    """A MariaDB compressed rows event as the plain rows event it stands for.

    Only the row images are compressed; the post-header, column count and bitmaps are
    not. The result keeps the original header's size and position (positions stay the
    binlog's) but the plain type, and carries a fresh CRC32 of its own bytes.
    """
    typ = ev[4]
    plain = C.COMPRESSED_ROWS_EVENTS[typ]
    p = 19 + tid_len + 2
    if C.ROWS_EVENTS[plain][1] == 2:
        p += ev[p] | (ev[p + 1] << 8)
    ncols, p = read_lenenc(ev, p)
    p += ((ncols + 7) // 8) * (2 if C.ROWS_EVENTS[plain][0] == "update" else 1)
    body = bytes(ev[:p]) + mariadb_uncompress(memoryview(ev)[p : len(ev) - crc])
    out = body[:4] + bytes([plain]) + body[5:]
    return out + struct.pack("<I", zlib.crc32(out)) if crc else out


def _uncompress_query_event(ev: bytes, crc: int) -> bytes:
    """A MariaDB QUERY_COMPRESSED event as a plain QUERY event (the statement inflated)."""
    db_len = ev[19 + 8]
    status_len = ev[19 + 11] | (ev[19 + 12] << 8)
    p = 19 + 13 + status_len + db_len + 1
    body = bytes(ev[:p]) + mariadb_uncompress(memoryview(ev)[p : len(ev) - crc])
    out = body[:4] + bytes([C.QUERY_EVENT]) + body[5:]
    return out + struct.pack("<I", zlib.crc32(out)) if crc else out


_BULK_TYPE = np.zeros(256, dtype=bool)
for _t in (*C.ROWS_EVENTS, C.TABLE_MAP_EVENT, C.MARIADB_GTID_EVENT, C.XID_EVENT):
    _BULK_TYPE[_t] = True
_KIND_OF_TYPE = np.full(256, -1, dtype=np.int8)
for _t, (_k, _v) in C.ROWS_EVENTS.items():
    _KIND_OF_TYPE[_t] = {"insert": 0, "update": 1, "delete": 2}[_k]


def _packet_chain(B: np.ndarray, start: int, rend: int) -> np.ndarray:
    """Buffer offsets of the whole packets from ``start`` on that hold bulk-walkable events.

    Following the packet lengths one by one is an inherently serial loop, and in Python it
    was the largest single cost of the decoder (~0.5 us an event). Instead every byte offset
    is tested at once for what such a packet looks like (status byte 0, an event type the
    bulk walk takes, event size + 1 == packet length), and the chain is then verified: the
    candidates, in order, must each end exactly where the next begins. The first candidate
    is ``start`` itself, so everything up to the first break is the true chain; a false
    candidate inside an event's data breaks the chain before it (the true event before it
    ends elsewhere), as does an event the test does not match. The stretch is then cut
    there, exactly where the serial walk would have to take over anyway.
    """
    W = B[start:rend]
    n = len(W) - 31  # an event header (and the table id after it) is readable
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    # byte compares only (a table lookup over every byte costs four times as much): the low
    # byte of the packet length is that of event size + 1, the status byte and the event
    # size's top byte are 0 -- all exact for every real packet, and rare elsewhere
    mask = W[14 : 14 + n] + np.uint8(1) == W[:n]
    mask &= W[4 : 4 + n] == 0
    mask &= W[17 : 17 + n] == 0
    cand = np.flatnonzero(mask)
    cand = cand[_BULK_TYPE[W[cand + 9]]]
    if not len(cand) or cand[0] != 0:
        return np.zeros(0, dtype=np.int64)
    plen = _gather_u32(W, cand) & 0xFFFFFF  # packet length (the 4th byte is the sequence id)
    same = _gather_u32(W, cand + 14) + 1 == plen
    cand, plen = cand[same], plen[same]
    if not len(cand) or cand[0] != 0:
        return np.zeros(0, dtype=np.int64)
    nxt = cand + 4 + plen
    breaks = np.flatnonzero(nxt[:-1] != cand[1:])
    k = int(breaks[0]) + 1 if len(breaks) else len(cand)
    if nxt[k - 1] > len(W):  # the last packet is not complete in the buffer
        k -= 1
    return cand[:k] + start


def _gather_u32(B: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The little-endian uint32 at each byte offset ``p`` of ``B``, as int64: one gather
    through a view whose element i is the 4 bytes at byte i (unaligned, stride 1)."""
    if len(B) < 4:
        return np.zeros(len(p), dtype=np.int64)
    return np.ndarray((len(B) - 3,), dtype="<u4", buffer=B, strides=(1,))[p].astype(np.int64)


def _gather_u16(B: np.ndarray, p: np.ndarray) -> np.ndarray:
    if len(B) < 2:
        return np.zeros(len(p), dtype=np.int64)
    return np.ndarray((len(B) - 1,), dtype="<u2", buffer=B, strides=(1,))[p].astype(np.int64)


def _gather_events(B: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The events at ``starts`` (with ``sizes``) copied back to back out of ``B`` in one gather,
    and where each begins in the copy."""
    return gather_slices(B, starts, sizes), np.cumsum(sizes) - sizes


def _gtid_array(runs: list[list[Any] | np.ndarray]) -> pa.Array:
    """GTIDs of the events as strings (see ``_Builder.gtids``); MariaDB's (domain, server, seq)
    triples formatted in bulk, anything else (MySQL's, none) one by one."""
    arrays: list[np.ndarray] = []
    for run in runs:
        if isinstance(run, np.ndarray):
            arrays.append(run)
        elif run and all(type(g) is tuple for g in run):
            arrays.append(np.array(run, dtype=np.uint64).reshape(-1, 3))
        else:
            values = [g for r in runs for g in (map(tuple, r.tolist()) if isinstance(r, np.ndarray) else r)]
            return pa.array(
                [g if g is None or isinstance(g, str) else f"{g[0]}-{g[1]}-{g[2]}" for g in values], pa.string()
            )
    if not arrays:
        return pa.array([], pa.string())
    parts = np.concatenate(arrays)
    return pc.binary_join_element_wise(*(pa.array(parts[:, k]).cast(pa.string()) for k in range(3)), "-")


def _row_numbers(counts: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Row index inside its event of every row: first[i], first[i] + 1, ... for counts[i] rows."""
    c = np.asarray(counts, dtype=np.int64)
    starts = np.cumsum(c) - c
    return (
        np.arange(int(c.sum()), dtype=np.int64) - np.repeat(starts, c) + np.repeat(np.asarray(first, dtype=np.int64), c)
    )


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
    with numpy (``_bulk_walk``) instead of one by one; 0 turns that off. ``server_id`` must
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
        self.bulk_events = 0  # events walked by _bulk_walk (observability, tests)
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
                f"endpoint now reaches {now} (a failover): the range is not read by file and position there. The "
                "stream's driver places it on the new server by GTID when the query runs again."
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
        builders: dict[int, _Builder] = {}  # id(decoder) -> builder
        pending = 0
        seq = 0
        gtid_event: bytes | None = None  # verified lazily: only when rows use its GTID
        gtid_parts: tuple[int, int, int] | None = None
        charsets = self._charsets
        watch = self.gtid_watch
        ROWS = _ROWS_COMPRESSED  # rows event type -> True if MariaDB compressed it
        TABLE_MAP = C.TABLE_MAP_EVENT
        MARIADB_GTID = C.MARIADB_GTID_EVENT
        XID = C.XID_EVENT
        MAXP = C.MAX_PACKET_LEN
        from_bytes = int.from_bytes
        sizepos = _SIZE_POS
        u64 = _U64
        frame = _FRAME
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
                    res = None
                    if rend - o >= bulk_bytes:
                        res = self._bulk_walk(
                            rbuf,
                            o,
                            rend,
                            rseq,
                            view,
                            start_pos,
                            stop_pos,
                            crc if verify else 0,
                            crc,
                            by_id,
                            last_map,
                            builders,
                            seq,
                            in_txn,
                            txn,
                            gtid_parts,
                            gtid_event,
                            max(self.batch_rows - pending, 1),
                        )
                    if res is None:  # not worth it here: walk one by one for a while
                        bulk_after = min(rend, o + max(bulk_bytes, (rend - o) // 8))
                    else:
                        (rstart, rseq, cur_pos, in_txn, txn, gtid_parts, gtid_event, seq, added) = res
                        pending += added
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
                    dec = by_id.get(tidq & tid_mask, _MISSING)
                    if dec is None:
                        continue  # not captured
                    if not in_txn:
                        txn = (self._file, pos)
                        in_txn = True
                    if pos < start_pos:
                        continue
                    if dec is _MISSING:
                        raise ProtocolError(
                            f"rows event at {self._file}:{pos} for table id "
                            f"{from_bytes(buf[o + 19 : o + 19 + tid_len], 'little')} without its TABLE_MAP: a read "
                            "must start at a transaction boundary (or pass dump_from = the transaction's start)"
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
                        ev = _uncompress_rows_event(ev, crc, tid_len)
                    if dec.__class__ is Unsupported:
                        self._pos, self._in_txn, self._txn = cur_pos, in_txn, txn
                        item = self._unsupported(dec, pos)
                        yield (flush() if pending else []) + [item]
                        continue
                    b = builders.get(id(dec))
                    if b is None:
                        b = builders[id(dec)] = _Builder(
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
                        dec = tm_cache.get(key, _MISSING)
                        if dec is _MISSING:
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
                    seq_no, domain = _GTID(buf, o + 19)
                    gtid_parts = (domain, _U32(buf, o + 5)[0], seq_no)
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
                    crc_alg, new_tid_len, tm_post = _parse_fde(ev)
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
                "the stop offset must be one the server has already written (SHOW MASTER STATUS)."
            )

    def _bulk_walk(
        self,
        rbuf: bytearray,
        start: int,
        rend: int,
        rseq: int,
        view: memoryview,
        start_pos: int,
        stop_pos: int,
        verify_crc: int,
        crc: int,
        by_id: dict,
        last_map: dict,
        builders: dict,
        seq: int,
        in_txn: bool,
        txn: tuple | None,
        gtid_parts: Any,
        gtid_event: Any,
        limit: int,
    ) -> tuple | None:
        """Walk the plain events already in the receive buffer with numpy; None if not worth it.

        No Python code runs per event: the packets are found by ``_packet_chain``; types,
        sizes, positions, table ids are gathered with numpy, and the stretch is cut before
        the first event that needs the one-by-one walk -- any other type, a TABLE_MAP that
        differs from the last one for its id, a rows event of a table without a decoder (or
        unsupported), the stop position, a framing surprise, the ``limit``-th captured rows
        event. Within the stretch the id -> decoder map is therefore constant, so captured
        rows events are found by table id, copied out in one gather per table and handed to
        its builder with their transactions' GTIDs. Everything emitted (those rows events,
        their GTIDs and TABLE_MAPs) is checked by one crc32 call (``checksums_valid``).
        Returns the walk's new state (see the caller).
        """
        B = np.frombuffer(rbuf, dtype=np.uint8)
        O = _packet_chain(B, start, rend)  # noqa: E741 - the bulk walk names its arrays B(ytes), O(ffsets)
        n = len(O)
        if n < self.bulk_min_events:
            return None
        plen = _gather_u32(B, O) & 0xFFFFFF
        e = O + 5
        typ = B[e + 4]
        size = _gather_u32(B, e + 9)
        pos = _gather_u32(B, e + 13) - size
        tid = _gather_u32(B, e + 19) | (_gather_u16(B, e + 23) << 32)
        ok = (
            (B[O + 3] == ((rseq + np.arange(n)) & 0xFF))
            & (B[O + 4] == 0)
            & (size + 1 == plen)
            & (plen < C.MAX_PACKET_LEN)
            & _BULK_TYPE[typ]
            & (pos < stop_pos)
            # before the start and at a start row the plain walk skips what it must
            & ((pos > start_pos) if self.start.row else (pos >= start_pos))
        )
        k = n if ok.all() else int(np.argmin(ok))
        # table maps must repeat the last map of their id byte for byte
        is_tm = typ[:k] == C.TABLE_MAP_EVENT
        if is_tm.any():
            tm_idx = np.nonzero(is_tm)[0]
            for t in np.unique(tid[tm_idx]).tolist():
                idx = tm_idx[tid[tm_idx] == t]
                ref = last_map.get(t)
                if ref is None:
                    k = min(k, int(idx[0]))
                    continue
                body = np.frombuffer(ref[0], dtype=np.uint8)
                same = size[idx] - 19 - crc == len(body)
                if same.any() and len(body):
                    cand = idx[same]  # their bodies copied out back to back, compared row-wise
                    bodies = gather_slices(B, e[cand] + 19, np.full(len(cand), len(body), dtype=np.int64))
                    eq = (bodies.reshape(len(cand), len(body)) == body).all(axis=1)
                    same[np.nonzero(same)[0][~eq]] = False
                if not same.all():
                    k = min(k, int(idx[np.argmin(same)]))
        # rows events: their table must have a decoder (or be known as not captured)
        is_rows = _KIND_OF_TYPE[typ[:k]] >= 0
        groups: dict[int, tuple[TableDecoder, list[np.ndarray]]] = {}
        if is_rows.any():
            rows_idx = np.nonzero(is_rows)[0]
            for t in np.unique(tid[rows_idx]).tolist():
                dec = by_id.get(t, _MISSING)
                if dec is None:
                    continue
                idx = rows_idx[tid[rows_idx] == t]
                if dec is _MISSING or dec.__class__ is Unsupported:
                    k = min(k, int(idx[0]))
                    continue
                groups.setdefault(id(dec), (dec, []))[1].append(idx)
        if groups:  # at most ``limit`` captured rows events: the flush comes right after them
            captured = np.sort(np.concatenate([i for _, parts in groups.values() for i in parts]))
            captured = captured[captured < k]
            if len(captured) > limit:
                k = int(captured[limit - 1]) + 1
        if k < self.bulk_min_events:
            return None
        typ, size, pos, e = typ[:k], size[:k], pos[:k], e[:k]
        is_gtid = typ == C.MARIADB_GTID_EVENT
        if self.gtid_watch is not None and is_gtid.any():
            gi = np.flatnonzero(is_gtid)
            ge = e[gi]
            seqs = _gather_u32(B, ge + 19).astype(np.uint64) | (
                _gather_u32(B, ge + 23).astype(np.uint64) << np.uint64(32)
            )
            try:
                self.gtid_watch.seen_many(_gather_u32(B, ge + 27), seqs, pos[gi], self._file)
            except GtidGapError as gap:  # a damaged event must not pass for a gap
                if verify_crc:
                    j = int(np.searchsorted(pos, gap.offset.position))
                    verify_checksum(view[int(e[j]) : int(e[j]) + int(size[j])], f"{self._file}:{int(pos[j])}")
                raise
        last_gtid = np.maximum.accumulate(np.where(is_gtid, np.arange(k), -1))
        file = self._file
        crc32 = zlib.crc32
        added = 0
        captured_any = np.zeros(k, dtype=bool)
        gtid_used = np.zeros(k, dtype=bool)
        emitted: list[tuple[np.ndarray, np.ndarray]] = []  # (events back to back, their offsets)
        carried_used = False
        for dec, parts in groups.values():
            idx = np.sort(np.concatenate(parts))
            idx = idx[idx < k]
            if not len(idx):
                continue
            captured_any[idx] = True
            # copy the group's events out of the receive buffer in one gather
            sz = size[idx]
            events, offsets = _gather_events(B, e[idx], sz)
            emitted.append((events, offsets))
            g = last_gtid[idx]
            ge = e[np.maximum(g, 0)]
            parts3 = np.empty((len(idx), 3), dtype=np.uint64)  # (domain, server, seq)
            parts3[:, 0] = _gather_u32(B, ge + 27)
            parts3[:, 1] = _gather_u32(B, ge + 5)
            parts3[:, 2] = _gather_u32(B, ge + 19).astype(np.uint64) | (
                _gather_u32(B, ge + 23).astype(np.uint64) << np.uint64(32)
            )
            gtids: np.ndarray | list[Any] = parts3
            if (g < 0).any():  # before the stretch's first GTID: the transaction's, carried in
                carried = gtid_parts if gtid_parts is not None else self._gtid
                if type(carried) is tuple:
                    parts3[g < 0] = carried
                else:
                    gtids = list(map(tuple, parts3.tolist()))
                    for j in np.nonzero(g < 0)[0].tolist():
                        gtids[j] = carried
                carried_used = True
            gtid_used[g[g >= 0]] = True
            b = builders.get(id(dec))
            if b is None:
                b = builders[id(dec)] = _Builder(dec, seq, self.columnar and dec.columnar_reason is None, crc, 6, file)
                seq += 1
            b.add_many(events, sz, gtids, file)  # any bytes-like: the builder joins them (build)
            added += len(idx)
        if verify_crc:
            if carried_used and gtid_event is not None:
                if crc32(gtid_event) != CRC32_RESIDUE:
                    verify_checksum(gtid_event, f"{file} (GTID event before {int(pos[0])})")
                gtid_event = None
            # what is emitted: the captured rows (copied above), the GTIDs they carry, their
            # tables' TABLE_MAPs; in any order, as every event is checked on its own
            tm_idx = np.nonzero(typ == C.TABLE_MAP_EVENT)[0]
            used = [t for t in np.unique(tid[tm_idx]).tolist() if last_map[t][1] is not None]
            others = np.flatnonzero(gtid_used)
            if len(used):
                others = np.concatenate((others, tm_idx[np.isin(tid[tm_idx], used)]))
            if len(others):
                emitted.append(_gather_events(B, e[others], size[others]))
            if emitted:
                lengths = [len(ev) for ev, _ in emitted]
                bases = np.cumsum([0] + lengths[:-1])
                all_events = np.concatenate([ev for ev, _ in emitted])
                starts = np.concatenate([off + base for (_, off), base in zip(emitted, bases)])
                if not checksums_valid(all_events, starts):
                    checked = captured_any.copy()
                    checked[others] = True
                    for i in np.flatnonzero(checked).tolist():  # name the first bad event
                        at, ln = int(e[i]), int(size[i])
                        verify_checksum(view[at : at + ln], f"{file}:{int(pos[i])}")
        # the transaction state after the stretch, as the one-by-one walk would leave it: a GTID
        # or a captured rows event begins a transaction unless one is open, an XID ends it
        g = int(last_gtid[k - 1])
        begins = is_gtid | captured_any
        boundary = np.nonzero(begins | (typ == C.XID_EVENT))[0]
        if len(boundary):
            is_begin = begins[boundary]
            opened_before = np.concatenate(([in_txn], is_begin[:-1]))
            starts = boundary[is_begin & ~opened_before]
            if len(starts):
                txn = (file, int(pos[starts[-1]]))
            in_txn = bool(is_begin[-1])
        if g >= 0:  # the last GTID is the current one
            ga = int(e[g])
            seq_no, domain = _GTID(rbuf, ga + 19)
            gtid_parts = (domain, _U32(rbuf, ga + 5)[0], seq_no)
            gtid_event = None if (gtid_used[g] or not verify_crc) else bytes(view[ga : ga + int(size[g])])
        last = k - 1
        self.bulk_events += k
        cur_pos = int(pos[last] + size[last])
        new_start = int(O[last] + 4 + plen[last])
        del B
        return new_start, (rseq + k) & 0xFF, cur_pos, in_txn, txn, gtid_parts, gtid_event, seq, added

    def _other_event(self, ev: bytes, crc: int, start_pos: int, stop_pos: int) -> tuple[Item | None, bool]:
        """The rare events: (item to yield or None, True if the read reached ``stop``).

        Works on ``self`` (position, transaction state), which the loop syncs around it.
        """
        ts, typ, server_id, size, log_pos, flags = _HEADER(ev, 0)
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
            ev = _uncompress_query_event(ev, crc)
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
                "from its binlog here; the captured tables must be snapshotted again."
            )
        elif not flags & C.LOG_EVENT_IGNORABLE_F:
            raise UnknownEventError(
                f"unknown binlog event type {typ} at {self._file}:{pos} (not marked ignorable): "
                "refusing to skip it, it may carry rows."
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
            size, end = _SIZE_POS(ev, 9)
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
    lengths = ev[p + 1 : len(ev) - 5]
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
