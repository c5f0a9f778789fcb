"""Noticing a gap in the binlog's GTIDs: transactions the server numbered but this binlog lacks.

Within one source (a MariaDB GTID domain, a MySQL server uuid) a server numbers its
transactions one after another, so the GTIDs of one binlog read in order run seq, seq+1, ...
A number skipped means a transaction the binlog does not hold: the stream was pointed at
another server after a failover, a replica filtered it out, or someone set ``gtid_seq_no``
(``gtid_next``) by hand. The first two lose changes the sink should have; only the user
knows whether the third is harmless. So a forward jump stops the stream (the option
``allow_gtid_gaps`` lets a user who knows their binlog has gaps go on).

A number at or below the highest seen is not a gap: a reader re-reading a range it read
before (a micro-batch cut inside a transaction is read again from that transaction's start),
or MariaDB's non-strict mode logging a replicated transaction out of order. A watch knows
only what it has seen: its first GTID of each source is taken as given.
"""

from __future__ import annotations

from typing import Any, Hashable

import numpy as np

from ..errors import NOT_EXACT_MARKER, CdcError
from ..offsets import BinlogOffset


class GtidGapError(CdcError):
    """A GTID jumped past the next number of its source (domain or server uuid)."""

    def __init__(self, source: str, last: int, seq: int, offset: BinlogOffset, flavor: str) -> None:
        self.source = source
        self.last = last
        self.seq = seq
        self.offset = offset
        missing = f"{last + 1}" if seq == last + 2 else f"{last + 1}..{seq - 1}"
        name = f"{source}-*-{missing}" if flavor == "mariadb" else f"{source}:{missing}"
        what = "domain" if flavor == "mariadb" else "server uuid"
        super().__init__(
            f"the binlog at {offset.file}:{offset.position} jumps from GTID seq {last} to {seq} in {what} "
            f"{source}: {seq - last - 1} transaction(s) ({name}) are not in this server's binlog (a failover to a "
            "server that lacks them, a replication filter, or gtid_seq_no / gtid_next set by hand). Their "
            f"changes would be missing from the sink, so {NOT_EXACT_MARKER} and stopped before the jump; "
            "every change before it is in the sink. Fix: if those transactions changed captured tables, "
            "load the tables again from a server that has them (trigger the pipeline with reset=true); if "
            "the gap is known to be harmless (numbers skipped on purpose, filtered transactions of other "
            "tables), set stream_options.allow_gtid_gaps: true and restart the stream."
        )


class GtidWatch:
    """The highest GTID number seen per source; raises ``GtidGapError`` at a forward jump."""

    def __init__(self) -> None:
        self.last: dict[Hashable, int] = {}

    def reset(self) -> None:
        """Forget what was seen (the caller will not read what lies between)."""
        self.last.clear()

    def seen(self, source: Hashable, seq: int, file: str, position: int, flavor: str = "mariadb") -> None:
        last = self.last.get(source)
        if last is None or seq > last:
            if last is not None and seq > last + 1:
                raise GtidGapError(str(source), last, seq, BinlogOffset(file, position), flavor)
            self.last[source] = seq

    def seen_many(self, sources: np.ndarray, seqs: np.ndarray, positions: np.ndarray, file: str) -> None:
        """MariaDB GTIDs of a stretch of events, in binlog order (numpy arrays); a jump is reported
        at the first one in binlog order, as one by one would."""
        if not len(seqs):
            return
        seqs = seqs.astype(np.int64, copy=False)
        tops: dict[Hashable, int] = {}
        for source in np.unique(sources).tolist():
            at = np.flatnonzero(sources == source)
            s = seqs[at]
            last = self.last.get(source)
            before = np.maximum.accumulate(np.concatenate(([s[0] - 1 if last is None else last], s)))[:-1]
            if (s > before + 1).any():  # rare: walk one by one to stop at the first jump of any source
                for src, seq, pos in zip(sources.tolist(), seqs.tolist(), positions.tolist()):
                    self.seen(src, seq, file, pos)
                raise AssertionError("a jump found by numpy was not found one by one")
            tops[source] = max(int(before[-1]), int(s[-1]))
        self.last.update(tops)

    def __repr__(self) -> str:
        return f"GtidWatch({self.last!r})"


def watch_or_none(allow_gaps: bool) -> Any:
    """A fresh watch, or None when the user allows gaps."""
    return None if allow_gaps else GtidWatch()
