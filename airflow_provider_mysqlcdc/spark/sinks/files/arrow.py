"""Executors write a DataFrame's rows as files; the driver gets back only small file records.

Shared by the Delta and changelog sinks. ``write_files`` runs one ``mapInArrow`` job: each
task streams its partition's Arrow batches into ONE file (Parquet with large row groups,
or JSON lines) named with a per-run tag and the partition id, and returns one record
(path, size, rows, stats). Nothing but those records reaches the driver, so a table of any
size can be written.

Why per-run tags in names: a failed or speculative task attempt may leave a partial file;
only the attempt Spark accepts is reported, and the next run never reuses a name (Delta
cannot add and remove the same path in one transaction).

Why ``check_files``: a commit that references a file that is not there (or is truncated)
would break every later read, so the driver verifies every reported file first.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from ....cdc.model import TableSchema
from ....cdc.types import arrow_schema, map_table

# Arrow batches from Spark hold 10k rows by default (spark.sql.execution.arrow.maxRecordsPerBatch):
# buffered into row groups of this many rows so readers do not pay per tiny row group.
DEFAULT_ROW_GROUP_ROWS = 128 * 1024

RECORD_SCHEMA = StructType(
    [
        StructField("path", StringType(), False),
        StructField("size", LongType(), False),
        StructField("num_rows", LongType(), False),
        StructField("stats", StringType(), True),
        StructField("counts", StringType(), True),
    ]
)

# Longest string whose exact value goes into Delta min/max stats (longer ones would have to be
# truncated, and a wrongly truncated max silently prunes files a query needs).
MAX_STRING_STAT_CHARS = 32


@dataclass(frozen=True)
class FileRecord:
    """One written file; ``path`` is relative to the filesystem base the writer was given."""

    path: str
    size: int
    num_rows: int
    stats: str | None = None
    counts: str | None = None  # JSON {value: rows} of the spec's count_by column (snapshot chunks)


@dataclass(frozen=True)
class FsSpec:
    """How an executor builds its filesystem: picklable, created lazily where it is used.

    ``kind="delta"`` goes through delta-rs' object store (same URIs and ``storage_options``
    as the Delta table itself); ``kind="uri"`` through ``pyarrow.fs.FileSystem.from_uri``.
    The ``base`` is the directory every relative path is resolved against.
    """

    kind: str
    base: str
    options: Mapping[str, str] | None = None

    def open(self) -> tuple[pafs.FileSystem, str]:
        """(filesystem, prefix) such that ``prefix + relative_path`` names a file in it."""
        if self.kind == "delta":
            from deltalake.fs import DeltaStorageHandler

            handler = DeltaStorageHandler(self.base, dict(self.options or {}))
            return pafs.PyFileSystem(handler), ""
        if self.kind == "uri":
            base = self.base if "://" in self.base else os.path.abspath(self.base)
            fs, path = pafs.FileSystem.from_uri(base)
            if self.options and base.startswith(("s3://", "s3a://")):
                fs = _s3_filesystem(self.options)  # this worker's environment may not hold them
            return fs, path.rstrip("/") + "/"
        raise ValueError(f"unknown filesystem kind {self.kind!r}")


def _s3_filesystem(options: Mapping[str, str]) -> pafs.FileSystem:
    """pyarrow's S3 filesystem from delta-rs style options (``AWS_ACCESS_KEY_ID``, ...)."""
    from urllib.parse import urlsplit

    o = {str(k).upper(): v for k, v in options.items()}
    kw: dict[str, Any] = {}
    if o.get("AWS_ACCESS_KEY_ID"):
        kw.update(
            access_key=o["AWS_ACCESS_KEY_ID"],
            secret_key=o.get("AWS_SECRET_ACCESS_KEY"),
            session_token=o.get("AWS_SESSION_TOKEN"),
        )
    if o.get("AWS_REGION") or o.get("AWS_DEFAULT_REGION"):
        kw["region"] = o.get("AWS_REGION") or o.get("AWS_DEFAULT_REGION")
    if o.get("AWS_ENDPOINT_URL"):
        url = urlsplit(o["AWS_ENDPOINT_URL"])
        kw.update(endpoint_override=url.netloc + url.path.rstrip("/"), scheme=url.scheme or "https")
    return pafs.S3FileSystem(**kw)


def remove_tree(uri: str) -> bool:
    """Delete a directory (local path or URI) and everything under it; False if it was not there."""
    base = uri if "://" in uri else os.path.abspath(uri)
    fs, path = pafs.FileSystem.from_uri(base)
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return False
    fs.delete_dir(path)
    return True


def local_or_uri(root: str) -> str:
    """An absolute path for local roots (relative paths would move with the executor's cwd)."""
    return root if "://" in root else os.path.abspath(root)


def location_uri(location: str) -> str:
    """A URI for a sink location: a URL as given, a local path as ``file:///...``."""
    if "://" in location:
        return location.rstrip("/")
    from pathlib import Path

    return Path(location).resolve().as_uri()


def new_run_tag() -> str:
    """A short unique tag for one write; file names carry it so no run reuses another's names."""
    return uuid.uuid4().hex[:12]


def table_arrow_schema(schema: TableSchema) -> pa.Schema:
    """The Arrow schema of a table's rows (same as the Spark schema of the batch frames).

    The Arrow types of the mapping do not depend on the server time zone, so any valid
    zone gives the same schema.
    """
    return arrow_schema(map_table(schema, "UTC"))


def spark_col(name: str):
    """A column by its exact name (quoted, so dots or backticks in names are not parsed)."""
    return F.col("`" + name.replace("`", "``") + "`")


# --- stats --------------------------------------------------------------------------------------


def _stat_eligible(t: pa.DataType) -> bool:
    """Types whose exact min/max we record: integers, dates and (short) strings.

    Decimals, floats and timestamps are left out on purpose: delta-rs' own writer gets
    DECIMAL(20,0) and microsecond timestamps wrong in stats, and a wrong max prunes files.
    """
    return pa.types.is_integer(t) or pa.types.is_date32(t) or pa.types.is_string(t)


def _json_stat(v: Any) -> Any:
    import datetime as dt

    return v.isoformat() if isinstance(v, dt.date) else v


class StatsCollector:
    """numRecords, nullCount for every column, minValues/maxValues for eligible columns."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows = 0
        self.nulls = {f.name: 0 for f in schema}
        self.mins: dict[str, Any] = {}
        self.maxs: dict[str, Any] = {}
        self.unusable: set[str] = set()

    def add(self, batch: pa.RecordBatch) -> None:
        self.rows += batch.num_rows
        for f, col in zip(self.schema, batch.columns):
            self.nulls[f.name] += col.null_count
            if not _stat_eligible(f.type) or f.name in self.unusable or col.null_count == len(col):
                continue
            mm = pc.min_max(col)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if isinstance(lo, str) and (len(lo) > MAX_STRING_STAT_CHARS or len(hi) > MAX_STRING_STAT_CHARS):
                self.unusable.add(f.name)
                self.mins.pop(f.name, None)
                self.maxs.pop(f.name, None)
                continue
            self.mins[f.name] = lo if f.name not in self.mins else min(self.mins[f.name], lo)
            self.maxs[f.name] = hi if f.name not in self.maxs else max(self.maxs[f.name], hi)

    def to_json(self) -> str:
        """Delta's per-file stats JSON (compact, deterministic key order)."""
        return json.dumps(
            {
                "numRecords": self.rows,
                "minValues": {k: _json_stat(v) for k, v in self.mins.items()},
                "maxValues": {k: _json_stat(v) for k, v in self.maxs.items()},
                "nullCount": self.nulls,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )


# --- executor side ------------------------------------------------------------------------------


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The batch in exactly ``schema``: Spark's field metadata dropped, the timestamp zone label
    set (Spark labels instants with the session zone; the values are the same UTC instants)."""
    cols = [batch.column(f.name).cast(f.type) for f in schema]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


# An encoder turns one (conformed) Arrow batch into the bytes to append to a text file.
Encoder = Callable[[pa.RecordBatch], bytes]


@dataclass(frozen=True)
class FileWriteSpec:
    """Everything a task needs to write its partition; shipped to executors by pickling."""

    fs: FsSpec
    directory: str  # relative to fs.base
    name_prefix: str  # e.g. "part-<run tag>"
    schema: pa.Schema  # the file's schema (input batches are conformed to it)
    fmt: str = "parquet"  # "parquet" | "text"
    suffix: str = ".parquet"
    encoder: Encoder | None = None
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS
    with_stats: bool = False
    # Set: the partition's rows are written in this (integer) column's order, sorted here if
    # they do not arrive sorted, and the record's stats are {"first": .., "last": ..} of it.
    order_by: str | None = None
    # Set: an integer column that is not written; the record counts the file's rows per value of
    # it (a snapshot's chunk index, taken before the chunks' partitions were coalesced).
    count_by: str | None = None


def _task_file_name(spec: FileWriteSpec) -> str:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    part = ctx.partitionId() if ctx is not None else 0
    attempt = ctx.attemptNumber() if ctx is not None else 0
    return f"{spec.directory.rstrip('/')}/{spec.name_prefix}-{part:05d}-a{attempt}{spec.suffix}"


def _write_parquet(spec: FileWriteSpec, out, batches: Iterable[pa.RecordBatch], stats: StatsCollector | None) -> int:
    rows = 0
    buffered: list[pa.RecordBatch] = []
    pending = 0
    with pq.ParquetWriter(out, spec.schema, compression="snappy") as writer:
        for b in batches:
            if b.num_rows == 0:
                continue
            buffered.append(b)
            pending += b.num_rows
            rows += b.num_rows
            if stats is not None:
                stats.add(b)
            if pending >= spec.row_group_rows:
                writer.write_table(pa.Table.from_batches(buffered, spec.schema), row_group_size=pending)
                buffered, pending = [], 0
        if buffered:
            writer.write_table(pa.Table.from_batches(buffered, spec.schema), row_group_size=pending)
    return rows


def _write_text(spec: FileWriteSpec, out, batches: Iterable[pa.RecordBatch]) -> int:
    assert spec.encoder is not None
    rows = 0
    for b in batches:
        if b.num_rows:
            out.write(spec.encoder(b))
            rows += b.num_rows
    return rows


def in_order(batches: Iterable[pa.RecordBatch], column: str) -> tuple[list[pa.RecordBatch], int, int]:
    """All the batches ordered by ``column`` (sorted only if they do not arrive in order: a
    stream range mostly does), with the column's first and last value."""
    got = [b for b in batches if b.num_rows]
    if not got:
        return [], 0, 0
    keys = [b.column(column).to_numpy(zero_copy_only=False) for b in got]
    ordered = all(bool((k[1:] >= k[:-1]).all()) for k in keys) and all(
        int(a[-1]) <= int(b[0]) for a, b in zip(keys, keys[1:])
    )
    if not ordered:
        table = pa.Table.from_batches(got).combine_chunks()
        table = table.take(pc.sort_indices(table, [(column, "ascending")]))
        got = table.to_batches(max_chunksize=64 * 1024)
        keys = [b.column(column).to_numpy(zero_copy_only=False) for b in got]
    return got, int(keys[0][0]), int(keys[-1][-1])


def _counted(batches: Iterable[pa.RecordBatch], column: str, counts: dict[int, int]) -> Iterator[pa.RecordBatch]:
    """The batches without ``column``, its values counted into ``counts`` on the way."""
    for b in batches:
        if b.num_rows:
            vc = pc.value_counts(b.column(column))
            for v, n in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()):
                counts[int(v)] = counts.get(int(v), 0) + int(n)
        yield b.drop_columns([column])


def write_partition(spec: FileWriteSpec, batches: Iterator[pa.RecordBatch]) -> FileRecord | None:
    """Write one partition's batches to one file; None (and no file) for an empty partition."""
    counts: dict[int, int] = {}
    if spec.count_by is not None:
        batches = _counted(batches, spec.count_by, counts)
    conformed: Iterator[pa.RecordBatch] = (conform(b, spec.schema) for b in batches)
    order_stats = None
    if spec.order_by is not None:
        got, first_key, last_key = in_order(conformed, spec.order_by)
        if not got:
            return None
        conformed = iter(got)
        order_stats = json.dumps({"first": first_key, "last": last_key})
    first = next((b for b in conformed if b.num_rows), None)
    if first is None:
        return None

    def all_batches():
        yield first
        yield from conformed

    fs, prefix = spec.fs.open()
    rel = _task_file_name(spec)
    fs.create_dir(prefix + rel.rsplit("/", 1)[0], recursive=True)
    stats = StatsCollector(spec.schema) if spec.with_stats else None
    with fs.open_output_stream(prefix + rel) as out:
        if spec.fmt == "parquet":
            rows = _write_parquet(spec, out, all_batches(), stats)
        else:
            rows = _write_text(spec, out, all_batches())
    size = fs.get_file_info(prefix + rel).size
    return FileRecord(
        rel,
        int(size),
        rows,
        stats.to_json() if stats else order_stats,
        json.dumps(counts) if spec.count_by is not None else None,
    )


def _partition_writer(spec: FileWriteSpec):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rec = write_partition(spec, batches)
        if rec is not None:
            yield pa.RecordBatch.from_pylist(
                [rec.__dict__],
                schema=pa.schema(
                    [
                        ("path", pa.string(), False),
                        ("size", pa.int64(), False),
                        ("num_rows", pa.int64(), False),
                        ("stats", pa.string()),
                        ("counts", pa.string()),
                    ]
                ),
            )

    return run


def write_files(frame: DataFrame, spec: FileWriteSpec) -> list[FileRecord]:
    """Run the write job; return the accepted task attempts' file records (small)."""
    got = frame.mapInArrow(_partition_writer(spec), RECORD_SCHEMA).collect()
    return sorted(
        (FileRecord(r["path"], r["size"], r["num_rows"], r["stats"], r["counts"]) for r in got), key=lambda r: r.path
    )


# --- driver side --------------------------------------------------------------------------------


class MissingFilesError(RuntimeError):
    """Files a job reported are absent or have another size: committing them would break reads."""


def check_files(fs_spec: FsSpec, records: Sequence[FileRecord]) -> None:
    """Every reported file exists with the reported size, or MissingFilesError naming them."""
    if not records:
        return
    fs, prefix = fs_spec.open()
    infos = fs.get_file_info([prefix + r.path for r in records])
    bad = []
    for r, info in zip(records, infos):
        if info.type != pafs.FileType.File:
            bad.append(f"{r.path} (missing)")
        elif info.size != r.size:
            bad.append(f"{r.path} (size {info.size}, expected {r.size})")
    if bad:
        raise MissingFilesError(
            f"{len(bad)} of {len(records)} written files under {fs_spec.base} are not as the job "
            f"reported, nothing was committed: {', '.join(bad[:5])}. Fix: rerun the batch."
        )


def safe_name(batch_id: str) -> str:
    """A path segment for a batch id: readable, URI-safe, and unique per id.

    Batch ids look like ``db.t#0-3``; '#', spaces and other characters would need
    percent-encoding in Delta paths and URIs, so they become '_' and a short hash of the
    original keeps two ids that differ only there apart.
    """
    import hashlib
    import re

    text = str(batch_id)
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:80]
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]
    return f"{readable}-{digest}"
