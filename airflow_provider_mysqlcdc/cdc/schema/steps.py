"""A micro-batch's records turned into ordered steps per table: rows, schema change, rows ...

The binlog source's tasks hand the driver one record per (table, segment between DDLs) of
their range, with the columns the rows were logged with, and one record per DDL on a
captured table, each placed by ``first_seq`` (see ``spark/sinks/direct_spec.py``). Here,
per table and in ``_seq`` order, consecutive row records become one ``RowsStep`` (read and
written with one schema version) and each DDL a ``ChangeStep``: the statement parsed with
``ddl.parse_ddl``, applied to the source version in force (``evolve.apply_change``), and
turned into sink actions by the pipeline's behaviour (``behavior.py``). The new versions go
into the schema history, keyed by the DDL's offset, before the sink applies anything; a
replayed micro-batch finds them there and takes the recorded actions instead of planning
again.

Every row record is checked against the version the history expects at its place: rows
logged with other columns than that version, with no DDL to explain it, stop the stream
with the table and the place named. Where a statement does not say what the table looks
like afterwards (a rename swap as gh-ost and pt-online-schema-change end with, a DDL the
parser cannot read under a lenient behaviour), the next rows' TABLE_MAP says it: the
version stays *pending* until rows of the table arrive, and is settled from their columns.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from typing import Any, Callable, Collection, Literal, Mapping, Sequence

from ..errors import SchemaMismatchError
from ..model import Column, TableId, TableSchema
from . import behavior as B
from .ddl import parse_ddl
from .ddl_tokens import DdlParseError
from .events import AddColumn, AlterColumnType, DropTable, RenameColumn, RenameTable, TruncateTable
from .evolve import apply_change
from .history import SchemaHistory, TableVersion

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RowsStep:
    """Row records of one table version: ``source`` is how they were logged, ``sink`` the shape
    the sink table has while they are written (rows are projected onto it by name)."""

    records: tuple[Mapping[str, Any], ...]
    source: TableSchema
    sink: TableSchema

    @property
    def changes(self) -> int:
        return sum(int(r["changes"]) for r in self.records)

    def describe(self, sink: str, batch_id: int, rows: int) -> str:
        return (
            f"{sink} {self.sink.table_id} micro-batch {batch_id}: {self.changes} changes from "
            f"{len(self.records)} binlog ranges, reduced by the source's tasks to {rows} rows"
        )


@dataclass(frozen=True)
class ChangeStep:
    """One DDL's effect on one sink table."""

    ddl: str
    offset: Mapping[str, Any]
    seq: int
    actions: tuple[B.SinkAction, ...]
    sink_before: TableSchema | None
    sink_after: TableSchema | None
    source_after: TableSchema | None
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        what = "; ".join(a.describe() for a in self.actions) or "no change to the sink table"
        return f"{_short(self.ddl)!r} at {_where(self.offset)}: {what}" + (
            f" ({'; '.join(self.notes)})" if self.notes else ""
        )


Step = RowsStep | ChangeStep


def _short(sql: str, n: int = 160) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _where(offset: Mapping[str, Any]) -> str:
    return f"{offset.get('file')}:{offset.get('position')}"


def logged_schema(table_id: TableId, record: Mapping[str, Any], like: TableSchema | None) -> TableSchema:
    """The table as a row record's TABLE_MAP described it (identity kept from ``like``)."""
    cols = tuple(Column.from_dict(c) for c in json.loads(record["columns"]))
    names = {c.name.lower() for c in cols}
    ident = like.row_identity if like and all(c.lower() in names for c in like.row_identity) else ()
    pk = like.primary_key if like and all(c.lower() in names for c in like.primary_key) else ()
    return TableSchema(
        table_id, cols, pk, like.chunk_key if like and ident else ident, ident or tuple(c.name for c in cols)
    )


def _same_columns(a: TableSchema, b: TableSchema) -> bool:
    return [c.name for c in a.columns] == [c.name for c in b.columns]


@dataclass
class StepPlanner:
    """Turns micro-batch records into steps for one sink, keeping the schema history current."""

    history: SchemaHistory
    behavior: str
    sink_name: str
    capabilities: Collection[str]
    on_record: Callable[[], None] = lambda: None  # persist the history (called before a sink acts)
    zero_dates: str = "null"  # the source's: every version the planner makes has it (cdc/types.py)

    def _moded(self, schema: TableSchema | None) -> TableSchema | None:
        """``schema`` with the pipeline's zero_dates: a table a DDL creates, or one the rows'
        TABLE_MAP describes, has its date columns typed as every other table's."""
        if schema is None or schema.zero_dates == self.zero_dates:
            return schema
        return replace(schema, zero_dates=self.zero_dates)

    def plan(self, records: Sequence[Mapping[str, Any]]) -> dict[TableId, list[Step]]:
        grouped: dict[TableId, list[Mapping[str, Any]]] = {}
        for r in records:
            grouped.setdefault(TableId(r["database"], r["table"]), []).append(r)
        return {
            t: self._table_steps(t, sorted(rs, key=lambda r: (int(r["first_seq"]), bool(r.get("ddl")) is False)))
            for t, rs in sorted(grouped.items())
        }

    # --- one table ----------------------------------------------------------------------------

    def _table_steps(self, t: TableId, records: list[Mapping[str, Any]]) -> list[Step]:
        ddls = [json.loads(r["ddl"]) for r in records if r.get("ddl")]
        if t not in self.history.versions:
            raise SchemaMismatchError(
                f"micro-batch holds changes of {t}, a table this stream does not capture. Fix: restart the stream job."
            )
        current = self.history.before(t, ddls[0]["offset"] if ddls else None)
        steps: list[Step] = []
        rows: list[Mapping[str, Any]] = []
        src, sink, pending = current.source, current.sink, current.pending

        def flush() -> None:
            if rows:
                assert src is not None and sink is not None
                steps.append(RowsStep(tuple(rows), src, sink))
                rows.clear()

        for i, r in enumerate(records):
            if r.get("ddl"):
                flush()
                mark = json.loads(r["ddl"])
                step = self._change(t, mark, src, sink, pending)
                if step is None:
                    continue
                steps.append(step)
                version = self.history.at(t, mark["offset"])
                assert version is not None
                current = version
                src, sink, pending = version.source, version.sink, version.pending
                continue
            logged = self._moded(logged_schema(t, r, src or sink or self._last_live(t)))
            assert logged is not None  # _moded keeps a schema a schema
            if src is None and pending:  # a rename brought a table under this name: its rows say its shape
                flush()
                settled = self._settle(t, current, src, sink, logged)
                steps.append(settled)
                current = self._settled(t, current)
                src, sink, pending = logged, settled.sink_after, False
                rows.append(r)
                continue
            if src is None or sink is None:
                raise SchemaMismatchError(
                    f"{t}: rows were logged after the table was dropped or renamed away "
                    f"(at {r.get('first_at') or '_seq ' + str(r['first_seq'])}); the schema history has no live version "
                    "for them. Fix: reload "
                    "the table (trigger the pipeline with reset=true)." + B.NO_RELAUNCH
                )
            if not _same_columns(logged, src):
                if not pending:
                    raise SchemaMismatchError(
                        f"{t}: rows at {r.get('first_at') or '_seq ' + str(r['first_seq'])} were logged with columns "
                        f"{list(logged.column_names)}, but the schema history expects {list(src.column_names)} "
                        "there, and no DDL in the binlog explains the difference (a change the stream did not see: "
                        "binlog off for a session, a filtered statement, a replica that diverged). Fix: reload the "
                        "table (trigger the pipeline with reset=true)." + B.NO_RELAUNCH
                    )
                flush()
                settled = self._settle(t, current, src, sink, logged)
                steps.append(settled)
                current = self._settled(t, current)
                src, sink, pending = logged, settled.sink_after, False
            elif pending:  # the rows confirm the shape the history guessed: no longer pending
                current = replace(current, pending=False)
                self.history.replace(t, current)
                self.on_record()
                pending = False
            rows.append(r)
        flush()
        return steps

    # --- a DDL ---------------------------------------------------------------------------------

    def _change(
        self, t: TableId, mark: Mapping[str, Any], src: TableSchema | None, sink: TableSchema | None, pending: bool
    ) -> ChangeStep | None:
        offset, sql = mark["offset"], mark["sql"]
        recorded = self.history.at(t, offset)
        if recorded is not None:  # a replay: the same actions, already planned
            return ChangeStep(
                sql,
                offset,
                int(mark["seq"]),
                tuple(B.SinkAction.from_dict(a) for a in recorded.actions),
                sink,
                recorded.sink,
                recorded.source,
                recorded.notes,
            )
        where = _where(offset)
        try:
            events = [
                e
                for e in parse_ddl(sql, mark.get("database") or "")
                if t in e.tables or isinstance(e, RenameTable) and t in (e.old, e.new)
            ]
            unreadable = None
        except DdlParseError as err:
            events, unreadable = [], err
        if unreadable is not None:
            if self.behavior in ("exception", "evolve"):
                raise SchemaMismatchError(
                    f"{t}: cannot read the DDL at {where}: {_short(sql)!r} ({unreadable}); schema_change_behavior "
                    f"'{self.behavior}' stops here. Every change before it is in the sink. Fix: set "
                    "schema_change_behavior to 'lenient' (the rows' own column metadata then decides), and restart "
                    "the stream." + B.NO_RELAUNCH
                ) from None
            log.warning(
                "%s: cannot read the DDL at %s (%s); the next rows' TABLE_MAP decides the shape", t, where, unreadable
            )
            return self._record(
                t, mark, TableVersion(offset, src, sink, sql, (), (f"unread DDL: {unreadable}",), pending=True), sink
            )
        if not events:
            return None  # an index, an option, another table's change: no row shape changes
        if self.behavior == "exception":
            raise B.stop(t, where, sql)
        if src is None or sink is None:
            # the table was gone; a CREATE or a rename into its name brings it back
            new_src = self._fold(t, None, events)
            if new_src is None or new_src == "pending":
                return self._record(
                    t, mark, TableVersion(offset, None, sink, sql, (), (), pending=new_src == "pending"), sink
                )
            plan = B.plan_returning_table(self.behavior, self.sink_name, self.capabilities, sink, new_src, where, sql)
            return self._record(
                t,
                mark,
                TableVersion(offset, new_src, plan.sink, sql, tuple(a.to_dict() for a in plan.actions), plan.notes),
                sink,
            )
        kinds = {type(e) for e in events}
        if DropTable in kinds or (
            RenameTable in kinds
            and any(e.old == t for e in events if isinstance(e, RenameTable))
            and not any(e.new == t for e in events if isinstance(e, RenameTable))
        ):
            kind = B.DROP_TABLE if DropTable in kinds else None
            if kind is None:  # renamed away: the sink keeps what it has; no more rows come under this name
                note = f"{t} renamed away; the sink table keeps its rows"
                return self._record(t, mark, TableVersion(offset, None, sink, sql, (), (note,)), sink)
            plan = B.plan_table_event(self.behavior, self.sink_name, self.capabilities, kind, sink, where, sql)
            return self._record(
                t,
                mark,
                TableVersion(offset, None, plan.sink, sql, tuple(a.to_dict() for a in plan.actions), plan.notes),
                sink,
            )
        actions: list[B.SinkAction] = []
        notes: list[str] = []
        if TruncateTable in kinds:
            plan = B.plan_table_event(self.behavior, self.sink_name, self.capabilities, B.TRUNCATE, sink, where, sql)
            actions += plan.actions
            notes += plan.notes
        new_src = self._fold(t, src, events)
        if new_src == "pending":
            return self._record(
                t,
                mark,
                TableVersion(offset, src, sink, sql, tuple(a.to_dict() for a in actions), tuple(notes), pending=True),
                sink,
            )
        assert isinstance(new_src, TableSchema)
        renames = [(e.old, e.new) for e in events if isinstance(e, RenameColumn)]
        renames += [
            (e.name, e.column.name)
            for e in events
            if isinstance(e, AlterColumnType) and e.name.lower() == e.column.name.lower() and e.name != e.column.name
        ]
        fills = {}
        for e in events:
            if isinstance(e, AddColumn):
                col = next((c for c in new_src.columns if c.name.lower() == e.column.name.lower()), None)
                if col is not None:
                    fills[col.name.lower()] = B.fill_value(
                        col, e.column.default, e.column.has_default, self.zero_dates == "text"
                    )
        plan = B.plan_columns(
            self.behavior, self.sink_name, self.capabilities, sink, src, new_src, renames, fills, where, sql
        )
        actions += plan.actions
        notes += plan.notes
        # Built on a pending version, the result is a guess too: the next rows' TABLE_MAP still decides.
        return self._record(
            t,
            mark,
            TableVersion(
                offset, new_src, plan.sink, sql, tuple(a.to_dict() for a in actions), tuple(notes), pending=pending
            ),
            sink,
        )

    def _fold(
        self, t: TableId, src: TableSchema | None, events: Sequence[Any]
    ) -> TableSchema | Literal["pending"] | None:
        """The source version after ``events``; "pending" when only the next TABLE_MAP can tell."""
        current: TableSchema | None = src
        for e in events:
            if isinstance(e, RenameTable):
                if e.old == t and e.new != t:
                    current = None
                elif e.new == t:
                    return "pending"  # another table's shape now carries this name
                continue
            if current is None and not hasattr(e, "columns"):
                continue
            try:
                current = apply_change(current, e)
            except Exception as err:  # the statement does not fit the version we hold
                log.warning(
                    "%s: %s did not apply to the schema history's version (%s); the next rows decide",
                    t,
                    type(e).__name__,
                    err,
                )
                return "pending"
            if current is not None and current.table_id != t:
                current = replace(current, table_id=t)
        return self._moded(current)

    def _last_live(self, t: TableId) -> TableSchema | None:
        """The table's last source shape before it went away (its key names the rows of a table
        renamed back under the name)."""
        return next((v.source for v in reversed(self.history.versions.get(t, [])) if v.source is not None), None)

    def _settle(
        self, t: TableId, latest: TableVersion, src: TableSchema | None, sink: TableSchema | None, logged: TableSchema
    ) -> ChangeStep:
        """A pending version settled from the columns rows were logged with (``src`` None: a table
        renamed under this name, planned as a table that comes back)."""
        where, ddl = _where(latest.offset or {}), latest.ddl or ""
        if src is None:
            plan = B.plan_returning_table(self.behavior, self.sink_name, self.capabilities, sink, logged, where, ddl)
        else:
            assert sink is not None
            plan = B.plan_columns(
                self.behavior, self.sink_name, self.capabilities, sink, src, logged, (), {}, where, ddl
            )
        settled = replace(
            latest,
            source=logged,
            sink=plan.sink,
            pending=False,
            actions=tuple(latest.actions) + tuple(a.to_dict() for a in plan.actions),
            notes=tuple(latest.notes) + plan.notes + ("shape taken from the rows' TABLE_MAP",),
        )
        self.history.replace(t, settled)
        self.on_record()
        return ChangeStep(
            latest.ddl or "", latest.offset or {}, -1, plan.actions, sink, plan.sink, logged, settled.notes
        )

    def _settled(self, t: TableId, latest: TableVersion) -> TableVersion:
        """The version ``_settle`` put in place of ``latest``."""
        if not latest.offset:
            return self.history.versions[t][0]
        version = self.history.at(t, latest.offset)
        assert version is not None  # _settle replaced the version at that offset
        return version

    def _record(
        self, t: TableId, mark: Mapping[str, Any], version: TableVersion, sink_before: TableSchema | None
    ) -> ChangeStep:
        self.history.record(t, version)
        self.on_record()
        step = ChangeStep(
            mark["sql"],
            mark["offset"],
            int(mark["seq"]),
            tuple(B.SinkAction.from_dict(a) for a in version.actions),
            sink_before,
            version.sink,
            version.source,
            version.notes,
        )
        log.info("%s: %s", t, step.describe())
        return step
