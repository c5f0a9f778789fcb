"""Chunks (half-open key ranges of one table) and batches (the chunks one Spark job reads).

A chunk is ``[start, end)`` over the table's chunk key, compared as a row value in the
server's order (its collation for strings). ``start=None`` means no lower bound and
``end=None`` no upper bound. Rows whose chunk key is NULL (possible only for a configured,
nullable chunk key column) belong to the first chunk, which has ``includes_null=True``,
so they are never lost.

A batch holds, for each of its tables, a run of consecutive chunks: so the batch covers
one contiguous key range per table and "is this key in the batch" is two comparisons.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from .model import TableId
from .offsets import BinlogOffset
from .values import decode_key, encode_key

Key = tuple[Any, ...]


@dataclass(frozen=True)
class Chunk:
    table_id: TableId
    chunk_id: int
    start: Key | None
    end: Key | None
    includes_null: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table_id.text,
            "chunk_id": self.chunk_id,
            "start": encode_key(self.start),
            "end": encode_key(self.end),
            "includes_null": self.includes_null,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Chunk":
        return cls(
            TableId.parse(d["table"]),
            int(d["chunk_id"]),
            decode_key(d["start"]),
            decode_key(d["end"]),
            bool(d.get("includes_null", False)),
        )


@dataclass(frozen=True)
class KeyRange:
    """The contiguous key range a batch covers in one table: ``[start, end)``."""

    table_id: TableId
    start: Key | None
    end: Key | None
    includes_null: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table_id.text,
            "start": encode_key(self.start),
            "end": encode_key(self.end),
            "includes_null": self.includes_null,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "KeyRange":
        return cls(
            TableId.parse(d["table"]), decode_key(d["start"]), decode_key(d["end"]), bool(d.get("includes_null", False))
        )


@dataclass(frozen=True)
class Batch:
    """The unit of consistency: the chunks one Spark job reads inside one LW..HW window."""

    batch_id: str
    chunks: tuple[Chunk, ...]

    def __post_init__(self) -> None:
        if not self.chunks:
            raise ValueError(f"batch {self.batch_id} has no chunks")
        seen: dict[TableId, Chunk] = {}
        for c in self.chunks:
            prev = seen.get(c.table_id)
            if prev is not None and prev.end != c.start:
                raise ValueError(
                    f"batch {self.batch_id}: chunks of {c.table_id} must be consecutive "
                    f"(chunk {prev.chunk_id} ends at {prev.end}, chunk {c.chunk_id} starts at {c.start})"
                )
            seen[c.table_id] = c

    @property
    def tables(self) -> tuple[TableId, ...]:
        out: list[TableId] = []
        for c in self.chunks:
            if c.table_id not in out:
                out.append(c.table_id)
        return tuple(out)

    def chunks_of(self, table_id: TableId) -> tuple[Chunk, ...]:
        return tuple(c for c in self.chunks if c.table_id == table_id)

    def ranges(self) -> tuple[KeyRange, ...]:
        out = []
        for t in self.tables:
            cs = self.chunks_of(t)
            out.append(KeyRange(t, cs[0].start, cs[-1].end, any(c.includes_null for c in cs)))
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {"batch_id": self.batch_id, "chunks": [c.to_dict() for c in self.chunks]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Batch":
        return cls(d["batch_id"], tuple(Chunk.from_dict(c) for c in d["chunks"]))


@dataclass(frozen=True)
class FinishedBatch:
    """A batch whose rows are in the sink as of ``high_watermark``: what the handoff needs."""

    batch_id: str
    ranges: tuple[KeyRange, ...]
    high_watermark: BinlogOffset
    # The server the watermark was taken on (cdc/binlog/failover.ServerIdentity as text; None before it was
    # recorded): on another server the stream places the watermark by its GTID state.
    server: str | None = None

    def to_dict(self) -> dict[str, Any]:
        hw = self.high_watermark.to_dict()
        if self.server:
            hw["server"] = self.server
        return {"batch_id": self.batch_id, "ranges": [r.to_dict() for r in self.ranges], "high_watermark": hw}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FinishedBatch":
        return cls(
            d["batch_id"],
            tuple(KeyRange.from_dict(r) for r in d["ranges"]),
            BinlogOffset.from_dict(d["high_watermark"]),
            d["high_watermark"].get("server") or None,
        )


def group_chunks(chunks: Sequence[Chunk], batch_chunk_count: int, prefix: str = "") -> list[Batch]:
    """Cut each table's chunk list into runs of at most ``batch_chunk_count`` chunks."""
    if batch_chunk_count < 1:
        raise ValueError("batch_chunk_count must be >= 1")
    by_table: dict[TableId, list[Chunk]] = {}
    for c in chunks:
        by_table.setdefault(c.table_id, []).append(c)
    batches = []
    for t, cs in by_table.items():
        for i in range(0, len(cs), batch_chunk_count):
            run = cs[i : i + batch_chunk_count]
            bid = f"{prefix}{t}#{run[0].chunk_id}-{run[-1].chunk_id}"
            batches.append(Batch(bid, tuple(run)))
    return batches


def iter_table_chunks(batches: Iterable[Batch], table_id: TableId) -> Iterable[Chunk]:
    for b in batches:
        yield from b.chunks_of(table_id)
