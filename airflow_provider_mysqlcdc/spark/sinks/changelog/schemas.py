"""The changelog's schema registry: one JSON document per column layout a record was written with.

Every changelog-json record names its layout in ``meta.schema_id``; the layout itself is
written once, as ``<db>/<table>/_schemas/<schema_id>.json``, by whichever writer (the
snapshot job, a stream task, the driver) meets it first. Writes are idempotent (same id,
same bytes) and atomic (a temporary name, then a rename), so tasks that race, a replayed
micro-batch or a retried attempt all leave one whole document.
"""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any, Sequence

import pyarrow.fs as pafs

from ....cdc.model import Column, TableId
from ....cdc.schema.fingerprint import schema_document

_written: set[tuple[str, str, str]] = set()  # (root, table dir, id) this process wrote or saw
_lock = threading.Lock()


def schemas_dir(table_id: TableId) -> str:
    return f"{table_id.database}/{table_id.table}/_schemas"


def register(fs: Any, prefix: str, root: str, table_id: TableId, columns: Sequence[Column]) -> str:
    """The layout's id, its document written under the table's ``_schemas`` if not there yet."""
    doc = schema_document(table_id, columns)
    sid = doc["schema_id"]
    key = (root, schemas_dir(table_id), sid)
    with _lock:
        if key in _written:
            return sid
    path = f"{prefix}{schemas_dir(table_id)}/{sid}.json"
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        tmp = f"{path}.tmp-{uuid.uuid4().hex[:12]}"
        with fs.open_output_stream(tmp) as out:
            out.write((json.dumps(doc, separators=(",", ":")) + "\n").encode("utf-8"))
        fs.move(tmp, path)
    with _lock:
        _written.add(key)
    return sid


def forget_registered(root: str, table_id: TableId) -> None:
    """The table's directory is being deleted (reset): write its documents again when met."""
    with _lock:
        _written.difference_update({k for k in _written if k[0] == root and k[1] == schemas_dir(table_id)})


def read_schema(fs: Any, prefix: str, table_id: TableId, sid: str) -> dict[str, Any]:
    """A registered layout (tools and tests)."""
    with fs.open_input_stream(f"{prefix}{schemas_dir(table_id)}/{sid}.json") as f:
        return json.loads(f.read().decode("utf-8"))
