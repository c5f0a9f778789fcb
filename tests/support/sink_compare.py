"""Read a sink table and its source table as {identity: row} dicts, for row-by-row checks."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from airflow_provider_mysqlcdc.cdc.model import TableId


def delta_rows(root: str | Path, table_id: TableId, identity: Sequence[str]) -> dict[tuple, dict]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(Path(root) / table_id.database / table_id.table)).to_pyarrow_table().to_pylist()
    return {tuple(r[c] for c in identity): r for r in rows}


def mysql_rows(server, table_id: TableId, columns: Sequence[str], identity: Sequence[str]) -> dict[tuple, dict]:
    cols = ", ".join(f"`{c}`" for c in columns)
    out = {}
    for r in server.query(f"SELECT {cols} FROM {table_id.quoted}"):
        d = dict(zip(columns, r))
        out[tuple(d[c] for c in identity)] = d
    return out
