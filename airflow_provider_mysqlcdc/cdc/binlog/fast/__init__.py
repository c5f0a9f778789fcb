"""A fast MySQL/MariaDB binlog reader: the replication protocol, per-table generated decoders, Arrow.

Engine code (no Airflow, no Spark). See ``reader.FastBinlogReader`` for the entry point
and ``decoder.plan_table`` for what is decoded and what falls back to
python-mysql-replication.
"""

from .batches import ChangeBatch, UnsupportedRows, batch_schema
from .decoder import TableDecoder, Unsupported, plan_table
from .errors import (
    ChecksumError,
    CompressedEventError,
    FastBinlogError,
    PartialImageError,
    ProtocolError,
    UnknownEventError,
    UnsupportedTableError,
)
from .reader import FastBinlogReader
from .tablemap import TableMap, parse_table_map

__all__ = [
    "ChangeBatch",
    "ChecksumError",
    "CompressedEventError",
    "FastBinlogError",
    "FastBinlogReader",
    "PartialImageError",
    "ProtocolError",
    "TableDecoder",
    "TableMap",
    "UnknownEventError",
    "Unsupported",
    "UnsupportedRows",
    "UnsupportedTableError",
    "batch_schema",
    "parse_table_map",
    "plan_table",
]
