"""Making a plan: the captured tables discovered, split into chunks and grouped into batches.

Carried out of ``plan.py`` so the plan record (which the state location and every layer reads)
imports neither discovery nor the splitter; this module is the one that talks to the server.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from ..batching import BatchSizing, pack_batches
from ..chunks import Batch, Chunk, group_chunks
from ..errors import ConfigError
from ..model import TableId
from ..plan import Plan
from ..source.config import SourceConfig, SplitOptions
from ..source.discovery import discover_tables
from ..source.table_patterns import matches
from ..state import StateStore
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


def reread_reason(entries: Sequence[str], batch_id: str, tables: Sequence[str]) -> str | None:
    """Why ``reread_batches`` asks for this batch again (its id, one of its tables, ``*``), or None."""
    for entry in entries:
        if entry in ("*", batch_id):
            return f"reread_batches names {entry!r}"
    for entry in entries:
        if entry in tables:
            return f"reread_batches names its table {entry}"
    return None


def check_reread_entries(entries: Sequence[str], batch_ids: Sequence[str], tables: Sequence[str]) -> None:
    """Each entry names a batch of the plan, a captured table, or ``*``: anything else is a typo
    that would silently reload nothing."""
    unknown = [e for e in entries if e != "*" and e not in batch_ids and e not in tables]
    if unknown:
        raise ConfigError(
            f"reread_batches: {unknown} is not a batch of the plan nor a captured table (captured: "
            f"{sorted(tables)}; batches {batch_ids[0]}..{batch_ids[-1]} if any). Fix: name a captured table as "
            "db.table, a batch id, or *; to capture a new table, add it to the table list."
        )


@dataclass(frozen=True)
class PlanChange:
    """What reconciling the stored plan with this run's settings did: the plan from now on (None
    when there is no stored plan), the tables it gained and lost, the batches whose results were
    dropped with a removed table."""

    plan: Plan | None
    added: tuple[TableId, ...] = ()
    removed: tuple[TableId, ...] = ()
    dropped_batches: tuple[str, ...] = ()


def reconcile_plan(
    state: StateStore,
    source: SourceConfig,
    include: Sequence[str],
    exclude: Sequence[str],
    split: SplitOptions,
    *,
    sizing: BatchSizing,
    keyed: Callable[[Plan], Plan] = lambda plan: plan,
) -> PlanChange:
    """The stored plan reused, or extended to another table list: a plan made from the same
    inputs is reused as it is; another table list adds batches for the tables it adds (the rest and
    their results stay) and drops the removed tables' batches and results; other chunk settings
    fail, since finished batches would no longer match the plan. ``keyed`` gives a plan's tables
    their transforms' primary keys (``transform/`` stands above this room). Writes the plan back
    when it changed; logging and telling the stream are the caller's."""
    plan = state.read_plan()
    inputs = plan_inputs(include, exclude, split, source.zero_dates)
    if plan is None or plan.inputs is None or plan.inputs == inputs:
        return PlanChange(plan)
    if not all(plan.inputs.get(k) == inputs.get(k) for k in ("chunk_size", "chunk_key_columns", "zero_dates")):
        raise ConfigError(
            f"the state location {state.location} holds a plan for other settings ({plan.inputs}); "
            f"this run asks for {inputs}. Fix: trigger with reset=true to plan and snapshot again, or use "
            "another state_location."
        )
    # Another table list: the tables it adds get batches of their own; the rest stays.
    extended, added, removed = extend_plan(plan, source, include, exclude, split, sizing=sizing)
    extended = keyed(extended)
    dropped = tuple(b.batch_id for b in plan.batches if b not in extended.batches)
    for batch_id in dropped:  # a removed table's batches leave with it
        state.delete(StateStore.batch_result_rel(batch_id))
        state.delete(StateStore.batch_owner_rel(batch_id))
    state.write_plan(extended)
    return PlanChange(extended, tuple(added), tuple(removed), dropped)


def batch_actions(plan: Plan, state: StateStore, entries: Sequence[str]) -> dict[str, str]:
    """Per batch, what this run's snapshot task will do with it: read it, read it again (it is
    finished and ``reread_batches`` names it) or leave it alone; handed to the running stream
    when one runs."""
    done = {r["batch_id"] for r in state.batch_results()}
    streaming = state.stream_started()
    out = {}
    for b in plan.batches:
        if b.batch_id not in done:
            out[b.batch_id] = "to read" + (" (handed to the running stream)" if streaming else "")
        elif reread_reason(entries, b.batch_id, [str(t) for t in b.tables]) is not None:
            out[b.batch_id] = "read again" + (" (handed to the running stream)" if streaming else "")
        else:
            out[b.batch_id] = "left alone"
    return out
