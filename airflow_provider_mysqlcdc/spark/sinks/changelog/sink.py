"""Append-only changelog sink: every change as a line (changelog-json) or a Parquet row.

Layout under ``<root>/<database>/<table>/`` (a local path or a pyarrow-supported URI)::

    snapshot/<batch>/part-<run>-<partition>-a<attempt>.jsonl   the batch's rows as +I
    stream/batch-000000123.jsonl                                one file per micro-batch
    _schemas/<schema_id>.json                                   each column layout a line has

JSON lines follow Flink's changelog-json (``data`` and ``op`` as Flink has them) plus a
``meta`` object::

    {"data":{"id":1,"amount":"9.99"},"op":"+I","meta":{"database":"shop","table":"orders",
     "binlog_file":"mariadb-bin.000003","binlog_pos":1234,"binlog_row":0,"gtid":"0-1-42",
     "event_time":"2024-01-01T00:00:00.000000Z","seq":17,"batch":123,"schema_id":"3f9c0a51d2e7"}}

``schema_id`` names the layout (column names, declared types, nullability) the row was
written with; its document is ``_schemas/<schema_id>.json`` (``schemas.py``), so a
reader decodes any line on its own, also across DDL.

Value encoding is stable (same input, same bytes) and lossless: DECIMAL as a plain string
with its scale ("1.50"), binary as base64, TIMESTAMP as ISO-8601 UTC with microseconds and
"Z", DATETIME the same without a zone, DATE as "YYYY-MM-DD", TIME as signed microseconds
(the mapping's int), integers as JSON numbers (BIGINT UNSIGNED is a decimal, so a string),
floats as the exact double in Java's notation (1.0E10), NaN and infinities as strings.
Snapshot lines (and stream lines handed over as rows, ``write_changes``) are built by
Spark's JSON writer in the JVM (``json_line_column``). The stream's lines are built in Python
by the binlog source's tasks, from the decoded Arrow rows, and written by them
(``json_text.py``, ``changelog/direct.py``; ``publish_steps`` commits them): same bytes, except
that a float's digits are the shortest that give back the double where Java 17 sometimes
prints more (4.9E-324 here is 5.0E-324). ``json_values`` is the encoding as Python values
(console sink).

Parquet files hold the table columns plus the ``_op`` and offset columns of base.py.

Idempotency: a micro-batch is written to a temporary name and renamed onto its final name,
which depends only on the batch id, so a replayed batch rewrites the same file with the
same content (rows sorted by ``_seq``): no duplicate lines. Each binlog range of the
micro-batch is written by its own task; the parts are joined in ``_seq`` order. A snapshot
batch is written into a temporary directory that then replaces the batch's directory (two
renames: a reader may briefly see the batch missing, never twice; a crash in between is
repaired by rerunning the batch).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Mapping, Sequence, cast

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ....cdc.chunks import KeyRange
from ....cdc.model import TableId, TableSchema
from ..base import (
    META_COLUMNS,
    META_DATABASE,
    META_OP,
    META_SEQ,
    META_TABLE,
    Sink,
    SnapshotWrite,
)
from ..files.arrow import (
    FileRecord,
    FileWriteSpec,
    FsSpec,
    check_files,
    local_or_uri,
    location_uri,
    new_run_tag,
    remove_tree,
    safe_name,
    spark_col,
    table_arrow_schema,
    write_files,
)
from ..json_text import joined_bytes
from .direct import DirectWrite, batch_tmp_dir, table_dir
from .lines import (
    LINES_SCHEMA,
    META_JSON_KEYS,
    STREAM_LINES_SCHEMA,
    JsonLines,
    change_arrow_schema,
    joined_lines,
    json_line_column,
    schema_change_line,
)
from .schemas import forget_registered, register

log = logging.getLogger(__name__)


class ChangelogSink(Sink):
    """Append-only changelog files per table; see the module docstring for layout and encoding."""

    name = "changelog"

    def __init__(
        self,
        root: str,
        format: str = "json",  # noqa: A002 - the option's name
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        if format not in ("json", "parquet"):
            raise ValueError(f"changelog format must be 'json' or 'parquet', not {format!r}")
        self.root = local_or_uri(root).rstrip("/")
        self.format = format
        # Credentials for object storage ride along to the snapshot's writers (a Spark Connect
        # server's workers do not have the task's environment); see cdc/store/object_store.py.
        self.fs_spec = FsSpec("uri", self.root, dict(storage_options) if storage_options else None)
        self._lines: dict[tuple[Any, ...], JsonLines] = {}  # stream line expressions, per table and columns

    @property
    def suffix(self) -> str:
        return ".jsonl" if self.format == "json" else ".parquet"

    def forget_tables(self, table_ids: Sequence[TableId]) -> list[str]:
        """Each table's directory: its snapshot parts and every micro-batch file."""
        for t in table_ids:
            forget_registered(self.root, t)
        return [self.table_dir(t) for t in table_ids if remove_tree(self.table_dir(t))]

    def table_dir(self, table_id: TableId) -> str:
        """Relative to the root."""
        return table_dir(table_id)

    def asset_uri(self, table_id: TableId) -> str:
        return location_uri(f"{self.root}/{self.table_dir(table_id)}")

    def snapshot_dir(self, table_id: TableId, batch_id: str) -> str:
        return f"{self.table_dir(table_id)}/snapshot/{safe_name(batch_id)}"

    def stream_file(self, table_id: TableId, batch_id: int) -> str:
        return f"{self.table_dir(table_id)}/stream/batch-{int(batch_id):09d}{self.suffix}"

    def prepare(self, schemas: Sequence[TableSchema]) -> None:
        """Directories per table; also checks every column maps (fails before any write)."""
        fs, prefix = self.fs_spec.open()
        for s in schemas:
            table_arrow_schema(s)
            for sub in ("snapshot", "stream"):
                fs.create_dir(f"{prefix}{self.table_dir(s.table_id)}/{sub}", recursive=True)

    # --- writing files ------------------------------------------------------------------------

    def _spec(self, directory: str, file_schema: pa.Schema) -> FileWriteSpec:
        if self.format == "json":
            return FileWriteSpec(
                self.fs_spec,
                directory,
                f"part-{new_run_tag()}",
                LINES_SCHEMA,
                fmt="text",
                suffix=self.suffix,
                encoder=joined_lines,
            )
        return FileWriteSpec(
            self.fs_spec, directory, f"part-{new_run_tag()}", file_schema, fmt="parquet", suffix=self.suffix
        )

    def write_snapshot(
        self, schema: TableSchema, frame: DataFrame, ranges: Sequence[KeyRange], batch_id: str
    ) -> SnapshotWrite:
        t = schema.table_id
        final = self.snapshot_dir(t, batch_id)
        tmp = f"{self.table_dir(t)}/snapshot/.tmp-{safe_name(batch_id)}-{new_run_tag()}"
        if self.format == "parquet":
            frame = frame.select(
                *[spark_col(c) for c in schema.column_names],
                F.lit("+I").alias(META_OP),
                F.lit(t.database).alias(META_DATABASE),
                F.lit(t.table).alias(META_TABLE),
            )
            file_schema = change_arrow_schema(schema, (META_OP, META_DATABASE, META_TABLE))
        else:
            fs, prefix = self.fs_spec.open()
            sid = register(fs, prefix, self.root, t, schema.columns)
            meta = [
                ("database", F.lit(t.database)),
                ("table", F.lit(t.table)),
                ("snapshot_batch", F.lit(str(batch_id))),
                ("schema_id", F.lit(sid)),
            ]
            frame = frame.select(json_line_column(frame, schema.column_names, F.lit("+I"), meta).alias("line"))
            file_schema = LINES_SCHEMA
        records = write_files(frame, self._spec(tmp, file_schema))
        check_files(self.fs_spec, records)
        self._replace_dir(tmp, final)
        rows = sum(r.num_rows for r in records)
        log.info("changelog %s snapshot batch %s: %d rows in %d files", t, batch_id, rows, len(records))
        return SnapshotWrite(rows, {"directory": final, "files": len(records)})

    def _replace_dir(self, tmp: str, final: str) -> None:
        """Move ``tmp`` onto ``final``; an earlier ``final`` is moved aside first, then deleted.
        An object store has no directories to rename: there the earlier files are deleted and
        the new ones moved one by one (a reader may see the batch partly there meanwhile, as
        it may see it missing between the two renames; the result file comes after either)."""
        fs, prefix = self.fs_spec.open()
        if fs.type_name != "local":
            if fs.get_file_info(prefix + final).type != pafs.FileType.NotFound:
                fs.delete_dir(prefix + final)
            files = [
                i.path
                for i in fs.get_file_info(pafs.FileSelector(prefix + tmp, recursive=True, allow_not_found=True))
                if i.type == pafs.FileType.File
            ]
            for path in files:
                fs.move(path, prefix + final + path[len(prefix + tmp) :])
            if fs.get_file_info(prefix + tmp).type != pafs.FileType.NotFound:
                fs.delete_dir(prefix + tmp)
            return
        fs.create_dir(prefix + tmp, recursive=True)  # an empty batch still gets its (empty) directory
        old = None
        if fs.get_file_info(prefix + final).type != pafs.FileType.NotFound:
            old = f"{final.rsplit('/', 1)[0]}/.old-{final.rsplit('/', 1)[1]}-{new_run_tag()}"
            fs.move(prefix + final, prefix + old)
        fs.move(prefix + tmp, prefix + final)
        if old is not None:
            fs.delete_dir(prefix + old)

    def write_changes(self, schema: TableSchema, changes: DataFrame, batch_id: int) -> None:
        t = schema.table_id
        tmp_dir = f"{self.table_dir(t)}/stream/.tmp-{int(batch_id):09d}-{new_run_tag()}"
        if self.format == "json":
            rows = self._write_json_changes(schema, changes, batch_id, tmp_dir)
        else:
            rows = self._write_parquet_changes(schema, changes, batch_id, tmp_dir)
        fs, prefix = self.fs_spec.open()
        if fs.get_file_info(prefix + tmp_dir).type != pafs.FileType.NotFound:
            fs.delete_dir(prefix + tmp_dir)
        log.info("changelog %s micro-batch %d: %d rows", t, batch_id, rows)

    def _write_json_changes(self, schema: TableSchema, changes: DataFrame, batch_id: int, tmp_dir: str) -> int:
        """Lines are built in the JVM where the rows are, and every partition (a binlog range
        of the micro-batch) is written by its own task, in ``_seq`` order; the parts are then
        joined in ``_seq`` order into the batch's file. Parts whose ``_seq`` spans overlap
        (input not partitioned by binlog range) are written again as one sorted partition."""
        types = {f.name: f.dataType for f in changes.schema}
        key = (schema.table_id, tuple(types.items()))
        lines = self._lines.get(key)
        if lines is None:
            meta = [(k, col) for col, k in META_JSON_KEYS.items() if col in types]
            lines = self._lines[key] = JsonLines(types, schema.column_names, META_OP, meta)
        fs, prefix = self.fs_spec.open()
        sid = register(fs, prefix, self.root, schema.table_id, schema.columns)
        line = lines.column([("batch", F.lit(int(batch_id))), ("schema_id", F.lit(sid))])
        selected = changes.select(line.alias("line"), spark_col(META_SEQ))

        def write(frame: DataFrame) -> list[tuple[int, int, FileRecord]]:
            spec = FileWriteSpec(
                self.fs_spec,
                tmp_dir,
                f"part-{new_run_tag()}",
                STREAM_LINES_SCHEMA,
                fmt="text",
                suffix=self.suffix,
                encoder=joined_lines,
                order_by=META_SEQ,
            )
            records = write_files(frame, spec)
            check_files(self.fs_spec, records)
            spans = [(json.loads(cast(str, r.stats)), r) for r in records]  # order_by: stats are the _seq span
            return sorted(((span["first"], span["last"], r) for span, r in spans), key=lambda x: x[0])

        parts = write(selected)
        if any(a[1] >= b[0] for a, b in zip(parts, parts[1:])):
            log.info(
                "changelog %s micro-batch %d: the partitions' _seq spans overlap; written again as one",
                schema.table_id,
                batch_id,
            )
            parts = write(selected.repartition(1))
        if parts:
            self._publish([r.path for _, _, r in parts], self.stream_file(schema.table_id, batch_id), tmp_dir)
        return sum(r.num_rows for _, _, r in parts)

    def _publish(self, parts: Sequence[str], final: str, tmp_dir: str) -> None:
        """Join ``parts`` (in order) into ``final`` by a rename: a reader sees the whole file or none.

        On a local filesystem the first part grows into the joined file, the kernel copying the
        others onto its end (``copy_file_range``): joining two ranges' 73 MB parts in Python
        took 0.4-0.5 s of the driver between the tasks and the commit. The parts live in the
        batch's ``.tmp`` directory, which a replay never reads again (its tasks write new parts).
        """
        fs, prefix = self.fs_spec.open()
        source = parts[0]
        if len(parts) > 1 and isinstance(fs, pafs.LocalFileSystem):
            append_files(prefix + parts[0], [prefix + p for p in parts[1:]])
        elif len(parts) > 1:
            source = f"{tmp_dir}/joined{self.suffix}"
            with fs.open_output_stream(prefix + source) as out:
                for p in parts:
                    with fs.open_input_stream(prefix + p) as f:
                        while chunk := f.read(8 << 20):
                            out.write(chunk)
        fs.move(prefix + source, prefix + final)

    def direct_write(self) -> DirectWrite | None:
        """JSON lines are written by the binlog source's tasks (``changelog/direct.py``); Parquet is not."""
        return DirectWrite(self.root) if self.format == "json" else None

    # --- re-snapshots ---------------------------------------------------------------------------

    def keys_in_sink(self, schema: TableSchema, key_range: KeyRange | None = None) -> None:
        """A log holds no table: its ``RS`` line tells a reader to replace the ranges."""
        return None

    def resnapshot_record(
        self,
        schema: TableSchema,
        image: Any,
        rows: Any,
        gone: Any,
        key_range: KeyRange,
        info: Mapping[str, Any],
        batch_id: int,
        seq: int,
    ) -> dict[str, Any]:
        """A part of the micro-batch's file: the ``RS`` line and the rows as read records."""
        from ..resnapshot_rows import record_base, resnapshot_lines

        t = schema.table_id
        fs, prefix = self.fs_spec.open()
        sid = register(fs, prefix, self.root, t, schema.columns)
        lines = resnapshot_lines(t, rows, key_range, info, batch_id, sid)
        path = f"{batch_tmp_dir(t, batch_id)}/resnapshot-{safe_name(info['handoff'])}{self.suffix}"
        data = joined_bytes(pa.array(lines, pa.string()))
        fs.create_dir(prefix + path.rsplit("/", 1)[0], recursive=True)
        with fs.open_output_stream(prefix + path) as out:
            out.write(data)
        return {
            **record_base(t, schema, seq, f"re-snapshot {info['handoff']}"),
            "path": path,
            "size": len(data),
            "lines": len(lines),
            "changes": 0,
        }

    # --- schema changes -------------------------------------------------------------------------

    def schema_capabilities(self) -> frozenset[str]:
        """A log takes every change: it writes a schema change line and later lines carry rows
        in their new shape."""
        from ....cdc.schema.behavior import ACTION_KINDS

        return frozenset(ACTION_KINDS)

    def publish_steps(self, table_id: TableId, steps: Sequence[Any], batch_id: int) -> int:
        """The table's batch file: each row step's parts and a schema change line per DDL, in
        binlog order, joined into one file by one rename (a replay writes the same file)."""
        from ....cdc.schema.steps import RowsStep

        fs, prefix = self.fs_spec.open()
        tmp_dir = batch_tmp_dir(table_id, batch_id)
        files: list[str] = []
        changes = 0
        for k, step in enumerate(steps):
            if isinstance(step, RowsStep):
                parts = sorted(step.records, key=lambda r: r["first_seq"])
                # the parts of one source table never overlap (a table merged from several by a route
                # has parts of each, which may: each keeps its own order)
                by_source: dict[tuple, list] = {}
                for r in parts:
                    by_source.setdefault((r.get("database"), r.get("table")), []).append(r)
                if any(a["last_seq"] >= b["first_seq"] for ps in by_source.values() for a, b in zip(ps, ps[1:])):
                    raise RuntimeError(
                        f"changelog {table_id} micro-batch {batch_id}: the binlog ranges' parts overlap in _seq "
                        f"({[(r['first_seq'], r['last_seq']) for r in parts]}); nothing was published"
                    )
                check_files(self.fs_spec, [FileRecord(r["path"], r["size"], r["lines"]) for r in parts])
                files += [r["path"] for r in parts]
                changes += step.changes
                continue
            path = f"{tmp_dir}/schema-change-{k:04d}{self.suffix}"
            fs.create_dir(prefix + tmp_dir, recursive=True)
            with fs.open_output_stream(prefix + path) as out:
                out.write((schema_change_line(table_id, step, batch_id) + "\n").encode("utf-8"))
            files.append(path)
        if files:
            self._publish(files, self.stream_file(table_id, batch_id), tmp_dir)
        fs.delete_dir(prefix + tmp_dir)
        parts = [r for s in steps if isinstance(s, RowsStep) for r in s.records]
        ddl = sum(1 for s in steps if not isinstance(s, RowsStep))
        log.info(
            "changelog %s micro-batch %d: %d changes, %d lines from %d binlog ranges%s",
            table_id,
            batch_id,
            changes,
            sum(int(r["lines"]) for r in parts),
            len(parts),
            f", {ddl} schema change(s)" if ddl else "",
        )
        return changes

    def _write_parquet_changes(self, schema: TableSchema, changes: DataFrame, batch_id: int, tmp_dir: str) -> int:
        present = [m for m in META_COLUMNS if m in changes.columns]
        selected = changes.select(*[spark_col(c) for c in schema.column_names], *present)
        # one input partition (one binlog range): no shuffle, just the sort (rows the library
        # read for refused events come after the range's other rows)
        single = selected.rdd.getNumPartitions() <= 1
        ordered = (selected.coalesce(1) if single else selected.repartition(1)).sortWithinPartitions(META_SEQ)
        records = write_files(ordered, self._spec(tmp_dir, change_arrow_schema(schema, present)))
        check_files(self.fs_spec, records)
        if records:
            (rec,) = records  # one partition -> at most one file
            fs, prefix = self.fs_spec.open()
            fs.move(prefix + rec.path, prefix + self.stream_file(schema.table_id, batch_id))
        return sum(r.num_rows for r in records)


def append_files(target: str, sources: Sequence[str]) -> None:
    """Append local files to ``target`` in the kernel (``copy_file_range``; a plain copy where
    the filesystem or kernel refuses it)."""
    fd_out = os.open(target, os.O_WRONLY)
    try:
        at = os.fstat(fd_out).st_size
        for path in sources:
            with open(path, "rb") as src:
                size = os.fstat(src.fileno()).st_size
                done = 0
                try:
                    while done < size:
                        n = os.copy_file_range(src.fileno(), fd_out, size - done, done, at + done)
                        if n == 0:
                            break
                        done += n
                except OSError:
                    pass  # EXDEV, ENOSYS, EINVAL ...: finish below
                if done < size:
                    src.seek(done)
                    os.lseek(fd_out, at + done, os.SEEK_SET)
                    while chunk := src.read(8 << 20):
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(fd_out, view) :]
                at += size
        if os.fstat(fd_out).st_size != at:
            raise OSError(f"joining into {target}: expected {at} bytes, found {os.fstat(fd_out).st_size}")
    finally:
        os.close(fd_out)


__all__ = ["ChangelogSink", "FileRecord"]
