"""Spark's optimizer rewrites that change a result, applied by the transform compiler as Spark applies
them (``x AND FALSE`` is FALSE even where x fails; the constants of ``(i + 1) + 2`` are added first;
a NULL operand makes an operation NULL without computing the other one), and the refusal of what
Spark fails on whatever the rows (a constant part that fails, ``check_constants``).

``SparkRewrites`` holds the compiler's methods for them (``transform_compiler.Compiler`` inherits it:
the compiler keeps one method per node kind, these run over the finished tree).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import pyarrow as pa

from .transform_eval import evaluate
from .transform_tree import INT_DIGITS, Context, Node, SqlType, TransformEvalError, decimal_type

_NULL_INTOLERANT = {"add", "sub", "mul", "div", "intdiv", "mod", "eq", "ne", "lt", "le", "gt", "ge", "like"}
_COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge", "nseq"}
_COMMUTATIVE = {"add", "mul", "eq", "ne", "nseq", "and", "or"}
_INT_RANGE = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
}


def _is_null(n: Node) -> bool:
    return n.op in ("lit", "const") and n.value is None


def _constant_only(n: Node) -> bool:
    return n.op not in ("col", "meta") and all(_constant_only(a) for a in n.args)


def _has_failing_constant(n: Node) -> bool:
    """A part over constants only that was not computed (it fails)."""
    if n.op in ("lit", "const", "col", "meta"):
        return False
    return _constant_only(n) or any(_has_failing_constant(a) for a in n.args)


def _canonical(n: Node) -> Any:
    """``n`` up to the order of commutative operands (Spark's semanticEquals)."""
    if n.op in ("lit", "const"):
        return ("value", n.type, repr(n.value))
    args = [_canonical(a) for a in n.args]
    if n.op in _COMMUTATIVE:
        args.sort(key=repr)
    return (n.op, n.type, tuple(args), repr(n.value))


def integral_vs_decimal_literal(op: str, a: Node, b: Node) -> Optional[bool]:
    """Spark's analyzer (DecimalPrecision) decides an integral value compared by <, <=, >, >= with
    a decimal literal beyond the BIGINT range without looking at the value -- NULL included."""
    if op not in ("lt", "le", "gt", "ge"):
        return None
    low, high = _INT_RANGE["BIGINT"]
    for value_side, literal, flipped in ((a, b, False), (b, a, True)):
        if (
            value_side.type.integral
            and literal.op == "lit"
            and literal.type.name == "DECIMAL"
            and literal.value is not None
        ):
            if not low <= literal.value <= high:
                above = literal.value > high
                less = op in ("lt", "le")
                return above == (less != flipped)
    return None


def _force_nullable(src: SqlType, dst: SqlType) -> bool:
    """Spark's Cast.forceNullable: the casts that may give NULL for a value."""
    if src.name == "VOID":
        return False
    if src.name == "STRING":
        return dst.name not in ("STRING", "BINARY")
    if dst.name == "STRING":
        return False
    if src.name == "TIMESTAMP" and dst.name == "DATE":
        return False
    if dst.name == "DATE":
        return True
    if src.name == "DATE":
        return dst.name not in ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ")
    if dst.name == "DECIMAL":
        if src.name == "BOOLEAN":
            return not (dst.precision - dst.scale >= 1)
        if src.integral or src.name == "DECIMAL":
            frm = decimal_type(INT_DIGITS[src.name], 0) if src.integral else src
            wider = dst.precision - dst.scale >= frm.precision - frm.scale and dst.scale >= frm.scale
            return not (wider or (src.name == "DECIMAL" and dst.precision - dst.scale > frm.precision - frm.scale))
        return True
    return src.fractional and dst.integral


def sql_text(e: Any) -> str:
    try:
        return e.sql(dialect="spark")
    except Exception:  # a node sqlglot cannot print back
        return type(e).__name__


def construct_node(e: Any) -> str:
    from sqlglot import expressions as exp

    if isinstance(e, exp.Anonymous):
        return f"function {e.name}()"
    if isinstance(e, exp.Func):  # the name as Spark SQL writes it (sqlglot may call DATE_ADD TsOrDsAdd)
        text = sql_text(e)
        return f"function {(text.split('(')[0] if '(' in text else e.sql_name()).lower()}()"
    return {
        "Is": "IS TRUE/IS FALSE",
        "ILike": "ILIKE",
        "RegexpLike": "RLIKE/REGEXP",
        "Escape": "LIKE ... ESCAPE",
        "Interval": "INTERVAL",
        "Subquery": "a subquery",
        "Star": "*",
        "Bracket": "[...] subscripts",
        "Dot": "field access (a.b)",
        "Between": "BETWEEN SYMMETRIC",
        "HexString": "X'..' binary literals",
        "Like": "LIKE ANY/ALL",
        "Placeholder": "parameters",
        "BitwiseAnd": "&",
        "BitwiseOr": "|",
        "BitwiseXor": "^",
        "BitwiseNot": "~",
    }.get(type(e).__name__, type(e).__name__)


class SparkRewrites:
    """The compiler's passes over a finished tree: Spark's rewrites, nullability, constant checks."""

    schema: pa.Schema
    error: Callable[..., Exception]  # the compiler's: the message with the expression and the fix

    def _fold(self, node: Node) -> Node:
        """A node over constants only is computed now (and typed as it is); one that fails stays,
        and is refused when the tree is complete unless it is only evaluated for some rows
        (``check_constants``). Before that, the rewrites of Spark's optimizer that change a result
        (``_rewrite``)."""
        node = self._rewrite(node)
        if node.op in ("lit", "const") or not node.args or not _constant_only(node):
            return node
        try:
            ctx = Context(pa.RecordBatch.from_pydict({"_": [0]}), "", "", "", "constant folding")
            value = evaluate(node, ctx)[0].as_py()
        except (TransformEvalError, pa.ArrowException):
            return node
        return Node("const", node.type, value=value, sql=node.sql)

    def _rewrite(self, node: Node) -> Node:
        """The rewrites of Spark's optimizer that change what a query gives (an error becomes a
        value). Spark runs them on every query over a table, so their result is Spark's result.
        NullPropagation runs before constant folding and may drop a part that fails; the others
        must not drop a failing constant part (Spark's constant folding fails the query first)."""
        op, args = node.op, node.args
        boolean = SqlType("BOOLEAN")
        # NullPropagation: a null-intolerant operation with a NULL operand is NULL ...
        if op in _NULL_INTOLERANT and any(_is_null(a) for a in args):
            return Node("const", node.type, value=None, sql=node.sql)
        # ... IS [NOT] NULL of what cannot be NULL is known
        if op in ("is_null", "is_not_null") and not self.nullable(args[0]):
            return Node("const", boolean, value=op == "is_not_null", sql=node.sql)
        # OptimizeIn: x IN (NULL) is x = NULL
        if op == "in" and node.value == ((), True) and not _has_failing_constant(args[0]):
            return Node("const", boolean, value=None, sql=node.sql)
        # SimplifyBinaryComparison: x <=> x; x = x (and <=, >=, <, >) of what cannot be NULL
        if (
            op in _COMPARISONS
            and _canonical(args[0]) == _canonical(args[1])
            and not any(_has_failing_constant(a) for a in args)
        ):
            if op == "nseq":
                return Node("const", boolean, value=True, sql=node.sql)
            if not self.nullable(args[0]):
                return Node("const", boolean, value=op in ("eq", "le", "ge"), sql=node.sql)
        # ReorderAssociativeOperator: the constants of a chain of integral + (or *) are added first
        if op in ("add", "mul") and node.type.integral:
            return self._reorder(node)
        # BooleanSimplification: x AND FALSE, x OR TRUE
        if op in ("and", "or"):
            absorbing = op == "or"
            for side, other in ((args[0], args[1]), (args[1], args[0])):
                if side.op in ("lit", "const") and side.value is absorbing and not _has_failing_constant(other):
                    return Node("const", boolean, value=absorbing, sql=node.sql)
        # SimplifyConditionals: a CASE (or IF) whose branches all give the same value is that value
        if op == "case":
            values = [args[k] for k in range(1, len(args) - 1, 2)] + [args[-1]]
            conditions = [args[k] for k in range(0, len(args) - 1, 2)]
            # (not when the value fails: Spark leaves a part that failed in a branch to the rows)
            if all(_canonical(v) == _canonical(values[-1]) for v in values) and not any(
                _has_failing_constant(n) for n in conditions + [values[-1]]
            ):
                return values[-1]
        return node

    def _reorder(self, node: Node) -> Node:
        op, t = node.op, node.type

        def terms(n: Node) -> list[Node]:
            return terms(n.args[0]) + terms(n.args[1]) if n.op == op and n.type == t else [n]

        flat = terms(node)
        constants = [n for n in flat if n.op in ("lit", "const")]
        if len(constants) < 2:
            return node
        low, high = _INT_RANGE[t.name]
        value = constants[0].value
        for c in constants[1:]:
            value = value + c.value if op == "add" else value * c.value
            if not low <= value <= high:
                # the constants overflow: a part that fails, as in Spark -- when it plans the query
                # (check_constants), or in a CASE branch on the rows that reach it
                label = (
                    f"{(' + ' if op == 'add' else ' * ').join(n.sql for n in constants)} (Spark computes the "
                    f"constants of {node.sql} first)"
                    if len(constants) < len(flat)
                    else node.sql
                )
                folded = constants[0]
                for k in constants[1:]:
                    folded = Node(op, t, (folded, k), sql=label)
                break
        else:
            folded = Node("const", t, value=value, sql=node.sql)
        others = [n for n in flat if n.op not in ("lit", "const")]
        if not others:
            return folded
        acc = others[0]
        for n in others[1:]:
            acc = Node(op, t, (acc, n), sql=node.sql)
        return Node(op, t, (acc, folded), sql=node.sql)

    def nullable(self, n: Node) -> bool:
        """Whether Spark holds ``n`` able to be NULL (its ``nullable``)."""
        op = n.op
        if op in ("lit", "const"):
            return n.value is None
        if op == "col":
            return self.schema.field(n.value).nullable
        if op in ("is_null", "is_not_null", "nseq"):
            return False
        if op in ("div", "intdiv", "mod", "round", "meta"):
            return True
        if op == "cast":
            return self.nullable(n.args[0]) or _force_nullable(n.args[0].type, n.type)
        if op == "case":
            return any(self.nullable(n.args[k]) for k in range(1, len(n.args) - 1, 2)) or self.nullable(n.args[-1])
        if op == "coalesce":
            return all(self.nullable(a) for a in n.args)
        if op == "in":
            return n.value[1] or self.nullable(n.args[0])
        return any(self.nullable(a) for a in n.args)

    def null_to_false(self, n: Node) -> Node:
        """Spark's ReplaceNullWithFalseInPredicate: in a condition (a filter, a CASE WHEN or IF
        condition), a NULL under AND, OR and boolean CASE/IF counts as FALSE."""
        if n.op in ("lit", "const") and n.value is None:
            return Node("const", SqlType("BOOLEAN"), value=False, sql=n.sql)
        if n.op in ("and", "or") or (n.op == "case" and n.type.name == "BOOLEAN"):
            return self._fold(Node(n.op, n.type, tuple(self.null_to_false(a) for a in n.args), sql=n.sql))
        return n

    def check_constants(self, node: Node, conditional: bool = False) -> None:
        """Spark computes the constant parts of an expression when it plans the query: one that
        fails fails the query whatever the rows -- unless it is a CASE/IF branch or a later COALESCE
        argument, which Spark leaves to the rows that reach it (as the evaluator does)."""
        if node.op in ("lit", "const", "col", "meta"):
            return
        if not conditional and _constant_only(node):
            try:
                evaluate(node, Context(pa.RecordBatch.from_pydict({"_": [0]}), "", "", "", "constant"))
                reason = "it cannot be computed"
            except TransformEvalError as e:
                reason = str(e).split(": ", 1)[-1].split(". Spark SQL")[0].split(". Fix:")[0]
            except pa.ArrowException as e:
                reason = str(e)
            raise self.error(
                f"the constant part {node.sql} fails ({reason}); Spark computes constant parts when it "
                "plans the query, so it fails the query whatever the rows",
                "correct the constant part, or move it into a CASE WHEN branch that only the rows needing it reach",
                supported=False,
            )
        for k, arg in enumerate(node.args):
            self.check_constants(arg, conditional or (node.op in ("case", "coalesce") and k > 0))
