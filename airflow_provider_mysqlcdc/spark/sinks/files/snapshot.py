"""A snapshot batch's rows written once, straight into the sink table's files, then corrected.

The consistent reader must finish every SELECT before it reads the high watermark. Staging the
rows (Parquet, then read back and written again into the sink) costs a second write and a
read of every row. Instead the SELECTs' action is the sink's own file write: the JDBC
partitions (one per chunk) are coalesced into a few tasks that each write one data file of
the table, uncommitted, counting rows per chunk on the way (``FileWriteSpec.count_by``).

After HW, the binlog window's corrections (usually a handful of keys, none on a quiet table)
are applied to the files rather than to all rows: a file that holds none of the changed keys
is committed as it is; one that holds some is rewritten without them (a Spark task per file,
reading its key columns first); the changed keys' rows at HW go into one more small file.
Then one Delta commit adds the files (and removes the batch's earlier ones), so a rerun
still replaces the batch's range atomically. The superseded files were never committed and
are deleted.
"""

from __future__ import annotations

import json
import logging
import math
import uuid
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ....cdc.model import TableSchema
from ....cdc.snapshot.corrections import TableCorrections
from .arrow import FileRecord, FileWriteSpec, StatsCollector, write_files

log = logging.getLogger(__name__)

CHUNK_COLUMN = "__mysqlcdc_chunk"
# Rows per data file of a snapshot batch (a file is written by one task, chunk after chunk).
FILE_ROWS = 1_000_000


def file_count(estimated_rows: int, chunks: int, parallelism: int = 2) -> int:
    """How many files (and write tasks) a batch's chunks are coalesced into: about ``FILE_ROWS``
    rows each, at least ``parallelism`` so every core reads, at most one per chunk."""
    return max(1, min(chunks, max(parallelism, math.ceil(max(0, estimated_rows) / FILE_ROWS))))


def write_chunks(frame: DataFrame, spec: FileWriteSpec, files: int) -> tuple[list[FileRecord], dict[int, int]]:
    """Write ``frame`` (one partition per chunk) as ``files`` files; records and rows per chunk."""
    tagged = frame.withColumn(CHUNK_COLUMN, F.spark_partition_id())  # evaluated before the coalesce
    records = write_files(tagged.coalesce(files), spec)
    per_chunk: dict[int, int] = {}
    for r in records:
        for k, n in json.loads(r.counts or "{}").items():
            per_chunk[int(k)] = per_chunk.get(int(k), 0) + int(n)
    return records, per_chunk


def correct_files(
    spark: SparkSession,
    spec: FileWriteSpec,
    schema: TableSchema,
    records: Sequence[FileRecord],
    corrections: TableCorrections | None,
) -> tuple[list[FileRecord], list[str]]:
    """The records to commit once ``corrections`` are applied, and the written files they
    supersede (to delete)."""
    if not corrections:
        return list(records), []
    ident = list(schema.row_identity)
    key_schema = pa.schema([spec.schema.field(c) for c in ident])
    changed = pa.Table.from_pylist([dict(zip(ident, k)) for k in corrections.drop_keys], schema=key_schema)
    candidates = [r for r in records if _may_hold(r, ident, changed)]
    kept = [r for r in records if r not in candidates]
    rewritten: list[FileRecord] = []
    superseded: list[str] = []
    if candidates:
        tag = uuid.uuid4().hex[:8]
        paths = spark.createDataFrame([(r.path,) for r in candidates], "path string").repartition(
            min(len(candidates), 8)
        )
        got = paths.mapInArrow(
            _rewriter(spec, ident, changed, tag), "old string, path string, size long, num_rows long, stats string"
        ).collect()
        by_old = {g["old"]: g for g in got}
        for r in candidates:
            g = by_old[r.path]
            if g["path"] == r.path:
                kept.append(r)
            else:
                superseded.append(r.path)
                if g["path"]:
                    rewritten.append(FileRecord(g["path"], g["size"], g["num_rows"], g["stats"]))
    upserts = _write_upserts(spec, corrections)
    log.info(
        "%s: %d changed key(s) in the window: %d of %d file(s) rewritten without them, %d row(s) at HW added",
        schema.table_id,
        changed.num_rows,
        len(superseded),
        len(records),
        len(corrections.upserts),
    )
    return kept + rewritten + ([upserts] if upserts else []), superseded


def _may_hold(record: FileRecord, ident: Sequence[str], changed: pa.Table) -> bool:
    """False only when the file's min/max stats of a single integer key rule every changed key out."""
    if len(ident) != 1 or not pa.types.is_integer(changed.schema.field(0).type) or not record.stats:
        return True
    stats = json.loads(record.stats)
    lo, hi = stats.get("minValues", {}).get(ident[0]), stats.get("maxValues", {}).get(ident[0])
    if lo is None or hi is None:
        return True
    keys = changed.column(0).to_pylist()
    return any(k is not None and lo <= k <= hi for k in keys)


def _rewriter(spec: FileWriteSpec, ident: Sequence[str], changed: pa.Table, tag: str):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fs, prefix = spec.fs.open()
        out = []
        for b in batches:
            for old in b.column("path").to_pylist():
                out.append(_rewrite_one(fs, prefix, spec, old, ident, changed, tag))
        if out:
            yield pa.RecordBatch.from_pylist(
                out,
                schema=pa.schema(
                    [
                        ("old", pa.string()),
                        ("path", pa.string()),
                        ("size", pa.int64()),
                        ("num_rows", pa.int64()),
                        ("stats", pa.string()),
                    ]
                ),
            )

    return run


def _rewrite_one(
    fs: Any, prefix: str, spec: FileWriteSpec, old: str, ident: Sequence[str], changed: pa.Table, tag: str
) -> Mapping[str, Any]:
    keys = pq.read_table(prefix + old, columns=list(ident), filesystem=fs)
    keys = keys.cast(changed.schema)
    if keys.join(changed, keys=list(ident), join_type="left semi").num_rows == 0:
        return {"old": old, "path": old, "size": None, "num_rows": None, "stats": None}
    table = pq.read_table(prefix + old, filesystem=fs).cast(spec.schema)
    # in the spec's schema again: the join's output has every column nullable (Iceberg's key is not)
    left = table.join(changed, keys=list(ident), join_type="left anti").select(spec.schema.names).cast(spec.schema)
    if left.num_rows == 0:
        return {"old": old, "path": None, "size": None, "num_rows": None, "stats": None}
    directory, name = old.rsplit("/", 1)
    new = f"{directory}/rw-{tag}-{name}"
    stats = StatsCollector(spec.schema)
    for b in left.to_batches():
        stats.add(b)
    with fs.open_output_stream(prefix + new) as f:
        pq.write_table(left, f, compression="snappy", row_group_size=spec.row_group_rows)
    return {
        "old": old,
        "path": new,
        "size": int(fs.get_file_info(prefix + new).size),
        "num_rows": left.num_rows,
        "stats": stats.to_json(),
    }


def _write_upserts(spec: FileWriteSpec, corrections: TableCorrections) -> FileRecord | None:
    """The changed keys' rows at HW, one file written here (they are few: the window's changes)."""
    if not corrections.upserts:
        return None
    rows = pa.Table.from_pylist([dict(r) for r in corrections.upserts.values()], schema=spec.schema)
    fs, prefix = spec.fs.open()
    rel = f"{spec.directory.rstrip('/')}/{spec.name_prefix}-hw-{uuid.uuid4().hex[:8]}{spec.suffix}"
    fs.create_dir(prefix + spec.directory.rstrip("/"), recursive=True)
    stats = StatsCollector(spec.schema)
    for b in rows.to_batches():
        stats.add(b)
    with fs.open_output_stream(prefix + rel) as f:
        pq.write_table(rows, f, compression="snappy")
    return FileRecord(rel, int(fs.get_file_info(prefix + rel).size), rows.num_rows, stats.to_json())


def delete_files(spec: FileWriteSpec, paths: Sequence[str]) -> None:
    fs, prefix = spec.fs.open()
    for p in paths:
        try:
            fs.delete_file(prefix + p)
        except OSError as e:  # left for the table's vacuum: never committed, never read
            log.warning("could not delete the superseded file %s: %s", p, e)
