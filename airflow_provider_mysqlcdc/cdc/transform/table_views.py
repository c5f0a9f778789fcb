"""What a source table looks like in its sink once a pipeline's ``route`` and ``transform`` rules
apply: the sink table, its columns and key, and the functions that turn the table's rows, change
rows and snapshot corrections into the sink's.

Why the sink is always keyed by the source's row identity (plus the source table for a merged
sink): the snapshot replaces a batch's rows and the stream's merge-based sinks apply the last
change per key. Both only ever know a row by its source identity -- a delete carries nothing
else, a snapshot correction names keys. So the identity columns must reach the sink unchanged
(the projection keeps them as plain columns), and a ``primary_keys`` other than the source's
identity is refused: an update that changed such a key would leave the old sink row behind.

A filter makes the sink hold the rows that pass it: a row whose last change fails it (an update
that moved it out) is deleted from the sink, one that passes is upserted (an update that moved
it in inserts it). The evaluator is ``transform_eval`` (Spark SQL's values), the same for the
snapshot's Spark tasks and the stream's driver, so the two paths cannot disagree.

Pure Arrow; no Spark, no Airflow.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError
from ..model import Column, TableId, TableSchema
from ..plan import Plan
from ..sinks import PARTITION_SINKS, VIEW_SINKS, logs_changes
from ..snapshot.corrections import TableCorrections
from ..types import arrow_schema, map_table
from .partitioning import PartitionKey, check_partition_keys, parse_partition_keys
from .routing import DEFAULT_SOURCE_COLUMN, Routing, resolve_routing
from .transform_exprs import CompiledFilter, CompiledProjection, compile_filter, compile_projection

OP_COLUMN = "_op"
UPSERT_OPS = ("+I", "+U")
# The op snapshot rows (and the window's corrections) are evaluated with, as Flink CDC reads them.
SNAPSHOT_OP = "+I"


@dataclass(frozen=True)
class Rules:
    """A pipeline's ``route`` and ``transform`` rules as plain mappings (what ``pipeline.json`` keeps)."""

    route: tuple[Mapping[str, Any], ...] = ()
    transform: tuple[Mapping[str, Any], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.route or self.transform)

    def to_dict(self) -> dict[str, Any]:
        return {"route": [dict(r) for r in self.route], "transform": [dict(t) for t in self.transform]}

    @classmethod
    def from_values(cls, route: Any = None, transform: Any = None) -> "Rules":
        """From a pipeline file's typed rules, mappings, or JSON text (a template field)."""
        return cls(
            _rule_list(route, "route", ("source_table", "sink_table", "description")),
            _rule_list(
                transform,
                "transform",
                ("source_table", "projection", "filter", "primary_keys", "partition_keys", "description"),
            ),
        )


def _rule_list(value: Any, what: str, keys: Sequence[str]) -> tuple[Mapping[str, Any], ...]:
    if value in (None, "", (), []):
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError(
                f"{what}: {value[:80]!r} is not a JSON list of rules. Fix: give a list of mappings "
                f"with {', '.join(keys[:2])}"
            ) from None
    if not isinstance(value, (list, tuple)):
        raise ConfigError(
            f"{what}: found {type(value).__name__}, need a list of rules. Fix: give a list of "
            f"mappings with {', '.join(keys[:2])}"
        )
    out = []
    for i, rule in enumerate(value):
        if hasattr(rule, "model_dump"):
            rule = rule.model_dump()
        if not isinstance(rule, Mapping) or not rule.get("source_table"):
            raise ConfigError(
                f"{what}[{i}]: found {rule!r}, need a mapping with source_table. Fix: give each "
                f"rule {', '.join(keys[:2])}"
            )
        unknown = sorted(set(rule) - set(keys))
        if unknown:
            raise ConfigError(f"{what}[{i}]: unknown key(s) {', '.join(unknown)}. Fix: use only {', '.join(keys)}")
        # a description is for readers: editing it changes nothing loaded (nor compares as other rules)
        out.append(
            {
                k: (list(v) if isinstance(v, tuple) else v)
                for k, v in rule.items()
                if v is not None and k != "description"
            }
        )
    return tuple(out)


# --- sink columns of computed values ---------------------------------------------------------


def column_for(name: str, ordinal: int, arrow_type: pa.DataType) -> Column:
    """A sink column holding a computed value of ``arrow_type``: declared as the MySQL type whose
    mapping (``types.map_column``) is that Arrow type, so every sink types it as it would a source
    column of that type."""
    if pa.types.is_decimal(arrow_type):
        return Column(
            name,
            ordinal,
            "decimal",
            f"decimal({arrow_type.precision},{arrow_type.scale})",
            True,
            numeric_precision=arrow_type.precision,
            numeric_scale=arrow_type.scale,
        )
    if pa.types.is_timestamp(arrow_type):
        kind = "datetime" if arrow_type.tz is None else "timestamp"
        return Column(name, ordinal, kind, f"{kind}(6)", True, datetime_precision=6)
    simple = {
        pa.int8(): ("tinyint", "tinyint(4)"),
        pa.int16(): ("smallint", "smallint(6)"),
        pa.int32(): ("int", "int(11)"),
        pa.int64(): ("bigint", "bigint(20)"),
        pa.float32(): ("float", "float"),
        pa.float64(): ("double", "double"),
        pa.string(): ("longtext", "longtext"),
        pa.large_string(): ("longtext", "longtext"),
        pa.binary(): ("longblob", "longblob"),
        pa.large_binary(): ("longblob", "longblob"),
        pa.date32(): ("date", "date"),
        pa.bool_(): ("boolean", "boolean"),
    }
    if arrow_type in simple:
        data_type, column_type = simple[arrow_type]
        charset = "utf8mb4" if data_type == "longtext" else None
        return Column(name, ordinal, data_type, column_type, True, charset=charset)
    raise ConfigError(
        f"transform: the output column {name!r} is of type {arrow_type}, which no sink column "
        "holds. Fix: CAST it to STRING, a number type, DATE or TIMESTAMP"
    )


def source_column(name: str, ordinal: int) -> Column:
    """The merged sink's column naming each row's source table (``db.table``)."""
    return Column(name, ordinal, "varchar", "varchar(193)", False, charset="utf8mb4", char_max_length=193)


# --- one table's view ------------------------------------------------------------------------


@dataclass
class TableView:
    """One source table as its sink sees it."""

    source: TableSchema
    sink_schema: TableSchema
    projection: Optional[CompiledProjection]
    filter: Optional[CompiledFilter]
    source_column: Optional[str]  # set for a merged sink: holds ``source_value``
    source_arrow: pa.Schema = field(repr=False, default=None)  # type: ignore[assignment]
    sink_arrow: pa.Schema = field(repr=False, default=None)  # type: ignore[assignment]
    # how the sink table is partitioned (a transform's partition_keys, checked against its columns);
    # the rows are not changed by it, so a view with only this is still ``identity``
    partition_keys: tuple[PartitionKey, ...] = ()

    def __post_init__(self) -> None:
        if self.source_arrow is None:
            self.source_arrow = arrow_schema(map_table(self.source, "UTC"))
        if self.sink_arrow is None:
            self.sink_arrow = arrow_schema(map_table(self.sink_schema, "UTC"))

    @property
    def source_id(self) -> TableId:
        return self.source.table_id

    @property
    def sink_id(self) -> TableId:
        return self.sink_schema.table_id

    @property
    def source_value(self) -> str:
        return str(self.source_id)

    @property
    def identity(self) -> bool:
        """True when the view changes nothing: same table, columns and rows."""
        return (
            self.projection is None
            and self.filter is None
            and self.source_column is None
            and self.sink_id == self.source_id
        )

    def sink_key(self, key: Sequence[Any]) -> tuple[Any, ...]:
        """The sink's key of the row whose source identity is ``key``."""
        return (self.source_value, *key) if self.source_column else tuple(key)

    # -- rows ------------------------------------------------------------------------------

    def _input(self, rows: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
        """``rows`` with the source columns in the types the transform was compiled for (Spark may
        hand strings as large strings)."""
        table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
        arrays = []
        for f in self.source_arrow:
            col = table.column(f.name)
            arrays.append((col if col.type == f.type else col.cast(f.type)).combine_chunks())
        return pa.RecordBatch.from_arrays(arrays, schema=self.source_arrow)

    def _project(self, batch: pa.RecordBatch, op: str | pa.Array) -> pa.RecordBatch:
        if self.projection is None:
            return batch
        return self.projection.evaluate(batch, database=self.source_id.database, table=self.source_id.table, op=op)

    def _passes(self, batch: pa.RecordBatch, op: str | pa.Array) -> pa.Array:
        if self.filter is None:
            return pa.repeat(True, batch.num_rows) if batch.num_rows else pa.array([], pa.bool_())
        return self.filter.evaluate(batch, database=self.source_id.database, table=self.source_id.table, op=op)

    def _finish(self, projected: pa.RecordBatch, extra: Mapping[str, pa.Array] = {}) -> pa.Table:
        n = projected.num_rows
        columns = {}
        for f in self.sink_arrow:
            if f.name == self.source_column:
                columns[f.name] = pa.array([self.source_value] * n, f.type)
            else:
                col = projected.column(projected.schema.get_field_index(f.name))
                columns[f.name] = col if col.type == f.type else col.cast(f.type)
        columns.update(extra)
        return pa.table(columns)

    def rows(self, rows: pa.RecordBatch | pa.Table) -> pa.Table:
        """Snapshot rows of the source table -> the sink's rows (filtered, projected)."""
        batch = self._input(rows)
        keep = self._passes(batch, SNAPSHOT_OP)
        batch = batch.filter(keep)
        return self._finish(self._project(batch, SNAPSHOT_OP))

    def changes(self, rows: pa.Table, op_column: str = OP_COLUMN, extra: Sequence[str] = ()) -> pa.Table:
        """A micro-batch's last change per source identity (source columns, ``op_column`` and the
        ``extra`` columns, e.g. ``_seq``) -> the sink's: an upsert whose after-image passes the
        filter is projected; any other row becomes a ``-D`` of its identity."""
        if rows.num_rows == 0:
            return self._finish(
                self._project(self._input(rows), SNAPSHOT_OP),
                {op_column: pa.array([], pa.string()), **{c: pa.array([], rows.schema.field(c).type) for c in extra}},
            )
        ops = rows.column(op_column).combine_chunks().cast(pa.string())
        batch = self._input(rows)
        upsert = pc.is_in(ops, value_set=pa.array(UPSERT_OPS))
        keep = pc.and_(upsert, self._passes(batch, ops))
        kept_idx = pc.indices_nonzero(keep)
        gone_idx = pc.indices_nonzero(pc.invert(keep))
        parts = []
        if len(kept_idx):
            kept = batch.take(kept_idx)
            parts.append(
                self._finish(
                    self._project(kept, ops.take(kept_idx)),
                    {op_column: ops.take(kept_idx), **{c: rows.column(c).take(kept_idx) for c in extra}},
                )
            )
        if len(gone_idx):
            gone = batch.take(gone_idx)
            parts.append(
                self._deletes(
                    gone,
                    {
                        op_column: pa.array(["-D"] * len(gone_idx), pa.string()),
                        **{c: rows.column(c).take(gone_idx) for c in extra},
                    },
                )
            )
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _deletes(self, batch: pa.RecordBatch, extra: Mapping[str, Any]) -> pa.Table:
        """Sink rows that only say which row goes: its identity, the other columns NULL."""
        n = batch.num_rows
        columns = {}
        for f in self.sink_arrow:
            if f.name == self.source_column:
                columns[f.name] = pa.array([self.source_value] * n, f.type)
            elif f.name in self.source.row_identity:
                col = batch.column(batch.schema.get_field_index(f.name))
                columns[f.name] = col if col.type == f.type else col.cast(f.type)
            else:
                columns[f.name] = pa.nulls(n, f.type)
        columns.update(extra)
        return pa.table(columns)

    def corrections(self, tc: Optional[TableCorrections]) -> Optional[TableCorrections]:
        """A batch's window corrections (source keys and after-images) in the sink's terms."""
        if tc is None:
            return None
        out = TableCorrections()
        for key in tc.deleted:
            out.delete(self.sink_key(key))
        if tc.upserts:
            keys = list(tc.upserts)
            images = pa.Table.from_pylist([dict(tc.upserts[k]) for k in keys], schema=self.source_arrow)
            batch = self._input(images)
            passes = self._passes(batch, SNAPSHOT_OP).to_pylist()
            projected = self._finish(self._project(batch, SNAPSHOT_OP)).to_pylist()
            for key, ok, row in zip(keys, passes, projected):
                if ok:
                    out.upsert(self.sink_key(key), row)
                else:
                    out.delete(self.sink_key(key))
        return out

    def layout_rows(self, rows: pa.RecordBatch, column: str) -> pa.RecordBatch:
        """A binlog batch of the source table (``op`` insert/update/delete, the images in the struct
        column ``column``) as the sink table's: each image projected, and each change as the filter
        makes it (``routing.filtered_changes``: an update out of the filter is a delete of the
        before image, one into it an insert of the after image, one outside it dropped). For the
        changelog, which logs every change with both images."""
        from .routing import filtered_changes

        op = rows.column(rows.schema.get_field_index("op"))
        pair = rows.column(rows.schema.get_field_index(column))
        before, after = pair.flatten()
        has_before = pc.is_in(op, value_set=pa.array(["update", "delete"]))
        has_after = pc.is_in(op, value_set=pa.array(["insert", "update"]))
        before_in = self._image_passes(before, has_before, pc.if_else(pc.equal(op, "update"), "-U", "-D"))
        after_in = self._image_passes(after, has_after, pc.if_else(pc.equal(op, "update"), "+U", "+I"))
        became = filtered_changes(has_before, has_after, before_in, after_in)
        keep = pc.is_valid(became)
        new_op = became.filter(keep)
        before = before.filter(keep)
        after = after.filter(keep)
        old_op = op.filter(keep)
        out_before = self._images(
            before,
            pc.is_in(new_op, value_set=pa.array(["update", "delete"])),
            pc.if_else(pc.equal(old_op, "update"), "-U", "-D"),
        )
        out_after = self._images(
            after,
            pc.is_in(new_op, value_set=pa.array(["insert", "update"])),
            pc.if_else(pc.equal(old_op, "update"), "+U", "+I"),
        )
        struct = pa.StructArray.from_arrays([out_before, out_after], names=["before", "after"])
        arrays, fields = [], []
        for i, f in enumerate(rows.schema):
            col = rows.column(i).filter(keep)
            if f.name == column:
                col, f = struct, pa.field(column, struct.type)
            elif f.name == "op":
                col = new_op.cast(f.type)
            arrays.append(col)
            fields.append(f)
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))

    def _image_passes(self, images: pa.Array, present: pa.Array, op: pa.Array) -> pa.Array:
        """The filter over the images that are there (False where there is none)."""
        idx = pc.indices_nonzero(present)
        out = np.zeros(len(images), dtype=bool)
        if len(idx):
            batch = self._input(pa.RecordBatch.from_struct_array(images.take(idx)))
            out[idx.to_numpy()] = self._passes(batch, op.take(idx)).to_numpy(zero_copy_only=False)
        return pa.array(out, pa.bool_())

    def _images(self, images: pa.Array, wanted: pa.Array, op: pa.Array) -> pa.Array:
        """The sink images (a struct of the sink's columns) of the ``wanted`` rows, NULL elsewhere."""
        sink_type = pa.struct(list(self.sink_arrow))
        idx = pc.indices_nonzero(wanted)
        if not len(idx):
            return pa.nulls(len(images), sink_type)
        batch = self._input(pa.RecordBatch.from_struct_array(images.take(idx)))
        projected = self._finish(self._project(batch, op.take(idx)))
        values = pa.StructArray.from_arrays(
            [projected.column(f.name).combine_chunks() for f in self.sink_arrow], fields=list(self.sink_arrow)
        )
        if len(idx) == len(images):
            return values
        # scatter: position i takes values[k] where idx[k] == i, else NULL
        where = np.full(len(images), -1, dtype=np.int64)
        where[idx.to_numpy()] = np.arange(len(idx))
        return values.take(pa.array(where, mask=where < 0))


def apply_primary_keys(
    rules: Rules, schemas: Iterable[TableSchema], default_database: Optional[str] = None
) -> list[TableSchema]:
    """The tables with a transform's ``primary_keys`` as their row identity where they have no
    primary key (Flink CDC's way to give a table without one a key: the user vouches that the
    columns identify a row). Snapshot corrections, the stream's reduction and the sink all match
    rows by it. A table with a primary key keeps it (``_view`` refuses other keys)."""
    out = []
    for schema in schemas:
        rule = _transform_rule(schema.table_id, rules, default_database) or {}
        keys = rule.get("primary_keys")
        if not keys or schema.primary_key:
            out.append(schema)
            continue
        by_lower = {c.name.lower(): c.name for c in schema.columns}
        missing = [k for k in keys if k.lower() not in by_lower]
        if missing:
            raise ConfigError(
                f"transform of {schema.table_id}: primary_keys {', '.join(missing)} are not columns of "
                f"the table ({', '.join(schema.column_names)}). Fix: name columns of the table"
            )
        out.append(replace(schema, row_identity=tuple(by_lower[k.lower()] for k in keys)))
    return out


def plan_with_primary_keys(plan: Plan, rules: Rules) -> Plan:
    """The plan's tables with their transforms' ``primary_keys`` as row identity where they have
    no primary key: the snapshot's corrections and the stream match rows by what the plan keeps."""
    if not rules:
        return plan
    return replace(plan, schemas={s.table_id: s for s in apply_primary_keys(rules, plan.schemas.values())})


def sink_table_of(rules: Rules, table_id: TableId, default_database: Optional[str] = None) -> TableId:
    """The sink table ``table_id``'s rows land in: the first matching route's, else its own name."""
    from ..source.table_patterns import TablePattern, qualify
    from .routing import sink_table_id

    for rule in rules.route:
        if TablePattern(qualify(rule["source_table"], default_database)).matches(table_id):
            return sink_table_id(rule["sink_table"])
    return table_id


# --- resolving every table's view ------------------------------------------------------------


def resolve_views(
    rules: Rules,
    schemas: Iterable[TableSchema],
    *,
    sink_type: Optional[str] = None,
    direct_write: bool = True,
    default_database: Optional[str] = None,
    source_column_name: str = DEFAULT_SOURCE_COLUMN,
) -> dict[TableId, TableView]:
    """Every captured table's view; a ConfigError naming the rule and the fix for rules this
    engine cannot apply (before any row is read)."""
    schemas = apply_primary_keys(rules, schemas, default_database)
    if sink_type is not None and sink_type not in PARTITION_SINKS:
        partitioned = [r for r in rules.transform if r.get("partition_keys")]
        if partitioned:
            raise ConfigError(
                f"transform of {partitioned[0]['source_table']}: partition_keys are applied by the "
                f"{', '.join(PARTITION_SINKS)} sink only, and the sink is {sink_type} (it would write its tables "
                f"unpartitioned). Fix: remove partition_keys, or use the {' or '.join(PARTITION_SINKS)} sink"
            )
    if rules and sink_type is not None:
        if sink_type not in VIEW_SINKS:
            raise ConfigError(
                f"route/transform: the {sink_type} sink does not apply routes and transforms (they "
                f"are applied by the {', '.join(VIEW_SINKS)} sinks). Fix: use one of those sinks, or "
                "remove the route and transform sections"
            )
        if not direct_write:
            what = "format: parquet" if logs_changes(sink_type) else "direct_write: false"
            raise ConfigError(
                f"route/transform: applied with the sink's direct stream write only, and sink_options "
                f"has {what}. Fix: remove {what.split(':')[0]} from sink_options (the default has it), "
                "or remove the route and transform sections"
            )
    routing = resolve_routing(
        rules.route,
        schemas,
        transforms=rules.transform,
        default_database=default_database,
        source_column=source_column_name,
    )
    views = {s.table_id: _view(s, routing, rules, default_database) for s in schemas}
    _check_merged_alike(views, routing)
    return views


def view_of(
    schema: TableSchema, rules: Rules, sink: TableId, merged: bool, source_column_name: str = DEFAULT_SOURCE_COLUMN
) -> TableView:
    """``schema``'s view when its sink table and whether that table is merged are known (the
    stream's tasks see one table version at a time; the driver resolved the routes)."""
    from .routing import SinkTable

    identity = (source_column_name, *schema.row_identity) if merged else schema.row_identity
    routing = Routing(
        {schema.table_id: sink},
        {sink: SinkTable(sink, (schema.table_id,), merged, source_column_name if merged else None, identity)},
    )
    return _view(apply_primary_keys(rules, [schema])[0], routing, rules, None)


def _transform_rule(table: TableId, rules: Rules, default_database: Optional[str]) -> Optional[Mapping[str, Any]]:
    from ..source.table_patterns import TablePattern, qualify

    for rule in rules.transform:
        if TablePattern(qualify(rule["source_table"], default_database)).matches(table):
            return rule
    return None


def _view(schema: TableSchema, routing: Routing, rules: Rules, default_database: Optional[str]) -> TableView:
    t = schema.table_id
    sink = routing.sink_for(t)
    rule = _transform_rule(t, rules, default_database) or {}
    source_arrow = arrow_schema(map_table(schema, "UTC"))
    projection = compile_projection(rule["projection"], source_arrow, t) if rule.get("projection") else None
    filt = compile_filter(rule["filter"], source_arrow, t) if rule.get("filter") else None
    if filt is not None and "op" in _meta_values(filt):
        raise ConfigError(
            f"transform filter {rule['filter']!r} of {t}: __data_event_type__ in a filter decides by "
            "the kind of change, but the sink holds rows (the last change of each), so it would "
            "differ from the filtered table. Fix: filter on the row's columns only"
        )
    keys = rule.get("primary_keys")
    if keys and [k.lower() for k in keys] != [k.lower() for k in schema.row_identity]:
        raise ConfigError(
            f"transform of {t}: primary_keys {', '.join(keys)} differ from the table's primary key "
            f"({', '.join(schema.row_identity)}); a sink keyed otherwise than a table's primary key is "
            "not built yet (an update that changed such a key would leave its old row in the sink). "
            "Fix: remove primary_keys, or give the primary key's columns (primary_keys set the key of "
            "tables without a primary key)"
        )
    columns: list[Column] = []
    merged_column = sink.source_column if sink.merged else None
    if sink.merged:
        assert merged_column is not None  # routing names the source column of every merged sink
        columns.append(source_column(merged_column, 1))
    if projection is None:
        columns += [replace(c, ordinal=len(columns) + i + 1) for i, c in enumerate(schema.columns)]
    else:
        out = projection.output_schema()
        for (name, node), f in zip(projection.items, out):
            ordinal = len(columns) + 1
            if node.op == "col":
                columns.append(replace(schema.column(node.value), name=name, ordinal=ordinal))
            else:
                columns.append(column_for(name, ordinal, f.type))
        for ident in schema.row_identity:
            item = next((node for name, node in projection.items if name == ident), None)
            if item is None or item.op != "col" or item.value != ident:
                found = "leaves it out" if item is None else f"computes it ({item.sql or 'an expression'})"
                raise ConfigError(
                    f"transform projection {rule['projection']!r} of {t}: {ident!r} is a column of the "
                    f"row identity ({', '.join(schema.row_identity)}), and the projection {found}; "
                    "the sink matches rows and deletes by it. Fix: keep it as a plain column under its "
                    f"own name: {ident}"
                )
    if projection is None and filt is None and not sink.merged and sink.table_id == t:
        # no rule touches its rows (partition_keys only lay them out)
        view = TableView(schema, schema, None, None, None, source_arrow=source_arrow)
        view.partition_keys = _partitioning(rule, view)
        return view
    # the source identity (primary_keys equal it, checked above), behind the source column when merged
    identity = (merged_column, *schema.row_identity) if merged_column is not None else tuple(schema.row_identity)
    sink_schema = TableSchema(
        sink.table_id,
        tuple(columns),
        primary_key=identity,
        chunk_key=identity,
        row_identity=identity,
        engine=schema.engine,
        approx_rows=schema.approx_rows,
        zero_dates=schema.zero_dates,
    )
    map_table(sink_schema, "UTC")  # every sink column has a type
    view = TableView(schema, sink_schema, projection, filt, merged_column, source_arrow=source_arrow)
    view.partition_keys = _partitioning(rule, view)
    return view


def _partitioning(rule: Mapping[str, Any], view: TableView) -> tuple[PartitionKey, ...]:
    """The rule's ``partition_keys``, checked against the sink table's columns and their types."""
    entries = rule.get("partition_keys")
    if not entries:
        return ()
    where = f"transform of {view.source_id}"
    try:
        keys = parse_partition_keys(entries)
    except ConfigError as e:
        raise ConfigError(f"{where}: partition_keys{e}") from None
    return check_partition_keys(view.sink_id, keys, view.sink_arrow, where)


def _meta_values(compiled: Any) -> set[str]:
    found: set[str] = set()

    def walk(node: Any) -> None:
        if node.op == "meta":
            found.add(node.value)
        for a in node.args:
            walk(a)

    for root in compiled._roots():
        walk(root)
    return found


def _check_merged_alike(views: Mapping[TableId, TableView], routing: Routing) -> None:
    """The tables merged into one sink table give it the same columns and types."""
    for sink in routing.merged:
        members = [views[t] for t in sink.sources if t in views]
        if len(members) < 2:
            continue
        first = members[0]
        for other in members[1:]:
            if other.partition_keys != first.partition_keys:
                raise ConfigError(
                    f"route: the tables merged into {sink.table_id} give it different partition_keys "
                    f"([{', '.join(k.text for k in first.partition_keys)}] from {first.source_id}, "
                    f"[{', '.join(k.text for k in other.partition_keys)}] from {other.source_id}). Fix: give the "
                    "same partition_keys in the transforms of every table routed there"
                )
            if other.sink_arrow.equals(first.sink_arrow):
                continue
            a = {f.name: str(f.type) for f in first.sink_arrow}
            b = {f.name: str(f.type) for f in other.sink_arrow}
            diffs = [
                f"{n}: {a.get(n, 'missing')} in {first.source_id}, {b.get(n, 'missing')} in {other.source_id}"
                for n in dict.fromkeys([*a, *b])
                if a.get(n) != b.get(n)
            ]
            raise ConfigError(
                f"route: the tables merged into {sink.table_id} give it different columns ("
                f"{'; '.join(diffs) or 'another column order'}). Fix: make their projections give the "
                "same columns and types (CAST where the tables differ), or route them to separate "
                "sink tables"
            )


def sink_partitioning(views: Mapping[TableId, TableView]) -> dict[TableId, tuple[PartitionKey, ...]]:
    """Each partitioned sink table's partition keys (tables merged into one agree: ``_check_merged_alike``)."""
    out: dict[TableId, tuple[PartitionKey, ...]] = {}
    for v in views.values():
        if v.partition_keys:
            out.setdefault(v.sink_id, v.partition_keys)
    return out


def sink_schemas(views: Mapping[TableId, TableView]) -> list[TableSchema]:
    """Each sink table once (the first member's shape; ``_check_merged_alike`` made them equal)."""
    seen: dict[TableId, TableSchema] = {}
    for v in views.values():
        seen.setdefault(v.sink_id, v.sink_schema)
    return list(seen.values())
