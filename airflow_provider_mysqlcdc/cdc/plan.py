"""A plan: the captured tables' schemas and their chunks grouped into batches.

Kept in the state location, so the snapshot jobs read exactly the schemas and ranges that
were planned, and a rerun of the pipeline does not plan again.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from .batching import BatchSizing, batch_row_estimates, pack_batches
from .chunks import Batch, Chunk, group_chunks
from .config import ServerIdRange, SourceConfig, SplitOptions
from .discovery import discover_tables
from .errors import ConfigError
from .model import TableId, TableSchema
from .splitter import ChunkSplitter
from .table_patterns import matches

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
            f"{', '.join(b.batch_id for b in self.batches[:5])}...)"
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


def plan_inputs(
    include: Sequence[str], exclude: Sequence[str], split: SplitOptions, zero_dates: str = "null"
) -> dict[str, Any]:
    """What a plan depends on; a stored plan is reused only when these are unchanged (zero_dates
    changes the sink's column types; it is recorded only when not the default, so plans stored
    before it existed still match)."""
    return {
        "include": list(include),
        "exclude": list(exclude),
        "chunk_size": split.chunk_size,
        "chunk_key_columns": dict(split.chunk_key_columns),
        **({"zero_dates": zero_dates} if zero_dates != "null" else {}),
    }


def build_plan(
    source: SourceConfig,
    include: Sequence[str],
    exclude: Sequence[str] = (),
    split: SplitOptions | None = None,
    chunks_per_batch: int = 64,
    sizing: BatchSizing | None = None,
) -> Plan:
    """Discover and split the tables. With ``sizing``, batches are packed by estimated rows
    (``cdc/batching.py``, what the Airflow plan step uses); else every table's chunks are
    cut into runs of ``chunks_per_batch``."""
    split = split or SplitOptions()
    with contextlib.closing(source.connect()) as conn:
        schemas = discover_tables(conn, include, exclude, split.chunk_key_columns, source.zero_dates)
        splitter = ChunkSplitter(conn, split)
        by_table: dict[TableId, list[Chunk]] = {s.table_id: splitter.split(s) for s in schemas}
        estimates = {s.table_id: splitter.row_estimate(s) for s in schemas}
    # The schemas carry the planner's estimate (exact for small tables): labels and logs use it.
    schemas = [dataclasses.replace(s, approx_rows=estimates[s.table_id]) for s in schemas]
    if sizing:
        batches = pack_batches(by_table, estimates, sizing)
    else:
        batches = group_chunks([c for cs in by_table.values() for c in cs], chunks_per_batch)
    return Plan(
        {s.table_id: s for s in schemas}, tuple(batches), plan_inputs(include, exclude, split, source.zero_dates)
    )


def extend_plan(
    plan: Plan,
    source: SourceConfig,
    include: Sequence[str],
    exclude: Sequence[str] = (),
    split: SplitOptions | None = None,
    sizing: BatchSizing | None = None,
) -> tuple[Plan, list[TableId], list[TableId]]:
    """The plan for another table list: the tables ``include``/``exclude`` match now and ``plan``
    lacks are split and batched on their own under new batch ids after the existing ones (whose
    results stay valid); the tables it holds and the list no longer matches leave it, with their
    batches. Returns the new plan, the added and the removed tables."""
    split = split or SplitOptions()
    with contextlib.closing(source.connect()) as conn:
        schemas = discover_tables(conn, include, exclude, split.chunk_key_columns, source.zero_dates)
        found = {s.table_id for s in schemas}
        # a table the list still names but the server no longer has stays (the stream follows its DDL)
        gone = sorted(t for t in plan.schemas if t not in found and not matches(t, include, exclude))
        kept = replace(
            plan,
            schemas={t: s for t, s in plan.schemas.items() if t not in gone},
            batches=tuple(b for b in plan.batches if not set(b.tables) & set(gone)),
            inputs=plan_inputs(include, exclude, split, source.zero_dates),
        )
        if any(set(b.tables) & set(gone) and not set(b.tables) <= set(gone) for b in plan.batches):
            raise ConfigError(
                f"a batch holds both a table the new list drops ({', '.join(map(str, gone))}) and one it keeps, so "
                "its capture cannot stop alone. Fix: keep the table in the list, or trigger with reset=true."
            )
        added = [s for s in schemas if s.table_id not in plan.schemas]
        if not added:
            return kept, [], gone
        plan = kept
        splitter = ChunkSplitter(conn, split)
        by_table = {s.table_id: splitter.split(s) for s in added}
        estimates = {s.table_id: splitter.row_estimate(s) for s in added}
    added = [dataclasses.replace(s, approx_rows=estimates[s.table_id]) for s in added]
    fresh = (
        pack_batches(by_table, estimates, sizing)
        if sizing
        else group_chunks([c for cs in by_table.values() for c in cs], 64)
    )
    taken = {b.batch_id for b in plan.batches}
    first = len(plan.batches)
    width = max(4, len(str(first + len(fresh))))
    renamed = []
    for i, b in enumerate(fresh):
        n = first + i
        while f"batch-{n:0{width}d}" in taken:
            n += 1
        taken.add(f"batch-{n:0{width}d}")
        renamed.append(replace(b, batch_id=f"batch-{n:0{width}d}"))
    return (
        Plan(
            {**plan.schemas, **{s.table_id: s for s in added}},
            plan.batches + tuple(renamed),
            plan_inputs(include, exclude, split, source.zero_dates),
        ),
        [s.table_id for s in added],
        gone,
    )


def plan_table_read(
    source: SourceConfig, table_id: TableId, split: SplitOptions | None = None, plan: Plan | None = None
) -> tuple[Plan, Batch]:
    """One table split into one batch (``stream-read-<db>.<table>``) that the stream job reads
    itself and hands to its own query. It joins ``plan``'s batches (a copy; the stored plan is
    not changed) so its backfill reader's server id slot comes after theirs, not on a running
    batch's."""
    from .table_patterns import qualify

    split = split or SplitOptions()
    own_key = {k: v for k, v in split.chunk_key_columns.items() if k == str(table_id)}
    with contextlib.closing(source.connect()) as conn:
        exact = ".".join("`" + part.replace("`", "``") + "`" for part in (table_id.database, table_id.table))
        (schema,) = discover_tables(conn, [qualify(exact, None)], (), own_key, source.zero_dates)
        splitter = ChunkSplitter(conn, split)
        chunks = splitter.split(schema)
        schema = dataclasses.replace(schema, approx_rows=splitter.row_estimate(schema))
    batch = Batch(f"stream-read-{table_id}", tuple(chunks))
    base = plan or Plan({}, ())
    return Plan({**base.schemas, table_id: schema}, base.batches + (batch,), base.inputs), batch
