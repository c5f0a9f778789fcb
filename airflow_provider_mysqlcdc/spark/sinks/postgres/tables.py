"""The PostgreSQL side of a MySQL table: identifiers, the type mapping (``pg_type``; the table in
``sink.py``'s docstring), the sink table (``PgTable``: names, columns, identity, the upsert), and the
names of the sink's own columns and bookkeeping tables.

Kept apart from the sink so the COPY writers and the connection use the same constants without a
cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa

from ....cdc.errors import REPORT_BUG, ConfigError
from ....cdc.model import TableId, TableSchema
from ....cdc.types import ColumnMapping, map_table

BATCH_COLUMN = "_mysqlcdc_batch"
PART_COLUMN = "_mysqlcdc_part"
SNAPSHOT_BATCHES = "_mysqlcdc_snapshot_batches"
PROGRESS = "_mysqlcdc_progress"
STAGING_PREFIX = "_mysqlcdc_stg_"
MAX_IDENT_BYTES = 63  # NAMEDATALEN - 1: PostgreSQL silently truncates longer names
DELETE_OPS = ("-D", "-U")
UPSERT_OPS = ("+I", "+U")


def qi(name: str) -> str:
    """Double-quote a PostgreSQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def pg_type(mp: ColumnMapping) -> str:
    """The PostgreSQL type of a column, spelled as ``format_type()`` prints it (for comparison)."""
    k, t = mp.kind, mp.arrow_type
    if k == "int":
        return {8: "smallint", 16: "smallint", 32: "integer", 64: "bigint"}[t.bit_width]
    if k in ("uint64", "bit") and pa.types.is_decimal(t):
        return "numeric(20,0)"
    if k in ("decimal", "decimal_text"):
        return f"numeric({mp.column.numeric_precision},{mp.column.numeric_scale})"
    simple = {
        "bit": "bigint",
        "float": "real",
        "double": "double precision",
        "datetime": "timestamp without time zone",
        "timestamp": "timestamp with time zone",
        "date": "date",
        "time": "bigint",
        "year": "smallint",
        "text": "text",
        "enum": "text",
        "set": "text",
        "binary": "bytea",
        "bool": "boolean",
        "date_text": "text",
        "datetime_text": "text",
        "timestamp_text": "text",  # zero_dates: text
    }
    if k in simple:
        return simple[k]
    raise ConfigError(f"column {mp.name!r}: no PostgreSQL type for mapping kind {k!r}. {REPORT_BUG}")


@dataclass(frozen=True)
class PgTable:
    """A MySQL table's PostgreSQL counterpart: names, column types, identity."""

    table_id: TableId
    schema: str
    name: str
    columns: tuple[tuple[str, str, str], ...]  # (name, pg type, mapping kind)
    identity: tuple[str, ...]
    nullable_identity: bool

    @property
    def qualified(self) -> str:
        return f"{qi(self.schema)}.{qi(self.name)}"

    @property
    def key(self) -> str:
        """The ``sink_table`` value in the bookkeeping tables."""
        return f"{self.schema}.{self.name}"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c[0] for c in self.columns)

    @property
    def identity_types(self) -> tuple[tuple[str, str, str], ...]:
        return tuple(c for c in self.columns if c[0] in self.identity)

    @property
    def value_columns(self) -> tuple[str, ...]:
        return tuple(c for c in self.column_names if c not in self.identity)

    def column_list(self, names: Sequence[str] | None = None, prefix: str = "") -> str:
        return ", ".join(prefix + qi(c) for c in (names if names is not None else self.column_names))

    def key_match(self, left: str, right: str) -> str:
        """``left.k = right.k AND ...`` (NULL-safe only where identity columns are nullable)."""
        op = "IS NOT DISTINCT FROM" if self.nullable_identity else "="
        return " AND ".join(f"{left}.{qi(c)} {op} {right}.{qi(c)}" for c in self.identity)

    def upsert_sql(self, source: str, extra_set: Sequence[tuple[str, str]] = ()) -> str:
        """``INSERT INTO t (...) SELECT ... FROM source ON CONFLICT (identity) DO UPDATE ...``."""
        target_cols = list(self.column_names) + [c for c, _ in extra_set]
        select_cols = [qi(c) for c in self.column_names] + [expr for _, expr in extra_set]
        sets = [f"{qi(c)} = EXCLUDED.{qi(c)}" for c in list(self.value_columns) + [c for c, _ in extra_set]]
        action = f"DO UPDATE SET {', '.join(sets)}" if sets else "DO NOTHING"
        return (
            f"INSERT INTO {self.qualified} ({self.column_list(target_cols)}) "
            f"SELECT {', '.join(select_cols)} FROM {source} "
            f"ON CONFLICT ({self.column_list(self.identity)}) {action}"
        )


def _check_ident(name: str, what: str) -> str:
    if not name or len(name.encode("utf-8")) > MAX_IDENT_BYTES:
        raise ConfigError(
            f"PostgreSQL {what} name {name!r} is empty or longer than {MAX_IDENT_BYTES} bytes "
            "(PostgreSQL would silently truncate it). Fix: set a shorter table_name_format or schema."
        )
    return name


def build_table(schema: TableSchema, pg_schema: str, table_name_format: str) -> PgTable:
    """The PostgreSQL layout of one MySQL table; ConfigError for names PostgreSQL cannot hold."""
    name = table_name_format.format(database=schema.table_id.database, table=schema.table_id.table)
    _check_ident(pg_schema, "schema")
    _check_ident(name, "table")
    mappings = map_table(schema, "UTC")  # the zone does not change any kind or type
    cols = []
    for mp in mappings:
        _check_ident(mp.name, "column")
        if mp.name in (BATCH_COLUMN, PART_COLUMN):
            raise ConfigError(
                f"{schema.table_id}: column {mp.name!r} is reserved by the PostgreSQL sink. "
                "Fix: exclude the column from capture."
            )
        cols.append((mp.name, pg_type(mp), mp.kind))
    if not schema.row_identity:
        raise ConfigError(f"{schema.table_id}: no row identity, so the sink cannot match rows. {REPORT_BUG}")
    nullable = any(schema.column(c).nullable for c in schema.row_identity)
    return PgTable(schema.table_id, pg_schema, name, tuple(cols), tuple(schema.row_identity), nullable)


def _check_distinct_names(tables: Sequence[PgTable]) -> None:
    """Two MySQL tables must not land in one PostgreSQL table (e.g. ``{table}`` across databases)."""
    seen: dict[str, TableId] = {}
    for t in tables:
        other = seen.setdefault(t.key, t.table_id)
        if other != t.table_id:
            raise ConfigError(
                f"{other} and {t.table_id} would both be written to PostgreSQL table {t.key}. "
                "Fix: use a table_name_format with both {database} and {table}."
            )


def map_column_of(column: Any, step: Any) -> ColumnMapping:
    """A DDL step's column as the sink table has it (its schema's ``zero_dates``)."""
    from ....cdc.types import map_column_in

    return map_column_in(step.sink_after or step.sink_before, column)
