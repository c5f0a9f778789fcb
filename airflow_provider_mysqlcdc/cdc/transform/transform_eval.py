"""Evaluate a compiled transform expression over Arrow columns, with Spark SQL's results.

A pipeline file's ``transform`` rules are Spark SQL, and a later change evaluates them on the
snapshot path and on the stream path alike. Running Spark SQL itself per micro-batch of a few
rows would cost a query plan each time, so the expressions are evaluated here with
``pyarrow.compute`` instead -- which only works if every value equals what Spark SQL would
give for the same row. Hence the rules this module keeps:

* Spark 4's default is ANSI mode (``spark.sql.ansi.enabled=true``): an integer overflow, a
  division by zero, a cast of unparsable text fail the query instead of giving NULL. Here they
  raise :class:`TransformEvalError`, so a row is never written with a value Spark would not
  have produced. Where Spark would accept an input this module cannot reproduce exactly (a
  date text such as ``'2020-1-1'``, a DOUBLE whose Java text differs between Java versions),
  it raises too (UNSUPPORTED_VALUE, or the text forms read here): *equal or error*, never
  different.
* Spark evaluates lazily per row: ``CASE WHEN b <> 0 THEN a / b END`` never divides by zero,
  nor does the right side of ``b <> 0 AND a / b > 1`` for b = 0, nor the second operand of an
  operation where the first is NULL (for / div % the divisor comes first), nor the parts of a
  concat after a NULL one. Vectorized kernels compute
  every row, so each node gets the mask of the rows Spark would evaluate it for (``active``),
  and errors only count on those rows; inputs of failing kernels are nulled outside the mask.
* The compiler (``transform_exprs``) has already typed every node as Spark would, inserted
  the implicit casts and applied the rewrites of Spark's optimizer that change a result, so the
  evaluator never decides a type; it only reproduces values.

Checked against Spark 4.2 by ``tests/integration/test_transform_spark_differential.py``.

The tree is plain frozen dataclasses so a compiled transform pickles to Spark executors.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

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
_BLANKS = "".join(chr(c) for c in range(33))
_BLANKS_AND_DEL = _BLANKS + "\x7f"
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


def evaluate(node: Node, ctx: Context) -> pa.Array:
    """``node`` over every row of ``ctx.batch``."""
    return _ev(node, ctx, None)


def _ev(node: Node, ctx: Context, active: Mask) -> pa.Array:
    out = _OPS[node.op](node, ctx, active)
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks()
    return out


# --- masks and failures ---------------------------------------------------------------------


def _restrict(arr: pa.Array, active: Mask) -> pa.Array:
    """Rows outside ``active`` become NULL, so a kernel that raises looks at Spark's rows only."""
    return arr if active is None else pc.if_else(active, arr, pa.scalar(None, arr.type))


def _within(active: Mask, cond: pa.Array) -> pa.Array:
    """The rows of ``active`` where ``cond`` is true (NULL counts as false)."""
    cond = pc.fill_null(cond, False)
    return cond if active is None else pc.and_(active, cond)


# The evaluator's own limits: a row whose Spark value is not reproduced here (equal or error).
NOT_REPRODUCED = "UNSUPPORTED_VALUE"


def _fail(ctx: Context, node: Node, condition: str, detail: str, fix: str, maybe: bool = False) -> None:
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


def _check(
    ctx: Context,
    node: Node,
    bad: pa.Array,
    active: Mask,
    values: pa.Array,
    condition: str,
    fix: str,
    maybe: bool = False,
) -> None:
    bad = _within(active, bad)
    if pc.any(bad).as_py():
        sample = pc.filter(values, bad)[0].as_py()
        _fail(ctx, node, condition, f"found {sample!r}", fix, maybe)


# --- leaves ---------------------------------------------------------------------------------


def _literal(node: Node, ctx: Context, active: Mask) -> pa.Array:
    if node.type.name == "VOID":
        return pa.nulls(ctx.rows)
    return pa.repeat(pa.scalar(node.value, node.type.arrow()), ctx.rows)


def _column(node: Node, ctx: Context, active: Mask) -> pa.Array:
    arr = ctx.batch.column(ctx.batch.schema.get_field_index(node.value))
    want = node.type.arrow()
    return arr if arr.type == want or node.type.name == "OTHER" else arr.cast(want)


def _meta(node: Node, ctx: Context, active: Mask) -> pa.Array:
    if node.value == "op":
        op = ctx.op
        if op is None:
            raise TransformEvalError(
                f"{ctx.what}: __data_event_type__ is used but no op was given. Fix: pass the "
                "change's op ('+I', '-U', '+U', '-D', or 'r' for snapshot reads)"
            )
        if isinstance(op, str):
            return pa.repeat(pa.scalar(op, pa.string()), ctx.rows)
        op = op.combine_chunks() if isinstance(op, pa.ChunkedArray) else op
        if len(op) != ctx.rows:
            raise TransformEvalError(f"{ctx.what}: {len(op)} ops for {ctx.rows} rows. Fix: pass one op per row")
        return op.cast(pa.string())
    return pa.repeat(pa.scalar(ctx.database if node.value == "database" else ctx.table, pa.string()), ctx.rows)


# --- logic ----------------------------------------------------------------------------------


def _and(node: Node, ctx: Context, active: Mask) -> pa.Array:
    left = _ev(node.args[0], ctx, active)
    # Spark skips the right side where the left is false
    right = _ev(node.args[1], ctx, _within(active, pc.invert(pc.fill_null(pc.invert(left), False))))
    return pc.and_kleene(left, right)


def _or(node: Node, ctx: Context, active: Mask) -> pa.Array:
    left = _ev(node.args[0], ctx, active)
    right = _ev(node.args[1], ctx, _within(active, pc.invert(pc.fill_null(left, False))))
    return pc.or_kleene(left, right)


def _case(node: Node, ctx: Context, active: Mask) -> pa.Array:
    """``args`` = cond1, value1, cond2, value2, ..., else. Conditions and branches are only
    evaluated on the rows that reach them, as Spark does."""
    pairs, default = node.args[:-1], node.args[-1]
    remaining = active if active is not None else pa.repeat(pa.scalar(True), ctx.rows)
    conds, values = [], []
    for i in range(0, len(pairs), 2):
        cond = pc.fill_null(_ev(pairs[i], ctx, remaining), False)
        values.append(_ev(pairs[i + 1], ctx, _within(remaining, cond)))
        conds.append(cond)
        remaining = pc.and_(remaining, pc.invert(cond))
    values.append(_ev(default, ctx, remaining))
    want = node.type.arrow()
    conds_struct = pc.make_struct(*conds, field_names=[f"c{i}" for i in range(len(conds))])
    return pc.case_when(conds_struct, *[v.cast(want) for v in values])


def _coalesce(node: Node, ctx: Context, active: Mask) -> pa.Array:
    remaining, out = active, None
    for arg in node.args:  # an argument is only evaluated where every earlier one was NULL
        value = _ev(arg, ctx, remaining).cast(node.type.arrow())
        out = value if out is None else pc.coalesce(out, value)
        remaining = _within(remaining, pc.is_null(out))
    return out


def _null_test(node: Node, ctx: Context, active: Mask) -> pa.Array:
    arr = _ev(node.args[0], ctx, active)
    return pc.is_null(arr) if node.op == "is_null" else pc.is_valid(arr)


def _in(node: Node, ctx: Context, active: Mask) -> pa.Array:
    """SQL IN over literals: true if found; else NULL when the value or a list item is NULL."""
    arr = _ev(node.args[0], ctx, active)
    items, has_null = node.value
    if pa.types.is_floating(arr.type):  # Spark's IN finds -0.0 among 0.0 (and 0.0 among -0.0)
        arr = pc.if_else(pc.equal(arr, 0), pa.scalar(0.0, arr.type), arr)
        items = tuple(0.0 if i == 0 else i for i in items)
    found = pc.is_in(arr, value_set=pa.array(items, type=arr.type)) if items else pa.repeat(False, ctx.rows)
    unknown = pc.or_(pc.is_null(arr), pa.scalar(bool(has_null)))
    return pc.if_else(found, True, pc.if_else(unknown, pa.scalar(None, pa.bool_()), False))


# --- comparisons ----------------------------------------------------------------------------


def _operands(node: Node, ctx: Context, active: Mask, divisor_first: bool = False) -> tuple[pa.Array, pa.Array, Mask]:
    """Both operands of a binary operation, and the rows where both were evaluated. Spark
    evaluates the second operand only where the first is not NULL (the result is NULL there
    anyway), and for / div % the divisor first."""
    first, second = (1, 0) if divisor_first else (0, 1)
    x = _ev(node.args[first], ctx, active)
    both = _within(active, pc.is_valid(x))
    y = _ev(node.args[second], ctx, both)
    a, b = (y, x) if divisor_first else (x, y)
    return a, b, both


def _compare(node: Node, ctx: Context, active: Mask) -> pa.Array:
    op = node.op
    if op == "nseq":
        a, b = (_ev(x, ctx, active) for x in node.args)
    else:
        a, b, both = _operands(node, ctx, active)
        a, b = _restrict(a, both), _restrict(b, both)
    if node.args[0].type.fractional:  # Spark: NaN = NaN, and NaN is larger than any other value
        return _compare_floats(op, a, b)
    if op == "nseq":
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        return pc.if_else(both_null, True, pc.fill_null(pc.equal(a, b), False))
    fn = {
        "eq": pc.equal,
        "ne": pc.not_equal,
        "lt": pc.less,
        "le": pc.less_equal,
        "gt": pc.greater,
        "ge": pc.greater_equal,
    }[op]
    return fn(a, b)


def _compare_floats(op: str, a: pa.Array, b: pa.Array) -> pa.Array:
    na, nb = pc.is_nan(a), pc.is_nan(b)
    eq = pc.or_(pc.equal(a, b), pc.and_(na, nb))
    lt = pc.or_(pc.less(a, b), pc.and_(pc.invert(na), nb))
    gt = pc.or_(pc.greater(a, b), pc.and_(na, pc.invert(nb)))
    if op == "nseq":
        return pc.if_else(pc.and_(pc.is_null(a), pc.is_null(b)), True, pc.fill_null(eq, False))
    return {"eq": eq, "ne": pc.invert(eq), "lt": lt, "le": pc.or_(lt, eq), "gt": gt, "ge": pc.or_(gt, eq)}[op]


# --- arithmetic -----------------------------------------------------------------------------


def _zero(arr: pa.Array) -> pa.Scalar:
    if pa.types.is_decimal(arr.type):
        return pa.scalar(decimal.Decimal(0), arr.type)
    return pa.scalar(0, pa.int8()).cast(arr.type)


def _dec(precision: int, scale: int, wide: bool = False) -> pa.DataType:
    return pa.decimal256(precision, scale) if wide or precision > 38 else pa.decimal128(precision, scale)


def _widen(x: pa.Array, extra: int) -> pa.Array:
    """One more digit before the point, so rounding can carry (9.99 -> 10.0) without failing."""
    return x.cast(_dec(min(x.type.precision + extra, 76), x.type.scale))


def decimal_intermediate(op: str, p1: int, s1: int, p2: int, s2: int, result_scale: int) -> int:
    """The widest decimal precision the exact computation of ``op`` needs here; the compiler
    refuses an operation above 76 (Arrow's decimal256), so the evaluator never rounds early."""
    if op in ("add", "sub"):
        return max(p1 - s1, p2 - s2) + max(s1, s2) + 1
    if op == "mul":
        return p1 + p2 + 1
    if op == "div":
        s1n = max(s1, result_scale + s2 - p2)
        rs = max(4, s1n + p2 - s2 + 1)
        return max(p1 + s1n - s1, p1 - s1 + s2 + rs)
    s = max(s1, s2)  # mod: aligned scales, integer quotient, a - b * q
    pa_, pb = p1 + s - s1, p2 + s - s2
    quotient = max(1, p1 - s1 + s2)
    return max(pa_ + max(4, pb + 1), pb + quotient + 2, pa_ + 1)


def fit_decimal(node: Node, ctx: Context, active: Mask, x: pa.Array, t: SqlType) -> pa.Array:
    """``x`` rounded HALF_UP to ``t``'s scale and fitted into ``t``, as Spark's changePrecision."""
    x = _restrict(x, active)
    try:
        if x.type.scale > t.scale:
            x = pc.round(_widen(x, 1), t.scale, round_mode=HALF_UP)
        return x.cast(t.arrow())
    except pa.ArrowInvalid:
        _fail(
            ctx,
            node,
            "NUMERIC_VALUE_OUT_OF_RANGE",
            f"a value does not fit {t}",
            "CAST to a DECIMAL with more digits before the point first",
        )
        raise


def _decimal_arith(node: Node, ctx: Context, active: Mask, a: pa.Array, b: pa.Array) -> pa.Array:
    (p1, s1), (p2, s2) = (a.type.precision, a.type.scale), (b.type.precision, b.type.scale)
    wide = decimal_intermediate(node.op, p1, s1, p2, s2, node.type.scale) > 38
    a, b = a.cast(_dec(p1, s1, wide)), b.cast(_dec(p2, s2, wide))
    exact = {"add": pc.add, "sub": pc.subtract, "mul": pc.multiply}[node.op](a, b)
    return fit_decimal(node, ctx, active, exact, node.type)


def _decimal_divide(node: Node, ctx: Context, active: Mask, a: pa.Array, b: pa.Array) -> pa.Array:
    """Arrow truncates the quotient at its own scale; with the dividend scaled so that this scale
    is at least the result's + 1, rounding HALF_UP from the truncated digits equals rounding the
    exact quotient (HALF_UP only looks at the first dropped digit)."""
    (p1, s1), (p2, s2), scale = (a.type.precision, a.type.scale), (b.type.precision, b.type.scale), node.type.scale
    s1n = max(s1, scale + s2 - p2)
    wide = decimal_intermediate("div", p1, s1, p2, s2, scale) > 38
    a, b = a.cast(_dec(p1 + s1n - s1, s1n, wide)), b.cast(_dec(p2, s2, wide))
    b = pc.if_else(pc.equal(b, _zero(b)), pa.scalar(None, b.type), b)  # left: NULL / 0, which is NULL
    return fit_decimal(node, ctx, active, pc.divide(a, b), node.type)


def _decimal_remainder(node: Node, ctx: Context, active: Mask, a: pa.Array, b: pa.Array) -> pa.Array:
    (p1, s1), (p2, s2) = (a.type.precision, a.type.scale), (b.type.precision, b.type.scale)
    s = max(s1, s2)
    wide = decimal_intermediate("mod", p1, s1, p2, s2, node.type.scale) > 38
    a, b = a.cast(_dec(p1 + s - s1, s, wide)), b.cast(_dec(p2 + s - s2, s, wide))
    b = pc.if_else(pc.equal(b, _zero(b)), pa.scalar(None, b.type), b)
    quotient = pc.trunc(pc.divide(a, b)).cast(_dec(max(1, p1 - s1 + s2), 0, wide))
    return fit_decimal(node, ctx, active, pc.subtract(a, pc.multiply(b, quotient)), node.type)


def _arith(node: Node, ctx: Context, active: Mask) -> pa.Array:
    t = node.type
    a, b, active = _operands(node, ctx, active)
    a, b = _restrict(a, active), _restrict(b, active)
    if t.name == "DECIMAL":
        return _decimal_arith(node, ctx, active, a, b)
    if t.fractional:
        return {"add": pc.add, "sub": pc.subtract, "mul": pc.multiply}[node.op](a, b)
    fn = {"add": pc.add_checked, "sub": pc.subtract_checked, "mul": pc.multiply_checked}[node.op]
    try:
        return fn(a, b)
    except pa.ArrowInvalid:  # Spark names it BINARY_ARITHMETIC_OVERFLOW for TINYINT and SMALLINT
        _fail(
            ctx,
            node,
            "BINARY_ARITHMETIC_OVERFLOW" if t.name in ("TINYINT", "SMALLINT") else "ARITHMETIC_OVERFLOW",
            f"the result does not fit {t}",
            "CAST an operand to a wider type first, e.g. CAST(x AS BIGINT) or CAST(x AS DECIMAL(38,0))",
        )
        raise


def _zero_divisor(node: Node, ctx: Context, active: Mask, a: pa.Array, b: pa.Array) -> None:
    # Spark looks at the divisor only when the dividend is not NULL: NULL / 0 is NULL
    condition = "REMAINDER_BY_ZERO" if node.op == "mod" else "DIVIDE_BY_ZERO"
    _check(
        ctx,
        node,
        pc.and_(pc.equal(b, _zero(b)), pc.is_valid(a)),
        active,
        a,
        condition,
        "guard the row, e.g. CASE WHEN <divisor> <> 0 THEN ... END, or filter such rows out",
    )


def _divide(node: Node, ctx: Context, active: Mask) -> pa.Array:
    """``/``: DOUBLE division (the compiler cast integral operands to DOUBLE) or decimal division."""
    a, b, active = _operands(node, ctx, active, divisor_first=True)
    a, b = _restrict(a, active), _restrict(b, active)
    _zero_divisor(node, ctx, active, a, b)
    if node.type.name == "DECIMAL":
        return _decimal_divide(node, ctx, active, a, b)
    return pc.divide(a, b)


def _int_divide(node: Node, ctx: Context, active: Mask) -> pa.Array:
    """``div``: BIGINT division truncating toward zero."""
    a, b, active = _operands(node, ctx, active, divisor_first=True)
    a, b = _restrict(a, active), _restrict(b, active)
    _zero_divisor(node, ctx, active, a, b)
    _check(
        ctx,
        node,
        pc.and_(pc.equal(a, -(2**63)), pc.equal(b, -1)),
        active,
        a,
        "ARITHMETIC_OVERFLOW",
        "CAST the operands to DECIMAL(20,0) and divide with /",
    )
    safe_b = pc.if_else(pc.or_(pc.equal(b, 0), pc.equal(b, -1)), pa.scalar(1, pa.int64()), b)
    quotient = pc.divide(a, safe_b)  # Arrow truncates integer division toward zero, like Java
    return pc.if_else(pc.equal(b, -1), pc.negate(a), quotient)


def _remainder(node: Node, ctx: Context, active: Mask) -> pa.Array:
    """``%``: the sign follows the dividend (Java's %)."""
    a, b, active = _operands(node, ctx, active, divisor_first=True)
    a, b = _restrict(a, active), _restrict(b, active)
    _zero_divisor(node, ctx, active, a, b)
    if node.type.name == "DECIMAL":
        return _decimal_remainder(node, ctx, active, a, b)
    one = pa.scalar(1, a.type)
    safe_b = pc.if_else(pc.or_(pc.equal(b, 0), pc.equal(b, -1)), one, b)  # x % -1 is 0; never MIN / -1
    return pc.subtract(a, pc.multiply(pc.divide(a, safe_b), safe_b))


def _scala_rounded(x: pa.Array, active: Mask, negative_only: bool) -> pa.Array:
    """Spark negates a decimal held as a Scala BigDecimal (every value of more than 18 digits),
    which rounds to 34 significant digits (MathContext.DECIMAL128, HALF_EVEN) on the way: a
    value of 35 to 38 digits loses its last ones before the result is fitted to its type.
    abs() negates the negative values only."""
    p, s = x.type.precision, x.type.scale
    unscaled = x.view(pa.decimal256(76, 0) if x.type.bit_width == 256 else pa.decimal128(38, 0)).cast(pa.string())
    digits = pc.utf8_length(pc.utf8_ltrim(unscaled, characters="-"))
    wide = x.cast(pa.decimal256(p + 1, s))
    out = wide
    for k in range(35, p + 1):
        band = _within(active, pc.equal(digits, k))
        if negative_only:
            band = pc.and_(band, pc.fill_null(pc.less(wide, pa.scalar(decimal.Decimal(0), wide.type)), False))
        if pc.any(band).as_py():
            rounded = pc.round(wide, s - (k - 34), round_mode="half_to_even")
            out = pc.if_else(band, rounded, out)
    return out


def _negate(node: Node, ctx: Context, active: Mask) -> pa.Array:
    a = _ev(node.args[0], ctx, active)
    if node.type.name == "DECIMAL" and node.type.precision > 34:
        return fit_decimal(node, ctx, active, pc.negate(_scala_rounded(a, active, False)), node.type)
    if not node.type.integral:
        return pc.negate(a)
    try:
        return pc.negate_checked(_restrict(a, active))
    except pa.ArrowInvalid:
        _fail(
            ctx,
            node,
            "ARITHMETIC_OVERFLOW",
            f"the smallest {node.type} has no negative in {node.type}",
            "CAST the operand to a wider type first, e.g. -CAST(x AS BIGINT)",
        )
        raise


def _abs(node: Node, ctx: Context, active: Mask) -> pa.Array:
    a = _ev(node.args[0], ctx, active)
    if node.type.name == "DECIMAL" and node.type.precision > 34:
        return fit_decimal(node, ctx, active, pc.abs(_scala_rounded(a, active, True)), node.type)
    if not node.type.integral:
        return pc.abs(a)
    try:
        return pc.abs_checked(_restrict(a, active))
    except pa.ArrowInvalid:
        _fail(
            ctx,
            node,
            "ARITHMETIC_OVERFLOW",
            f"abs of the smallest {node.type} does not fit {node.type}",
            "CAST the operand to a wider type first, e.g. abs(CAST(x AS BIGINT))",
        )
        raise


def _round(node: Node, ctx: Context, active: Mask) -> pa.Array:
    digits, src, t = node.value, node.args[0].type, node.type
    x = _ev(node.args[0], ctx, active)
    if src.fractional:
        return _round_double(node, ctx, active, x, digits)
    if src.integral:
        if digits >= 0:
            return x
        rounded = pc.round(x.cast(pa.decimal128(INT_DIGITS[src.name] + 1, 0)), digits, round_mode=HALF_UP)
        try:
            return _restrict(rounded, active).cast(t.arrow())
        except pa.ArrowInvalid:
            _fail(
                ctx,
                node,
                "ARITHMETIC_OVERFLOW",
                f"the rounded value does not fit {t}",
                "round CAST(x AS BIGINT) or CAST(x AS DECIMAL(38,0)) instead",
            )
            raise
    room = max(1, 1 - digits - (x.type.precision - x.type.scale))  # round(0.9999, -2) needs 3 digits
    return fit_decimal(node, ctx, active, pc.round(_widen(x, room), digits, round_mode=HALF_UP), t)


def _shortest_decimals(v: pa.Array, fn: Callable[[pa.Array], pa.Array]) -> pa.Array:
    """Spark turns a DOUBLE into a decimal through its shortest text (``BigDecimal(d)`` reads
    ``Double.toString(d)``), not through its exact binary value. Arrow's float-to-text is the
    shortest text too; it is parsed as decimal256 in two magnitude bands (a band's scale must
    hold every digit of the text, or the parse fails) and ``fn`` applied to each band; the
    caller has refused magnitudes of 1e38 and more."""
    finite, mag = pc.is_finite(v), pc.abs(v)
    large = pc.and_(finite, pc.and_(pc.greater_equal(mag, 1e15), pc.less(mag, 1e38)))
    small = pc.and_(finite, pc.and_(pc.greater_equal(mag, 1e-39), pc.less(mag, 1e15)))
    text = v.cast(pa.string())
    # below 1e-39 every scale allowed here (<= 38) rounds to 0; BigDecimal has no -0 either
    parts = [
        fn(pc.if_else(mask, text, "0").cast(pa.decimal256(76, scale))) for mask, scale in ((small, 60), (large, 38))
    ]
    return pc.if_else(large, parts[1], parts[0])


def _java_text_check(node: Node, ctx: Context, active: Mask, x: pa.Array, v: pa.Array) -> None:
    """Spark reads a DOUBLE as a decimal through Java's Double.toString, which before Java 19 is
    not always the shortest text: for an integral value from 2**53 to 2**63 it can be the exact
    binary value instead (2.82879384806159E17 reads as 282879384806159008 on Java 17, as
    282879384806159000 on Java 21). Such a row, where the two differ, is not reproduced."""
    big = pc.and_(pc.is_finite(v), pc.and_(pc.greater_equal(pc.abs(v), 2.0**53), pc.less(pc.abs(v), 2.0**63)))
    if not pc.any(_within(active, big)).as_py():
        return
    inside = pc.if_else(big, v, 0.0)
    exact = inside.cast(pa.int64()).cast(pa.decimal256(76, 0))
    shortest = inside.cast(pa.string()).cast(pa.decimal256(76, 0))
    _check(
        ctx,
        node,
        pc.and_(big, pc.not_equal(exact, shortest)),
        active,
        x,
        NOT_REPRODUCED,
        "Java's text of this DOUBLE depends on the Java version Spark runs on; CAST it to BIGINT first",
    )


def _round_double(node: Node, ctx: Context, active: Mask, x: pa.Array, digits: int) -> pa.Array:
    """round(0.285D, 2) is 0.29 in Spark (see ``_shortest_decimals``), 0.28 in IEEE terms."""
    v = x.cast(pa.float64())
    # From 1e38 the text Spark rounds has at most 18 digits, the last at 10**(e-17) or above:
    # rounding at 10**(e-18) or lower gives the value back; further is not reproduced here.
    huge = pc.and_(pc.is_finite(v), pc.greater_equal(pc.abs(v), 1e38))
    kept = pc.less_equal(pa.scalar(float(-digits)), pc.subtract(pc.floor(pc.log10(pc.abs(v))), 18.0))
    _check(
        ctx,
        node,
        pc.and_(huge, pc.invert(kept)),
        active,
        x,
        NOT_REPRODUCED,
        "round() of a DOUBLE of 1e38 or more to so few digits is not reproduced here; leave it unrounded",
    )
    if digits < 0:  # rounding an integral value to 0 or more digits gives it back
        _java_text_check(node, ctx, active, x, v)
    rounded = _shortest_decimals(v, lambda d: pc.round(d, digits, round_mode=HALF_UP).cast(pa.string()).cast(x.type))
    return pc.if_else(pc.and_(pc.is_finite(v), pc.invert(huge)), rounded, x)  # NaN and Infinity stay, as in Spark


# --- casts ----------------------------------------------------------------------------------

_INTEGRAL_TEXT = r"^[+-]?[0-9]+$"
_DECIMAL_TEXT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)$"
_FLOAT_TEXT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_DATE_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_TIMESTAMP_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?)?$"
_TRUE, _FALSE = ["t", "true", "y", "yes", "1"], ["f", "false", "n", "no", "0"]
_NUMBER_TARGETS = set(INTEGRALS) | {"FLOAT", "DOUBLE", "DECIMAL"}
# source -> the targets this evaluator reproduces exactly (Spark allows more; those are refused)
CASTS: dict[str, set[str]] = {
    **{t: _NUMBER_TARGETS | {"STRING", "BOOLEAN"} for t in INTEGRALS},
    "DECIMAL": _NUMBER_TARGETS | {"STRING", "BOOLEAN"},
    "FLOAT": set(INTEGRALS) | {"DOUBLE", "DECIMAL"},
    "DOUBLE": set(INTEGRALS) | {"DOUBLE", "DECIMAL"},
    "BOOLEAN": _NUMBER_TARGETS | {"STRING", "BOOLEAN"},
    "STRING": _NUMBER_TARGETS | {"STRING", "BOOLEAN", "DATE", "TIMESTAMP"},
    "DATE": {"STRING", "DATE", "TIMESTAMP"},
    "TIMESTAMP": {"STRING", "DATE", "TIMESTAMP"},
    "TIMESTAMP_NTZ": {"STRING", "DATE", "TIMESTAMP"},
    "VOID": _NUMBER_TARGETS | {"STRING", "BOOLEAN", "DATE", "TIMESTAMP", "BINARY"},
    "BINARY": {"BINARY"},
}


def _cast(node: Node, ctx: Context, active: Mask) -> pa.Array:
    src, dst = node.args[0].type, node.type
    x = _ev(node.args[0], ctx, active)
    if src.name == "VOID":
        return pa.nulls(ctx.rows, dst.arrow())
    if src == dst:
        return x
    if src.name == "STRING" and dst.name != "STRING":
        return _from_text(node, ctx, active, x, dst)
    if dst.name == "STRING":
        return to_text(node, ctx, active, x, src)
    if dst.name == "BOOLEAN":
        return pc.not_equal(x, _zero(x))
    if dst.name == "DECIMAL":
        if src.fractional:
            return _double_to_decimal(node, ctx, active, x, dst)
        if src.integral or src.name == "BOOLEAN":
            x = x.cast(pa.int8()) if src.name == "BOOLEAN" else x
            return fit_decimal(node, ctx, active, x.cast(pa.decimal128(INT_DIGITS[_int_name(x)], 0)), dst)
        return fit_decimal(node, ctx, active, x, dst)
    if dst.fractional:
        if src.name == "DECIMAL":  # through the plain text: correctly rounded, like BigDecimal.doubleValue
            return to_text(node, ctx, active, x, src).cast(dst.arrow())
        return x.cast(dst.arrow(), safe=False)  # integral: round to nearest, like Java's (double) long
    if dst.integral:
        if src.name == "DECIMAL":
            return _decimal_to_int(node, ctx, active, x, src, dst)
        if src.fractional:
            x = pc.trunc(x.cast(pa.float64()) if src.name == "FLOAT" else x)  # toward zero, then range-checked
        try:
            return _restrict(x, active).cast(dst.arrow())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            _fail(
                ctx,
                node,
                "CAST_OVERFLOW",
                f"a value is out of the range of {dst} (or NaN/Infinity)",
                "CAST to a wider type, or filter such rows out",
            )
            raise
    if dst.name == "DATE":  # the UTC date (Spark's session time zone here is UTC)
        return pc.floor_temporal(x, unit="day").cast(pa.date32()) if src.name != "DATE" else x
    return x.cast(dst.arrow())  # TIMESTAMP from DATE (midnight UTC) or TIMESTAMP_NTZ (same wall clock, UTC)


_INT_BOUNDS = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
}


def _decimal_to_int(node: Node, ctx: Context, active: Mask, x: pa.Array, src: SqlType, dst: SqlType) -> pa.Array:
    """Spark truncates toward zero -- exactly for BIGINT and for a decimal it holds as a long (a
    column of at most 18 digits), but through the nearest DOUBLE for TINYINT, SMALLINT and INT
    when it holds the decimal as a BigDecimal (a column of more digits, and the decimals it
    computes): CAST(123456789.9999999999 AS INT) is 123456790 there, and 2147483647.9999999999
    overflows. Where the two readings part and the holding is not known, the row is refused."""
    low, high = _INT_BOUNDS[dst.name]
    wide = x.cast(pa.decimal256(min(x.type.precision + 1, 76), x.type.scale))
    exact = pc.trunc(wide).cast(pa.decimal256(76, 0))
    exact_ok = pc.and_(
        pc.greater_equal(exact, pa.scalar(decimal.Decimal(low), exact.type)),
        pc.less_equal(exact, pa.scalar(decimal.Decimal(high), exact.type)),
    )
    source = node.args[0]
    long_held = source.op == "col" and src.precision <= 18
    if dst.name == "BIGINT" or long_held:
        ok, value = exact_ok, exact
    else:
        v = to_text(node, ctx, active, x, src).cast(pa.float64())  # correctly rounded, as BigDecimal.doubleValue
        double_ok = pc.and_(pc.less_equal(pc.floor(v), float(high)), pc.greater_equal(pc.ceil(v), float(low)))
        double = pc.trunc(v)
        if source.op != "col":
            same_value = pc.equal(
                pc.if_else(exact_ok, exact, pa.scalar(decimal.Decimal(0), exact.type)).cast(pa.float64()),
                pc.if_else(double_ok, double, 0.0),
            )
            parted = pc.or_(pc.not_equal(exact_ok, double_ok), pc.and_(exact_ok, pc.invert(same_value)))
            _check(
                ctx,
                node,
                parted,
                active,
                x,
                NOT_REPRODUCED,
                "Spark truncates this value either exactly or "
                "through a DOUBLE, depending on how it holds it; CAST it to BIGINT first, or round() it",
            )
        ok, value = double_ok, double
    _check(ctx, node, pc.invert(ok), active, x, "CAST_OVERFLOW", "CAST to a wider type, or filter such rows out")
    return _restrict(value, _within(active, ok)).cast(dst.arrow())


def _int_name(x: pa.Array) -> str:
    return {pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INT", pa.int64(): "BIGINT"}[x.type]


def _double_to_decimal(node: Node, ctx: Context, active: Mask, x: pa.Array, dst: SqlType) -> pa.Array:
    """CAST(2.675D AS DECIMAL(3,2)) is 2.68 in Spark, through the shortest text (``_shortest_decimals``).
    NaN and Infinity give NULL, even in ANSI mode (checked against Spark 4.2)."""
    v = x.cast(pa.float64())
    v = pc.if_else(pc.is_finite(v), v, pa.scalar(None, pa.float64()))
    _check(
        ctx,
        node,
        pc.greater_equal(pc.abs(v), 10.0 ** (dst.precision - dst.scale)),
        active,
        x,
        "NUMERIC_VALUE_OUT_OF_RANGE",
        f"CAST to a DECIMAL with more digits before the point than {dst}",
    )
    _java_text_check(node, ctx, active, x, v)
    finite = pc.fill_null(pc.is_finite(v), False)
    out = _shortest_decimals(pc.if_else(finite, v, 0.0), lambda d: fit_decimal(node, ctx, active, d, dst))
    return pc.if_else(finite, out, pa.scalar(None, out.type))


def to_text(node: Node, ctx: Context, active: Mask, x: pa.Array, src: SqlType) -> pa.Array:
    """Spark's text of a value: decimals plain (never 1E-7), timestamps without trailing zeros
    of the fraction ('2020-01-02 03:04:05.0006'), booleans true/false."""
    if src.name == "DECIMAL":
        scale = x.type.scale
        digits = x.view(pa.decimal256(76, 0) if x.type.bit_width == 256 else pa.decimal128(38, 0)).cast(pa.string())
        if scale == 0:
            return digits
        negative = pc.starts_with(digits, "-")
        padded = pc.utf8_lpad(pc.utf8_ltrim(digits, characters="-"), width=scale + 1, padding="0")
        sign = pc.if_else(negative, "-", "")
        return pc.binary_join_element_wise(
            sign,
            pc.utf8_slice_codeunits(padded, start=0, stop=-scale),
            ".",
            pc.utf8_slice_codeunits(padded, start=-scale),
            "",
        )
    if src.name in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        years = pc.year(x)  # years 1 to 999 have four digits, 0001 (as in Spark)
        _check(
            ctx,
            node,
            pc.greater(years, 9999),
            active,
            x,
            NOT_REPRODUCED,
            "years after 9999 are not formatted here; filter such rows out",
        )
        seconds = pc.floor_temporal(x, unit="second")
        micros = pc.add(pc.subtract(x.cast(pa.int64()), seconds.cast(pa.int64())), 1_000_000).cast(pa.string())
        fraction = pc.utf8_rtrim(pc.utf8_slice_codeunits(micros, start=1), characters="0")
        fraction = pc.if_else(pc.equal(fraction, ""), "", pc.binary_join_element_wise(".", fraction, ""))
        base = pc.utf8_slice_codeunits(pc.strftime(seconds, format="%Y-%m-%d %H:%M:%S"), start=0, stop=19)
        return pc.binary_join_element_wise(base, fraction, "")
    return x.cast(pa.string())  # integral, boolean (true/false), date (yyyy-mm-dd)


def _from_text(node: Node, ctx: Context, active: Mask, x: pa.Array, dst: SqlType) -> pa.Array:
    """Text to a value, for the forms Spark reads too; any other text fails (CAST_INVALID_INPUT).
    For the integers and BOOLEAN these are all Spark reads ('1.5' as INT fails in Spark 4 too);
    for the others Spark reads a few more (e.g. '2020-1-1' as DATE, 'NaN' as DOUBLE, '1e2' as
    DECIMAL): equal or error."""
    name = dst.name
    blanks = _BLANKS if name in ("DOUBLE", "FLOAT", "DECIMAL") else _BLANKS_AND_DEL
    text = pc.utf8_trim(_restrict(x, active), characters=blanks)
    if name == "BOOLEAN":
        lower = pc.ascii_lower(text)
        true, false = pc.is_in(lower, value_set=pa.array(_TRUE)), pc.is_in(lower, value_set=pa.array(_FALSE))
        _check(
            ctx,
            node,
            pc.and_(pc.is_valid(text), pc.and_(pc.invert(true), pc.invert(false))),
            active,
            x,
            "CAST_INVALID_INPUT",
            "give 'true'/'false' (or t, f, yes, no, y, n, 1, 0), or filter such rows out",
        )
        return pc.if_else(pc.is_null(text), pa.scalar(None, pa.bool_()), true)
    pattern = {"DATE": _DATE_TEXT, "TIMESTAMP": _TIMESTAMP_TEXT, "DECIMAL": _DECIMAL_TEXT}.get(
        name, _FLOAT_TEXT if dst.fractional else _INTEGRAL_TEXT
    )
    if dst.integral:  # Spark reads [+-]digits only, too
        _check(
            ctx,
            node,
            pc.invert(pc.match_substring_regex(text, pattern)),
            active,
            x,
            "CAST_INVALID_INPUT",
            "give [+-]digits, or filter or fix such rows",
        )
    else:
        _check(
            ctx,
            node,
            pc.invert(pc.match_substring_regex(text, pattern)),
            active,
            x,
            "CAST_INVALID_INPUT",
            f"only the plain forms are read here ({_FORMS[name if name in _FORMS else 'number']}); filter or "
            "fix such rows",
            maybe=True,
        )
    if name == "DECIMAL":
        return _text_to_decimal(node, ctx, active, text, dst)
    try:
        if dst.integral:
            return pc.utf8_ltrim(text, characters="+").cast(pa.int64()).cast(dst.arrow())
        if name == "TIMESTAMP":
            return text.cast(pa.timestamp("us")).cast(dst.arrow())
        return text.cast(dst.arrow())
    except pa.ArrowInvalid:
        _fail(
            ctx,
            node,
            "CAST_INVALID_INPUT",
            f"a text is not a valid {dst} (out of range, or no such day)",
            "filter or fix such rows",
        )
        raise


_FORMS = {
    "DATE": "yyyy-mm-dd",
    "TIMESTAMP": "yyyy-mm-dd[ hh:mm:ss[.ffffff]], in UTC",
    "DECIMAL": "digits with an optional sign and point, no exponent",
    "number": "[+-]digits[.digits][e[+-]digits]",
}


def _text_to_decimal(node: Node, ctx: Context, active: Mask, text: pa.Array, dst: SqlType) -> pa.Array:
    """Digits beyond the scale + 1 cannot change a HALF_UP rounding, so the text is cut there and
    parsed exactly; the integer digits are checked against the precision first."""
    negative = pc.starts_with(text, "-")
    body = pc.utf8_ltrim(text, characters="+-")
    body = pc.if_else(pc.match_substring(body, "."), body, pc.binary_join_element_wise(body, ".", ""))
    parts = pc.split_pattern(body, ".", max_splits=1)
    whole = pc.utf8_ltrim(pc.list_element(parts, 0), characters="0")
    _check(
        ctx,
        node,
        pc.greater(pc.utf8_length(whole), dst.precision - dst.scale),
        active,
        text,
        "NUMERIC_VALUE_OUT_OF_RANGE",
        f"CAST to a DECIMAL with more digits before the point than {dst}",
    )
    fraction = pc.utf8_slice_codeunits(pc.list_element(parts, 1), start=0, stop=dst.scale + 1)
    exact = pc.binary_join_element_wise(
        pc.if_else(negative, "-", ""),
        pc.if_else(pc.equal(whole, ""), "0", whole),
        ".",
        pc.if_else(pc.equal(fraction, ""), "0", fraction),
        "",
    )
    return fit_decimal(node, ctx, active, exact.cast(_dec(dst.precision + 1, dst.scale + 1)), dst)


# --- strings --------------------------------------------------------------------------------


def _concat(node: Node, ctx: Context, active: Mask) -> pa.Array:
    parts = []
    for x in node.args:  # NULL if any part is NULL, as Spark's concat, which stops at the first NULL
        parts.append(_ev(x, ctx, active).cast(pa.string()))
        active = _within(active, pc.is_valid(parts[-1]))
    return pc.binary_join_element_wise(*parts, "")


def _like(node: Node, ctx: Context, active: Mask) -> pa.Array:
    # The compiler refused backslashes, so Arrow's LIKE (which reads \ as an escape too) and
    # Spark's agree: % any run of characters, _ one character, newlines included.
    return pc.match_like(_ev(node.args[0], ctx, active), node.value)


# Characters whose upper / lower case in Java (String.toUpperCase / toLowerCase, which Spark
# calls) is not the one-character mapping Arrow applies: SpecialCasing.txt's unconditional
# mappings (German sharp s -> "SS", ligatures, Greek with ypogegrammeni ...), and for lower case
# dotted capital I (two characters) and capital sigma (final sigma depends on the word).
_UPPER_SPECIAL = "".join(
    map(
        chr,
        [
            0xDF,
            0x149,
            0x1F0,
            0x390,
            0x3B0,
            0x587,
            *range(0x1E96, 0x1E9B),
            0x1F50,
            0x1F52,
            0x1F54,
            0x1F56,
            *range(0x1F80, 0x1FB0),
            0x1FB2,
            0x1FB3,
            0x1FB4,
            0x1FB6,
            0x1FB7,
            0x1FBC,
            0x1FC2,
            0x1FC3,
            0x1FC4,
            0x1FC6,
            0x1FC7,
            0x1FCC,
            0x1FD2,
            0x1FD3,
            0x1FD6,
            0x1FD7,
            0x1FE2,
            0x1FE3,
            0x1FE4,
            0x1FE6,
            0x1FE7,
            0x1FF2,
            0x1FF3,
            0x1FF4,
            0x1FF6,
            0x1FF7,
            0x1FFC,
            *range(0xFB00, 0xFB07),
            *range(0xFB13, 0xFB18),
        ],
    )
)
_LOWER_SPECIAL = "\u0130\u03a3"


def _case_map(node: Node, ctx: Context, active: Mask) -> pa.Array:
    arr = _ev(node.args[0], ctx, active)
    special = _UPPER_SPECIAL if node.op == "upper" else _LOWER_SPECIAL
    hits = pc.match_substring_regex(arr, "[" + special + "]")
    if pc.any(_within(active, hits)).as_py():
        sample = pc.filter(arr, _within(active, hits))[0].as_py()
        raise TransformEvalError(
            f"{ctx.what}: {node.sql}: found {sample!r}, whose {node.op} case in Spark (Java's full case mapping, "
            "e.g. 'ß' -> 'SS') differs from the one-character mapping this evaluator has, so the row cannot be "
            f"transformed exactly. Fix: remove {node.op}() from the transform, or filter such rows out"
        )
    return pc.utf8_upper(arr) if node.op == "upper" else pc.utf8_lower(arr)


def _trim(node: Node, ctx: Context, active: Mask) -> pa.Array:
    where, chars = node.value  # Spark's trim() removes spaces only (ASCII 32), not other blanks
    fn = {"both": pc.utf8_trim, "leading": pc.utf8_ltrim, "trailing": pc.utf8_rtrim}[where]
    return fn(_ev(node.args[0], ctx, active), characters=chars)


def _length(node: Node, ctx: Context, active: Mask) -> pa.Array:
    arr = _ev(node.args[0], ctx, active)
    counted = pc.binary_length(arr) if node.args[0].type.name == "BINARY" else pc.utf8_length(arr)
    return counted.cast(pa.int32())


def _substring(node: Node, ctx: Context, active: Mask) -> pa.Array:
    """Spark's substringSQL with constant pos/len: 1-based, 0 means 1, a negative pos counts from
    the end, and the end is pos+len *before* clamping at the start. In Python slice terms that is
    start = pos-1 (pos > 0), 0 (pos = 0), pos (pos < 0, from the end); stop = start+len, where for
    a negative pos the stop stays relative to the end until it reaches it."""
    pos, length = node.value
    arr = _ev(node.args[0], ctx, active)
    if length is not None and length <= 0:
        return pc.if_else(pc.is_null(arr), pa.scalar(None, pa.string()), "")
    if pos > 0:
        start, stop = pos - 1, None if length is None else pos - 1 + length
    elif pos == 0:
        start, stop = 0, length
    else:
        start = pos
        stop = None if length is None or pos + length >= 0 else pos + length
    return (
        pc.utf8_slice_codeunits(arr, start=start, stop=stop)
        if stop is not None
        else pc.utf8_slice_codeunits(arr, start=start)
    )


_OPS: dict[str, Callable[[Node, Context, Mask], pa.Array]] = {
    "lit": _literal,
    "const": _literal,
    "col": _column,
    "meta": _meta,
    "and": _and,
    "or": _or,
    "not": lambda n, c, a: pc.invert(_ev(n.args[0], c, a)),
    "case": _case,
    "coalesce": _coalesce,
    "is_null": _null_test,
    "is_not_null": _null_test,
    "in": _in,
    "eq": _compare,
    "ne": _compare,
    "lt": _compare,
    "le": _compare,
    "gt": _compare,
    "ge": _compare,
    "nseq": _compare,
    "add": _arith,
    "sub": _arith,
    "mul": _arith,
    "div": _divide,
    "intdiv": _int_divide,
    "mod": _remainder,
    "neg": _negate,
    "abs": _abs,
    "round": _round,
    "cast": _cast,
    "concat": _concat,
    "like": _like,
    "upper": _case_map,
    "lower": _case_map,
    "trim": _trim,
    "length": _length,
    "substring": _substring,
}
