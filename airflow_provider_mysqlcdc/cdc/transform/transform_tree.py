"""The vocabulary of a compiled transform (``transform_exprs`` builds it, ``transform_eval`` runs it):
Spark SQL types (``SqlType``), the tree of frozen dataclasses (``Node``; it pickles to Spark
executors), the evaluation context, and how a row that Spark would fail on fails here (``fail``,
``check``: Spark's error condition, the expression, the fix).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CdcError

INTEGRALS = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_INT_ARROW = {"TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(), "BIGINT": pa.int64()}
# The decimal type Spark gives an integral operand next to a decimal (DecimalPrecision).
INT_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 20}
_SIMPLE_ARROW = {
    "BOOLEAN": pa.bool_(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "STRING": pa.string(),
    "BINARY": pa.binary(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "TIMESTAMP_NTZ": pa.timestamp("us"),
    "VOID": pa.null(),
    **_INT_ARROW,
}
# Spark's cast from text trims these first: every character up to ASCII 32 (Java's String.trim, for
# DOUBLE, FLOAT and DECIMAL), and DEL too (UTF8String.trimAll, for the integers, BOOLEAN, DATE, TIMESTAMP).
BLANKS = "".join(chr(c) for c in range(33))
BLANKS_AND_DEL = BLANKS + "\x7f"
HALF_UP = "half_towards_infinity"  # Java's HALF_UP (ties away from zero); Arrow's "half_up" is toward +inf


class TransformEvalError(CdcError):
    """A row on which Spark SQL (ANSI mode) would fail the query, or whose Spark result this
    evaluator cannot reproduce exactly: nothing is written for the batch."""


@dataclass(frozen=True)
class SqlType:
    """A Spark SQL type: the compiler's types, and through ``arrow()`` the sink column's type."""

    name: str
    precision: int = 0
    scale: int = 0
    other: Optional[pa.DataType] = None  # the Arrow type of a column no operation may touch

    def __str__(self) -> str:
        if self.name == "DECIMAL":
            return f"DECIMAL({self.precision},{self.scale})"
        return f"{self.other} (no Spark SQL operation here)" if self.name == "OTHER" else self.name

    @property
    def integral(self) -> bool:
        return self.name in INTEGRALS

    @property
    def fractional(self) -> bool:
        return self.name in ("FLOAT", "DOUBLE")

    @property
    def numeric(self) -> bool:
        return self.integral or self.fractional or self.name == "DECIMAL"

    def arrow(self) -> pa.DataType:
        if self.name == "DECIMAL":
            return pa.decimal128(self.precision, self.scale)
        return self.other if self.other is not None else _SIMPLE_ARROW[self.name]


def decimal_type(precision: int, scale: int) -> SqlType:
    return SqlType("DECIMAL", precision, scale)


@dataclass(frozen=True)
class Node:
    """One typed expression node. ``op`` names the operation, ``value`` holds what is fixed at
    compile time (a column name, a literal, a pattern, round's digits), ``sql`` the node's text
    for error messages."""

    op: str
    type: SqlType
    args: tuple["Node", ...] = ()
    value: Any = None
    sql: str = field(default="", compare=False)


@dataclass
class Context:
    """One batch of one source table, with the metadata columns' values (constants per batch,
    or one op per row)."""

    batch: pa.RecordBatch
    database: str
    table: str
    op: Union[str, pa.Array, pa.ChunkedArray, None]
    what: str  # e.g. "filter 'amount > 0' of shop.orders", for messages

    @property
    def rows(self) -> int:
        return self.batch.num_rows


Mask = Optional[pa.Array]


def restrict(arr: pa.Array, active: Mask) -> pa.Array:
    """Rows outside ``active`` become NULL, so a kernel that raises looks at Spark's rows only."""
    return arr if active is None else pc.if_else(active, arr, pa.scalar(None, arr.type))


def within(active: Mask, cond: pa.Array) -> pa.Array:
    """The rows of ``active`` where ``cond`` is true (NULL counts as false)."""
    cond = pc.fill_null(cond, False)
    return cond if active is None else pc.and_(active, cond)


# The evaluator's own limits: a row whose Spark value is not reproduced here (equal or error).
NOT_REPRODUCED = "UNSUPPORTED_VALUE"


def fail_rows(ctx: Context, node: Node, condition: str, detail: str, fix: str, maybe: bool = False) -> None:
    if maybe:  # the text is in no form read here; Spark reads a few more (equal or error)
        consequence = (
            "Spark SQL in ANSI mode fails the query on this row unless the text is in a form it reads "
            "and this evaluator does not, so the transform fails and writes nothing"
        )
    elif condition == NOT_REPRODUCED:
        consequence = (
            "Spark SQL gives a value on this row that this evaluator does not reproduce exactly, so the "
            "transform fails rather than write a different value, and writes nothing"
        )
    else:
        consequence = (
            "Spark SQL in ANSI mode (Spark 4's default) fails the query on this row, so the transform "
            "fails too and writes nothing"
        )
    raise TransformEvalError(f"{ctx.what}: {condition} in {node.sql or node.op}: {detail}. {consequence}. Fix: {fix}")


def check_rows(
    ctx: Context,
    node: Node,
    bad: pa.Array,
    active: Mask,
    values: pa.Array,
    condition: str,
    fix: str,
    maybe: bool = False,
) -> None:
    bad = within(active, bad)
    if pc.any(bad).as_py():
        sample = pc.filter(values, bad)[0].as_py()
        fail_rows(ctx, node, condition, f"found {sample!r}", fix, maybe)
