"""A batch's SELECTs read into Arrow and written as the sink's data files by Spark's tasks.

One Spark job per table of a batch: ``spark.range(n, numPartitions=n).mapInArrow(...)``, task
``i`` runs its run of chunk groups' SELECTs one after another through the Arrow reader
(``arrow_read.py``), writes the rows into ONE Parquet file of the table (uncommitted, under
the batch's prefix, as ``sinks/files/snapshot.py`` describes) and returns one record: path,
size, rows, Delta stats from the file's footer, rows per group. Rows never enter the JVM; the
driver collects only the records, so the action that runs the SELECTs (and must end before the
high watermark is read) is this ``collect()``.

Why ``mapInArrow`` and not a Python data source: a data source costs three more Python
processes per Spark Connect session (its lookup, creation and planning workers, ~2.3 CPU
seconds measured), and every snapshot task is a session of its own. The task function carries
the source password and the sink's storage keys inside its pickled closure: Spark shows a
Python function by its name only (UI, plans, event logs), never its closure.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ...cdc.chunks import Chunk
from ...cdc.model import TableSchema
from ...cdc.source.config import SourceConfig
from ...cdc.sql import range_predicate
from ...cdc.types import arrow_schema, map_table
from ..sinks.files.arrow import FileRecord, FileWriteSpec
from ..sinks.files.spark_parquet import footer_stats
from .arrow_read import has_raw_dates, read_rows, select_sql

RECORDS = pa.schema(
    [
        pa.field("path", pa.string(), False),
        pa.field("size", pa.int64(), False),
        pa.field("num_rows", pa.int64(), False),
        pa.field("stats", pa.string(), True),
        pa.field("counts", pa.string(), False),
    ]
)
RECORDS_DDL = "path string, size long, num_rows long, stats string, counts string"


def split_parts(groups: int, parts: int) -> list[list[int]]:
    """Group indexes in ``parts`` contiguous runs of about equal size (one file each)."""
    parts = max(1, min(parts, groups))
    bounds = [round(i * groups / parts) for i in range(parts + 1)]
    return [list(range(bounds[i], bounds[i + 1])) for i in range(parts) if bounds[i + 1] > bounds[i]]


# Rows of the first SELECT a file's dictionary choice looks at, and the share of distinct values
# above which a column is written without one.
DICTIONARY_SAMPLE_ROWS = 65_536
DICTIONARY_MAX_DISTINCT = 0.5


def dictionary_columns(rows: pa.Table, unique: Sequence[str] = ()) -> list[str]:
    """The columns worth a Parquet dictionary, judged on the file's first rows: those with few
    distinct values. For a column of mostly distinct values the writer fills a dictionary per row
    group only to fall back to plain encoding: measured, dictionary attempts were 70% of the
    write's CPU on a table of distinct values, and its files 30% larger. ``unique``: a
    single-column key, distinct by definition."""
    import pyarrow.compute as pc

    sample = rows.slice(0, DICTIONARY_SAMPLE_ROWS)
    n = max(1, sample.num_rows)
    skip = set(unique)
    return [
        f.name
        for f in rows.schema
        if f.name not in skip
        and pc.count_distinct(sample.column(f.name), mode="all").as_py() <= DICTIONARY_MAX_DISTINCT * n
    ]


def write_part(
    source: SourceConfig,
    schema: TableSchema,
    spec: FileWriteSpec,
    part: int,
    groups: Sequence[tuple[int, str, str | None]],
    unique: Sequence[str] = (),
) -> dict[str, Any]:
    """Run ``groups``' SELECTs (group index, SQL, the SQL with dates as text or None) and write
    their rows into one file; its record (``path`` empty when no row came back). A failed read
    leaves no file behind. Once a group needed the dates as text, the later ones are read so too."""
    mappings = map_table(schema, source.server_time_zone)
    # the file in the sink's schema: the reader's (Delta's) unless the sink's differs -- Iceberg's
    # has no 8/16-bit integers and its key columns are required
    target = spec.schema if spec.schema is not None else arrow_schema(mappings)
    fs, prefix = spec.fs.open()
    directory = spec.directory.rstrip("/")
    rel = f"{directory}/{spec.name_prefix}-{part:05d}-{uuid.uuid4().hex[:8]}{spec.suffix}"
    counts: dict[str, int] = {}
    writer = out = None
    try:
        dates_as_text = False
        for group, fast, safe in groups:
            if dates_as_text and safe is not None:
                fast, safe = safe, None
            rows, used_safe = read_rows(source, schema.table_id.database, mappings, fast, safe)
            dates_as_text = dates_as_text or used_safe
            counts[str(group)] = rows.num_rows
            if rows.num_rows == 0:
                continue
            if rows.schema != target:
                rows = rows.cast(target)
            if writer is None:
                fs.create_dir(prefix + directory, recursive=True)
                out = fs.open_output_stream(prefix + rel)
                writer = pq.ParquetWriter(
                    out, target, compression="snappy", use_dictionary=dictionary_columns(rows, unique)
                )
            writer.write_table(rows, row_group_size=spec.row_group_rows)
            del rows
        if writer is None:
            return {"path": "", "size": 0, "num_rows": 0, "stats": None, "counts": json.dumps(counts)}
        writer.close()
        assert out is not None  # opened with the writer
        out.close()
    except BaseException:
        for f in (writer, out):
            try:
                if f is not None:
                    f.close()
            except Exception:  # the read's own failure is what is raised
                pass
        if writer is not None:
            try:
                fs.delete_file(prefix + rel)
            except Exception:  # never committed; the batch's prefix is cleared on its next run
                pass
        raise
    meta = writer.writer.metadata
    return {
        "path": rel,
        "size": int(fs.get_file_info(prefix + rel).size),
        "num_rows": int(meta.num_rows),
        "stats": footer_stats(meta, target),
        "counts": json.dumps(counts),
    }


def _task(
    source: SourceConfig,
    schema: TableSchema,
    spec: FileWriteSpec,
    parts: Sequence[Sequence[tuple[int, str, str | None]]],
    unique: Sequence[str],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for part in b.column(0).to_pylist():
                rec = write_part(source, schema, spec, int(part), parts[int(part)], unique)
                yield pa.RecordBatch.from_pylist([rec], schema=RECORDS)

    return run


def write_files(
    spark: Any,
    source: SourceConfig,
    schema: TableSchema,
    groups: Sequence[Sequence[Chunk]],
    spec: FileWriteSpec,
    files: int,
    unique: Sequence[str] = (),
) -> tuple[list[FileRecord], dict[int, int]]:
    """Read ``groups`` (runs of consecutive chunks, one SELECT each) and write them as about
    ``files`` uncommitted files per ``spec``; the file records and rows per group index."""
    mappings = map_table(schema, source.server_time_zone)
    where = [range_predicate(schema, g[0].start, g[-1].end, g[0].includes_null) for g in groups]
    dates = has_raw_dates(mappings)
    sql = [
        (select_sql(schema, mappings, w), select_sql(schema, mappings, w, raw_dates=False) if dates else None)
        for w in where
    ]
    parts = [[(i, *sql[i]) for i in run] for run in split_parts(len(groups), files)]
    n = len(parts)
    got = spark.range(0, n, 1, n).mapInArrow(_task(source, schema, spec, parts, tuple(unique)), RECORDS_DDL).collect()
    return records_of(row.asDict() for row in got)


def records_of(rows: Any) -> tuple[list[FileRecord], dict[int, int]]:
    records: list[FileRecord] = []
    per_group: dict[int, int] = {}
    for row in rows:
        for g, n in json.loads(row["counts"]).items():
            per_group[int(g)] = per_group.get(int(g), 0) + int(n)
        if row["path"]:
            records.append(FileRecord(row["path"], int(row["size"]), int(row["num_rows"]), row["stats"]))
    return records, per_group
