"""The binlog event's bytes as the fast reader reads them: struct layouts of the packet and event
headers, MariaDB's compressed events inflated, the format description, and the numpy gathers the
bulk walk uses (``packet_chain`` finds the packets of a stretch by testing every byte offset at
once and verifying the chain).

Kept out of ``reader.py`` so the bulk walk (``bulk.py``) and the reader share them without a cycle.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np

from . import constants as C
from .columnar import gather_slices
from .errors import (
    ProtocolError,
)
from .packets import mariadb_uncompress
from .tablemap import read_lenenc

HEADER = struct.Struct("<IBIIIH").unpack_from
GTID_BODY = struct.Struct("<QI").unpack_from
SIZE_POS = struct.Struct("<II").unpack_from  # event_size, log_pos at offset 9 of the header
U64 = struct.Struct("<Q").unpack_from  # a 6-byte table id plus the 2 flag bytes after it
U32 = struct.Struct("<I").unpack_from
# packet length+sequence id, status byte, [timestamp], type, [server id], event size, log_pos,
# [flags], then 8 bytes: a rows event's / TABLE_MAP's 6-byte table id and 2 flag bytes
FRAME = struct.Struct("<IB4xB4xII2xQ").unpack_from
ROWS_COMPRESSED = {**{t: False for t in C.ROWS_EVENTS}, **{t: True for t in C.COMPRESSED_ROWS_EVENTS}}


def uncompress_rows_event(ev: bytes, crc: int, tid_len: int) -> bytes:
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


def uncompress_query_event(ev: bytes, crc: int) -> bytes:
    """A MariaDB QUERY_COMPRESSED event as a plain QUERY event (the statement inflated)."""
    db_len = ev[19 + 8]
    status_len = ev[19 + 11] | (ev[19 + 12] << 8)
    p = 19 + 13 + status_len + db_len + 1
    body = bytes(ev[:p]) + mariadb_uncompress(memoryview(ev)[p : len(ev) - crc])
    out = body[:4] + bytes([C.QUERY_EVENT]) + body[5:]
    return out + struct.pack("<I", zlib.crc32(out)) if crc else out


BULK_TYPE = np.zeros(256, dtype=bool)
for _t in (*C.ROWS_EVENTS, C.TABLE_MAP_EVENT, C.MARIADB_GTID_EVENT, C.XID_EVENT):
    BULK_TYPE[_t] = True
KIND_OF_TYPE = np.full(256, -1, dtype=np.int8)
for _t, (_k, _v) in C.ROWS_EVENTS.items():
    KIND_OF_TYPE[_t] = {"insert": 0, "update": 1, "delete": 2}[_k]


def packet_chain(B: np.ndarray, start: int, rend: int) -> np.ndarray:
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
    cand = cand[BULK_TYPE[W[cand + 9]]]
    if not len(cand) or cand[0] != 0:
        return np.zeros(0, dtype=np.int64)
    plen = gather_u32(W, cand) & 0xFFFFFF  # packet length (the 4th byte is the sequence id)
    same = gather_u32(W, cand + 14) + 1 == plen
    cand, plen = cand[same], plen[same]
    if not len(cand) or cand[0] != 0:
        return np.zeros(0, dtype=np.int64)
    nxt = cand + 4 + plen
    breaks = np.flatnonzero(nxt[:-1] != cand[1:])
    k = int(breaks[0]) + 1 if len(breaks) else len(cand)
    if nxt[k - 1] > len(W):  # the last packet is not complete in the buffer
        k -= 1
    return cand[:k] + start


def gather_u32(B: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The little-endian uint32 at each byte offset ``p`` of ``B``, as int64: one gather
    through a view whose element i is the 4 bytes at byte i (unaligned, stride 1)."""
    if len(B) < 4:
        return np.zeros(len(p), dtype=np.int64)
    return np.ndarray((len(B) - 3,), dtype="<u4", buffer=B, strides=(1,))[p].astype(np.int64)


def gather_u16(B: np.ndarray, p: np.ndarray) -> np.ndarray:
    if len(B) < 2:
        return np.zeros(len(p), dtype=np.int64)
    return np.ndarray((len(B) - 1,), dtype="<u2", buffer=B, strides=(1,))[p].astype(np.int64)


def gather_events(B: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The events at ``starts`` (with ``sizes``) copied back to back out of ``B`` in one gather,
    and where each begins in the copy."""
    return gather_slices(B, starts, sizes), np.cumsum(sizes) - sizes


class Missing:
    pass


MISSING: Any = Missing()


def parse_fde(ev: bytes) -> tuple[int, int, int]:
    """(checksum algorithm, table id length, TABLE_MAP post-header length) of an FDE.

    Layout after the header: binlog version (2), server version (50), create time (4),
    header length (1), one post-header length per event type, then (servers since 5.6.1)
    the checksum algorithm (1) and the event's checksum (4).
    """
    p = 19 + 2 + 50 + 4
    header_len = ev[p]
    if header_len != C.EVENT_HEADER_LEN:
        raise ProtocolError(
            f"format description with a {header_len}-byte event header: not binlog v4. Fix: capture from "
            "a supported server version (the version check of the validate task lists them)."
        )
    lengths = ev[p + 1 : len(ev) - 5]
    crc_alg = ev[len(ev) - 5]
    tm_post = lengths[C.TABLE_MAP_EVENT - 1] if len(lengths) >= C.TABLE_MAP_EVENT else 8
    tid_len = 4 if tm_post == 6 else 6
    return crc_alg, tid_len, tm_post
