"""A short id for a column layout, so every changelog record can say which shape it has.

Why an id made from the columns and not a counter: the binlog ranges of one micro-batch
are read in parallel, and a task that reads the second range cannot know how many DDLs
the first one held. What every task does know is the layout its rows were logged with
(the TABLE_MAP), so the id is a digest of that layout: two tasks that meet the same
shape give the same id without talking to each other. The changelog keeps one small
document per id (``<table>/_schemas/<id>.json``), like a schema registry.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

from ..model import Column, TableId


def layout_fields(columns: Sequence[Column]) -> list[dict[str, Any]]:
    """What a reader needs to decode a record: names in order, declared types, nullability."""
    return [{"name": c.name, "type": c.column_type, "nullable": bool(c.nullable)} for c in columns]


def schema_id(columns: Sequence[Column]) -> str:
    """12 hex digits of the layout's SHA-256 (a collision needs ~16M layouts of one table)."""
    text = json.dumps(layout_fields(columns), separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def schema_document(table_id: TableId, columns: Sequence[Column]) -> dict[str, Any]:
    return {
        "schema_id": schema_id(columns),
        "database": table_id.database,
        "table": table_id.table,
        "columns": layout_fields(columns),
    }
