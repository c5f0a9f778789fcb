"""Spark side of the type mapping (see ``cdc/types.py`` for the per-type table).

Snapshot path: ``SELECT <select_sql> AS `c`, ...`` through the JDBC reader with
``customSchema=jdbc_custom_schema(mappings)`` and ``JDBC_URL_PARAMS`` in the URL, then
``finalize_columns``. Binlog path: normalized rows -> ``rows_to_dataframe``. Both give
``struct_type(mappings)`` exactly.

Nothing here depends on the JVM's default zone or the session zone: temporal values
reach Spark as epoch microseconds (TIMESTAMP) or ISO text (DATETIME, DATE), and casting
text to TIMESTAMP_NTZ / DATE or ``timestamp_micros`` are zone-free. Python-side
``createDataFrame`` turns UTC-aware datetimes into instants with ``calendar.timegm`` and
naive datetimes for TIMESTAMP_NTZ likewise, so the Python process zone does not matter
either (a naive datetime for a TIMESTAMP field *would* go through local time: the
normalizer never produces one).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ..cdc.model import quote_ident
from ..cdc.types import ColumnMapping

# Connector/J URL parameters the mapping relies on:
# - tinyInt1isBit=false: TINYINT(1) is a number (5 stays 5), not a boolean;
# - yearIsDateType=false: YEAR is a number, not a java.sql.Date (we select `y`+0 anyway);
# - useServerPrepStmts=true: the binary protocol. The server sends integers, doubles and
#   the epoch/seconds expressions as binary values instead of formatting them as text for the
#   driver to parse again (about 10% of a snapshot's CPU in the JVM and the server: see
#   docs/performance.md). Every select_sql expression reads the same either way: DECIMAL and
#   the formatted temporals are strings in both protocols, DOUBLE is its exact bits.
# Connector/J always talks utf8mb4, so every column charset arrives as Unicode text.
JDBC_URL_PARAMS = "tinyInt1isBit=false&yearIsDateType=false&useServerPrepStmts=true"


def jdbc_url(host: str, port: int, database: str, extra: str = "") -> str:
    """``jdbc:mysql://host:port/db?<JDBC_URL_PARAMS>[&extra]``."""
    url = f"jdbc:mysql://{host}:{port}/{database}?{JDBC_URL_PARAMS}"
    return f"{url}&{extra}" if extra else url


def _arrow_to_spark(t: pa.DataType) -> DataType:
    """The Spark type of an Arrow type the mapping uses; unknown ones are a programming error."""
    simple = {
        pa.int8(): ByteType(),
        pa.int16(): ShortType(),
        pa.int32(): IntegerType(),
        pa.int64(): LongType(),
        pa.float32(): FloatType(),
        pa.float64(): DoubleType(),
        pa.string(): StringType(),
        pa.binary(): BinaryType(),
        pa.date32(): DateType(),
    }
    if t in simple:
        return simple[t]
    if pa.types.is_decimal(t):
        return DecimalType(t.precision, t.scale)
    if pa.types.is_timestamp(t):
        return TimestampType() if t.tz else TimestampNTZType()
    raise TypeError(f"no Spark type for Arrow type {t}")


def spark_type(mapping: ColumnMapping) -> DataType:
    """The final Spark type of a column."""
    return _arrow_to_spark(mapping.arrow_type)


def struct_type(mappings: Iterable[ColumnMapping]) -> StructType:
    """The final row schema; all fields nullable (zero dates read as NULL, JDBC says nullable)."""
    return StructType([StructField(mp.name, spark_type(mp), True) for mp in mappings])


def jdbc_custom_schema(mappings: Iterable[ColumnMapping]) -> str:
    """DDL for the JDBC ``customSchema`` option: the (intermediate) type each column is read as."""
    return ", ".join(f"{quote_ident(mp.name)} {mp.jdbc_read_type}" for mp in mappings)


def snapshot_select(mappings: Iterable[ColumnMapping], table_quoted: str, where: str = "") -> str:
    """``(SELECT <select_sql> AS `c`, ... FROM db.t [WHERE ...]) AS q`` for the ``dbtable`` option."""
    cols = ", ".join(f"{mp.select_sql} AS {quote_ident(mp.name)}" for mp in mappings)
    w = f" WHERE {where}" if where else ""
    return f"(SELECT {cols} FROM {table_quoted}{w}) AS q"


def _final_column(mp: ColumnMapping):
    c = quote_ident(mp.name)
    if mp.finalize_sql is None:
        col = F.col(c)
    else:
        col = F.expr(mp.finalize_sql.format(c=c))
    return col.cast(spark_type(mp)).alias(mp.name)


def finalize_columns(df: DataFrame, mappings: Iterable[ColumnMapping]) -> DataFrame:
    """The JDBC result in the final schema: intermediate reads converted, columns in table order."""
    return df.select(*[_final_column(mp) for mp in mappings])


def rows_to_dataframe(
    spark: SparkSession, rows: Sequence[Mapping[str, Any]], mappings: list[ColumnMapping]
) -> DataFrame:
    """Normalized binlog rows (``row_normalizer`` output) as a DataFrame of ``struct_type``."""
    names = [mp.name for mp in mappings]
    tuples = [tuple(r[n] for n in names) for r in rows]
    return spark.createDataFrame(tuples, struct_type(mappings), verifySchema=True)
