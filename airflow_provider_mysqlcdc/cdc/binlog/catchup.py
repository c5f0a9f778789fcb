"""Planning a binlog backlog by bytes: micro-batch ends and parallel ranges, without reading it.

Why this exists: a stream far behind the head must not parse its backlog twice (once on the
driver to count rows for admission control, once on the executor to read them), and one
Python decoder is slower than a busy primary writes. So when the backlog is large the driver
plans by *bytes* of binlog instead of rows, and splits a micro-batch into several ranges that
separate readers decode in parallel.

A range may only start where a transaction starts: a rows event is decodable only after its
TABLE_MAP, and a reader must never begin inside a transaction it then half-emits. The
server knows where events start; the client does not, short of reading every byte. So the
boundaries come from ``SHOW BINLOG EVENTS IN file FROM pos LIMIT k, n``: the server walks the
events itself, in C (about 4 million events a second here, against about 300,000 for any
Python reader), and returns a few rows near the k-th event, among which is the next
transaction start (a ``Gtid`` event on MariaDB, ``Gtid`` / ``Anonymous_Gtid`` on MySQL 5.7+,
whose position is where that transaction's events begin). The k for a byte target is
estimated from the average event size at the start of that stretch, refined once if far off:
each such statement walks from the stretch's start, so they are few.

Everything here is advisory: a boundary that cannot be found (one transaction larger than
a whole range, or a server without GTID events) just means fewer, larger ranges -- never a
wrong one, because every returned position is the start of a transaction the server named.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..offsets import BinlogOffset

log = logging.getLogger(__name__)

# Event types whose position is where a transaction starts (MariaDB, MySQL 5.7+, MySQL 8.4 tagged).
TRANSACTION_START_TYPES = frozenset({"Gtid", "Anonymous_Gtid", "Gtid_tagged", "Gtid_log_event"})
_FIRST_EVENT_POS = 4
_SAMPLE_EVENTS = 256
_WINDOW_EVENTS = 64
_MAX_WINDOW_EVENTS = 16_384


@dataclass(frozen=True)
class BinlogFiles:
    """The server's binlog files with their sizes, the last one cut at the head."""

    files: tuple[tuple[str, int], ...]

    @classmethod
    def read(cls, conn: Any, head: BinlogOffset) -> "BinlogFiles":
        from ..source.server import list_binlogs

        logs = [(f, size) for f, size in list_binlogs(conn) if BinlogOffset(f, 0) <= BinlogOffset(head.file, 0)]
        if logs and logs[-1][0] == head.file:
            logs[-1] = (head.file, head.position)
        return cls(tuple(logs))

    def _index(self, file: str) -> int:
        for i, (f, _) in enumerate(self.files):
            if f == file:
                return i
        raise KeyError(file)

    def bytes_between(self, a: BinlogOffset, b: BinlogOffset) -> int:
        """Binlog bytes from ``a`` to ``b`` (0 when ``b`` is not after ``a``)."""
        if b <= a:
            return 0
        if a.file == b.file:
            return b.position - a.position
        try:
            i, j = self._index(a.file), self._index(b.file)
        except KeyError:
            return 0
        total = self.files[i][1] - a.position
        total += sum(size - _FIRST_EVENT_POS for _, size in self.files[i + 1 : j])
        return total + b.position - _FIRST_EVENT_POS

    def advance(self, a: BinlogOffset, n: int) -> BinlogOffset:
        """The byte position ``n`` bytes after ``a`` (not an event boundary), capped at the last file's end."""
        i = self._index(a.file)
        pos = a.position
        while True:
            f, size = self.files[i]
            if pos + n < size or i == len(self.files) - 1:
                return BinlogOffset(f, min(pos + n, size))
            n -= size - pos
            i += 1
            pos = _FIRST_EVENT_POS

    def file_end(self, file: str) -> BinlogOffset:
        return BinlogOffset(file, self.files[self._index(file)][1])


def _events(conn: Any, file: str, from_pos: int, skip: int, count: int) -> list[tuple[int, str, int]]:
    """(position, type, end position) of ``count`` events after skipping ``skip`` from ``from_pos``."""
    with conn.cursor() as cur:
        cur.execute(f"SHOW BINLOG EVENTS IN %s FROM {int(from_pos)} LIMIT {int(skip)}, {int(count)}", (file,))
        return [(int(r[1]), str(r[2]), int(r[4])) for r in cur.fetchall()]


def transaction_start_near(conn: Any, file: str, from_pos: int, target: int, end: int) -> int | None:
    """The position of the first transaction start at or after about ``target`` in ``file``.

    ``from_pos`` must be an event start in ``file`` (a transaction start or 4). Returns None
    when no transaction starts between the target and ``end`` (the position must be < end).
    Every ``SHOW BINLOG EVENTS`` walks from ``from_pos`` on the server, so this asks at most
    three times: a sample for the average event size, the window at the estimated event
    number, and once more only when that estimate missed by more than a quarter.
    """
    if target <= from_pos:
        return None
    sample = _events(conn, file, from_pos, 0, _SAMPLE_EVENTS)
    if len(sample) < 2:
        return None
    avg = max(1.0, (sample[-1][2] - sample[0][0]) / len(sample))
    skip = int((target - from_pos) / avg)
    events = _events(conn, file, from_pos, skip, _WINDOW_EVENTS)
    if events and abs(events[0][0] - target) > (target - from_pos) / 4:
        skip = max(0, int(skip * (target - from_pos) / max(1, events[0][0] - from_pos)))
        events = _events(conn, file, from_pos, skip, _WINDOW_EVENTS)
    window = _WINDOW_EVENTS
    while True:
        for pos, typ, _ in events:
            if pos >= end:
                return None
            if typ in TRANSACTION_START_TYPES and pos > from_pos:
                return pos
        if len(events) < window or window >= _MAX_WINDOW_EVENTS:
            return None  # the end of the file, or one transaction larger than the search
        skip += window
        window *= 4
        events = _events(conn, file, from_pos, skip, window)


def boundary_after(
    conn: Any, files: BinlogFiles, start: BinlogOffset, nbytes: int, limit: BinlogOffset
) -> BinlogOffset | None:
    """A transaction start about ``nbytes`` after ``start`` (a transaction start) and before ``limit``."""
    target = files.advance(start, nbytes)
    if target >= limit:
        return None
    from_pos = start.position if target.file == start.file else _FIRST_EVENT_POS
    end = limit.position if limit.file == target.file else files.file_end(target.file).position
    pos = transaction_start_near(conn, target.file, from_pos, target.position, end)
    if pos is None and target.file != limit.file:
        nxt = files.files[files._index(target.file) + 1][0]
        candidate = BinlogOffset(nxt, _FIRST_EVENT_POS)  # a file starts with a new transaction
        return candidate if candidate < limit else None
    return BinlogOffset(target.file, pos) if pos is not None else None


def split_range(
    conn: Any, files: BinlogFiles, start: BinlogOffset, end: BinlogOffset, parts: int, min_part_bytes: int
) -> list[BinlogOffset]:
    """Up to ``parts - 1`` transaction starts cutting ``[start, end)`` into about equal byte ranges.

    ``start`` is where the first range's dump begins (a transaction start). Ranges smaller
    than ``min_part_bytes`` are not worth a reader of their own, so there may be fewer cuts.
    """
    total = files.bytes_between(start, end)
    parts = max(1, min(parts, total // max(1, min_part_bytes)))
    cuts: list[BinlogOffset] = []
    prev = start
    for i in range(1, parts):
        want = total * i // parts - files.bytes_between(start, prev)
        if want < min_part_bytes // 2:
            continue
        cut = boundary_after(conn, files, prev, want, end)
        if cut is None or cut <= prev:
            continue
        cuts.append(cut)
        prev = cut
    return cuts


def batch_end(conn: Any, files: BinlogFiles, start: BinlogOffset, head: BinlogOffset, max_bytes: int) -> BinlogOffset:
    """Where a catch-up micro-batch from ``start`` ends: the head, or a transaction start about
    ``max_bytes`` on (the end of a file when nothing closer can be found)."""
    if files.bytes_between(start, head) <= max_bytes:
        return head
    cut = boundary_after(conn, files, start, max_bytes, head)
    if cut is not None:
        return cut
    if start.file != head.file:
        i = files._index(start.file)
        return BinlogOffset(files.files[i + 1][0], _FIRST_EVENT_POS)
    return head


def plan_batch(
    conn: Any,
    files: BinlogFiles,
    start: BinlogOffset,
    head: BinlogOffset,
    max_bytes: int,
    parts: int,
    min_part_bytes: int,
    tail_bytes: int = 0,
) -> tuple[BinlogOffset, list[BinlogOffset]]:
    """A catch-up micro-batch from ``start``: its end (as ``batch_end``) and up to ``parts - 1``
    transaction starts cutting it into ranges of about equal bytes (as ``split_range``).

    Found in one pass when the head is beyond ``max_bytes``: every search walks from the last
    cut found, so the server walks the batch's events once, where ``batch_end`` then
    ``split_range`` walked them once for the end and again up to the last cut (each
    ``SHOW BINLOG EVENTS`` walks from the position it is given: ~0.1 s per 64 MiB here).

    A rest of at most ``tail_bytes`` beyond ``max_bytes`` is taken into this micro-batch: left
    alone it would be a micro-batch of its own, paying a scan near the head and a micro-batch's
    fixed costs (~0.45 s at the end of a 2 GiB catch-up here) for a few MiB.
    """
    if files.bytes_between(start, head) <= max_bytes + tail_bytes:
        return head, split_range(conn, files, start, head, parts, min_part_bytes)
    parts = max(1, min(parts, max_bytes // max(1, min_part_bytes)))
    cuts: list[BinlogOffset] = []
    prev = start
    for _ in range(parts - 1):
        cut = boundary_after(conn, files, prev, max_bytes // parts, head)
        if cut is None or cut <= prev:
            break
        cuts.append(cut)
        prev = cut
    end = batch_end(conn, files, prev, head, max(1, max_bytes - files.bytes_between(start, prev)))
    return end, [c for c in cuts if c < end]
