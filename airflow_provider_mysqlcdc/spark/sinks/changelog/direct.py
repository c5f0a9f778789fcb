"""The changelog sink's direct stream write: the task that reads a binlog range writes its lines.

Why: the stream's executors hold every change as Arrow right after decoding. Passing the
rows through the JVM (Arrow -> rows -> projection -> ``to_json`` -> Arrow -> Python writer)
cost about twice the CPU of decoding. In direct mode the binlog source's task encodes its
range's changes (``json_text.ChangeLines``) and writes one part file per table
under ``<table>/stream/.tmp-<batch>/``; Spark carries only the part records
(``PART_SCHEMA``) back to ``foreachBatch``, where ``ChangelogSink.publish_steps`` joins
each table's parts in ``_seq`` order into the micro-batch's file, as the row path does.

Exactly once stays as it was: the part names carry the task attempt, only the records of
the attempts Spark accepted are joined, the final file name depends only on the batch id,
and the batch's ``.tmp`` directory (with any part a failed attempt left) is deleted after
the join -- also when a replay of the batch joins it again.

The micro-batch id goes into every line's ``meta`` (``direct.current_batch_id``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pyarrow as pa

from ....cdc.model import TableId
from ..direct_spec import DdlMark, DirectSpec, Segments, TableRows, columns_signature, first_at
from ..json_text import ChangeLines, joined_bytes, text_buffer
from .schemas import register

SUFFIX = ".jsonl"

# One record per (range, table) with rows: where the part is and which _seq it spans.
PART_FIELDS = (
    ("database", pa.string()),
    ("table", pa.string()),
    ("path", pa.string()),
    ("size", pa.int64()),
    ("lines", pa.int64()),
    ("changes", pa.int64()),
    ("first_seq", pa.int64()),
    ("last_seq", pa.int64()),
    ("columns", pa.string()),
    ("ddl", pa.string()),
    ("first_at", pa.string()),
)
PART_ARROW_SCHEMA = pa.schema([pa.field(n, t, nullable=False) for n, t in PART_FIELDS])


def table_dir(table_id: TableId) -> str:
    """A table's directory, relative to the changelog root."""
    return f"{table_id.database}/{table_id.table}"


def batch_tmp_dir(table_id: TableId, batch_id: int) -> str:
    """Where a micro-batch's parts of a table are written before the join (one per batch id)."""
    return f"{table_dir(table_id)}/stream/.tmp-{int(batch_id):09d}"


@dataclass(frozen=True)
class DirectWrite(DirectSpec):
    """What the binlog source needs to write changelog-json parts itself."""

    kind = "changelog-json"
    root: str
    # A pipeline's routes and transforms (``routed.RoutedSink.direct_write``): the rules and, per
    # routed or transformed table (``db.table`` text), its sink table's text and whether it is merged.
    views: str = ""

    def options(self) -> dict[str, Any]:
        return {"root": self.root, **({"views": self.views} if self.views else {})}

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "DirectWrite":
        return cls(str(options["root"]), str(options.get("views") or ""))

    def _view(self, table_id: TableId, schema: Any, cache: dict) -> Any:
        """The table's view (``cdc/transform/table_views.py``) for this version of it, or None: written as logged."""
        if not self.views:
            return None
        import json as _json

        from ....cdc.transform.table_views import Rules, view_of

        spec = _json.loads(self.views)
        entry = spec["tables"].get(table_id.text)
        if entry is None:
            return None
        key = (table_id, columns_signature(schema))
        if key not in cache:
            rules = Rules.from_values(spec["rules"].get("route"), spec["rules"].get("transform"))
            cache[key] = view_of(schema, rules, TableId.parse(entry[0]), bool(entry[1]))
        return cache[key]

    def arrow_schema(self) -> pa.Schema:
        return PART_ARROW_SCHEMA

    def write_range(self, items: Iterable[TableRows | DdlMark], batch_id: int, part: int) -> pa.RecordBatch:
        """Encode and write one binlog range's rows, one part file per table and segment between
        DDLs; returns the part records and one record per DDL, as one batch of ``PART_ARROW_SCHEMA``."""
        from pyspark import TaskContext

        from ..files.arrow import FsSpec

        ctx = TaskContext.get()
        attempt = ctx.attemptNumber() if ctx is not None else 0
        fs, prefix = FsSpec("uri", self.root).open()
        tag = uuid.uuid4().hex[:12]
        encoders: dict[tuple, ChangeLines] = {}
        views: dict[tuple, Any] = {}
        parts: dict[tuple, _TablePart] = {}
        where: dict[tuple, str] = {}
        segments = Segments()
        records: list[dict[str, Any]] = []
        try:
            for item in items:
                if isinstance(item, DdlMark):
                    segments.add(item)
                    records += [
                        {
                            "database": t.database,
                            "table": t.table,
                            "path": "",
                            "size": 0,
                            "lines": 0,
                            "changes": 0,
                            "first_seq": item.seq,
                            "last_seq": item.seq,
                            "columns": "",
                            "ddl": item.to_json(),
                            "first_at": f"{item.offset['file']}:{item.offset['position']}",
                        }
                        for t in item.tables
                    ]
                    continue
                t, slot = item.table_id, item.slot
                columns = columns_signature(slot.schema)
                enc_key = (t, slot.column, columns)
                view = self._view(t, slot.schema, views)
                target = view.sink_id if view is not None else t  # where its lines go: its sink table
                if enc_key not in encoders:
                    shape = view.sink_schema if view is not None else slot.schema
                    sid = register(fs, prefix, self.root, target, shape.columns)
                    encoders[enc_key] = ChangeLines(target.database, target.table, slot.column, shape.column_names, sid)
                rows = item.rows if view is None else view.layout_rows(item.rows, slot.column)
                seq = rows.column("seq").to_numpy(zero_copy_only=False).astype(np.int64) * 2
                for seg, at in segments.split(t, seq):
                    piece = rows if len(at) == rows.num_rows else rows.take(pa.array(at))
                    lines, line_seq = encoders[enc_key].lines(piece, batch_id, newline=True)
                    key = (t, seg, columns)
                    if key not in parts:
                        path = (
                            f"{batch_tmp_dir(target, batch_id)}/part-{part:04d}-{len(parts):03d}-{tag}"
                            f"-a{attempt}{SUFFIX}"
                        )
                        parts[key] = _TablePart(fs, prefix, path)
                        where[key] = first_at(piece)
                    parts[key].add(lines, line_seq, piece.num_rows)
        except BaseException:
            for p in parts.values():
                p.abort()
            raise
        for key, p in parts.items():
            t, _seg, columns = key
            rec = p.close()
            if rec is not None:
                records.append(
                    {
                        "database": t.database,
                        "table": t.table,
                        **rec,
                        "columns": columns,
                        "ddl": "",
                        "first_at": where[key],
                    }
                )
        return pa.RecordBatch.from_pylist(records, schema=PART_ARROW_SCHEMA)


class _TablePart:
    """One table's part file of a range, written as batches arrive, sorted only if they do not
    arrive in ``_seq`` order (rows python-mysql-replication read for a table whose events the
    fast decoder refused come after the range's other rows)."""

    def __init__(self, fs: Any, prefix: str, path: str) -> None:
        self.fs, self.prefix, self.path = fs, prefix, path
        self.out: Any = None
        self.seqs: list[np.ndarray] = []  # of the lines in the file, in file order
        self.held: list[tuple[pa.Array, np.ndarray]] = []  # lines that arrived out of order
        self.changes = 0

    def add(self, lines: pa.Array, seq: np.ndarray, changes: int) -> None:
        """``lines`` end with a newline each (``ChangeLines.lines(..., newline=True)``)."""
        if not len(seq):
            return
        self.changes += changes
        ordered = (
            not self.held
            and bool((seq[1:] > seq[:-1]).all())
            and (not self.seqs or int(seq[0]) > int(self.seqs[-1][-1]))
        )
        if not ordered:
            self.held.append((lines, seq))
            return
        if self.out is None:
            self.fs.create_dir(self.prefix + self.path.rsplit("/", 1)[0], recursive=True)
            self.out = self.fs.open_output_stream(self.prefix + self.path)
        self.out.write(text_buffer(lines))
        self.seqs.append(seq)

    def close(self) -> dict[str, Any] | None:
        if self.out is not None:
            self.out.close()
            self.out = None
        if self.held:
            self._rewrite_sorted()
        if not self.seqs:
            return None
        seq = np.concatenate(self.seqs)
        size = self.fs.get_file_info(self.prefix + self.path).size
        return {
            "path": self.path,
            "size": int(size),
            "lines": len(seq),
            "changes": self.changes,
            "first_seq": int(seq[0]),
            "last_seq": int(seq[-1]),
        }

    def abort(self) -> None:
        if self.out is not None:
            self.out.close()
            self.out = None

    def _rewrite_sorted(self) -> None:
        """Rare: merge the held lines with the file's, in ``_seq`` order, into the same file."""
        lines: list[str] = []
        if self.seqs:
            with self.fs.open_input_stream(self.prefix + self.path) as f:
                lines = f.read().decode("utf-8").split("\n")[:-1]
        for held, _ in self.held:
            lines += [v[:-1] for v in held.to_pylist()]  # without their newlines, as the file's
        seq = np.concatenate(self.seqs + [s for _, s in self.held])
        order = np.argsort(seq, kind="stable")
        if len(np.unique(seq)) != len(seq):
            raise AssertionError(f"{self.path}: two changelog lines with the same _seq")
        self.fs.create_dir(self.prefix + self.path.rsplit("/", 1)[0], recursive=True)
        with self.fs.open_output_stream(self.prefix + self.path) as out:
            out.write(joined_bytes(pa.array([lines[i] for i in order], pa.string())))
        self.seqs, self.held = [seq[order]], []
