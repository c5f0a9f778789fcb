"""Where the Iceberg sink's tables live: a catalog (pyiceberg) and a warehouse under the sink's root.

The catalog is pyiceberg's SQL catalog by default, on a SQLite file beside the warehouse
(``<root>/catalog.db``): embedded, nothing to run, enough for one pipeline or a try-out. A shared
deployment names its own in ``sink_options.catalog``, any properties pyiceberg's ``load_catalog``
takes: ``{"type": "sql", "uri": "postgresql+psycopg://user@host/db"}`` (the password from
``$PGPASSWORD``, never in the options: they are stored in the state location), or a REST, Glue
or Hive catalog by its own properties.

Each source table ``db.t`` is the Iceberg table ``db.t`` (namespace ``db``), so tables of two
databases never collide and the names read the same in every engine.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import pyarrow as pa

from ....cdc.errors import ConfigError
from ....cdc.model import TableId

DEFAULT_CATALOG_NAME = "mysqlcdc"
CATALOG_FILE = "catalog.db"
# A catalog property that would put a secret into the stored settings.
_SECRET_KEYS = re.compile(r"(password|secret|token|credential|private)", re.IGNORECASE)
_URI_PASSWORD = re.compile(r"://[^/@:]+:[^/@]+@")


def check_catalog_options(root: str, catalog: Mapping[str, Any] | None) -> dict[str, str]:
    """The catalog properties to load, checked: no secret in them (they are stored with the
    pipeline), and a catalog given explicitly when the warehouse is not a local directory (the
    default SQLite file must sit on a local disk)."""
    props = {str(k): str(v) for k, v in (catalog or {}).items()}
    for key, value in props.items():
        if _SECRET_KEYS.search(key) or _URI_PASSWORD.search(value):
            raise ConfigError(
                f"sink_options.catalog.{key}: holds a secret, and the sink's options are stored in the "
                "pipeline's state. Fix: leave the password out of the catalog's properties; a PostgreSQL "
                "catalog reads it from $PGPASSWORD (the sink_conn_id connection's password), object storage "
                "keys come from the aws connection."
            )
    if not props:
        if "://" in root and not root.startswith("file://"):
            raise ConfigError(
                f"sink_options.catalog: needed for a warehouse at {root} (the default catalog is a SQLite "
                "file beside a local warehouse). Fix: give the catalog's properties, e.g. "
                '{"type": "sql", "uri": "postgresql+psycopg://user@host/db"}.'
            )
        local = root[len("file://") :] if root.startswith("file://") else root
        props = {"type": "sql", "uri": f"sqlite:///{local.rstrip('/')}/{CATALOG_FILE}"}
    props.setdefault("warehouse", root if "://" in root else f"file://{root}")
    return props


def load(name: str, props: Mapping[str, str]) -> Any:
    """The pyiceberg catalog, created on first use (a SQL catalog makes its tables itself)."""
    from pyiceberg.catalog import load_catalog

    return load_catalog(name, **dict(props))


def identifier(table_id: TableId) -> tuple[str, str]:
    return (table_id.database, table_id.table)


def plain_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema data files are written in: Iceberg's types (no 8/16-bit integers), no field
    ids (files are read by name through the table's name mapping)."""
    fields = []
    for f in schema:
        t = f.type
        if pa.types.is_int8(t) or pa.types.is_int16(t):
            t = pa.int32()
        elif pa.types.is_large_string(t) or pa.types.is_string_view(t):
            t = pa.string()
        elif pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
            t = pa.binary()
        fields.append(pa.field(f.name, t, f.nullable))
    return pa.schema(fields)
