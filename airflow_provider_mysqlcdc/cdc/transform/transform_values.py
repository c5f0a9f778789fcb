"""Values as Spark SQL computes them, on Arrow arrays: decimal arithmetic with Spark's precision and
scale rules (``fit_decimal``), DOUBLE rounding and text in Java's notation, and the casts between
numbers, text, dates and timestamps (``CASTS`` lists which are supported). ``transform_eval`` applies
them to a node's evaluated operands.
"""

from __future__ import annotations

import decimal
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from .transform_tree import (
    BLANKS,
    BLANKS_AND_DEL,
    HALF_UP,
    INTEGRALS,
    NOT_REPRODUCED,
    Context,
    Mask,
    Node,
    SqlType,
    check_rows,
    fail_rows,
    restrict,
    within,
)


def compare_floats(op: str, a: pa.Array, b: pa.Array) -> pa.Array:
    na, nb = pc.is_nan(a), pc.is_nan(b)
    eq = pc.or_(pc.equal(a, b), pc.and_(na, nb))
    lt = pc.or_(pc.less(a, b), pc.and_(pc.invert(na), nb))
    gt = pc.or_(pc.greater(a, b), pc.and_(na, pc.invert(nb)))
    if op == "nseq":
        return pc.if_else(pc.and_(pc.is_null(a), pc.is_null(b)), True, pc.fill_null(eq, False))
    return {"eq": eq, "ne": pc.invert(eq), "lt": lt, "le": pc.or_(lt, eq), "gt": gt, "ge": pc.or_(gt, eq)}[op]


def zero_like(arr: pa.Array) -> pa.Scalar:
    if pa.types.is_decimal(arr.type):
        return pa.scalar(decimal.Decimal(0), arr.type)
    return pa.scalar(0, pa.int8()).cast(arr.type)


def _dec(precision: int, scale: int, wide: bool = False) -> pa.DataType:
    return pa.decimal256(precision, scale) if wide or precision > 38 else pa.decimal128(precision, scale)


def widen_digits(x: pa.Array, extra: int) -> pa.Array:
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
    x = restrict(x, active)
    try:
        if x.type.scale > t.scale:
            x = pc.round(widen_digits(x, 1), t.scale, round_mode=HALF_UP)
        return x.cast(t.arrow())
    except pa.ArrowInvalid:
        fail_rows(
            ctx,
            node,
            "NUMERIC_VALUE_OUT_OF_RANGE",
            f"a value does not fit {t}",
            "CAST to a DECIMAL with more digits before the point first",
        )
        raise


def decimal_arith(node: Node, ctx: Context, active: Mask, a: pa.Array, b: pa.Array) -> pa.Array:
    (p1, s1), (p2, s2) = (a.type.precision, a.type.scale), (b.type.precision, b.type.scale)
    wide = decimal_intermediate(node.op, p1, s1, p2, s2, node.type.scale) > 38
    a, b = a.cast(_dec(p1, s1, wide)), b.cast(_dec(p2, s2, wide))
    exact = {"add": pc.add, "sub": pc.subtract, "mul": pc.multiply}[node.op](a, b)
    return fit_decimal(node, ctx, active, exact, node.type)


def decimal_divide(node: Node, ctx: Context, active: Mask, a: pa.Array, b: pa.Array) -> pa.Array:
    """Arrow truncates the quotient at its own scale; with the dividend scaled so that this scale
    is at least the result's + 1, rounding HALF_UP from the truncated digits equals rounding the
    exact quotient (HALF_UP only looks at the first dropped digit)."""
    (p1, s1), (p2, s2), scale = (a.type.precision, a.type.scale), (b.type.precision, b.type.scale), node.type.scale
    s1n = max(s1, scale + s2 - p2)
    wide = decimal_intermediate("div", p1, s1, p2, s2, scale) > 38
    a, b = a.cast(_dec(p1 + s1n - s1, s1n, wide)), b.cast(_dec(p2, s2, wide))
    b = pc.if_else(pc.equal(b, zero_like(b)), pa.scalar(None, b.type), b)  # left: NULL / 0, which is NULL
    return fit_decimal(node, ctx, active, pc.divide(a, b), node.type)


def decimal_remainder(node: Node, ctx: Context, active: Mask, a: pa.Array, b: pa.Array) -> pa.Array:
    (p1, s1), (p2, s2) = (a.type.precision, a.type.scale), (b.type.precision, b.type.scale)
    s = max(s1, s2)
    wide = decimal_intermediate("mod", p1, s1, p2, s2, node.type.scale) > 38
    a, b = a.cast(_dec(p1 + s - s1, s, wide)), b.cast(_dec(p2 + s - s2, s, wide))
    b = pc.if_else(pc.equal(b, zero_like(b)), pa.scalar(None, b.type), b)
    quotient = pc.trunc(pc.divide(a, b)).cast(_dec(max(1, p1 - s1 + s2), 0, wide))
    return fit_decimal(node, ctx, active, pc.subtract(a, pc.multiply(b, quotient)), node.type)


def zero_divisor(node: Node, ctx: Context, active: Mask, a: pa.Array, b: pa.Array) -> None:
    # Spark looks at the divisor only when the dividend is not NULL: NULL / 0 is NULL
    condition = "REMAINDER_BY_ZERO" if node.op == "mod" else "DIVIDE_BY_ZERO"
    check_rows(
        ctx,
        node,
        pc.and_(pc.equal(b, zero_like(b)), pc.is_valid(a)),
        active,
        a,
        condition,
        "guard the row, e.g. CASE WHEN <divisor> <> 0 THEN ... END, or filter such rows out",
    )


def scala_rounded(x: pa.Array, active: Mask, negative_only: bool) -> pa.Array:
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
        band = within(active, pc.equal(digits, k))
        if negative_only:
            band = pc.and_(band, pc.fill_null(pc.less(wide, pa.scalar(decimal.Decimal(0), wide.type)), False))
        if pc.any(band).as_py():
            rounded = pc.round(wide, s - (k - 34), round_mode="half_to_even")
            out = pc.if_else(band, rounded, out)
    return out


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
    if not pc.any(within(active, big)).as_py():
        return
    inside = pc.if_else(big, v, 0.0)
    exact = inside.cast(pa.int64()).cast(pa.decimal256(76, 0))
    shortest = inside.cast(pa.string()).cast(pa.decimal256(76, 0))
    check_rows(
        ctx,
        node,
        pc.and_(big, pc.not_equal(exact, shortest)),
        active,
        x,
        NOT_REPRODUCED,
        "Java's text of this DOUBLE depends on the Java version Spark runs on; CAST it to BIGINT first",
    )


def round_double(node: Node, ctx: Context, active: Mask, x: pa.Array, digits: int) -> pa.Array:
    """round(0.285D, 2) is 0.29 in Spark (see ``_shortest_decimals``), 0.28 in IEEE terms."""
    v = x.cast(pa.float64())
    # From 1e38 the text Spark rounds has at most 18 digits, the last at 10**(e-17) or above:
    # rounding at 10**(e-18) or lower gives the value back; further is not reproduced here.
    huge = pc.and_(pc.is_finite(v), pc.greater_equal(pc.abs(v), 1e38))
    kept = pc.less_equal(pa.scalar(float(-digits)), pc.subtract(pc.floor(pc.log10(pc.abs(v))), 18.0))
    check_rows(
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
_INT_BOUNDS = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
}


def decimal_to_int(node: Node, ctx: Context, active: Mask, x: pa.Array, src: SqlType, dst: SqlType) -> pa.Array:
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
            check_rows(
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
    check_rows(ctx, node, pc.invert(ok), active, x, "CAST_OVERFLOW", "CAST to a wider type, or filter such rows out")
    return restrict(value, within(active, ok)).cast(dst.arrow())


def int_name(x: pa.Array) -> str:
    return {pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INT", pa.int64(): "BIGINT"}[x.type]


def double_to_decimal(node: Node, ctx: Context, active: Mask, x: pa.Array, dst: SqlType) -> pa.Array:
    """CAST(2.675D AS DECIMAL(3,2)) is 2.68 in Spark, through the shortest text (``_shortest_decimals``).
    NaN and Infinity give NULL, even in ANSI mode (checked against Spark 4.2)."""
    v = x.cast(pa.float64())
    v = pc.if_else(pc.is_finite(v), v, pa.scalar(None, pa.float64()))
    check_rows(
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
        check_rows(
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


def from_text(node: Node, ctx: Context, active: Mask, x: pa.Array, dst: SqlType) -> pa.Array:
    """Text to a value, for the forms Spark reads too; any other text fails (CAST_INVALID_INPUT).
    For the integers and BOOLEAN these are all Spark reads ('1.5' as INT fails in Spark 4 too);
    for the others Spark reads a few more (e.g. '2020-1-1' as DATE, 'NaN' as DOUBLE, '1e2' as
    DECIMAL): equal or error."""
    name = dst.name
    blanks = BLANKS if name in ("DOUBLE", "FLOAT", "DECIMAL") else BLANKS_AND_DEL
    text = pc.utf8_trim(restrict(x, active), characters=blanks)
    if name == "BOOLEAN":
        lower = pc.ascii_lower(text)
        true, false = pc.is_in(lower, value_set=pa.array(_TRUE)), pc.is_in(lower, value_set=pa.array(_FALSE))
        check_rows(
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
        check_rows(
            ctx,
            node,
            pc.invert(pc.match_substring_regex(text, pattern)),
            active,
            x,
            "CAST_INVALID_INPUT",
            "give [+-]digits, or filter or fix such rows",
        )
    else:
        check_rows(
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
        fail_rows(
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
    check_rows(
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


# Characters whose upper / lower case in Java (String.toUpperCase / toLowerCase, which Spark
# calls) is not the one-character mapping Arrow applies: SpecialCasing.txt's unconditional
# mappings (German sharp s -> "SS", ligatures, Greek with ypogegrammeni ...), and for lower case
# dotted capital I (two characters) and capital sigma (final sigma depends on the word).
UPPER_SPECIAL = "".join(
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
LOWER_SPECIAL = "\u0130\u03a3"
