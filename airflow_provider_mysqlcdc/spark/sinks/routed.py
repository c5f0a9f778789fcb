"""A sink seen through a pipeline's routes and transforms (``cdc/transform/table_views.py``).

The snapshot job and the stream speak of source tables; this wrapper turns each call into the
wrapped sink's call for the table's sink table, with the rows transformed:

- snapshot rows are filtered and projected in the Spark tasks that read them (``mapInArrow``,
  before the sink writes its files), the window's corrections on the driver;
- a batch's rows of one source table get their own label in a merged sink table (``<batch>.<db.table>``),
  so the sink replaces exactly that table's rows on a rerun, never another shard's;
- a stream micro-batch is published once per *sink* table: the last change per source identity
  of every table routed there, transformed, in one step -- one commit per sink table and
  micro-batch, which keeps the wrapped sink's exactly-once bookkeeping (a merged table's shards
  would otherwise each claim the same micro-batch id);
- a changelog logs each change with both images, so its source's tasks transform the changes
  (``TableView.layout_rows``: the spec carries the rules) and write the sink table's lines; the
  micro-batch joins every routed table's parts into the sink table's one file.

DDL on a routed or transformed table is followed when it leaves the sink table's columns as they
are (an explicit projection that does not use the changed column); otherwise the stream stops with
the table, the statement and the fix, before the micro-batch is applied.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from ...cdc.chunks import KeyRange
from ...cdc.errors import ConfigError
from ...cdc.model import TableId, TableSchema
from ...cdc.sinks import logs_changes
from ...cdc.transform.table_views import Rules, TableView, resolve_views, sink_partitioning, sink_schemas
from .base import META_OP, META_SEQ, Sink, SnapshotFileSink, SnapshotWrite

log = logging.getLogger(__name__)


def transform_frame(frame: DataFrame, view: TableView) -> DataFrame:
    """``frame`` (the source table's rows) as the sink's rows, computed in the Spark tasks: a
    narrow step, so each partition (a chunk group) stays one partition."""
    if view.identity:
        return frame
    from pyspark.sql.pandas.types import from_arrow_schema

    def run(batches):
        for batch in batches:
            out = view.rows(batch)
            yield from out.to_batches()

    return frame.mapInArrow(run, from_arrow_schema(view.sink_arrow))


class RoutedSink(Sink):
    """``inner`` written through ``views`` (source table -> its view)."""

    def __init__(self, inner: Sink, rules: Rules, views: Mapping[TableId, TableView]) -> None:
        self.inner = inner
        self.rules = rules
        self.views = dict(views)
        self.name = inner.name
        self._partition_inner()

    def _partition_inner(self) -> None:
        """Hand the inner sink the sink tables' partition keys (a transform's ``partition_keys``):
        it creates them partitioned and writes every file into its partition; one that cannot
        refuses here, before anything is written."""
        keys = sink_partitioning(self.views)
        if keys:
            self.inner.partition_tables(keys)

    # --- which view ---------------------------------------------------------------------------

    def view(self, table_id: TableId) -> TableView:
        try:
            return self.views[table_id]
        except KeyError:
            raise ConfigError(
                f"{table_id} has no route/transform view: it was not among the tables the pipeline "
                "planned. Fix: trigger the pipeline with reset=true so the plan includes it"
            ) from None

    def _view_for(self, schema: TableSchema) -> TableView:
        """The view of ``schema`` (a version of a captured table): the planned one, or -- after a DDL
        -- one compiled for the new columns that must give the sink table the same columns."""
        if schema.table_id not in self.views:  # a table captured since (same rules)
            self.add_tables([schema])
        current = self.view(schema.table_id)
        if current.source.columns == schema.columns:
            return current
        others = [v.source for t, v in self.views.items() if t != schema.table_id]
        try:
            new = resolve_views(self.rules, [*others, schema])[schema.table_id]
        except ConfigError as e:
            raise ConfigError(
                f"{schema.table_id} changed (DDL) and its route/transform no longer applies: {e}"
            ) from None
        if current.identity and new.identity:  # no rule touches it: its sink follows DDL as always
            self.views[schema.table_id] = new
            if new.partition_keys != current.partition_keys:
                self._partition_inner()
            return new
        if not new.sink_arrow.equals(current.sink_arrow) or new.sink_id != current.sink_id:
            raise ConfigError(
                f"{schema.table_id} changed (DDL) and now gives its sink table {current.sink_id} other columns "
                f"({', '.join(f'{f.name} {f.type}' for f in new.sink_arrow)}; the sink has "
                f"{', '.join(f'{f.name} {f.type}' for f in current.sink_arrow)}). A routed or transformed table's "
                "sink follows DDL only while its columns stay the same; the stream stopped before this micro-batch. "
                "Fix: list the columns in the transform's projection (so a new column does not reach the sink), or "
                "trigger the pipeline with reset=true to load the tables in their new shape"
            )
        self.views[schema.table_id] = new
        return new

    def add_tables(self, schemas: Sequence[TableSchema]) -> None:
        """Views for tables the stream took over since it started (routed by the same rules; a new
        shard into a merged table must give it the same columns)."""
        new = [s for s in schemas if s.table_id not in self.views]
        if new:
            views = resolve_views(self.rules, [*(v.source for v in self.views.values()), *new])
            self.views.update({s.table_id: views[s.table_id] for s in new})
            self._partition_inner()

    @staticmethod
    def _label(view: TableView, batch_id: str) -> str:
        """A snapshot batch's name in the sink table: its own per source table of a merged table."""
        return f"{batch_id}.{view.source_value}" if view.source_column else batch_id

    # --- set-up -------------------------------------------------------------------------------

    def prepare(self, schemas: Sequence[TableSchema]) -> None:
        self.inner.prepare(sink_schemas({s.table_id: self._view_for(s) for s in schemas}))

    def observe_replaced_values(self, callback: Callable[[str, str, int], None]) -> None:
        self.inner.observe_replaced_values(callback)

    def close(self) -> None:
        self.inner.close()

    def asset_uri(self, table_id: TableId) -> str | None:
        return self.inner.asset_uri(self.view(table_id).sink_id)

    def forget_tables(self, table_ids: Sequence[TableId]) -> list[str]:
        sinks = list(dict.fromkeys(self.view(t).sink_id for t in table_ids))
        return self.inner.forget_tables(sinks)

    def schema_capabilities(self) -> frozenset[str]:
        return self.inner.schema_capabilities()

    @property
    def _logs_changes(self) -> bool:
        """The wrapped sink logs each change (the changelog): its source's tasks transform them."""
        return logs_changes(self.inner.name)

    def direct_write(self) -> Any:
        spec = self.inner.direct_write()
        if spec is None or not self._logs_changes:
            return spec
        import json

        tables = {
            v.source_id.text: [v.sink_id.text, bool(v.source_column)] for v in self.views.values() if not v.identity
        }
        return replace(spec, views=json.dumps({"rules": self.rules.to_dict(), "tables": tables}, sort_keys=True))

    # --- snapshot -----------------------------------------------------------------------------

    def writes_snapshot_files(self) -> bool:
        return self.inner.writes_snapshot_files()

    def _ranges(self, view: TableView, ranges: Sequence[KeyRange]) -> list[KeyRange]:
        return [replace(r, table_id=view.sink_id) for r in ranges]

    def write_snapshot(
        self, schema: TableSchema, frame: DataFrame, ranges: Sequence[KeyRange], batch_id: str
    ) -> SnapshotWrite:
        view = self._view_for(schema)
        return self.inner.write_snapshot(
            view.sink_schema, transform_frame(frame, view), self._ranges(view, ranges), self._label(view, batch_id)
        )

    def write_chunk_files(self, schema: TableSchema, frame: DataFrame, batch_id: str, files: int) -> Any:
        view = self._view_for(schema)
        return self._file_sink().write_chunk_files(
            view.sink_schema,
            transform_frame(frame, view),
            self._label(view, batch_id),
            files,
        )

    def arrow_snapshot_spec(self, schema: TableSchema, batch_id: str) -> Any:
        """The inner sink's, for a table written as it is (no route, no transform): the Arrow reader
        writes source rows, which only such a table takes."""
        view = self._view_for(schema)
        spec = getattr(self.inner, "arrow_snapshot_spec", None)
        if not view.identity or spec is None:
            return None
        return spec(view.sink_schema, self._label(view, batch_id))

    def commit_chunk_files(
        self,
        spark: Any,
        schema: TableSchema,
        batch_id: str,
        records: Sequence[Any],
        corrections: Any,
        ranges: Sequence[KeyRange],
    ) -> SnapshotWrite:
        view = self._view_for(schema)
        return self._file_sink().commit_chunk_files(
            spark,
            view.sink_schema,
            self._label(view, batch_id),
            records,
            view.corrections(corrections),
            self._ranges(view, ranges),
        )

    def discard_uncommitted(self, schema: TableSchema, batch_id: str) -> int:
        view = self._view_for(schema)
        return self._file_sink().discard_uncommitted(view.sink_schema, self._label(view, batch_id))

    def _file_sink(self) -> SnapshotFileSink:
        """The inner sink, where it writes snapshot files (the callers above run only then)."""
        return cast(SnapshotFileSink, self.inner)

    # --- stream -------------------------------------------------------------------------------

    def write_changes(self, schema: TableSchema, changes: DataFrame, batch_id: int) -> None:
        raise ConfigError(
            "route/transform: applied with the sink's direct stream write only. Fix: remove "
            "direct_write: false from sink_options"
        )

    def publish_micro_batch(self, planned: Mapping[TableId, Sequence[Any]], batch_id: int) -> int:
        """One step per sink table: every routed table's last changes, transformed (module docstring)."""
        from ...cdc.schema.steps import RowsStep
        from .last_change import merged_rows, to_ipc

        groups: dict[TableId, list[pa.Table]] = {}
        records: dict[TableId, list[Any]] = {}
        changes: dict[TableId, int] = {}
        written = 0
        for table_id, steps in planned.items():
            if table_id not in self.views:  # captured since the stream started: routed by the same rules
                first = steps[0]
                schema = first.source if isinstance(first, RowsStep) else (first.source_after or first.sink_before)
                if schema is not None:
                    self.add_tables([schema])
            view = self.views.get(table_id)
            if view is None or view.identity:
                # no rule touches it: its steps (rows, DDL, re-snapshots) go to the sink as they are
                written += self.inner.publish_steps(table_id, steps, batch_id)
                continue
            for step in steps:
                if not isinstance(step, RowsStep):
                    if step.source_after is None:
                        raise ConfigError(
                            f"{table_id}: {step.describe()}; a routed or transformed table that is dropped or "
                            "renamed away is not followed yet. The stream stopped before this micro-batch. Fix: "
                            "trigger the pipeline with reset=true to load the tables again"
                        )
                    self._view_for(step.source_after)
                    log.info(
                        "%s: %s (its sink table %s keeps its columns)",
                        table_id,
                        step.describe(),
                        self.view(table_id).sink_id,
                    )
                    continue
                view = self._view_for(step.source)
                changes[view.sink_id] = changes.get(view.sink_id, 0) + step.changes
                if self._logs_changes:  # its tasks wrote the sink table's lines: the parts are joined
                    records.setdefault(view.sink_id, []).extend(step.records)
                    continue
                rows = merged_rows(step.source, [bytes(r["payload"]) for r in step.records])
                groups.setdefault(view.sink_id, []).append(view.changes(rows, META_OP, extra=[META_SEQ]))
        shapes = {s.table_id: s for s in sink_schemas(self.views)}
        for sink_id, parts in records.items():
            schema = shapes[sink_id]
            written += self.inner.publish_steps(sink_id, [RowsStep(tuple(parts), schema, schema)], batch_id)
        for sink_id, parts in groups.items():
            rows = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
            schema = shapes[sink_id]
            seq = rows.column(META_SEQ)
            record = {
                "database": sink_id.database,
                "table": sink_id.table,
                "changes": changes[sink_id],
                "rows": rows.num_rows,
                "first_seq": int(pc.min(seq).as_py() or 0),
                "last_seq": int(pc.max(seq).as_py() or 0),
                "payload": to_ipc(rows),
                "columns": "",
                "ddl": "",
                "first_at": "",
            }
            step = RowsStep((record,), schema, schema)
            written += self.inner.publish_steps(sink_id, [step], batch_id)
        return written

    def publish_steps(self, table_id: TableId, steps: Sequence[Any], batch_id: int) -> int:
        return self.publish_micro_batch({table_id: steps}, batch_id)

    def keys_in_sink(self, schema: TableSchema, key_range: KeyRange | None = None) -> Any:
        """The keys the sink holds for ``schema``'s rows (a batch read again while the stream runs
        deletes those it lacks): the sink table's, only this table's rows of a merged one, under the
        source's names. The rows themselves come back through ``resnapshot_record`` and are
        transformed with the micro-batch's changes."""
        view = self._view_for(schema)
        if view.identity:
            return self.inner.keys_in_sink(schema, key_range)
        if self._logs_changes:
            raise ConfigError(
                f"{schema.table_id} is routed or transformed into a changelog, and a batch read again "
                "while the stream runs is not logged through routes and transforms yet. Fix: trigger "
                "the pipeline with reset=true to load everything again"
            )
        sink_names = set(view.sink_schema.column_names)
        missing = [c for c in dict.fromkeys([*schema.row_identity, *schema.chunk_key]) if c not in sink_names]
        if missing:
            raise ConfigError(
                f"{schema.table_id}: a batch read again while the stream runs replaces the batch's key "
                f"ranges of the chunk key ({', '.join(schema.chunk_key)}), and the projection leaves "
                f"{', '.join(missing)} out of the sink table, so its rows there cannot be told by range. "
                "Fix: keep the chunk key columns in the projection, or trigger the pipeline with "
                "reset=true to load everything again"
            )
        keys = self.inner.keys_in_sink(view.sink_schema, None)
        if keys is None:
            return None
        if view.source_column:
            keys = keys.filter(pc.equal(keys.column(view.source_column), view.source_value))
        return keys.select(list(dict.fromkeys([*schema.row_identity, *schema.chunk_key])))

    def consistency_keys(self, schema: TableSchema, upto_batch: int) -> tuple[Any, int]:
        """This table's keys in its sink table (only its rows of a merged one), under the source's
        names; a transform that filters rows keeps a sink that is not the source's rows, which
        the check cannot compare."""
        view = self._view_for(schema)
        if view.identity:
            return self.inner.consistency_keys(schema, upto_batch)
        if view.filter is not None:
            raise ConfigError(
                f"{schema.table_id} is transformed with a row filter, so its sink table holds a part of "
                "its rows by design. Fix: leave it out of the consistency check (tables=...)"
            )
        self.keys_in_sink(schema, None)  # refuses what it refuses, naming the fix
        keys, applied = self.inner.consistency_keys(view.sink_schema, upto_batch)
        if view.source_column:
            keys = keys.filter(pc.equal(keys.column(view.source_column), view.source_value))
        return keys.select(list(dict.fromkeys([*schema.row_identity, *schema.chunk_key]))), applied

    def resnapshot_record(
        self,
        schema: TableSchema,
        image: Any,
        rows: Any,
        gone: Any,
        key_range: KeyRange,
        info: Mapping[str, Any],
        batch_id: int,
        seq: int,
    ) -> dict[str, Any]:
        view = self._view_for(schema)
        if view.identity:
            return self.inner.resnapshot_record(schema, image, rows, gone, key_range, info, batch_id, seq)
        self.keys_in_sink(schema, key_range)  # a changelog: refused, naming the table
        # the re-read rows as last changes of the source table: the micro-batch's publish transforms them
        return Sink.resnapshot_record(self, schema, image, rows, gone, key_range, info, batch_id, seq)


def pipeline_sink(config: Any, schemas: Sequence[TableSchema]) -> Sink:
    """The pipeline's sink (``config``: a ``PipelineConfig``), seen through its routes and transforms
    when it has any."""
    from .factory import build_sink

    sink = build_sink(config.sink)
    rules = config.rules
    if not rules:
        return sink
    views = resolve_views(rules, schemas, sink_type=config.sink.type, direct_write=sink.direct_write() is not None)
    return RoutedSink(sink, rules, views)
