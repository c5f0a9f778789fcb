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

from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from .transform_tree import (
    HALF_UP,
    INT_DIGITS,
    Context,
    Mask,
    Node,
    TransformEvalError,
    check_rows,
    fail_rows,
    restrict,
    within,
)
from .transform_values import (
    LOWER_SPECIAL,
    UPPER_SPECIAL,
    compare_floats,
    decimal_arith,
    decimal_divide,
    decimal_remainder,
    decimal_to_int,
    double_to_decimal,
    fit_decimal,
    from_text,
    int_name,
    round_double,
    scala_rounded,
    to_text,
    widen_digits,
    zero_divisor,
    zero_like,
)


def evaluate(node: Node, ctx: Context) -> pa.Array:
    """``node`` over every row of ``ctx.batch``."""
    return _ev(node, ctx, None)


def _ev(node: Node, ctx: Context, active: Mask) -> pa.Array:
    out = _OPS[node.op](node, ctx, active)
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks()
    return out


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


def _and(node: Node, ctx: Context, active: Mask) -> pa.Array:
    left = _ev(node.args[0], ctx, active)
    # Spark skips the right side where the left is false
    right = _ev(node.args[1], ctx, within(active, pc.invert(pc.fill_null(pc.invert(left), False))))
    return pc.and_kleene(left, right)


def _or(node: Node, ctx: Context, active: Mask) -> pa.Array:
    left = _ev(node.args[0], ctx, active)
    right = _ev(node.args[1], ctx, within(active, pc.invert(pc.fill_null(left, False))))
    return pc.or_kleene(left, right)


def _case(node: Node, ctx: Context, active: Mask) -> pa.Array:
    """``args`` = cond1, value1, cond2, value2, ..., else. Conditions and branches are only
    evaluated on the rows that reach them, as Spark does."""
    pairs, default = node.args[:-1], node.args[-1]
    remaining = active if active is not None else pa.repeat(pa.scalar(True), ctx.rows)
    conds, values = [], []
    for i in range(0, len(pairs), 2):
        cond = pc.fill_null(_ev(pairs[i], ctx, remaining), False)
        values.append(_ev(pairs[i + 1], ctx, within(remaining, cond)))
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
        remaining = within(remaining, pc.is_null(out))
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


def _operands(node: Node, ctx: Context, active: Mask, divisor_first: bool = False) -> tuple[pa.Array, pa.Array, Mask]:
    """Both operands of a binary operation, and the rows where both were evaluated. Spark
    evaluates the second operand only where the first is not NULL (the result is NULL there
    anyway), and for / div % the divisor first."""
    first, second = (1, 0) if divisor_first else (0, 1)
    x = _ev(node.args[first], ctx, active)
    both = within(active, pc.is_valid(x))
    y = _ev(node.args[second], ctx, both)
    a, b = (y, x) if divisor_first else (x, y)
    return a, b, both


def _compare(node: Node, ctx: Context, active: Mask) -> pa.Array:
    op = node.op
    if op == "nseq":
        a, b = (_ev(x, ctx, active) for x in node.args)
    else:
        a, b, both = _operands(node, ctx, active)
        a, b = restrict(a, both), restrict(b, both)
    if node.args[0].type.fractional:  # Spark: NaN = NaN, and NaN is larger than any other value
        return compare_floats(op, a, b)
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


def _arith(node: Node, ctx: Context, active: Mask) -> pa.Array:
    t = node.type
    a, b, active = _operands(node, ctx, active)
    a, b = restrict(a, active), restrict(b, active)
    if t.name == "DECIMAL":
        return decimal_arith(node, ctx, active, a, b)
    if t.fractional:
        return {"add": pc.add, "sub": pc.subtract, "mul": pc.multiply}[node.op](a, b)
    fn = {"add": pc.add_checked, "sub": pc.subtract_checked, "mul": pc.multiply_checked}[node.op]
    try:
        return fn(a, b)
    except pa.ArrowInvalid:  # Spark names it BINARY_ARITHMETIC_OVERFLOW for TINYINT and SMALLINT
        fail_rows(
            ctx,
            node,
            "BINARY_ARITHMETIC_OVERFLOW" if t.name in ("TINYINT", "SMALLINT") else "ARITHMETIC_OVERFLOW",
            f"the result does not fit {t}",
            "CAST an operand to a wider type first, e.g. CAST(x AS BIGINT) or CAST(x AS DECIMAL(38,0))",
        )
        raise


def _divide(node: Node, ctx: Context, active: Mask) -> pa.Array:
    """``/``: DOUBLE division (the compiler cast integral operands to DOUBLE) or decimal division."""
    a, b, active = _operands(node, ctx, active, divisor_first=True)
    a, b = restrict(a, active), restrict(b, active)
    zero_divisor(node, ctx, active, a, b)
    if node.type.name == "DECIMAL":
        return decimal_divide(node, ctx, active, a, b)
    return pc.divide(a, b)


def _int_divide(node: Node, ctx: Context, active: Mask) -> pa.Array:
    """``div``: BIGINT division truncating toward zero."""
    a, b, active = _operands(node, ctx, active, divisor_first=True)
    a, b = restrict(a, active), restrict(b, active)
    zero_divisor(node, ctx, active, a, b)
    check_rows(
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
    a, b = restrict(a, active), restrict(b, active)
    zero_divisor(node, ctx, active, a, b)
    if node.type.name == "DECIMAL":
        return decimal_remainder(node, ctx, active, a, b)
    one = pa.scalar(1, a.type)
    safe_b = pc.if_else(pc.or_(pc.equal(b, 0), pc.equal(b, -1)), one, b)  # x % -1 is 0; never MIN / -1
    return pc.subtract(a, pc.multiply(pc.divide(a, safe_b), safe_b))


def _negate(node: Node, ctx: Context, active: Mask) -> pa.Array:
    a = _ev(node.args[0], ctx, active)
    if node.type.name == "DECIMAL" and node.type.precision > 34:
        return fit_decimal(node, ctx, active, pc.negate(scala_rounded(a, active, False)), node.type)
    if not node.type.integral:
        return pc.negate(a)
    try:
        return pc.negate_checked(restrict(a, active))
    except pa.ArrowInvalid:
        fail_rows(
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
        return fit_decimal(node, ctx, active, pc.abs(scala_rounded(a, active, True)), node.type)
    if not node.type.integral:
        return pc.abs(a)
    try:
        return pc.abs_checked(restrict(a, active))
    except pa.ArrowInvalid:
        fail_rows(
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
        return round_double(node, ctx, active, x, digits)
    if src.integral:
        if digits >= 0:
            return x
        rounded = pc.round(x.cast(pa.decimal128(INT_DIGITS[src.name] + 1, 0)), digits, round_mode=HALF_UP)
        try:
            return restrict(rounded, active).cast(t.arrow())
        except pa.ArrowInvalid:
            fail_rows(
                ctx,
                node,
                "ARITHMETIC_OVERFLOW",
                f"the rounded value does not fit {t}",
                "round CAST(x AS BIGINT) or CAST(x AS DECIMAL(38,0)) instead",
            )
            raise
    room = max(1, 1 - digits - (x.type.precision - x.type.scale))  # round(0.9999, -2) needs 3 digits
    return fit_decimal(node, ctx, active, pc.round(widen_digits(x, room), digits, round_mode=HALF_UP), t)


def _cast(node: Node, ctx: Context, active: Mask) -> pa.Array:
    src, dst = node.args[0].type, node.type
    x = _ev(node.args[0], ctx, active)
    if src.name == "VOID":
        return pa.nulls(ctx.rows, dst.arrow())
    if src == dst:
        return x
    if src.name == "STRING" and dst.name != "STRING":
        return from_text(node, ctx, active, x, dst)
    if dst.name == "STRING":
        return to_text(node, ctx, active, x, src)
    if dst.name == "BOOLEAN":
        return pc.not_equal(x, zero_like(x))
    if dst.name == "DECIMAL":
        if src.fractional:
            return double_to_decimal(node, ctx, active, x, dst)
        if src.integral or src.name == "BOOLEAN":
            x = x.cast(pa.int8()) if src.name == "BOOLEAN" else x
            return fit_decimal(node, ctx, active, x.cast(pa.decimal128(INT_DIGITS[int_name(x)], 0)), dst)
        return fit_decimal(node, ctx, active, x, dst)
    if dst.fractional:
        if src.name == "DECIMAL":  # through the plain text: correctly rounded, like BigDecimal.doubleValue
            return to_text(node, ctx, active, x, src).cast(dst.arrow())
        return x.cast(dst.arrow(), safe=False)  # integral: round to nearest, like Java's (double) long
    if dst.integral:
        if src.name == "DECIMAL":
            return decimal_to_int(node, ctx, active, x, src, dst)
        if src.fractional:
            x = pc.trunc(x.cast(pa.float64()) if src.name == "FLOAT" else x)  # toward zero, then range-checked
        try:
            return restrict(x, active).cast(dst.arrow())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            fail_rows(
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


def _concat(node: Node, ctx: Context, active: Mask) -> pa.Array:
    parts = []
    for x in node.args:  # NULL if any part is NULL, as Spark's concat, which stops at the first NULL
        parts.append(_ev(x, ctx, active).cast(pa.string()))
        active = within(active, pc.is_valid(parts[-1]))
    return pc.binary_join_element_wise(*parts, "")


def _like(node: Node, ctx: Context, active: Mask) -> pa.Array:
    # The compiler refused backslashes, so Arrow's LIKE (which reads \ as an escape too) and
    # Spark's agree: % any run of characters, _ one character, newlines included.
    return pc.match_like(_ev(node.args[0], ctx, active), node.value)


def _case_map(node: Node, ctx: Context, active: Mask) -> pa.Array:
    arr = _ev(node.args[0], ctx, active)
    special = UPPER_SPECIAL if node.op == "upper" else LOWER_SPECIAL
    hits = pc.match_substring_regex(arr, "[" + special + "]")
    if pc.any(within(active, hits)).as_py():
        sample = pc.filter(arr, within(active, hits))[0].as_py()
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
