"""The stream's table set changes: tables the pipeline's list brings in while it runs, or drops.

A table created under a captured pattern is taken up at its DDL (``take_up_new_tables``); a
table the list no longer names stops being read when the query starts (``forget_removed``).
Tables added by a longer list come as re-snapshot hand-offs (``resnapshots.py``).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping, Sequence

from ....cdc.model import TableId, TableSchema
from ....cdc.pipeline import PipelineConfig
from ....cdc.schema.history import TableVersion
from .restart import RESTART

log = logging.getLogger(__name__)


def take_up_new_tables(
    records: Sequence[Mapping[str, Any]], captured: Any, planner: Any, config: PipelineConfig, save_history: Any
) -> list[TableId]:
    """Tables a DDL of this micro-batch brings under the pipeline's list (CREATE TABLE, a RENAME
    into a matching name) that this query does not read: each gets a version in the schema
    history at its DDL (created in the sink by the micro-batch that replays it), and the query
    must start again so its source reads them -- before this micro-batch writes anything, so the
    next query reads the whole micro-batch, the new tables' rows after their DDL included."""
    from ....cdc.schema import behavior as B
    from ....cdc.schema.ddl import parse_ddl
    from ....cdc.schema.events import CreateTable
    from ....cdc.schema.evolve import apply_change
    from ....cdc.snapshot.resnapshot import request_table_read
    from ....cdc.state import StateStore

    state = StateStore(config.state_location)
    history = planner.history
    added: list[TableId] = []
    for r in records:
        if not r.get("ddl"):
            continue
        t = TableId(r["database"], r["table"])
        if t in captured or t in added:
            continue
        mark = json.loads(r["ddl"])
        sql, offset = mark["sql"], mark["offset"]
        schema, created = None, False
        try:
            for e in parse_ddl(sql, mark.get("database") or ""):
                if isinstance(e, CreateTable) and e.table == t:
                    created = True  # empty, or (CREATE ... SELECT) its rows follow as row events
                    if e.like is None and e.columns:
                        schema = apply_change(None, e)
        except Exception as err:  # DdlParseError, a shape apply_change cannot build: the server knows
            log.info("%s: %s (the server's information_schema says the shape)", t, err)
        if schema is None:
            schema = _server_schema(config, t)
        if not created:
            # RENAME TABLE into a captured name: its rows are not in the binlog after the DDL. The
            # request is written before the history records the table: a crash between the two
            # replays this micro-batch, which asks again.
            request_table_read(state, t, offset, f"{' '.join(sql.split())[:120]}")
        latest = history.latest(t) if t in history.versions else None
        sink = latest.sink if latest is not None else None
        plan = B.plan_returning_table(
            planner.behavior,
            planner.sink_name,
            planner.capabilities,
            sink,
            schema,
            f"{offset['file']}:{offset['position']}",
            sql,
        )
        if latest is None:
            history.record(t, TableVersion(None, None, None, None, (), ("not captured before its DDL",)))
        history.record(
            t,
            TableVersion(
                offset,
                schema,
                plan.sink,
                sql,
                tuple(a.to_dict() for a in plan.actions),
                plan.notes + (() if created else ("rows of its own: read by the stream job",)),
            ),
        )
        save_history()
        added.append(t)
        if created:
            log.info(
                "%s was created under the pipeline's table list (%s): captured from there on",
                t,
                " ".join(sql.split())[:120],
            )
        else:
            log.info(
                "%s came under the pipeline's table list with rows of its own (%s): captured from there on; "
                "the stream job reads its rows and takes them over",
                t,
                " ".join(sql.split())[:120],
            )
    if added:
        RESTART.set()
    return added


def _server_schema(config: PipelineConfig, t: TableId) -> TableSchema:
    import contextlib

    from ....cdc.source.discovery import read_table_schema

    with contextlib.closing(config.source.connect()) as conn:
        return read_table_schema(conn, t, zero_dates=config.source.zero_dates)


def forget_removed(history: Any, config: PipelineConfig, checkpoint: str, store: Any) -> None:
    """Tables the history captures that the pipeline's table list no longer names: they are not
    read from here on (a version without a source at the last committed offset); their sink
    tables stay as they are. A table the list names but the server lacks is not one of them (the
    stream follows its DDL)."""
    from ....cdc.source.table_patterns import matches
    from ..offsets.checkpoint_offsets import committed_end

    removed = [
        t
        for t in history.tables
        if history.latest(t).source is not None and not matches(t, config.include, config.exclude)
    ]
    if not removed:
        return
    end = committed_end(checkpoint)
    for t in removed:
        if end is None:  # nothing streamed yet: as if it had never been captured
            history.versions.pop(t)
        else:
            history.record(
                t,
                TableVersion(
                    end.to_dict(),
                    None,
                    history.latest(t).sink,
                    None,
                    (),
                    ("removed from the pipeline: no longer read; the sink table stays",),
                ),
            )
    store.save(history)
    log.info(
        "binlog stream: %d table(s) removed from the pipeline are not read any more (their sink tables stay): %s",
        len(removed),
        ", ".join(map(str, removed)),
    )


def ask_reads_for_renames(records: Sequence[Mapping[str, Any]], captured: Any, config: PipelineConfig) -> list[TableId]:
    """A ``RENAME TABLE`` onto a name this query already reads (a table dropped or renamed away
    before, coming back with another table's rows): those rows are not in the binlog, so the
    stream job reads the table (``table_reads.py``). Not for the swap of an online schema change
    tool (gh-ost, pt-online-schema-change): its helper table holds the same rows, kept in step
    by the tool up to the swap. Asked before the micro-batch writes anything."""
    from ....cdc.schema.ddl import parse_ddl
    from ....cdc.schema.events import RenameTable
    from ....cdc.snapshot.resnapshot import request_table_read
    from ....cdc.state import StateStore
    from ..settings import is_osc_helper

    asked: list[TableId] = []
    for r in records:
        if not r.get("ddl"):
            continue
        t = TableId(r["database"], r["table"])
        if t not in captured or t in asked:
            continue
        mark = json.loads(r["ddl"])
        try:
            events = parse_ddl(mark["sql"], mark.get("database") or "")
        except Exception:  # the planner says what it makes of an unreadable DDL
            continue
        if any(
            isinstance(e, RenameTable) and e.new == t and e.old != t and not is_osc_helper(e.old.table) for e in events
        ):
            request_table_read(
                StateStore(config.state_location), t, mark["offset"], " ".join(mark["sql"].split())[:120]
            )
            log.info(
                "%s: a table was renamed onto it (%s); the stream job reads its rows and takes them over",
                t,
                " ".join(mark["sql"].split())[:120],
            )
            asked.append(t)
    return asked
