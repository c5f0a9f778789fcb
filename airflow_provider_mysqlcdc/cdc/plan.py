"""A plan: the captured tables' schemas and their chunks grouped into batches.

Kept in the state location, so the snapshot jobs read exactly the schemas and ranges that
were planned, and a rerun of the pipeline does not plan again.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .chunks import Batch, Chunk, group_chunks
from .config import SourceConfig, SplitOptions
from .discovery import discover_tables
from .errors import ConfigError
from .model import TableId, TableSchema
from .splitter import ChunkSplitter

# Server id slots: 0 = the stream's reader, 1 = the stream driver's offset scans,
# 2.. = snapshot batches (each concurrent batch's backfill needs its own id).
FIRST_BATCH_SLOT = 2


@dataclass(frozen=True)
class Plan:
    schemas: Mapping[TableId, TableSchema]
    batches: tuple[Batch, ...]

    def batch(self, batch_id: str) -> Batch:
        for b in self.batches:
            if b.batch_id == batch_id:
                return b
        raise ConfigError(f"batch {batch_id!r} is not in the plan ({len(self.batches)} batches: "
                          f"{', '.join(b.batch_id for b in self.batches[:5])}...)")

    def server_id_slot(self, batch_id: str, slots: int) -> int:
        """A slot per batch, cycling through the ids the range has for batches."""
        usable = max(1, slots - FIRST_BATCH_SLOT)
        index = [b.batch_id for b in self.batches].index(batch_id)
        return FIRST_BATCH_SLOT + index % usable

    def to_dict(self) -> dict[str, Any]:
        return {"schemas": [s.to_dict() for s in self.schemas.values()],
                "batches": [b.to_dict() for b in self.batches]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Plan":
        schemas = [TableSchema.from_dict(s) for s in d["schemas"]]
        return cls({s.table_id: s for s in schemas}, tuple(Batch.from_dict(b) for b in d["batches"]))


def build_plan(source: SourceConfig, include: Sequence[str], exclude: Sequence[str] = (),
               split: SplitOptions | None = None, chunks_per_batch: int = 64) -> Plan:
    split = split or SplitOptions()
    with contextlib.closing(source.connect()) as conn:
        schemas = discover_tables(conn, include, exclude, split.chunk_key_columns)
        splitter = ChunkSplitter(conn, split)
        chunks: list[Chunk] = [c for s in schemas for c in splitter.split(s)]
    return Plan({s.table_id: s for s in schemas}, tuple(group_chunks(chunks, chunks_per_batch)))
