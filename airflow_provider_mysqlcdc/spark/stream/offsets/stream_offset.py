"""A stream offset: the next binlog change to consume and where its transaction's dump starts.

Spark checkpoints these as JSON and compares them as strings, so ``to_dict`` always gives the
same keys in the same order (the format is described in ``binlog_source.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ....cdc.events import RowChange
from ....cdc.offsets import BinlogOffset

# --- offsets -------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamOffset:
    """A stream offset: the next change to consume, plus where its transaction's dump starts."""

    at: BinlogOffset
    txn_start: BinlogOffset | None = None
    # The server the offset was taken on (``cdc/binlog/failover.ServerIdentity`` as text); ``at.gtid`` is
    # then the GTID state at ``dump_from`` (every transaction before it). Both let a stream that
    # finds another server behind the endpoint place the offset there by GTID (a failover).
    server: str | None = field(default=None, compare=False)

    @property
    def dump_from(self) -> BinlogOffset:
        return self.txn_start or BinlogOffset(self.at.file, self.at.position)

    def to_dict(self) -> dict[str, Any]:
        """Fixed key order and always the same keys: Spark compares serialized offsets."""
        return {
            "file": self.at.file,
            "position": self.at.position,
            "row": self.at.row,
            "txn_file": self.txn_start.file if self.txn_start else None,
            "txn_position": self.txn_start.position if self.txn_start else None,
            "gtid": self.at.gtid,
            "server": self.server,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StreamOffset":
        at = BinlogOffset(str(d["file"]), int(d["position"]), d.get("gtid") or None, int(d.get("row") or 0))
        txn = None
        if d.get("txn_file"):
            txn = BinlogOffset(str(d["txn_file"]), int(d["txn_position"]))
        return cls(at, txn, d.get("server") or None)

    @classmethod
    def boundary(cls, offset: BinlogOffset, server: str | None = None) -> "StreamOffset":
        """A transaction boundary (watermarks, heads, file starts)."""
        return cls(BinlogOffset(offset.file, offset.position, offset.gtid, 0), None, server)

    def placed(self, gtid: str | None, server: str) -> "StreamOffset":
        """This offset marked as taken on ``server``, with the GTID state at its ``dump_from``."""
        a = self.at
        return StreamOffset(BinlogOffset(a.file, a.position, gtid, a.row), self.txn_start, server)

    def same_place(self, other: "StreamOffset") -> bool:
        """The same point of the binlog (GTID and server aside)."""
        return self.at == other.at and self.dump_from == other.dump_from

    @classmethod
    def after(cls, change: RowChange, txn_start: BinlogOffset | None) -> "StreamOffset":
        """Just past ``change``: its next row, resumed from its transaction's start."""
        o = change.offset
        return cls(BinlogOffset(o.file, o.position, None, o.row + 1), txn_start)

    @classmethod
    def at_change(cls, change: RowChange, txn_start: BinlogOffset | None) -> "StreamOffset":
        """Exactly at ``change`` (exclusive end of a rate-limited batch)."""
        o = change.offset
        return cls(BinlogOffset(o.file, o.position, None, o.row), txn_start)

    def __str__(self) -> str:
        return f"{self.at}" + (f" (txn from {self.txn_start})" if self.txn_start else "")
