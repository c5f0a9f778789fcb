"""Compile a transform rule's Spark SQL (a ``projection`` select list or a ``filter`` predicate)
into a typed tree (``transform_tree``) that ``transform_eval`` evaluates over Arrow batches of one source table.

Why a subset: the tree must give Spark SQL's values (ANSI mode, Spark 4's default, session time
zone UTC as the engine sets it) for every row, on the snapshot and the stream path alike, and
its column types must be known before any row is seen (sink tables are created from
``output_schema``). Every construct outside the subset is refused here, at compile time, with
the construct, the expression and what is supported -- better than a pipeline whose rows
quietly differ from what the same SQL gives in Spark. Implicit conversions Spark would make
between text and numbers are refused too (write the CAST), because their ANSI rules are where
this evaluator and Spark could part.

Spark's optimizer rewrites some expressions before it runs them, and a few rewrites change
the result (``x AND FALSE`` is FALSE even where x fails; the constants of ``(i + 1) + 2`` are
added first; a NULL operand makes an operation NULL without computing the other one): the
compiler applies those too (``Compiler._rewrite``), and refuses what Spark fails on whatever
the rows (a constant part that fails, ``check_constants``). Checked against Spark 4.2 by
``tests/integration/test_transform_spark_differential.py``.

The compiled objects hold the text, the input schema and a tree of frozen dataclasses (no
sqlglot objects), so they pickle to Spark executors.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass, field
from typing import Any, Optional

import pyarrow as pa

from .transform_grammar import (
    ALLOWED_STATEMENT_PARTS,
    ARGS,
    ARITH,
    CAST_TARGETS,
    COMPARE,
    METADATA_COLUMNS,
    TransformError,
    compile_error,
    sql_type_of,
)
from .transform_rewrite import (
    SparkRewrites,
    construct_node,
    integral_vs_decimal_literal,
    sql_text,
)
from .transform_tree import INT_DIGITS, INTEGRALS, Node, SqlType, decimal_type
from .transform_values import CASTS, decimal_intermediate


@dataclass
class Compiler(SparkRewrites):
    text: str
    kind: str
    schema: pa.Schema
    table: str
    _suffixed: set[int] = field(default_factory=set)  # text offsets of literals such as 5L, 2Y, 3S
    _suffixed_texts: set[str] = field(default_factory=set)  # their digits, for sqlglot releases without offsets
    _has_cast: bool = False
    _prefix: int = 0

    def error(self, what: str, fix: str, supported: bool = True) -> TransformError:
        return compile_error(self.kind, self.text, self.table, what, fix, supported)

    def refuse(self, e: Any, what: Optional[str] = None) -> TransformError:
        what = what or f"{construct_node(e)} is not supported (in {sql_text(e)})"
        return self.error(
            what, "rewrite it with the supported functions and operators, or leave it out of the transform"
        )

    def parse(self) -> list[Any]:
        import sqlglot
        from sqlglot import expressions as exp
        from sqlglot.errors import ParseError, TokenError

        self._scan_tokens()
        prefix = "SELECT " if self.kind == "projection" else "SELECT * FROM __t WHERE "
        sql = prefix + self.text + (" FROM __t" if self.kind == "projection" else "")
        self._prefix = len(prefix)
        try:
            trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
        except (ParseError, TokenError) as e:
            raise self.error(f"not Spark SQL ({str(e).splitlines()[0]})", "correct the expression", False) from None
        extra = sorted(k for k, v in (trees[0].args.items() if trees else ()) if v and k not in ALLOWED_STATEMENT_PARTS)
        if len(trees) != 1 or not isinstance(trees[0], exp.Select) or extra:
            raise self.error(
                f"more than a {self.kind} ({', '.join(extra) or 'a second statement'})",
                f"write only the {self.kind}",
                False,
            )
        tree = trees[0]
        return list(tree.expressions) if self.kind == "projection" else [tree.args["where"].this]

    def _scan_tokens(self) -> None:
        """What the parsed tree no longer tells: escapes in text literals, CHAR/VARCHAR lengths,
        TRY_CAST, empty select items, and which numbers had a type suffix (5L is a literal in
        Spark, CAST(5 AS BIGINT) is not -- it matters for decimal result types)."""
        import sqlglot
        from sqlglot.tokens import TokenType

        try:
            tokens = list(sqlglot.tokenize(self.text, read="spark"))
        except Exception:  # the parse reports it with its position
            return
        for i, tok in enumerate(tokens):
            raw = self.text[tok.start : tok.end + 1]
            if (
                tok.token_type == TokenType.STRING
                and i > 0
                and tokens[i - 1].token_type == TokenType.STRING
                and tokens[i - 1].end + 1 == tok.start
            ):
                raise self.error(
                    f"the text literal {self.text[tokens[i - 1].start : tok.end + 1]} doubles its quote "
                    "character, which Spark reads as one quote character inside the text and this "
                    "parser as two texts",
                    "write the text in the other quotes (\"it's\" for it's)",
                    False,
                )
            if tok.token_type == TokenType.STRING and "\\" in raw:
                raise self.error(
                    f"the text literal {raw} has a backslash, which Spark reads as an escape (and "
                    "LIKE as its escape character)",
                    "leave backslashes out of text literals, e.g. "
                    "compare with a different literal or use LIKE with % and _",
                    False,
                )
            if tok.token_type in (TokenType.CHAR, TokenType.VARCHAR, TokenType.NCHAR, TokenType.NVARCHAR):
                raise self.error(
                    f"{tok.text.upper()} is not supported (a cast to CHAR/VARCHAR)", "CAST AS STRING instead"
                )
            if tok.text.lower() == "try_cast":
                raise self.error(
                    "function try_cast() is not supported",
                    "use CAST (which fails the transform on "
                    "bad input, as Spark's ANSI mode does), or filter such rows out",
                )
            if (
                tok.token_type == TokenType.COMMA
                and self.kind == "projection"
                and (i == 0 or i == len(tokens) - 1 or tokens[i + 1].token_type == TokenType.COMMA)
            ):
                raise self.error("an empty item between commas", "remove the extra comma", False)
            if (
                tok.token_type == TokenType.NUMBER
                and i + 1 < len(tokens)
                and tokens[i + 1].token_type == TokenType.DCOLON
                and tokens[i + 1].start == tok.start
            ):
                self._suffixed.add(tok.start)
                self._suffixed_texts.add(tok.text)
            self._has_cast = self._has_cast or tok.text.lower() == "cast"
        self._scan_predicates(tokens)

    def _scan_predicates(self, tokens: list[Any]) -> None:
        """Spark's grammar takes one IS/IN/LIKE test on a value and nothing after it but AND, OR
        or the end of the item: i IN (1, 2) IS NULL and x IS NULL = TRUE are parse errors there,
        which sqlglot reads (with an order of its own)."""
        from sqlglot.tokens import TokenType

        follow = {
            TokenType.AND,
            TokenType.OR,
            TokenType.R_PAREN,
            TokenType.COMMA,
            TokenType.THEN,
            TokenType.ELSE,
            TokenType.END,
            TokenType.WHEN,
            TokenType.ALIAS,
            TokenType.VAR,
            TokenType.IDENTIFIER,
            TokenType.ESCAPE,
        }
        for i, tok in enumerate(tokens):
            end = None
            if tok.token_type == TokenType.IS:
                j = i + 1 + (i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.NOT)
                if j < len(tokens) and tokens[j].token_type in (TokenType.NULL, TokenType.TRUE, TokenType.FALSE):
                    end = j + 1
            elif (
                tok.token_type == TokenType.IN and i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN
            ):
                depth, j = 0, i + 1
                for j in range(i + 1, len(tokens)):
                    depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tokens[j].token_type, 0)
                    if depth == 0:
                        break
                end = j + 1
            elif (
                tok.token_type in (TokenType.LIKE, TokenType.ILIKE, TokenType.RLIKE)
                and i + 1 < len(tokens)
                and tokens[i + 1].token_type == TokenType.STRING
            ):
                end = i + 2
            if end is not None and end < len(tokens) and tokens[end].token_type not in follow:
                raise self.error(
                    f"not Spark SQL: Spark's grammar takes nothing but AND/OR after "
                    f"{self.text[tok.start : tokens[end - 1].end + 1]} (found {tokens[end].text})",
                    "put the test in parentheses, e.g. (x IN (1, 2)) IS NULL",
                    False,
                )

    # -- select items --

    def item(self, e: Any) -> list[tuple[str, Node]]:
        from sqlglot import expressions as exp

        if type(e) is exp.Star:
            if any(e.args.values()):
                raise self.refuse(e, f"{sql_text(e)} is not supported (write the columns, or * alone)")
            return [(f.name, Node("col", sql_type_of(f.type), value=f.name, sql=f.name)) for f in self.schema]
        if type(e) is exp.Alias:
            return [(e.alias, self.expr(e.this))]
        if type(e) is exp.Column:
            node = self.expr(e)
            return [(node.value if node.op == "col" else e.name, node)]
        raise self.error(
            f"the item {sql_text(e)} has no name", f"name it with AS, e.g. {sql_text(e)} AS my_column", supported=False
        )

    # -- expressions --

    def expr(self, e: Any) -> Node:
        """``e`` typed. Dispatch is on the exact sqlglot class and every argument it carries must be
        one understood here: a subclass (CONCAT_WS is a Concat) or a flag a sqlglot version adds
        (NOT LIKE as Like(negate=True)) must never be read as something else."""
        from sqlglot import expressions as exp

        name = type(e).__name__
        allowed = ARGS.get(name)
        extra = sorted(k for k, v in e.args.items() if v not in (None, False, [], "") and k not in (allowed or ()))
        if allowed is None or extra:
            raise self.refuse(
                e,
                None
                if allowed is None
                else f"{construct_node(e)} with {', '.join(extra)} is not supported (in {sql_text(e)})",
            )
        if e.args.get("negate"):  # x NOT LIKE / NOT IN / NOT BETWEEN / IS NOT as one node
            inner = e.copy()
            inner.set("negate", None)
            return self._fold(Node("not", SqlType("BOOLEAN"), (self._boolean(self.expr(inner), e),), sql=sql_text(e)))
        if name == "Paren":
            return self.expr(e.this)
        if name == "Column":
            return self._column(e)
        if name in ("Literal", "Null", "Boolean", "RawString"):
            return self._literal(e)
        if name == "Neg":
            return self._negate(e)
        if name in ARITH:
            return self._arith(ARITH[name], self.expr(e.this), self.expr(e.expression), e)
        if name in COMPARE:
            return self._compare(COMPARE[name], e.this, e.expression, e)
        if name in ("And", "Or"):
            args = [self._boolean(self.expr(x), e) for x in (e.this, e.expression)]
            return self._fold(Node(name.lower(), SqlType("BOOLEAN"), tuple(args), sql=sql_text(e)))
        if name == "Not":
            return self._fold(Node("not", SqlType("BOOLEAN"), (self._boolean(self.expr(e.this), e),), sql=sql_text(e)))
        if name == "Is" and type(e.expression) is exp.Null:
            return self._fold(Node("is_null", SqlType("BOOLEAN"), (self.expr(e.this),), sql=sql_text(e)))
        if name == "Anonymous" and e.name.lower() in ("isnull", "isnotnull") and len(e.expressions) == 1:
            op = "is_null" if e.name.lower() == "isnull" else "is_not_null"
            return self._fold(Node(op, SqlType("BOOLEAN"), (self.expr(e.expressions[0]),), sql=sql_text(e)))
        if name == "In":
            return self._in(e)
        if name == "Between":
            # Spark replaces BETWEEN by x >= low AND x <= high after its analyzer's rewrites
            low = self._compare("ge", e.this, e.args["low"], e, between=True)
            high = self._compare("le", e.this, e.args["high"], e, between=True)
            return self._fold(Node("and", SqlType("BOOLEAN"), (low, high), sql=sql_text(e)))
        if name == "Like" and not isinstance(e.expression, (exp.Any, exp.All)):
            return self._like(e)
        if name in ("DPipe", "Concat"):
            parts = [e.this, e.expression] if name == "DPipe" else list(e.expressions)
            return self._concat([self.expr(x) for x in parts], e)
        if name in ("Case", "If"):
            return self._case(e)
        if name == "Coalesce":
            args = [self.expr(x) for x in [e.this, *e.expressions]]
            t = self._common([a.type for a in args], e)
            return self._fold(Node("coalesce", t, tuple(self._to(a, t) for a in args), sql=sql_text(e)))
        if name in ("Upper", "Lower", "Trim", "Length", "Substring"):
            return self._string_function(e)
        if name == "Abs":
            arg = self.expr(e.this)
            self._need(arg.type.numeric, e, "a number", arg.type)
            return self._fold(Node("abs", arg.type, (arg,), sql=sql_text(e)))
        if name == "Round":
            return self._round(e)
        if name in ("Cast", "TryCast"):
            return self._cast(e)
        raise self.refuse(e)

    def _column(self, e: Any) -> Node:
        from sqlglot import expressions as exp

        if isinstance(e.this, exp.Star):
            raise self.refuse(e, f"{sql_text(e)} is not supported here")
        if e.table or e.args.get("db") or e.args.get("catalog"):
            raise self.error(
                f"the qualified column {sql_text(e)} is not supported",
                f"write the column name alone: {e.name}",
                supported=False,
            )
        wanted = e.name.lower()
        for f in self.schema:
            if f.name.lower() == wanted:  # Spark resolves names case-insensitively by default
                return Node("col", sql_type_of(f.type), value=f.name, sql=f.name)
        if wanted in METADATA_COLUMNS:
            return Node("meta", SqlType("STRING"), value=METADATA_COLUMNS[wanted], sql=wanted)
        columns = ", ".join(f.name for f in self.schema)
        raise self.error(
            f"column {e.name!r} is not a column of {self.table} (its columns: {columns}; metadata "
            f"columns: {', '.join(METADATA_COLUMNS)})",
            "use one of the table's columns, or quote a name with special characters in backticks",
            supported=False,
        )

    def _literal(self, e: Any) -> Node:
        from sqlglot import expressions as exp

        if isinstance(e, exp.Null):
            return Node("lit", SqlType("VOID"), sql="NULL")
        if isinstance(e, exp.Boolean):
            return Node("lit", SqlType("BOOLEAN"), value=bool(e.this), sql=sql_text(e))
        if isinstance(e, exp.RawString) or e.is_string:
            return Node("lit", SqlType("STRING"), value=str(e.this), sql=sql_text(e))
        return self._number(str(e.this), e)

    def _number(self, text: str, e: Any) -> Node:
        """Spark's literal types: an integer is INT, else BIGINT, else DECIMAL(n,0); a number with a
        point is DECIMAL(p,s); with an exponent, DOUBLE."""
        if "e" in text.lower():
            return Node("lit", SqlType("DOUBLE"), value=float(text), sql=text)
        if "." in text:
            d = decimal.Decimal(text)
            sign, digits, exponent = d.as_tuple()
            scale = max(0, -int(exponent))
            precision = max(len(digits), scale, 1)
            if precision > 38:
                raise self.error(
                    f"the literal {text} has more than 38 digits",
                    "write fewer digits, or a DOUBLE literal such as 1.5e3",
                    supported=False,
                )
            return Node("lit", decimal_type(precision, scale), value=d, sql=text)
        value = int(text)
        for name, bits in (("INT", 31), ("BIGINT", 63)):
            if -(2**bits) <= value < 2**bits:
                return Node("lit", SqlType(name), value=value, sql=text)
        if len(str(abs(value))) <= 38:
            return Node("lit", decimal_type(len(str(abs(value))), 0), value=decimal.Decimal(value), sql=text)
        raise self.error(f"the literal {text} has more than 38 digits", "write fewer digits", supported=False)

    def _negate(self, e: Any) -> Node:
        from sqlglot import expressions as exp

        if isinstance(e.this, exp.Literal) and not e.this.is_string:  # -5 is one literal in Spark's grammar
            lit = self._literal(e.this)
            return (
                self._number("-" + str(e.this.this), e)
                if lit.type.name != "DOUBLE"
                else Node("lit", lit.type, value=-lit.value, sql="-" + lit.sql)
            )
        arg = self.expr(e.this)
        self._need(arg.type.numeric, e, "a number", arg.type)
        return self._fold(Node("neg", arg.type, (arg,), sql=sql_text(e)))

    # -- typing --

    def _need(self, ok: bool, e: Any, what: str, found: SqlType) -> None:
        if not ok:
            raise self.error(
                f"{sql_text(e)} needs {what}, found {found}",
                "CAST the operand to the type needed, e.g. CAST(x AS INT) or CAST(x AS STRING)",
                supported=False,
            )

    def _boolean(self, node: Node, e: Any) -> Node:
        self._need(node.type.name in ("BOOLEAN", "VOID"), e, "a condition (BOOLEAN)", node.type)
        return self._to(node, SqlType("BOOLEAN"))

    def _to(self, node: Node, t: SqlType) -> Node:
        """``node`` implicitly cast to ``t`` (a widening Spark also does)."""
        if node.type == t:
            return node
        return self._fold(Node("cast", t, (node,), sql=node.sql))

    # -- Spark's optimizer --

    def _decimal_of(self, node: Node) -> SqlType:
        """An integral operand next to a decimal: DECIMAL(3/5/10/20, 0), or for a literal just its
        digits (Spark's DecimalPrecision with literalPickMinimumPrecision)."""
        if node.type.name == "DECIMAL":
            return node.type
        if node.op == "lit" and node.type.name != "TINYINT":  # Spark: a TINYINT literal (2Y) is DECIMAL(3,0)
            return decimal_type(max(1, len(str(abs(int(node.value))))), 0)
        return decimal_type(INT_DIGITS[node.type.name], 0)

    def _common(self, types: list[SqlType], e: Any) -> SqlType:
        """The least common type (ANSI precedence): integrals widen, decimals widen to hold both
        (above 38 digits the integer digits are kept and the scale is cut, as Spark 4 does), FLOAT
        with any other number is DOUBLE, DATE with TIMESTAMP is TIMESTAMP."""
        ts = [t for t in types if t.name != "VOID"]
        if not ts:
            return SqlType("VOID")
        names = {t.name for t in ts}
        if len(set(ts)) == 1:
            return ts[0]
        if all(t.numeric for t in ts):
            if names & {"FLOAT", "DOUBLE"}:  # FLOAT with TINYINT too: Spark's ANSI widening gives DOUBLE
                return SqlType("DOUBLE")
            if "DECIMAL" in names:
                decs = [t if t.name == "DECIMAL" else decimal_type(INT_DIGITS[t.name], 0) for t in ts]
                scale = max(t.scale for t in decs)
                whole = max(t.precision - t.scale for t in decs)
                # DecimalType.boundedPreferIntegralDigits: DECIMAL(4,4) with DECIMAL(38,0) is DECIMAL(38,0)
                return decimal_type(min(whole + scale, 38), max(0, min(scale, 38 - whole)))
            return SqlType(max(names, key=INTEGRALS.index))
        if names <= {"DATE", "TIMESTAMP", "TIMESTAMP_NTZ"} and names != {"DATE", "TIMESTAMP_NTZ"}:
            return SqlType("TIMESTAMP")
        raise self.error(
            f"{sql_text(e)} mixes {' and '.join(sorted(str(t) for t in set(ts)))}",
            "CAST the values to one type, e.g. CAST(x AS STRING)",
            supported=False,
        )

    def _arith(self, op: str, a: Node, b: Node, e: Any) -> Node:
        if a.type.name == "VOID" and b.type.name == "VOID":
            raise self.error(
                f"{sql_text(e)} computes on two NULLs, which have no type",
                "CAST one of them, e.g. CAST(NULL AS INT)",
                supported=False,
            )
        # NULL / x is DOUBLE division in Spark whatever x is (x / NULL takes x's type)
        a = a if a.type.name != "VOID" else self._to(a, b.type if b.type.numeric and op != "div" else SqlType("DOUBLE"))
        b = b if b.type.name != "VOID" else self._to(b, a.type if a.type.numeric else SqlType("DOUBLE"))
        for x in (a, b):
            self._need(x.type.numeric, e, "numbers", x.type)
        names = {a.type.name, b.type.name}
        if op == "intdiv":
            self._need(
                a.type.integral and b.type.integral,
                e,
                "integral numbers (div of decimals is not supported)",
                a.type if not a.type.integral else b.type,
            )
            t = SqlType("BIGINT")
            return self._fold(Node(op, t, (self._to(a, t), self._to(b, t)), sql=sql_text(e)))
        if op == "mod" and names & {"FLOAT", "DOUBLE"}:
            raise self.refuse(e, f"% of FLOAT/DOUBLE values is not supported (in {sql_text(e)})")
        if op == "div" and not (names & {"FLOAT", "DOUBLE"}) and "DECIMAL" not in names:
            t = SqlType("DOUBLE")  # Spark's / of integral numbers is DOUBLE division
        elif "DECIMAL" in names and not names & {"FLOAT", "DOUBLE"}:
            return self._decimal_arith(op, a, b, e)
        else:
            t = self._common([a.type, b.type], e)
            t = SqlType("DOUBLE") if op == "div" else t
        return self._fold(Node(op, t, (self._to(a, t), self._to(b, t)), sql=sql_text(e)))

    def _decimal_arith(self, op: str, a: Node, b: Node, e: Any) -> Node:
        """Spark's decimal result types, with precision loss allowed (the default): the exact
        type, and if wider than 38 digits, 38 digits keeping at least 6 (or all) of the scale."""
        t1, t2 = self._decimal_of(a), self._decimal_of(b)
        p1, s1, p2, s2 = t1.precision, t1.scale, t2.precision, t2.scale
        if op in ("add", "sub"):
            p, s = max(s1, s2) + max(p1 - s1, p2 - s2) + 1, max(s1, s2)
        elif op == "mul":
            p, s = p1 + p2 + 1, s1 + s2
        elif op == "div":
            s = max(6, s1 + p2 + 1)
            p = p1 - s1 + s2 + s
        else:
            p, s = min(p1 - s1, p2 - s2) + max(s1, s2), max(s1, s2)
        if p > 38:
            p, s = 38, max(38 - (p - s), min(s, 6))
        if decimal_intermediate(op, p1, s1, p2, s2, s) > 76:
            raise self.refuse(
                e,
                f"{sql_text(e)} of DECIMAL({p1},{s1}) and DECIMAL({p2},{s2}) needs more than 76 "
                "digits to compute exactly, which is not supported",
            )
        return self._fold(Node(op, decimal_type(p, s), (self._to(a, t1), self._to(b, t2)), sql=sql_text(e)))

    def _compare(self, op: str, left: Any, right: Any, e: Any, between: bool = False) -> Node:
        from sqlglot import expressions as exp

        a, b = self.expr(left), self.expr(right)
        # a text literal next to a date/timestamp is read as one (Spark's ANSI string-literal rule)
        for lit_side, other, raw in ((0, b, left), (1, a, right)):
            if isinstance(raw, exp.Literal) and raw.is_string and other.type.name in ("DATE", "TIMESTAMP"):
                converted = self._fold(Node("cast", other.type, ((a, b)[lit_side],), sql=sql_text(raw)))
                if converted.op == "cast":
                    raise self.error(
                        f"{sql_text(raw)} is not a valid {other.type}",
                        "write it as yyyy-mm-dd[ hh:mm:ss]",
                        supported=False,
                    )
                a, b = (converted, b) if lit_side == 0 else (a, converted)
        if not between:
            decided = integral_vs_decimal_literal(op, a, b)
            if decided is not None:
                return Node("const", SqlType("BOOLEAN"), value=decided, sql=sql_text(e))
        t = self._common([self._operand_type(a, b), self._operand_type(b, a)], e)
        if t.name == "VOID":  # NULL = NULL: unknown (NULL <=> NULL: true)
            return Node("const", SqlType("BOOLEAN"), value=True if op == "nseq" else None, sql=sql_text(e))
        if t.name in ("BINARY", "OTHER") and op != "nseq" and op not in ("eq", "ne"):
            raise self.refuse(e, f"ordering {t} values is not supported (in {sql_text(e)})")
        return self._fold(Node(op, SqlType("BOOLEAN"), (self._to(a, t), self._to(b, t)), sql=sql_text(e)))

    def _in(self, e: Any) -> Node:
        if e.args.get("query") or e.args.get("unnest") or e.args.get("field"):
            raise self.refuse(e, f"IN with a subquery is not supported (in {sql_text(e)})")
        value = self.expr(e.this)
        items = [self.expr(x) for x in e.expressions]
        if any(i.op not in ("lit", "const") for i in items):
            raise self.refuse(e, f"IN with a non-constant list item is not supported (in {sql_text(e)})")
        t = self._common([value.type, *(i.type for i in items)], e)
        values = [self._to(i, t) for i in items]
        if any(v.op not in ("lit", "const") for v in values):
            raise self.error(
                f"an item of {sql_text(e)} is not a valid {t}", "give items of the value's type", supported=False
            )
        present = [v.value for v in values if v.value is not None and v.type.name != "VOID"]
        has_null = len(present) < len(values)
        return self._fold(
            Node("in", SqlType("BOOLEAN"), (self._to(value, t),), value=(tuple(present), has_null), sql=sql_text(e))
        )

    def _like(self, e: Any) -> Node:

        value = self.expr(e.this)
        pattern = self.expr(e.expression)
        self._need(value.type.name in ("STRING", "VOID"), e, "a STRING", value.type)
        if pattern.op not in ("lit", "const") or pattern.type.name != "STRING" or not isinstance(pattern.value, str):
            raise self.refuse(e, f"LIKE with a pattern that is not a text literal is not supported (in {sql_text(e)})")
        if "\\" in pattern.value:  # Spark's and Arrow's LIKE escapes would have to agree; not needed
            raise self.refuse(e, f"a backslash in a LIKE pattern is not supported (in {sql_text(e)})")
        return self._fold(
            Node(
                "like", SqlType("BOOLEAN"), (self._to(value, SqlType("STRING")),), value=pattern.value, sql=sql_text(e)
            )
        )

    def _concat(self, parts: list[Node], e: Any) -> Node:
        if not parts:
            raise self.refuse(e)
        for p in parts:
            self._need(p.type.name in ("STRING", "VOID"), e, "STRING values (CAST the others AS STRING)", p.type)
        t = SqlType("STRING")
        return self._fold(Node("concat", t, tuple(self._to(p, t) for p in parts), sql=sql_text(e)))

    def _case(self, e: Any) -> Node:
        from sqlglot import expressions as exp

        if isinstance(e, exp.If):
            if e.args.get("false") is None:
                raise self.refuse(e, f"if() needs three arguments (in {sql_text(e)})")
            branches, default = [(e.this, e.args["true"])], e.args["false"]
        else:
            branches, default = [(b.this, b.args["true"]) for b in e.args["ifs"]], e.args.get("default")
        subject = self.expr(e.this) if isinstance(e, exp.Case) and e.this is not None else None
        conds = []
        for cond, _ in branches:
            if subject is not None:  # CASE x WHEN v: x = v
                conds.append(self._compare_nodes(subject, self.expr(cond), e))
                continue
            node = self.expr(cond)
            if node.type.name == "VOID" and isinstance(e, exp.Case):
                raise self.error(
                    f"the condition NULL of {sql_text(e)} has no type, and Spark requires a BOOLEAN there",
                    "write FALSE, or CAST(NULL AS BOOLEAN)",
                    supported=False,
                )
            # Spark's optimizer reads a NULL in a condition as FALSE (ReplaceNullWithFalseInPredicate)
            conds.append(self.null_to_false(self._boolean(node, e)))
        values = [self.expr(v) for _, v in branches] + [
            self.expr(default) if default is not None else Node("lit", SqlType("VOID"), sql="NULL")
        ]
        t = self._common([v.type for v in values], e)
        args: list[Node] = []
        for c, v in zip(conds, values):
            args += [c, self._to(v, t)]
        return self._fold(Node("case", t, tuple(args) + (self._to(values[-1], t),), sql=sql_text(e)))

    def _compare_nodes(self, a: Node, b: Node, e: Any) -> Node:
        t = self._common([self._operand_type(a, b), self._operand_type(b, a)], e)
        if t.name == "VOID":
            return Node("const", SqlType("BOOLEAN"), value=None, sql=sql_text(e))
        return self._fold(Node("eq", SqlType("BOOLEAN"), (self._to(a, t), self._to(b, t)), sql=sql_text(e)))

    def _operand_type(self, node: Node, other: Node) -> SqlType:
        """An integral literal next to a decimal in a comparison counts with its own digits, as in
        arithmetic (Spark's DecimalPrecision for binary operators)."""
        if node.op == "lit" and node.type.integral and other.type.name == "DECIMAL":
            return self._decimal_of(node)
        return node.type

    def _constant_int(self, e: Any, what: str) -> int:
        node = self.expr(e)
        if node.op not in ("lit", "const") or node.type.name not in INTEGRALS[:3] or node.value is None:
            raise self.refuse(e, f"{what} must be a constant INT, found {sql_text(e)}")
        return int(node.value)

    def _string_function(self, e: Any) -> Node:
        from sqlglot import expressions as exp

        arg = self.expr(e.this)
        allowed = ("STRING", "VOID", "BINARY") if isinstance(e, exp.Length) else ("STRING", "VOID")
        self._need(arg.type.name in allowed, e, "a STRING", arg.type)
        if isinstance(e, exp.Length):
            arg = arg if arg.type.name == "BINARY" else self._to(arg, SqlType("STRING"))
            return self._fold(Node("length", SqlType("INT"), (arg,), sql=sql_text(e)))
        arg = self._to(arg, SqlType("STRING"))
        if isinstance(e, (exp.Upper, exp.Lower)):
            op = "upper" if isinstance(e, exp.Upper) else "lower"
            return self._fold(Node(op, SqlType("STRING"), (arg,), sql=sql_text(e)))
        if isinstance(e, exp.Trim):
            chars = " "
            if e.expression is not None:
                # sqlglot releases read ltrim('x', s) with the arguments either way round; a text
                # literal as the characters and a non-constant string is the one unambiguous reading
                node = self.expr(e.expression)
                if node.op not in ("lit", "const") or not isinstance(node.value, str) or arg.op in ("lit", "const"):
                    raise self.refuse(
                        e,
                        f"trim() with characters that are not a text literal, or of a constant, is "
                        f"not supported (in {sql_text(e)})",
                    )
                chars = node.value
            where = str(e.args.get("position") or "BOTH").lower()
            return self._fold(Node("trim", SqlType("STRING"), (arg,), value=(where, chars), sql=sql_text(e)))
        pos = self._constant_int(e.args["start"], "substring's position")
        length = self._constant_int(e.args["length"], "substring's length") if e.args.get("length") else None
        return self._fold(Node("substring", SqlType("STRING"), (arg,), value=(pos, length), sql=sql_text(e)))

    def _round(self, e: Any) -> Node:
        arg = self.expr(e.this)
        self._need(arg.type.numeric, e, "a number", arg.type)
        digits = self._constant_int(e.args["decimals"], "round's digits") if e.args.get("decimals") else 0
        if not -38 <= digits <= 38:
            raise self.refuse(e, f"round() to {digits} digits is not supported (from -38 to 38 are)")
        t = arg.type
        if t.name == "DECIMAL":  # Spark: one more integer digit for the carry; scale min(s, digits)
            whole = t.precision - t.scale + 1
            t = (
                decimal_type(min(max(whole, 1 - digits), 38), 0)
                if digits < 0
                else decimal_type(min(whole + min(t.scale, digits), 38), min(t.scale, digits))
            )
        return self._fold(Node("round", t, (arg,), value=digits, sql=sql_text(e)))

    def _cast(self, e: Any) -> Node:
        from sqlglot import expressions as exp

        if e.args.get("safe"):
            raise self.refuse(e, f"function try_cast() is not supported (in {sql_text(e)})")
        to = e.args["to"]
        target = CAST_TARGETS.get(to.this.name)
        if target is None:
            raise self.refuse(e, f"CAST to {sql_text(to)} is not supported (in {sql_text(e)})")
        t = SqlType(target)
        if target == "DECIMAL":
            params = [int(p.this.this) if isinstance(p, exp.DataTypeParam) else int(p.this) for p in to.expressions]
            p, s = (params + [10, 0][len(params) :])[:2] if params else (10, 0)
            if not (1 <= p <= 38 and 0 <= s <= p):
                raise self.error(
                    f"DECIMAL({p},{s}) is not a Spark decimal type",
                    "give 1 <= precision <= 38 and 0 <= scale <= precision",
                    supported=False,
                )
            t = decimal_type(p, s)
        if isinstance(e.this, exp.Literal) and not e.this.is_string:
            start = e.this.meta.get("start", -1) - self._prefix
            suffixed = (
                start in self._suffixed
                if "start" in e.this.meta
                else str(e.this.this) in self._suffixed_texts and not self._has_cast
            )
            if suffixed:  # 5L, 2Y, 3S, 1.5D, 10BD: a literal of that type, not a CAST
                if target == "DECIMAL" and not to.expressions:  # 10BD is DECIMAL(2,0), as its digits say
                    _, digits, exponent = decimal.Decimal(str(e.this.this)).as_tuple()
                    scale = max(0, -int(exponent))
                    t = decimal_type(max(len(digits), scale, 1), scale)
                node = self._fold(Node("cast", t, (self._literal(e.this),), sql=sql_text(e)))
                return Node("lit", t, value=node.value, sql=node.sql) if node.op == "const" else node
        arg = self.expr(e.this)
        if target not in CASTS.get(arg.type.name, set()):
            raise self.refuse(e, f"CAST from {arg.type} to {t} is not supported (in {sql_text(e)})")
        node = self._fold(Node("cast", t, (arg,), sql=sql_text(e)))
        if node.op == "cast" and arg.op in ("lit", "const"):
            raise self.error(f"{sql_text(e)} fails: the value is not a valid {t}", "correct the literal", False)
        return node
