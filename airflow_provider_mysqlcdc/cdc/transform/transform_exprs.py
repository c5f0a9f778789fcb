"""Compile a transform rule's Spark SQL (a ``projection`` select list or a ``filter`` predicate)
into a typed tree that ``transform_eval`` evaluates over Arrow batches of one source table.

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
compiler applies those too (``_Compiler._rewrite``), and refuses what Spark fails on whatever
the rows (a constant part that fails, ``check_constants``). Checked against Spark 4.2 by
``tests/integration/test_transform_spark_differential.py``.

The compiled objects hold the text, the input schema and a tree of frozen dataclasses (no
sqlglot objects), so they pickle to Spark executors.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError
from .transform_eval import (
    CASTS,
    INT_DIGITS,
    INTEGRALS,
    Context,
    Node,
    SqlType,
    TransformEvalError,
    decimal_intermediate,
    decimal_type,
    evaluate,
)

__all__ = [
    "TransformError",
    "TransformEvalError",
    "CompiledProjection",
    "CompiledFilter",
    "compile_projection",
    "compile_filter",
    "METADATA_COLUMNS",
    "SUPPORTED",
]

# Flink CDC 3's metadata column names -> what they carry here
METADATA_COLUMNS = {
    "__namespace_name__": "database",
    "__schema_name__": "database",
    "__table_name__": "table",
    "__data_event_type__": "op",
}
SUPPORTED = (
    "columns of the table and the metadata columns __namespace_name__, __schema_name__ (the source database), "
    "__table_name__, __data_event_type__ ('+I', '-U', '+U', '-D', 'r'); literals (integers, decimals, doubles "
    "such as 1.5e3 or 1.5D, 'text', NULL, TRUE, FALSE, DATE 'yyyy-mm-dd', TIMESTAMP 'yyyy-mm-dd hh:mm:ss'); "
    "+ - * / div % and unary -; = == <> != < <= > >= <=>; AND OR NOT; IS [NOT] NULL, isnull(), isnotnull(); "
    "[NOT] IN (literals); [NOT] BETWEEN; [NOT] LIKE with % and _; ||; CASE WHEN; IF; COALESCE, NVL, IFNULL; "
    "concat, upper/ucase, lower/lcase, trim/ltrim/rtrim, length/char_length/character_length, "
    "substring/substr with constant positions, abs, round with constant digits; CAST to STRING, TINYINT, "
    "SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p,s), DATE, TIMESTAMP, BOOLEAN"
)
_ARROW_TYPES = {
    pa.int8(): "TINYINT",
    pa.int16(): "SMALLINT",
    pa.int32(): "INT",
    pa.int64(): "BIGINT",
    pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE",
    pa.string(): "STRING",
    pa.large_string(): "STRING",
    pa.binary(): "BINARY",
    pa.large_binary(): "BINARY",
    pa.bool_(): "BOOLEAN",
    pa.date32(): "DATE",
    pa.null(): "VOID",
}
_COMPARE = {"EQ": "eq", "NEQ": "ne", "LT": "lt", "LTE": "le", "GT": "gt", "GTE": "ge", "NullSafeEQ": "nseq"}
_ARITH = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "IntDiv": "intdiv", "Mod": "mod"}
_CAST_TARGETS = {
    "TEXT": "STRING",
    "TINYINT": "TINYINT",
    "SMALLINT": "SMALLINT",
    "INT": "INT",
    "BIGINT": "BIGINT",
    "FLOAT": "FLOAT",
    "DOUBLE": "DOUBLE",
    "DECIMAL": "DECIMAL",
    "DATE": "DATE",
    "BOOLEAN": "BOOLEAN",
    "TIMESTAMPTZ": "TIMESTAMP",
    "TIMESTAMPLTZ": "TIMESTAMP",
    "TIMESTAMP": "TIMESTAMP",
}
_ALLOWED_STATEMENT_PARTS = ("expressions", "from", "from_", "where")
# sqlglot class -> the arguments understood for it (see _Compiler.expr)
_BINARY = {"this", "expression"}
_ARGS: dict[str, set[str]] = {
    "Paren": {"this"},
    "Column": {"this", "table", "db", "catalog"},
    "Literal": {"this", "is_string"},
    "Null": set(),
    "Boolean": {"this"},
    "RawString": {"this"},
    "Neg": {"this"},
    **{
        k: set(_BINARY)
        for k in (
            "Add",
            "Sub",
            "Mul",
            "IntDiv",
            "Mod",
            "EQ",
            "NEQ",
            "LT",
            "LTE",
            "GT",
            "GTE",
            "NullSafeEQ",
            "And",
            "Or",
        )
    },
    "Div": _BINARY | {"typed", "safe"},  # sqlglot's notes on Spark's / (DOUBLE, NULL on 0 in legacy mode)
    "Not": {"this"},
    "Is": _BINARY | {"negate"},
    "In": {"this", "expressions", "query", "negate"},
    "Between": {"this", "low", "high", "negate"},
    "Like": _BINARY | {"negate"},
    "DPipe": _BINARY | {"safe"},
    "Concat": {"expressions", "safe"},
    "Case": {"this", "ifs", "default"},
    "If": {"this", "true", "false"},
    "Coalesce": {"this", "expressions", "is_nvl", "is_null"},
    "Upper": {"this"},
    "Lower": {"this"},
    "Trim": {"this", "expression", "position"},
    "Length": {"this"},
    "Substring": {"this", "start", "length"},
    "Abs": {"this"},
    "Round": {"this", "decimals"},
    "Cast": {"this", "to", "safe", "requires_string"},
    "TryCast": {"this", "to", "safe", "requires_string"},
    "Anonymous": {"this", "expressions"},
}


class TransformError(ConfigError):
    """A transform expression outside the subset evaluated here, or wrong for its table."""


ColumnsLike = Union[pa.Schema, Mapping[str, pa.DataType], Iterable[tuple[str, pa.DataType]]]


def sql_type_of(arrow_type: pa.DataType) -> SqlType:
    """The Spark type of a source column (the engine's Arrow mapping, ``cdc/types.py``)."""
    if pa.types.is_decimal(arrow_type) and arrow_type.precision <= 38:
        return decimal_type(arrow_type.precision, arrow_type.scale)
    if pa.types.is_timestamp(arrow_type):
        if arrow_type.tz is None:
            return SqlType("TIMESTAMP_NTZ")
        if arrow_type.tz in ("UTC", "+00:00", "Etc/UTC"):
            return SqlType("TIMESTAMP")
    name = _ARROW_TYPES.get(arrow_type)
    return SqlType(name) if name else SqlType("OTHER", other=arrow_type)


def _schema(columns: ColumnsLike) -> pa.Schema:
    if isinstance(columns, pa.Schema):
        return columns
    items = columns.items() if isinstance(columns, Mapping) else columns
    return pa.schema([pa.field(n, t) for n, t in items])


def _error(kind: str, text: str, table: str, what: str, fix: str, supported: bool = True) -> TransformError:
    listing = f" Supported: {SUPPORTED}." if supported else ""
    return TransformError(f"transform {kind} {text!r} of {table}: {what}.{listing} Fix: {fix}")


# --- the compiled forms ---------------------------------------------------------------------


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
    schema = _schema(columns)
    comp = _Compiler(text, "projection", schema, str(table))
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
    schema = _schema(columns)
    comp = _Compiler(text, "filter", schema, str(table))
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


# --- the compiler ---------------------------------------------------------------------------


@dataclass
class _Compiler:
    text: str
    kind: str
    schema: pa.Schema
    table: str
    _suffixed: set[int] = field(default_factory=set)  # text offsets of literals such as 5L, 2Y, 3S
    _suffixed_texts: set[str] = field(default_factory=set)  # their digits, for sqlglot releases without offsets
    _has_cast: bool = False
    _prefix: int = 0

    def error(self, what: str, fix: str, supported: bool = True) -> TransformError:
        return _error(self.kind, self.text, self.table, what, fix, supported)

    def refuse(self, e: Any, what: Optional[str] = None) -> TransformError:
        what = what or f"{_construct(e)} is not supported (in {_sql(e)})"
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
        extra = sorted(
            k for k, v in (trees[0].args.items() if trees else ()) if v and k not in _ALLOWED_STATEMENT_PARTS
        )
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
                raise self.refuse(e, f"{_sql(e)} is not supported (write the columns, or * alone)")
            return [(f.name, Node("col", sql_type_of(f.type), value=f.name, sql=f.name)) for f in self.schema]
        if type(e) is exp.Alias:
            return [(e.alias, self.expr(e.this))]
        if type(e) is exp.Column:
            node = self.expr(e)
            return [(node.value if node.op == "col" else e.name, node)]
        raise self.error(
            f"the item {_sql(e)} has no name", f"name it with AS, e.g. {_sql(e)} AS my_column", supported=False
        )

    # -- expressions --

    def expr(self, e: Any) -> Node:
        """``e`` typed. Dispatch is on the exact sqlglot class and every argument it carries must be
        one understood here: a subclass (CONCAT_WS is a Concat) or a flag a sqlglot version adds
        (NOT LIKE as Like(negate=True)) must never be read as something else."""
        from sqlglot import expressions as exp

        name = type(e).__name__
        allowed = _ARGS.get(name)
        extra = sorted(k for k, v in e.args.items() if v not in (None, False, [], "") and k not in (allowed or ()))
        if allowed is None or extra:
            raise self.refuse(
                e,
                None if allowed is None else f"{_construct(e)} with {', '.join(extra)} is not supported (in {_sql(e)})",
            )
        if e.args.get("negate"):  # x NOT LIKE / NOT IN / NOT BETWEEN / IS NOT as one node
            inner = e.copy()
            inner.set("negate", None)
            return self._fold(Node("not", SqlType("BOOLEAN"), (self._boolean(self.expr(inner), e),), sql=_sql(e)))
        if name == "Paren":
            return self.expr(e.this)
        if name == "Column":
            return self._column(e)
        if name in ("Literal", "Null", "Boolean", "RawString"):
            return self._literal(e)
        if name == "Neg":
            return self._negate(e)
        if name in _ARITH:
            return self._arith(_ARITH[name], self.expr(e.this), self.expr(e.expression), e)
        if name in _COMPARE:
            return self._compare(_COMPARE[name], e.this, e.expression, e)
        if name in ("And", "Or"):
            args = [self._boolean(self.expr(x), e) for x in (e.this, e.expression)]
            return self._fold(Node(name.lower(), SqlType("BOOLEAN"), tuple(args), sql=_sql(e)))
        if name == "Not":
            return self._fold(Node("not", SqlType("BOOLEAN"), (self._boolean(self.expr(e.this), e),), sql=_sql(e)))
        if name == "Is" and type(e.expression) is exp.Null:
            return self._fold(Node("is_null", SqlType("BOOLEAN"), (self.expr(e.this),), sql=_sql(e)))
        if name == "Anonymous" and e.name.lower() in ("isnull", "isnotnull") and len(e.expressions) == 1:
            op = "is_null" if e.name.lower() == "isnull" else "is_not_null"
            return self._fold(Node(op, SqlType("BOOLEAN"), (self.expr(e.expressions[0]),), sql=_sql(e)))
        if name == "In":
            return self._in(e)
        if name == "Between":
            # Spark replaces BETWEEN by x >= low AND x <= high after its analyzer's rewrites
            low = self._compare("ge", e.this, e.args["low"], e, between=True)
            high = self._compare("le", e.this, e.args["high"], e, between=True)
            return self._fold(Node("and", SqlType("BOOLEAN"), (low, high), sql=_sql(e)))
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
            return self._fold(Node("coalesce", t, tuple(self._to(a, t) for a in args), sql=_sql(e)))
        if name in ("Upper", "Lower", "Trim", "Length", "Substring"):
            return self._string_function(e)
        if name == "Abs":
            arg = self.expr(e.this)
            self._need(arg.type.numeric, e, "a number", arg.type)
            return self._fold(Node("abs", arg.type, (arg,), sql=_sql(e)))
        if name == "Round":
            return self._round(e)
        if name in ("Cast", "TryCast"):
            return self._cast(e)
        raise self.refuse(e)

    def _column(self, e: Any) -> Node:
        from sqlglot import expressions as exp

        if isinstance(e.this, exp.Star):
            raise self.refuse(e, f"{_sql(e)} is not supported here")
        if e.table or e.args.get("db") or e.args.get("catalog"):
            raise self.error(
                f"the qualified column {_sql(e)} is not supported",
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
            return Node("lit", SqlType("BOOLEAN"), value=bool(e.this), sql=_sql(e))
        if isinstance(e, exp.RawString) or e.is_string:
            return Node("lit", SqlType("STRING"), value=str(e.this), sql=_sql(e))
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
        return self._fold(Node("neg", arg.type, (arg,), sql=_sql(e)))

    # -- typing --

    def _need(self, ok: bool, e: Any, what: str, found: SqlType) -> None:
        if not ok:
            raise self.error(
                f"{_sql(e)} needs {what}, found {found}",
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

    # -- Spark's optimizer --

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
            f"{_sql(e)} mixes {' and '.join(sorted(str(t) for t in set(ts)))}",
            "CAST the values to one type, e.g. CAST(x AS STRING)",
            supported=False,
        )

    def _arith(self, op: str, a: Node, b: Node, e: Any) -> Node:
        if a.type.name == "VOID" and b.type.name == "VOID":
            raise self.error(
                f"{_sql(e)} computes on two NULLs, which have no type",
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
            return self._fold(Node(op, t, (self._to(a, t), self._to(b, t)), sql=_sql(e)))
        if op == "mod" and names & {"FLOAT", "DOUBLE"}:
            raise self.refuse(e, f"% of FLOAT/DOUBLE values is not supported (in {_sql(e)})")
        if op == "div" and not (names & {"FLOAT", "DOUBLE"}) and "DECIMAL" not in names:
            t = SqlType("DOUBLE")  # Spark's / of integral numbers is DOUBLE division
        elif "DECIMAL" in names and not names & {"FLOAT", "DOUBLE"}:
            return self._decimal_arith(op, a, b, e)
        else:
            t = self._common([a.type, b.type], e)
            t = SqlType("DOUBLE") if op == "div" else t
        return self._fold(Node(op, t, (self._to(a, t), self._to(b, t)), sql=_sql(e)))

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
                f"{_sql(e)} of DECIMAL({p1},{s1}) and DECIMAL({p2},{s2}) needs more than 76 "
                "digits to compute exactly, which is not supported",
            )
        return self._fold(Node(op, decimal_type(p, s), (self._to(a, t1), self._to(b, t2)), sql=_sql(e)))

    def _compare(self, op: str, left: Any, right: Any, e: Any, between: bool = False) -> Node:
        from sqlglot import expressions as exp

        a, b = self.expr(left), self.expr(right)
        # a text literal next to a date/timestamp is read as one (Spark's ANSI string-literal rule)
        for lit_side, other, raw in ((0, b, left), (1, a, right)):
            if isinstance(raw, exp.Literal) and raw.is_string and other.type.name in ("DATE", "TIMESTAMP"):
                converted = self._fold(Node("cast", other.type, ((a, b)[lit_side],), sql=_sql(raw)))
                if converted.op == "cast":
                    raise self.error(
                        f"{_sql(raw)} is not a valid {other.type}", "write it as yyyy-mm-dd[ hh:mm:ss]", supported=False
                    )
                a, b = (converted, b) if lit_side == 0 else (a, converted)
        if not between:
            decided = _integral_vs_decimal_literal(op, a, b)
            if decided is not None:
                return Node("const", SqlType("BOOLEAN"), value=decided, sql=_sql(e))
        t = self._common([self._operand_type(a, b), self._operand_type(b, a)], e)
        if t.name == "VOID":  # NULL = NULL: unknown (NULL <=> NULL: true)
            return Node("const", SqlType("BOOLEAN"), value=True if op == "nseq" else None, sql=_sql(e))
        if t.name in ("BINARY", "OTHER") and op != "nseq" and op not in ("eq", "ne"):
            raise self.refuse(e, f"ordering {t} values is not supported (in {_sql(e)})")
        return self._fold(Node(op, SqlType("BOOLEAN"), (self._to(a, t), self._to(b, t)), sql=_sql(e)))

    def _in(self, e: Any) -> Node:
        if e.args.get("query") or e.args.get("unnest") or e.args.get("field"):
            raise self.refuse(e, f"IN with a subquery is not supported (in {_sql(e)})")
        value = self.expr(e.this)
        items = [self.expr(x) for x in e.expressions]
        if any(i.op not in ("lit", "const") for i in items):
            raise self.refuse(e, f"IN with a non-constant list item is not supported (in {_sql(e)})")
        t = self._common([value.type, *(i.type for i in items)], e)
        values = [self._to(i, t) for i in items]
        if any(v.op not in ("lit", "const") for v in values):
            raise self.error(
                f"an item of {_sql(e)} is not a valid {t}", "give items of the value's type", supported=False
            )
        present = [v.value for v in values if v.value is not None and v.type.name != "VOID"]
        has_null = len(present) < len(values)
        return self._fold(
            Node("in", SqlType("BOOLEAN"), (self._to(value, t),), value=(tuple(present), has_null), sql=_sql(e))
        )

    def _like(self, e: Any) -> Node:

        value = self.expr(e.this)
        pattern = self.expr(e.expression)
        self._need(value.type.name in ("STRING", "VOID"), e, "a STRING", value.type)
        if pattern.op not in ("lit", "const") or pattern.type.name != "STRING" or not isinstance(pattern.value, str):
            raise self.refuse(e, f"LIKE with a pattern that is not a text literal is not supported (in {_sql(e)})")
        if "\\" in pattern.value:  # Spark's and Arrow's LIKE escapes would have to agree; not needed
            raise self.refuse(e, f"a backslash in a LIKE pattern is not supported (in {_sql(e)})")
        return self._fold(
            Node("like", SqlType("BOOLEAN"), (self._to(value, SqlType("STRING")),), value=pattern.value, sql=_sql(e))
        )

    def _concat(self, parts: list[Node], e: Any) -> Node:
        if not parts:
            raise self.refuse(e)
        for p in parts:
            self._need(p.type.name in ("STRING", "VOID"), e, "STRING values (CAST the others AS STRING)", p.type)
        t = SqlType("STRING")
        return self._fold(Node("concat", t, tuple(self._to(p, t) for p in parts), sql=_sql(e)))

    def _case(self, e: Any) -> Node:
        from sqlglot import expressions as exp

        if isinstance(e, exp.If):
            if e.args.get("false") is None:
                raise self.refuse(e, f"if() needs three arguments (in {_sql(e)})")
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
                    f"the condition NULL of {_sql(e)} has no type, and Spark requires a BOOLEAN there",
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
        return self._fold(Node("case", t, tuple(args) + (self._to(values[-1], t),), sql=_sql(e)))

    def _compare_nodes(self, a: Node, b: Node, e: Any) -> Node:
        t = self._common([self._operand_type(a, b), self._operand_type(b, a)], e)
        if t.name == "VOID":
            return Node("const", SqlType("BOOLEAN"), value=None, sql=_sql(e))
        return self._fold(Node("eq", SqlType("BOOLEAN"), (self._to(a, t), self._to(b, t)), sql=_sql(e)))

    def _operand_type(self, node: Node, other: Node) -> SqlType:
        """An integral literal next to a decimal in a comparison counts with its own digits, as in
        arithmetic (Spark's DecimalPrecision for binary operators)."""
        if node.op == "lit" and node.type.integral and other.type.name == "DECIMAL":
            return self._decimal_of(node)
        return node.type

    def _constant_int(self, e: Any, what: str) -> int:
        node = self.expr(e)
        if node.op not in ("lit", "const") or node.type.name not in INTEGRALS[:3] or node.value is None:
            raise self.refuse(e, f"{what} must be a constant INT, found {_sql(e)}")
        return int(node.value)

    def _string_function(self, e: Any) -> Node:
        from sqlglot import expressions as exp

        arg = self.expr(e.this)
        allowed = ("STRING", "VOID", "BINARY") if isinstance(e, exp.Length) else ("STRING", "VOID")
        self._need(arg.type.name in allowed, e, "a STRING", arg.type)
        if isinstance(e, exp.Length):
            arg = arg if arg.type.name == "BINARY" else self._to(arg, SqlType("STRING"))
            return self._fold(Node("length", SqlType("INT"), (arg,), sql=_sql(e)))
        arg = self._to(arg, SqlType("STRING"))
        if isinstance(e, (exp.Upper, exp.Lower)):
            op = "upper" if isinstance(e, exp.Upper) else "lower"
            return self._fold(Node(op, SqlType("STRING"), (arg,), sql=_sql(e)))
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
                        f"not supported (in {_sql(e)})",
                    )
                chars = node.value
            where = str(e.args.get("position") or "BOTH").lower()
            return self._fold(Node("trim", SqlType("STRING"), (arg,), value=(where, chars), sql=_sql(e)))
        pos = self._constant_int(e.args["start"], "substring's position")
        length = self._constant_int(e.args["length"], "substring's length") if e.args.get("length") else None
        return self._fold(Node("substring", SqlType("STRING"), (arg,), value=(pos, length), sql=_sql(e)))

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
        return self._fold(Node("round", t, (arg,), value=digits, sql=_sql(e)))

    def _cast(self, e: Any) -> Node:
        from sqlglot import expressions as exp

        if e.args.get("safe"):
            raise self.refuse(e, f"function try_cast() is not supported (in {_sql(e)})")
        to = e.args["to"]
        target = _CAST_TARGETS.get(to.this.name)
        if target is None:
            raise self.refuse(e, f"CAST to {_sql(to)} is not supported (in {_sql(e)})")
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
                node = self._fold(Node("cast", t, (self._literal(e.this),), sql=_sql(e)))
                return Node("lit", t, value=node.value, sql=node.sql) if node.op == "const" else node
        arg = self.expr(e.this)
        if target not in CASTS.get(arg.type.name, set()):
            raise self.refuse(e, f"CAST from {arg.type} to {t} is not supported (in {_sql(e)})")
        node = self._fold(Node("cast", t, (arg,), sql=_sql(e)))
        if node.op == "cast" and arg.op in ("lit", "const"):
            raise self.error(f"{_sql(e)} fails: the value is not a valid {t}", "correct the literal", False)
        return node


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


def _integral_vs_decimal_literal(op: str, a: Node, b: Node) -> Optional[bool]:
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


def _sql(e: Any) -> str:
    try:
        return e.sql(dialect="spark")
    except Exception:  # a node sqlglot cannot print back
        return type(e).__name__


def _construct(e: Any) -> str:
    from sqlglot import expressions as exp

    if isinstance(e, exp.Anonymous):
        return f"function {e.name}()"
    if isinstance(e, exp.Func):  # the name as Spark SQL writes it (sqlglot may call DATE_ADD TsOrDsAdd)
        text = _sql(e)
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
