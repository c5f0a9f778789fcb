"""The numpy walk over a stretch of plain events already in the receive buffer (``bulk_walk``).

The event walk (``reader.FastBinlogReader._loop``) hands a stretch over when enough bytes are
buffered; no Python code runs per event here. Its state travels in a ``BulkWalk`` (a ``__slots__``
object the loop fills from its locals around each call, once per ~1 MiB), not in arguments and a
returned tuple.
"""

from __future__ import annotations

import zlib
from typing import Any, cast

import numpy as np

from ..gtid_watch import GtidGapError, GtidWatch
from . import constants as C
from .batches import Builder
from .columnar import gather_slices
from .decoder import TableDecoder, Unsupported
from .frames import (
    BULK_TYPE,
    GTID_BODY,
    KIND_OF_TYPE,
    MISSING,
    U32,
    gather_events,
    gather_u16,
    gather_u32,
    packet_chain,
)
from .packets import CRC32_RESIDUE, checksums_valid, verify_checksum


class BulkWalk:
    """What the numpy walk (``bulk_walk``) reads and advances, handed over by the event walk
    (``FastBinlogReader._loop``). The loop keeps its hot state in locals and writes it here only
    around a call, which comes once per stretch of ~1 MiB: the object costs nothing per event."""

    __slots__ = (
        # fixed for the read: the loop's tables (shared, never copied) and the reader's settings
        "by_id",
        "last_map",
        "builders",
        "min_events",
        "start_row",
        "gtid_watch",
        "columnar",
        # set by the loop before each call: the stretch buf[start:end] of the receive buffer, the
        # next packet's sequence id, the current file's bounds and checksum length, the GTID state
        "buf",
        "view",
        "start",
        "end",
        "packet_seq",
        "start_pos",
        "stop_pos",
        "crc",
        "verify_crc",
        "file",
        "gtid",
        "seq",
        "in_txn",
        "txn",
        "gtid_parts",
        "gtid_event",
        # set by the walk: where the event after the stretch starts (with start, packet_seq, the
        # GTID and transaction state above) and how many captured rows events it added
        "position",
        "added",
    )

    def __init__(
        self,
        by_id: dict,
        last_map: dict,
        builders: dict,
        min_events: int,
        start_row: int,
        gtid_watch: GtidWatch | None,
        columnar: bool,
    ) -> None:
        self.by_id, self.last_map, self.builders = by_id, last_map, builders
        self.min_events, self.start_row, self.gtid_watch, self.columnar = min_events, start_row, gtid_watch, columnar
        self.buf: bytearray | None = None
        self.view: memoryview | None = None
        self.start = self.end = self.packet_seq = self.start_pos = self.stop_pos = self.crc = self.verify_crc = 0
        self.file = ""
        self.gtid: str | None = None
        self.seq, self.in_txn = 0, False
        self.txn: tuple[str, int] | None = None
        self.gtid_parts: Any = None
        self.gtid_event: Any = None
        self.position = self.added = 0


def bulk_walk(w: BulkWalk, limit: int) -> int | None:
    """Walk the plain events already in the receive buffer with numpy; None if not worth it.

    No Python code runs per event: the packets are found by ``packet_chain``; types,
    sizes, positions, table ids are gathered with numpy, and the stretch is cut before
    the first event that needs the one-by-one walk -- any other type, a TABLE_MAP that
    differs from the last one for its id, a rows event of a table without a decoder (or
    unsupported), the stop position, a framing surprise, the ``limit``-th captured rows
    event. Within the stretch the id -> decoder map is therefore constant, so captured
    rows events are found by table id, copied out in one gather per table and handed to
    its builder with their transactions' GTIDs. Everything emitted (those rows events,
    their GTIDs and TABLE_MAPs) is checked by one crc32 call (``checksums_valid``).
    Returns how many events it walked, with the walk's new state in ``w``.

    Kept whole, over the ~120-line limit for functions (issue 38): its arrays (``B``, ``O``, the
    gathered types, sizes, positions, ids) flow from one numpy step to the next, and a cut would
    hand a dozen of them between helpers. It is the decoder's fast path: ``bench/decoder_throughput.py``
    measures it with the reader's loop (332,211 changes/s, 8.21x ``mariadb-binlog``, 2026-11-29,
    docs/performance.md); a split must keep that figure (rerun both side by side).
    """
    rbuf, view = cast(bytearray, w.buf), cast(memoryview, w.view)
    start, rend, rseq = w.start, w.end, w.packet_seq
    start_pos, stop_pos, verify_crc, crc = w.start_pos, w.stop_pos, w.verify_crc, w.crc
    by_id, last_map, builders = w.by_id, w.last_map, w.builders
    seq, in_txn, txn, gtid_parts, gtid_event = w.seq, w.in_txn, w.txn, w.gtid_parts, w.gtid_event
    B = np.frombuffer(rbuf, dtype=np.uint8)
    O = packet_chain(B, start, rend)  # noqa: E741 - the bulk walk names its arrays B(ytes), O(ffsets)
    n = len(O)
    if n < w.min_events:
        return None
    plen = gather_u32(B, O) & 0xFFFFFF
    e = O + 5
    typ = B[e + 4]
    size = gather_u32(B, e + 9)
    pos = gather_u32(B, e + 13) - size
    tid = gather_u32(B, e + 19) | (gather_u16(B, e + 23) << 32)
    ok = (
        (B[O + 3] == ((rseq + np.arange(n)) & 0xFF))
        & (B[O + 4] == 0)
        & (size + 1 == plen)
        & (plen < C.MAX_PACKET_LEN)
        & BULK_TYPE[typ]
        & (pos < stop_pos)
        # before the start and at a start row the plain walk skips what it must
        & ((pos > start_pos) if w.start_row else (pos >= start_pos))
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
    is_rows = KIND_OF_TYPE[typ[:k]] >= 0
    groups: dict[int, tuple[TableDecoder, list[np.ndarray]]] = {}
    if is_rows.any():
        rows_idx = np.nonzero(is_rows)[0]
        for t in np.unique(tid[rows_idx]).tolist():
            dec = by_id.get(t, MISSING)
            if dec is None:
                continue
            idx = rows_idx[tid[rows_idx] == t]
            if dec is MISSING or dec.__class__ is Unsupported:
                k = min(k, int(idx[0]))
                continue
            groups.setdefault(id(dec), (dec, []))[1].append(idx)
    if groups:  # at most ``limit`` captured rows events: the flush comes right after them
        captured = np.sort(np.concatenate([i for _, parts in groups.values() for i in parts]))
        captured = captured[captured < k]
        if len(captured) > limit:
            k = int(captured[limit - 1]) + 1
    if k < w.min_events:
        return None
    typ, size, pos, e = typ[:k], size[:k], pos[:k], e[:k]
    is_gtid = typ == C.MARIADB_GTID_EVENT
    if w.gtid_watch is not None and is_gtid.any():
        gi = np.flatnonzero(is_gtid)
        ge = e[gi]
        seqs = gather_u32(B, ge + 19).astype(np.uint64) | (gather_u32(B, ge + 23).astype(np.uint64) << np.uint64(32))
        try:
            w.gtid_watch.seen_many(gather_u32(B, ge + 27), seqs, pos[gi], w.file)
        except GtidGapError as gap:  # a damaged event must not pass for a gap
            if verify_crc:
                j = int(np.searchsorted(pos, gap.offset.position))
                verify_checksum(view[int(e[j]) : int(e[j]) + int(size[j])], f"{w.file}:{int(pos[j])}")
            raise
    last_gtid = np.maximum.accumulate(np.where(is_gtid, np.arange(k), -1))
    file = w.file
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
        events, offsets = gather_events(B, e[idx], sz)
        emitted.append((events, offsets))
        g = last_gtid[idx]
        ge = e[np.maximum(g, 0)]
        parts3 = np.empty((len(idx), 3), dtype=np.uint64)  # (domain, server, seq)
        parts3[:, 0] = gather_u32(B, ge + 27)
        parts3[:, 1] = gather_u32(B, ge + 5)
        parts3[:, 2] = gather_u32(B, ge + 19).astype(np.uint64) | (
            gather_u32(B, ge + 23).astype(np.uint64) << np.uint64(32)
        )
        gtids: np.ndarray | list[Any] = parts3
        if (g < 0).any():  # before the stretch's first GTID: the transaction's, carried in
            carried = gtid_parts if gtid_parts is not None else w.gtid
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
            b = builders[id(dec)] = Builder(dec, seq, w.columnar and dec.columnar_reason is None, crc, 6, file)
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
            emitted.append(gather_events(B, e[others], size[others]))
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
        seq_no, domain = GTID_BODY(rbuf, ga + 19)
        gtid_parts = (domain, U32(rbuf, ga + 5)[0], seq_no)
        gtid_event = None if (gtid_used[g] or not verify_crc) else bytes(view[ga : ga + int(size[g])])
    last = k - 1
    w.position = int(pos[last] + size[last])
    w.start = int(O[last] + 4 + plen[last])
    w.packet_seq = (rseq + k) & 0xFF
    w.in_txn, w.txn, w.gtid_parts, w.gtid_event, w.seq, w.added = in_txn, txn, gtid_parts, gtid_event, seq, added
    del B
    return k
