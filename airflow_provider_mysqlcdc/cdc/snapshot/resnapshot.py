"""Re-snapshots handed to the running stream: a batch read again while the stream owns the sink.

Once the binlog stream runs it is the only writer of the sink. A batch read again after that
(a cleared mapped task, a table named for reloading) must not write the sink itself: its rows
are exact at its high watermark HW, and the stream may already have written newer changes of
the same keys. So the batch's job leaves its rows in the state location with a manifest (a
*hand-off*), and the stream takes them over at a micro-batch whose end S is at or past HW:

1. the binlog between HW and S, reduced to the last change per key inside the batch's ranges
   (the same reduction a snapshot batch does between its watermarks), corrects the rows to S;
2. the keys the sink holds inside the ranges and the corrected rows do not hold are deletes;
3. both go into that micro-batch's own changes of the table as its last word on those keys,
   so the sink's one commit of the micro-batch replaces the ranges exactly at S.

A hand-off is applied once: ``applied.json`` is written after the micro-batch's commit (a
replayed micro-batch whose hand-off is still marked pending applies it again, to the same
result, because S, the rows and the binlog are the same). This module holds the files' shape
and where they are; the Spark side is ``spark/stream/tables/resnapshots.py``.
"""

from __future__ import annotations

import posixpath
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..chunks import Batch, KeyRange
from ..model import Column, TableId, TableSchema
from ..offsets import BinlogOffset
from ..state import StateStore

if TYPE_CHECKING:
    import pyarrow as pa

ROOT = "handoffs"
# Piece size and how many rows a micro-batch takes over: ``StreamOptions.handoff_piece_rows``
# and ``takeover_rows_per_batch`` (the pipeline's stream_options).
MANIFEST = "manifest.json"
APPLIED = "applied.json"
ROWS_FILE = "rows.parquet"


@dataclass(frozen=True)
class Handoff:
    """One re-read batch waiting for (or taken over by) the stream."""

    handoff_id: str
    batch: Batch
    high_watermark: BinlogOffset
    low_watermark: BinlogOffset
    schemas: Mapping[TableId, TableSchema]
    rows: Mapping[TableId, str]  # table -> directory of its Parquet rows, relative to the state
    row_counts: Mapping[TableId, int]
    server_id: int  # the batch's own slot: free once its job is done
    created_at: float

    @property
    def ranges(self) -> tuple[KeyRange, ...]:
        return self.batch.ranges()

    def to_dict(self) -> dict[str, Any]:
        return {
            "handoff_id": self.handoff_id,
            "batch": self.batch.to_dict(),
            "high_watermark": self.high_watermark.to_dict(),
            "low_watermark": self.low_watermark.to_dict(),
            "schemas": {t.text: s.to_dict() for t, s in self.schemas.items()},
            "rows": {t.text: p for t, p in self.rows.items()},
            "row_counts": {t.text: n for t, n in self.row_counts.items()},
            "server_id": self.server_id,
            "created_at": self.created_at,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Handoff":
        return cls(
            str(d["handoff_id"]),
            Batch.from_dict(d["batch"]),
            BinlogOffset.from_dict(d["high_watermark"]),
            BinlogOffset.from_dict(d["low_watermark"]),
            {TableId.parse(t): TableSchema.from_dict(s) for t, s in d["schemas"].items()},
            {TableId.parse(t): str(p) for t, p in d["rows"].items()},
            {TableId.parse(t): int(n) for t, n in d["row_counts"].items()},
            int(d["server_id"]),
            float(d["created_at"]),
        )


def new_handoff_id(batch_id: str) -> str:
    return f"{batch_id}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"


def rows_rel(handoff_id: str, table_id: TableId) -> str:
    return posixpath.join(ROOT, handoff_id, "rows", f"{table_id.database}.{table_id.table}")


def write_rows(state: StateStore, rel: str, rows: "pa.Table") -> None:
    """One table's rows of a piece, written by the batch job's own process through the state's file
    system (pyarrow), not by Spark: Spark reaches object storage only through Hadoop's S3 connector,
    which a cluster often lacks, while this process already writes the state there. A piece is
    bounded (``handoff_piece_rows``), and the stream collects it whole when it takes it over."""
    import pyarrow.parquet as pq

    folder = state.path(rel)
    state.fs.makedirs(folder, exist_ok=True)
    with state.fs.open(posixpath.join(folder, ROWS_FILE), "wb") as f:
        pq.write_table(rows, f)


def read_rows(state: StateStore, rel: str) -> "pa.Table":
    """The rows ``write_rows`` left in ``rel`` (and the ``part-*.parquet`` files of a hand-off an
    earlier version wrote through Spark, still pending after an upgrade), in file order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = state.path(rel)
    listed = state.fs.ls(folder, detail=False) if state.fs.exists(folder) else []
    files = sorted(str(p) for p in listed if str(p).endswith(".parquet"))
    if not files:
        raise FileNotFoundError(f"no Parquet rows under {state.url(rel)}")
    tables = []
    for path in files:
        with state.fs.open(path, "rb") as f:
            tables.append(pq.read_table(f))
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")


def write_manifest(state: StateStore, handoff: Handoff) -> None:
    """Last step of the batch's job: from here on the stream sees the hand-off (one atomic file)."""
    state.write_json(posixpath.join(ROOT, handoff.handoff_id, MANIFEST), handoff.to_dict())


def read_applied(state: StateStore, handoff_id: str) -> dict[str, Any] | None:
    rel = posixpath.join(ROOT, handoff_id, APPLIED)
    return state.read_json(rel) if state.exists(rel) else None


def mark_applied(state: StateStore, handoff_id: str, outcome: Mapping[str, Any]) -> None:
    """``outcome``: micro-batch, exact_at, rows, deleted -- or ``superseded`` with the reason."""
    state.write_json(posixpath.join(ROOT, handoff_id, APPLIED), dict(outcome))


def forget_rows(state: StateStore, handoff_id: str) -> None:
    """The hand-off's rows, once the stream took them over: the manifest and outcome stay (status)."""
    state.delete(posixpath.join(ROOT, handoff_id, "rows"))


def forget_orphans(state: StateStore, older_than_s: float = 6 * 3600) -> list[str]:
    """Hand-off directories without a manifest (a job that died while writing one), older than
    ``older_than_s``: never applied, so only disk."""
    root = state.path(ROOT)
    if not state.fs.exists(root):
        return []
    gone = []
    for d in state.fs.ls(root, detail=True):
        name = posixpath.basename(str(d["name"]).rstrip("/"))
        if state.exists(posixpath.join(ROOT, name, MANIFEST)):
            continue
        stamp = d.get("mtime") or d.get("LastModified") or d.get("created")
        age = time.time() - (stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp or time.time()))
        if age > older_than_s:
            state.delete(posixpath.join(ROOT, name))
            gone.append(name)
    return gone


def _names(state: StateStore, rel: str) -> list[str]:
    """The entries directly under ``rel`` of the state location (none when it does not exist)."""
    root = state.path(rel)
    if not state.fs.exists(root):
        return []
    return [posixpath.basename(str(d).rstrip("/")) for d in state.fs.ls(root, detail=False)]


def pending(state: StateStore) -> list[Handoff]:
    """Hand-offs with a manifest and no ``applied.json``, oldest first (a directory without a
    manifest is a job that died before it finished: never applied)."""
    out = []
    for name in _names(state, ROOT):
        if state.exists(posixpath.join(ROOT, name, MANIFEST)) and not state.exists(posixpath.join(ROOT, name, APPLIED)):
            out.append(Handoff.from_dict(state.read_json(posixpath.join(ROOT, name, MANIFEST))))
    return sorted(out, key=lambda h: (h.created_at, h.handoff_id))


def status(state: StateStore, recent: int = 5) -> dict[str, Any]:
    """What the stream's health check shows: hand-offs waiting, and the last ones taken over."""
    now = time.time()
    waiting = [
        {
            "handoff": h.handoff_id,
            "batch": h.batch.batch_id,
            "high_watermark": h.high_watermark.to_dict(),
            "waiting_s": round(now - h.created_at, 1),
        }
        for h in pending(state)
    ]
    done = []
    for name in _names(state, ROOT):
        applied = read_applied(state, name)
        if applied is not None:
            manifest = state.read_json(posixpath.join(ROOT, name, MANIFEST))
            done.append(
                {
                    "handoff": name,
                    "batch": manifest["batch"]["batch_id"],
                    "created_at": manifest["created_at"],
                    **applied,
                }
            )
    done.sort(key=lambda d: d["created_at"])
    return {
        "pending": waiting,
        "applied": done[-recent:],
        "applied_total": len(done),
        "table_reads": table_read_requests(state),
    }


# A table that comes under the pipeline's list with rows the binlog after its DDL does not hold
# (RENAME TABLE into a captured name) is read by the stream job itself, as a hand-off: the
# request is written before the stream records the table, so a crash between the two reads it
# anyway, and removed once every piece is handed over (spark/stream/tables/table_reads.py).
READS = "stream/table_reads"


def _read_rel(table_id: TableId) -> str:
    from urllib.parse import quote

    return posixpath.join(READS, quote(str(table_id), safe="") + ".json")


def request_table_read(state: StateStore, table_id: TableId, offset: Mapping[str, Any], reason: str) -> None:
    state.write_json(
        _read_rel(table_id),
        {
            "table": str(table_id),
            "database": table_id.database,
            "name": table_id.table,
            "offset": dict(offset),
            "reason": reason,
            "requested_at": time.time(),
        },
    )


def note_table_read(state: StateStore, table_id: TableId, **fields: Any) -> None:
    """Progress or the last error of a request, for the stream's status (gone requests stay gone)."""
    rel = _read_rel(table_id)
    if state.exists(rel):
        state.write_json(rel, {**state.read_json(rel), **fields})


def table_read_requests(state: StateStore) -> list[dict[str, Any]]:
    out = []
    for name in _names(state, READS):
        if name.endswith(".json"):
            try:
                out.append(state.read_json(posixpath.join(READS, name)))
            except (OSError, ValueError):  # being replaced right now: the next look sees it
                continue
    return sorted(out, key=lambda r: r.get("requested_at", 0))


def forget_table_read(state: StateStore, table_id: TableId) -> None:
    state.delete(_read_rel(table_id))


def same_columns(a: TableSchema, b: TableSchema) -> bool:
    return [(c.name, c.column_type.lower()) for c in a.columns] == [(c.name, c.column_type.lower()) for c in b.columns]


def describe_columns(columns: Sequence[Column]) -> str:
    return ", ".join(c.name for c in columns)
