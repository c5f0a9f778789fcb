"""Where each captured table's rows land (a pipeline file's ``route`` rules), which sink tables
merge several source tables and on what key, and what a ``filter`` makes of a change.

Pure functions of the rules and the tables' schemas, so the plan can be checked -- and refused
with a fix -- before the first row is read; the snapshot and the stream paths later apply the
same answer.

Why a merged sink has a ``_source_table`` column in its key: shards (``shop.orders_1``,
``shop.orders_2`` -> ``shop.orders``) usually number their rows independently, so id 7 exists
in both; keyed by the source row identity alone, one shard's row would overwrite the other's.
A sink is treated as merged as soon as a rule with a *pattern* routes into it, even while only
one table matches: a shard created later must not change the sink's columns or key under rows
already written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError
from ..model import TableId, TableSchema
from ..source.table_patterns import TablePattern, _quoted_parts, qualify

DEFAULT_SOURCE_COLUMN = "_source_table"

# What a change becomes under a filter (``filtered_changes``)
INSERT, UPDATE, DELETE = "insert", "update", "delete"


@dataclass(frozen=True)
class SinkTable:
    """One sink table: the source tables routed into it, whether they merge, and its row identity
    (the columns the sink matches rows on)."""

    table_id: TableId
    sources: tuple[TableId, ...]
    merged: bool
    source_column: Optional[str]  # the column holding "db.table" of the row's source (merged sinks)
    row_identity: tuple[str, ...]


@dataclass(frozen=True)
class Routing:
    """The resolved routes of a pipeline's captured tables."""

    sink_of: Mapping[TableId, TableId]
    sinks: Mapping[TableId, SinkTable]

    def sink_for(self, source: TableId) -> SinkTable:
        return self.sinks[self.sink_of[source]]

    @property
    def merged(self) -> tuple[SinkTable, ...]:
        return tuple(s for s in self.sinks.values() if s.merged)

    @staticmethod
    def source_value(source: TableId) -> str:
        """The value of the source column for rows of ``source``: ``db.table``."""
        return str(source)


def sink_table_id(text: str) -> TableId:
    """A route's ``sink_table``: ``db.table`` or `` `db`.`table` `` (a name, never a pattern)."""
    parts = _quoted_parts(text.strip())
    if parts is None:
        parts = text.strip().split(".", 1)
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise ConfigError(
            f"route sink_table {text!r} is not db.table. Fix: name the sink table with its database, e.g. shop.orders"
        )
    return TableId(parts[0], parts[1])


def _rule_value(rule: Any, key: str) -> Any:
    return rule.get(key) if isinstance(rule, Mapping) else getattr(rule, key, None)


def resolve_routing(
    routes: Sequence[Any],
    tables: Iterable[TableSchema],
    *,
    transforms: Sequence[Any] = (),
    default_database: Optional[str] = None,
    source_column: str = DEFAULT_SOURCE_COLUMN,
    arrow_schemas: Optional[Mapping[TableId, pa.Schema]] = None,
) -> Routing:
    """Each captured table's sink (the first route whose ``source_table`` matches wins; a table no
    route matches keeps its own name) and each sink's identity. ``routes`` and ``transforms``
    are the pipeline file's rules (``RouteRule``/``TransformRule`` or mappings with their keys);
    ``arrow_schemas`` the tables' row schemas, derived from ``tables`` when not given (needed
    only to read projections)."""
    schemas = {t.table_id: t for t in tables}
    rules = [
        (
            TablePattern(qualify(_rule_value(r, "source_table"), default_database)),
            _rule_value(r, "source_table"),
            sink_table_id(_rule_value(r, "sink_table")),
        )
        for r in routes
    ]
    sink_of: dict[TableId, TableId] = {}
    by_pattern: set[TableId] = set()
    routed: set[TableId] = set()
    for table in sorted(schemas):
        for pattern, _, sink in rules:
            if pattern.matches(table):
                sink_of[table] = sink
                routed.add(table)
                if not pattern.exact:
                    by_pattern.add(sink)
                break
        else:
            sink_of[table] = table
    for table in sorted(set(schemas) - routed):
        into = sorted(str(s) for s, k in sink_of.items() if k == table and s != table)
        if into:
            raise ConfigError(
                f"route: sink table {table} is also a captured table that no route moves ({', '.join(into)} would "
                f"be written into its rows). Fix: route {table} too (e.g. to itself with the others: a pattern "
                f"matching all of them), route the others to another sink table, or exclude {table}"
            )
    sources: dict[TableId, list[TableId]] = {}
    for table, sink in sink_of.items():
        sources.setdefault(sink, []).append(table)
    transform_rules = [(TablePattern(qualify(_rule_value(t, "source_table"), default_database)), t) for t in transforms]
    sinks = {}
    for sink, members in sorted(sources.items()):
        merged = len(members) > 1 or sink in by_pattern
        sinks[sink] = _sink(
            sink, tuple(sorted(members)), merged, schemas, transform_rules, source_column, arrow_schemas
        )
    return Routing(sink_of, sinks)


def _transform_for(table: TableId, transform_rules: Sequence[tuple[TablePattern, Any]]) -> Any:
    """The first transform rule matching ``table`` (as for routes, the first match wins)."""
    return next((rule for pattern, rule in transform_rules if pattern.matches(table)), None)


def _output_columns(
    table: TableSchema, rule: Any, arrow_schemas: Optional[Mapping[TableId, pa.Schema]]
) -> tuple[str, ...]:
    projection = _rule_value(rule, "projection") if rule is not None else None
    if not projection:
        return table.column_names
    from .transform_exprs import compile_projection

    if arrow_schemas is not None and table.table_id in arrow_schemas:
        schema = arrow_schemas[table.table_id]
    else:
        from ..types import arrow_schema, map_table

        schema = arrow_schema(map_table(table, "UTC"))  # the zone changes no type
    return compile_projection(projection, schema, table.table_id).output_names


def _sink(
    sink: TableId,
    members: tuple[TableId, ...],
    merged: bool,
    schemas: Mapping[TableId, TableSchema],
    transform_rules: Sequence[tuple[TablePattern, Any]],
    source_column: str,
    arrow_schemas: Optional[Mapping[TableId, pa.Schema]],
) -> SinkTable:
    keys: dict[TableId, Optional[tuple[str, ...]]] = {}
    for table in members:
        rule = _transform_for(table, transform_rules)
        columns = _output_columns(schemas[table], rule, arrow_schemas)
        lower = {c.lower() for c in columns}
        primary_keys = tuple(_rule_value(rule, "primary_keys") or ()) if rule is not None else ()
        if merged and source_column.lower() in lower:
            raise ConfigError(
                f"route: {table} has a column {source_column!r}, the column that says which source "
                f"table a row of the merged sink {sink} came from. Fix: choose another source column "
                "name for the pipeline, or leave that column out with a projection"
            )
        if primary_keys:
            missing = [k for k in primary_keys if k.lower() not in lower]
            if missing:
                raise ConfigError(
                    f"transform of {table}: primary_keys {', '.join(missing)} are not columns of its "
                    f"output ({', '.join(columns)}). Fix: give primary_keys made of projected columns"
                )
            keys[table] = primary_keys
            continue
        identity = schemas[table].row_identity
        dropped = [c for c in identity if c.lower() not in lower]
        if dropped:
            raise ConfigError(
                f"transform of {table}: the projection drops {', '.join(dropped)} of the row identity "
                f"({', '.join(identity)}), so sink rows could not be matched to changes. Fix: keep "
                "those columns in the projection as plain columns"
            )
        keys[table] = None
    given = {k for k in keys.values() if k is not None}
    if given:
        if len(given) > 1 or len(given) != len(set(keys.values())):
            described = "; ".join(f"{t}: {', '.join(k) if k else 'none (its row identity)'}" for t, k in keys.items())
            raise ConfigError(
                f"route: the source tables of {sink} give different primary_keys ({described}). Fix: "
                "give the same primary_keys in the transforms of every table routed there"
            )
        return SinkTable(sink, members, merged, source_column if merged else None, next(iter(given)))
    identities = {t: schemas[t].row_identity for t in members}
    names = {frozenset(c.lower() for c in ident) for ident in identities.values()}
    if len(names) > 1:
        described = "; ".join(f"{t}: {', '.join(i)}" for t, i in identities.items())
        raise ConfigError(
            f"route: the source tables merged into {sink} identify rows by different columns "
            f"({described}), so their rows cannot share one sink key. Fix: route them to separate "
            "sink tables, or give a transform with the same primary_keys for all of them"
        )
    identity = identities[members[0]]
    return SinkTable(
        sink, members, merged, source_column if merged else None, (source_column, *identity) if merged else identity
    )


# --- changes under a filter -----------------------------------------------------------------


BoolLike = Union[pa.Array, pa.ChunkedArray, Sequence[Optional[bool]]]


def filtered_changes(has_before: BoolLike, has_after: BoolLike, before_in: BoolLike, after_in: BoolLike) -> pa.Array:
    """What each change becomes when only rows passing a filter are in the sink: a change is a
    before image and/or an after image; ``before_in`` / ``after_in`` say whether each image
    passes (NULL or a missing image counts as not passing).

    both in -> UPDATE; before in, after out -> DELETE of the before image (the row left the
    sink's set); before out, after in -> INSERT of the after image (it entered); neither -> NULL
    (dropped). An insert (after image only) and a delete (before image only) look at their one
    image. Returns "insert" / "update" / "delete" / NULL per change.
    """

    def mask(values: BoolLike) -> pa.Array:
        arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, pa.bool_())
        return pc.fill_null(arr.cast(pa.bool_()), False)

    before = pc.and_(mask(has_before), mask(before_in))
    after = pc.and_(mask(has_after), mask(after_in))
    conds = pc.make_struct(pc.and_(before, after), before, after, field_names=["update", "delete", "insert"])
    return pc.case_when(conds, UPDATE, DELETE, INSERT).cast(pa.string())
