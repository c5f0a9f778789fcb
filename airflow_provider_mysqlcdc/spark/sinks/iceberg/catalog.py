"""Where the Iceberg sink's tables live: a catalog (pyiceberg) and a warehouse under the sink's root.

The catalog is pyiceberg's SQL catalog by default, on a SQLite file beside the warehouse
(``<root>/catalog.db``): embedded, nothing to run, enough for one pipeline or a try-out on a local
disk. A warehouse on object storage (``s3://bucket/prefix``) needs a catalog every process
reaches, named in ``sink_options.catalog`` by the properties pyiceberg's ``load_catalog`` takes:
``{"type": "sql", "uri": "postgresql+psycopg://user@host:5432/db"}``, or a REST, Glue or Hive
catalog by its own properties.

Secrets never go into those properties (the sink's options are stored in the state location):

* a PostgreSQL catalog's password is the ``sink_conn_id`` connection's, handed to the process in
  memory (the ``password`` option the operators add) or as ``$PGPASSWORD`` (the Spark jobs'
  environment), and put into the SQLAlchemy engine's URL object only, whose printed form masks it;
* the S3 warehouse's keys, endpoint and region are the ``aws`` connection's, as the Delta sink
  gets them: ``storage_options`` held in memory (a Spark Connect server's workers) or this
  process's ``AWS_*`` environment, turned into pyiceberg's ``s3.*`` FileIO properties here.

Each source table ``db.t`` is the Iceberg table ``db.t`` (namespace ``db``), so tables of two
databases never collide and the names read the same in every engine.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

import pyarrow as pa

from ....cdc.errors import ConfigError
from ....cdc.model import TableId
from ....cdc.store.object_store import credentials_from_env, is_object_store

DEFAULT_CATALOG_NAME = "mysqlcdc"
CATALOG_FILE = "catalog.db"
CATALOG_PASSWORD_ENV = "PGPASSWORD"
# A catalog property that would put a secret into the stored settings.
_SECRET_KEYS = re.compile(r"(password|secret|token|credential|private|access[-_.]?key)", re.IGNORECASE)
_URI_PASSWORD = re.compile(r"://[^/@:]+:[^/@]+@")
_EXAMPLE = '{"type": "sql", "uri": "postgresql+psycopg://cdc@pg.example.com:5432/iceberg"}'
# Region used when an S3-compatible endpoint is given without one: pyiceberg would otherwise ask
# AWS which region the bucket is in, which an S3-compatible server is not.
_ENDPOINT_DEFAULT_REGION = "us-east-1"


def check_catalog_options(root: str, catalog: Mapping[str, Any] | None) -> dict[str, str]:
    """The catalog properties to load, checked: no secret in them (they are stored with the
    pipeline), and a catalog every process reaches when the warehouse is on object storage (the
    default SQLite file sits on one host's disk, where the other hosts' jobs cannot see it)."""
    props = {str(k): str(v) for k, v in (catalog or {}).items()}
    for key, value in props.items():
        if _URI_PASSWORD.search(value):
            raise ConfigError(
                f"sink_options.catalog.{key}: found a URI with a password in it, need one without (the "
                "sink's options are stored in the pipeline's state). Fix: write it as user@host (e.g. "
                "postgresql+psycopg://cdc@pg:5432/iceberg) and set sink_conn_id to an Airflow connection "
                "whose password is the catalog database's."
            )
        if _SECRET_KEYS.search(key):
            raise ConfigError(
                f"sink_options.catalog.{key}: found a secret, need catalog properties without one (the "
                "sink's options are stored in the pipeline's state). Fix: remove it; a PostgreSQL catalog's "
                "password comes from the sink_conn_id connection, the S3 warehouse's keys from the aws "
                "connection (aws_conn_id)."
            )
    remote = is_object_store(root)
    if not props:
        if remote:
            raise ConfigError(
                f"sink_options.catalog: found none for the warehouse {root}, need a catalog every Spark "
                "process reaches (the default is a SQLite file beside a local warehouse). Fix: give the "
                f"catalog's properties, e.g. {_EXAMPLE}, and set sink_conn_id to the connection with its "
                "password."
            )
        local = root[len("file://") :] if root.startswith("file://") else root
        props = {"type": "sql", "uri": f"sqlite:///{local.rstrip('/')}/{CATALOG_FILE}"}
    elif remote and props.get("uri", "").startswith("sqlite"):
        raise ConfigError(
            f"sink_options.catalog.uri: found a SQLite catalog for the warehouse {root}, need one every "
            "Spark process reaches (a SQLite file is on one host's disk). Fix: use a shared catalog, e.g. "
            f"{_EXAMPLE}."
        )
    props.setdefault("warehouse", root if "://" in root else f"file://{root}")
    return props


def takes_password(props: Mapping[str, str]) -> bool:
    """Whether the catalog is a SQL catalog on PostgreSQL (its password: the sink connection's)."""
    return str(props.get("type", "sql")).lower() == "sql" and str(props.get("uri", "")).startswith("postgresql")


def storage_properties(root: str, storage_options: Mapping[str, Any] | None) -> dict[str, str]:
    """pyiceberg's FileIO properties for an S3 warehouse: the ``aws`` connection's credentials,
    endpoint and region from ``storage_options`` (in memory) or else this process's environment.
    Empty for a local warehouse, or when neither holds any (the SDK's own chain then applies)."""
    if not root.startswith(("s3://", "s3a://", "s3n://")):
        return {}
    given = {str(k).upper(): str(v) for k, v in (storage_options or {}).items() if v not in (None, "")}
    creds = credentials_from_env(given) if given else credentials_from_env()
    if creds is None:
        return {}
    props = {
        "s3.access-key-id": creds.access_key_id,
        "s3.secret-access-key": creds.secret_access_key,
        "s3.session-token": creds.session_token,
        "s3.endpoint": creds.endpoint_url,
        "s3.region": creds.region or (_ENDPOINT_DEFAULT_REGION if creds.endpoint_url else None),
    }
    return {k: v for k, v in props.items() if v}


def catalog_password(password: str | None) -> str | None:
    """The catalog database's password: the one handed in memory, else ``$PGPASSWORD``."""
    return password if password not in (None, "") else (os.environ.get(CATALOG_PASSWORD_ENV) or None)


def catalog_uri(props: Mapping[str, str], password: str | None) -> Any:
    """The ``uri`` property pyiceberg hands SQLAlchemy: a PostgreSQL catalog's with the password in
    SQLAlchemy's URL object (its printed forms, in logs and errors, mask it), else the string."""
    uri = props.get("uri")
    if not (password and uri and takes_password(props)):
        return uri
    from sqlalchemy.engine import make_url

    return make_url(str(uri)).set(password=password)


def load(name: str, props: Mapping[str, str], password: str | None = None) -> Any:
    """The pyiceberg catalog, created on first use (a SQL catalog makes its tables itself)."""
    from pyiceberg.catalog import load_catalog

    loaded: dict[str, Any] = dict(props)
    if "uri" in loaded:
        loaded["uri"] = catalog_uri(props, password)
    return load_catalog(name, **loaded)


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
