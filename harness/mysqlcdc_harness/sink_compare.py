"""Read a sink table and its source table as {identity: row} dicts, for row-by-row checks."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from airflow_provider_mysqlcdc.cdc.model import TableId


def delta_rows(root: str | Path, table_id: TableId, identity: Sequence[str]) -> dict[tuple, dict]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(Path(root) / table_id.database / table_id.table)).to_pyarrow_table().to_pylist()
    return {tuple(r[c] for c in identity): r for r in rows}


def iceberg_rows(
    root: str | Path,
    table_id: TableId,
    identity: Sequence[str],
    catalog: dict | None = None,
    password: str | None = None,
    storage_options: dict | None = None,
) -> dict[tuple, dict]:
    """The rows of the Iceberg sink's table: its default catalog (SQLite beside a local warehouse),
    or ``catalog`` with its database's ``password`` and, for an S3 warehouse, the credentials as
    ``storage_options`` (the same way the sink resolves them)."""
    from airflow_provider_mysqlcdc.spark.sinks.iceberg import catalog as cat

    where = str(root) if "://" in str(root) else str(Path(root).resolve())
    props = {**cat.storage_properties(where, storage_options), **cat.check_catalog_options(where, catalog)}
    table = cat.load(cat.DEFAULT_CATALOG_NAME, props, password).load_table(cat.identifier(table_id))
    rows = table.scan().to_arrow().to_pylist()
    return {tuple(r[c] for c in identity): r for r in rows}


def mysql_rows(server, table_id: TableId, columns: Sequence[str], identity: Sequence[str]) -> dict[tuple, dict]:
    cols = ", ".join(f"`{c}`" for c in columns)
    out = {}
    for r in server.query(f"SELECT {cols} FROM {table_id.quoted}"):
        d = dict(zip(columns, r))
        out[tuple(d[c] for c in identity)] = d
    return out


def postgres_rows(
    pg, pg_table: str, columns: Sequence[str], identity: Sequence[str], schema: str = "public"
) -> dict[tuple, dict]:
    cols = ", ".join(f'"{c}"' for c in columns)
    out = {}
    for r in pg.query(f'SELECT {cols} FROM "{schema}"."{pg_table}"'):
        d = dict(zip(columns, r))
        out[tuple(d[c] for c in identity)] = d
    return out


def wait_until_equal(read_expected, read_actual, timeout_s: float = 90.0, every_s: float = 1.0) -> str:
    """Poll until the sink equals the source; '' on success, else the last difference."""
    import time

    from mysqlcdc_harness.verify import diff

    deadline = time.time() + timeout_s
    while True:
        try:
            problem = diff(read_expected(), read_actual())
        except Exception as e:  # the sink table may not be readable yet
            problem = f"sink not readable: {e!r}"
        if not problem or time.time() > deadline:
            return problem
        time.sleep(every_s)


def postgres_for(request, kind: str):
    """The PostgreSQL test server when ``kind`` needs it (started only then), else None."""
    return request.getfixturevalue("postgres") if kind.startswith("postgres") else None


def sink_config(kind: str, tmp_dir: Path, postgres, monkeypatch, **options):
    """A Delta or changelog sink under ``tmp_dir``, or a PostgreSQL sink in a fresh schema
    (password via $PGPASSWORD); ``delta-rows`` / ``postgres-rows``: with Spark reducing the change
    rows instead of the source's tasks. ``options``: more sink options."""
    from airflow_provider_mysqlcdc.cdc.pipeline import SinkConfig

    if kind in ("delta", "delta-rows"):
        return SinkConfig("delta", {"root": str(tmp_dir / "lake"), "direct_write": kind == "delta", **options})
    if kind in ("iceberg", "iceberg-rows"):
        return SinkConfig("iceberg", {"root": str(tmp_dir / "lake"), "direct_write": kind == "iceberg", **options})
    if kind == "changelog":
        return SinkConfig("changelog", {"root": str(tmp_dir / "lake"), **options})
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    return SinkConfig(
        "postgres",
        {"dsn": postgres.dsn, "schema": postgres.fresh_schema(), "direct_write": kind == "postgres", **options},
    )
