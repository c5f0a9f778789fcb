"""A plan: the captured tables' schemas and their chunks grouped into batches.

Kept in the state location, so the snapshot jobs read exactly the schemas and ranges that
were planned, and a rerun of the pipeline does not plan again. Making one (discover, split,
batch) is ``snapshot/planning.py``: this record imports no planner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .batching import batch_row_estimates
from .chunks import Batch
from .errors import ConfigError
from .model import TableId, TableSchema
from .source.config import ServerIdRange

# Server id slots: 0 = the stream's reader, 1 = the stream driver's offset scans,
# 2.. = snapshot batches (each concurrent batch's backfill needs its own id).
FIRST_BATCH_SLOT = 2


@dataclass(frozen=True)
class Plan:
    """``inputs`` records what the plan was made from (tables, split options), so a rerun with
    different settings is noticed instead of silently reusing a plan for other tables."""

    schemas: Mapping[TableId, TableSchema]
    batches: tuple[Batch, ...]
    inputs: Mapping[str, Any] | None = None

    def batch(self, batch_id: str) -> Batch:
        for b in self.batches:
            if b.batch_id == batch_id:
                return b
        raise ConfigError(
            f"batch {batch_id!r} is not in the plan ({len(self.batches)} batches: "
            f"{', '.join(b.batch_id for b in self.batches[:5])}...). Fix: the plan was written anew after this "
            "task's run was planned (a later run with reset=true): trigger the pipeline instead of clearing "
            "tasks of the older run."
        )

    def server_id_slot(self, batch_id: str, slots: int) -> int:
        """A slot per batch, cycling through the ids the range has for batches."""
        usable = max(1, slots - FIRST_BATCH_SLOT)
        index = [b.batch_id for b in self.batches].index(batch_id)
        return FIRST_BATCH_SLOT + index % usable

    def batch_server_id(self, batch_id: str, ids: ServerIdRange, reserved_top: int = 0) -> int:
        """The server id of a batch's backfill reader, never one of the ``reserved_top`` highest ids
        of the range (the stream's parallel catch-up ranges take those)."""
        slots = max(len(ids) - reserved_top, FIRST_BATCH_SLOT + 1)
        return ids.pick(self.server_id_slot(batch_id, slots))

    def estimated_rows(self) -> dict[str, int]:
        """Each batch's estimated rows, from the tables' row estimates at planning time."""
        return batch_row_estimates(self.batches, {t: s.approx_rows for t, s in self.schemas.items()})

    def to_dict(self) -> dict[str, Any]:
        return {
            "schemas": [s.to_dict() for s in self.schemas.values()],
            "batches": [b.to_dict() for b in self.batches],
            "inputs": dict(self.inputs) if self.inputs is not None else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Plan":
        schemas = [TableSchema.from_dict(s) for s in d["schemas"]]
        return cls({s.table_id: s for s in schemas}, tuple(Batch.from_dict(b) for b in d["batches"]), d.get("inputs"))
