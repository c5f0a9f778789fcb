"""Compiled transforms: what ``transform_compiler`` makes of a rule's Spark SQL and what the sinks run.

``CompiledProjection`` (a ``projection`` select list: the output schema, evaluated over an Arrow
batch of one source table) and ``CompiledFilter`` (a ``filter`` predicate: a row mask), the error a
rule that cannot be compiled raises (``TransformError``), and the metadata columns a rule may name.
They hold the text, the input schema and a tree of frozen dataclasses (no sqlglot objects), so
they pickle to Spark executors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc

from .transform_compiler import Compiler
from .transform_eval import evaluate
from .transform_grammar import (
    METADATA_COLUMNS,
    ColumnsLike,
    TransformError,
    arrow_schema_of,
)
from .transform_tree import Context, Node, TransformEvalError

__all__ = [
    "TransformError",
    "TransformEvalError",
    "CompiledProjection",
    "CompiledFilter",
    "METADATA_COLUMNS",
]


@dataclass
class _Compiled:
    text: str
    table: str
    input_schema: pa.Schema

    def _context(
        self,
        data: Union[pa.RecordBatch, pa.Table],
        database: str,
        table: str,
        op: Union[str, pa.Array, None],
        kind: str,
    ) -> Context:
        batch = _as_batch(data)
        for name in {n.value for n in _column_refs(self._roots())}:
            i = batch.schema.get_field_index(name)
            want = self.input_schema.field(name).type
            if i < 0 or batch.schema.field(i).type != want:
                found = "missing" if i < 0 else f"of type {batch.schema.field(i).type}"
                raise TransformError(
                    f"transform {kind} {self.text!r} of {self.table}: column {name!r} is {found} "
                    f"in the batch, but was compiled as {want}. Fix: compile the transform "
                    "against the table's current schema"
                )
        return Context(batch, database, table, op, f"transform {kind} {self.text!r} of {self.table}")

    def _roots(self) -> list[Node]:
        raise NotImplementedError


@dataclass
class CompiledProjection(_Compiled):
    """A projection: ``evaluate`` returns the projected batch, ``output_schema`` its schema."""

    items: tuple[tuple[str, Node], ...] = ()

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.items)

    def output_schema(self, input_schema: Optional[pa.Schema] = None) -> pa.Schema:
        """The sink columns for rows of ``input_schema`` (default: the compiled one). Known before
        any row: a bare column keeps its Arrow type, an expression has its Spark type's."""
        compiled = (
            self
            if input_schema is None or input_schema.equals(self.input_schema)
            else compile_projection(self.text, input_schema, self.table)
        )
        return pa.schema(
            [
                pa.field(
                    name,
                    compiled.input_schema.field(node.value).type if node.op == "col" else node.type.arrow(),
                    nullable=True,
                )
                for name, node in compiled.items
            ]
        )

    def evaluate(
        self, data: Union[pa.RecordBatch, pa.Table], *, database: str, table: str, op: Union[str, pa.Array, None] = None
    ) -> pa.RecordBatch:
        ctx = self._context(data, database, table, op, "projection")
        schema = self.output_schema()
        arrays = []
        for (name, node), fld in zip(self.items, schema):
            # a bare column passes through untouched (its Arrow type is the sink's)
            arr = (
                ctx.batch.column(ctx.batch.schema.get_field_index(node.value))
                if node.op == "col"
                else evaluate(node, ctx)
            )
            arrays.append(arr if arr.type == fld.type else arr.cast(fld.type))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def _roots(self) -> list[Node]:
        return [node for _, node in self.items]


@dataclass
class CompiledFilter(_Compiled):
    """A filter: ``evaluate`` returns one boolean per row, NULL counted as false (SQL WHERE)."""

    predicate: Optional[Node] = None

    def evaluate(
        self, data: Union[pa.RecordBatch, pa.Table], *, database: str, table: str, op: Union[str, pa.Array, None] = None
    ) -> pa.Array:
        ctx = self._context(data, database, table, op, "filter")
        assert self.predicate is not None
        if self.predicate.type.name == "VOID":
            return pa.repeat(False, ctx.rows)
        return pc.fill_null(evaluate(self.predicate, ctx), False)

    def _roots(self) -> list[Node]:
        return [self.predicate] if self.predicate is not None else []


def _as_batch(data: Union[pa.RecordBatch, pa.Table]) -> pa.RecordBatch:
    if isinstance(data, pa.RecordBatch):
        return data
    return pa.RecordBatch.from_arrays([c.combine_chunks() for c in data.columns], schema=data.schema)


def _column_refs(nodes: Iterable[Node]) -> Iterable[Node]:
    for node in nodes:
        if node.op == "col":
            yield node
        yield from _column_refs(node.args)


def compile_projection(text: str, columns: ColumnsLike, table: Any = "the table") -> CompiledProjection:
    """``text`` (``id, upper(name) AS name_uc, *``) against the table's columns and Arrow types."""
    schema = arrow_schema_of(columns)
    comp = Compiler(text, "projection", schema, str(table))
    items: list[tuple[str, Node]] = []
    for item in comp.parse():
        items.extend(comp.item(item))
    if not items:  # '' or '-- i' (a comment to the end): Spark's SELECT with no item is a parse error
        raise comp.error(
            "no select item (an empty text, or one that is all comment)",
            "write at least one column or expression, and no -- before it (-- starts a comment in Spark SQL)",
            supported=False,
        )
    seen: dict[str, str] = {}
    for name, node in items:
        if node.type.name == "VOID":
            raise comp.error(
                f"the output column {name!r} is a bare NULL, which has no type for the sink column",
                f"give it a type, e.g. CAST(NULL AS STRING) AS {name}",
                supported=False,
            )
        if name.lower() in seen:
            raise comp.error(
                f"two output columns are named {name!r}",
                "give each output column its own name "
                "with AS (a projection with * already has every column of the table)",
                supported=False,
            )
        seen[name.lower()] = name
        comp.check_constants(node)
    return CompiledProjection(text, str(table), schema, tuple(items))


def compile_filter(text: str, columns: ColumnsLike, table: Any = "the table") -> CompiledFilter:
    """``text`` (``amount > 0 AND __data_event_type__ <> '-D'``) against the table's columns."""
    schema = arrow_schema_of(columns)
    comp = Compiler(text, "filter", schema, str(table))
    predicate = comp.expr(comp.parse()[0])
    if predicate.type.name == "VOID":  # Spark: FILTER_NOT_BOOLEAN
        raise comp.error(
            "the filter is a bare NULL, which has no type, and Spark requires a BOOLEAN condition",
            "write FALSE to keep no row",
            supported=False,
        )
    if predicate.type.name != "BOOLEAN":
        raise comp.error(
            f"the filter is a {predicate.type}, not a condition", "write a condition, e.g. amount > 0", supported=False
        )
    predicate = comp.null_to_false(predicate)
    comp.check_constants(predicate)
    return CompiledFilter(text, str(table), schema, predicate)
