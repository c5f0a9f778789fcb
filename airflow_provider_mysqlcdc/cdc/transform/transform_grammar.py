"""What the transform compiler (``transform_compiler.py``) accepts: the supported constructs as the
errors list them (``SUPPORTED``), the functions with their arguments, the operators, the CAST
targets, and the Arrow type of each SQL type name.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Union

import pyarrow as pa

from ..errors import ConfigError
from .transform_tree import SqlType, decimal_type

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
COMPARE = {"EQ": "eq", "NEQ": "ne", "LT": "lt", "LTE": "le", "GT": "gt", "GTE": "ge", "NullSafeEQ": "nseq"}
ARITH = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "IntDiv": "intdiv", "Mod": "mod"}
CAST_TARGETS = {
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
ALLOWED_STATEMENT_PARTS = ("expressions", "from", "from_", "where")
# sqlglot class -> the arguments understood for it (see Compiler.expr)
_BINARY = {"this", "expression"}
ARGS: dict[str, set[str]] = {
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


# Flink CDC 3's metadata column names -> what they carry here
METADATA_COLUMNS = {
    "__namespace_name__": "database",
    "__schema_name__": "database",
    "__table_name__": "table",
    "__data_event_type__": "op",
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


def arrow_schema_of(columns: ColumnsLike) -> pa.Schema:
    if isinstance(columns, pa.Schema):
        return columns
    items = columns.items() if isinstance(columns, Mapping) else columns
    return pa.schema([pa.field(n, t) for n, t in items])


def compile_error(kind: str, text: str, table: str, what: str, fix: str, supported: bool = True) -> TransformError:
    listing = f" Supported: {SUPPORTED}." if supported else ""
    return TransformError(f"transform {kind} {text!r} of {table}: {what}.{listing} Fix: {fix}")
