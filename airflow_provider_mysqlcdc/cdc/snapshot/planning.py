"""Making a plan: the captured tables discovered, split into chunks and grouped into batches.

Carried out of ``plan.py`` so the plan record (which the state location and every layer reads)
imports neither discovery nor the splitter; this module is the one that talks to the server.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import replace
from typing import Any, Sequence

from ..batching import BatchSizing, pack_batches
from ..chunks import Batch, Chunk, group_chunks
from ..errors import ConfigError
from ..model import TableId
from ..plan import Plan
from ..source.config import SourceConfig, SplitOptions
from ..source.discovery import discover_tables
from ..source.table_patterns import matches
from .splitter import ChunkSplitter


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
    from ..source.table_patterns import qualify

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
