"""A snapshot batch's rows written by Spark's own Parquet writer, in the JVM.

``write_files`` (files/arrow.py) hands every row to a Python worker as Arrow and writes it
with pyarrow: it works on any storage delta-rs reaches (object stores without Hadoop's s3a
jars), but the rows cross from the JVM to Python and back. When Spark itself can write the
table's storage -- a local or mounted path, which is what a local Spark Connect server or
``local[*]`` writes -- ``DataFrameWriter.parquet`` does the same work without the crossing.

The files land in a directory of their own under the batch's prefix (``_snapshot/<batch>/
<run tag>/``), one per JDBC partition: Spark names each ``part-<partition>-...``, so the rows
per chunk group come from the file footers, as do Delta's per-file stats (numRecords,
nullCount, min/max of the columns ``files/arrow.py`` records them for). Spark's bookkeeping
files (``_SUCCESS``, ``.crc``) are removed; a file without rows is dropped.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame

from .arrow import MAX_STRING_STAT_CHARS, FileRecord, _json_stat, _stat_eligible, new_run_tag

_PART = re.compile(r"^part-(\d{5,})-.*\.parquet$")


def local_table_path(uri: str) -> str | None:
    """The file system path of a table Spark writes as a local file, or None (an object store:
    the Arrow writer goes through delta-rs instead)."""
    if uri.startswith("file://"):
        return uri[len("file://") :]
    return None if "://" in uri else os.path.abspath(uri)


def write_partitions(
    frame: DataFrame, table_path: str, directory: str, schema: pa.Schema, unique_columns: Sequence[str] = ()
) -> tuple[list[FileRecord], dict[int, int]]:
    """Write ``frame`` under ``<table_path>/<directory>/<run tag>/`` with Spark, one file per
    partition; the file records (paths relative to the table) and rows per partition.

    ``unique_columns`` (a single-column key) are written without a dictionary: every value is
    distinct, so Parquet's writer would fill a dictionary per row group only to fall back to
    plain encoding, a few percent of the write's CPU for nothing."""
    rel = f"{directory.strip('/')}/{new_run_tag()}"
    out = os.path.join(table_path, rel)
    # Delta readers (delta-rs) want INT64 microsecond timestamps, not Spark's default INT96, and
    # dates and times in the proleptic Gregorian calendar as they are (no rebase of old values
    # to the hybrid Julian calendar, no refusal of them).
    conf = frame.sparkSession.conf
    conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    conf.set("spark.sql.parquet.datetimeRebaseModeInWrite", "CORRECTED")
    writer = frame.write.mode("error").option("compression", "snappy")
    for column in unique_columns:  # parquet-mr's per-column setting: parquet.enable.dictionary#<path>
        writer = writer.option(f"parquet.enable.dictionary#{column}", "false")
    writer.parquet(out)
    records: list[FileRecord] = []
    per_partition: dict[int, int] = {}
    for name in sorted(os.listdir(out)):
        path = os.path.join(out, name)
        m = _PART.match(name)
        if m is None:  # _SUCCESS, .part-*.crc
            os.remove(path)
            continue
        meta = pq.ParquetFile(path).metadata
        if meta.num_rows == 0:
            os.remove(path)
            continue
        part = int(m.group(1))
        per_partition[part] = per_partition.get(part, 0) + meta.num_rows
        records.append(FileRecord(f"{rel}/{name}", os.path.getsize(path), meta.num_rows, footer_stats(meta, schema)))
    return records, per_partition


def footer_stats(meta: Any, schema: pa.Schema) -> str:
    """Delta's per-file stats JSON from a Parquet footer (the same keys and the same columns
    with min/max as ``arrow.StatsCollector``); a column some row group has no statistics
    for is left out rather than guessed."""
    nulls = {f.name: 0 for f in schema}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    no_nulls: set[str] = set()
    no_range: set[str] = set()
    index = {meta.schema.column(i).name: i for i in range(meta.num_columns)}
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        for f in schema:
            i = index.get(f.name)
            st = rg.column(i).statistics if i is not None else None
            if st is None or not st.has_null_count:
                no_nulls.add(f.name)
                no_range.add(f.name)
                continue
            nulls[f.name] += st.null_count
            if not _stat_eligible(f.type) or st.null_count == rg.num_rows:
                continue
            if not st.has_min_max:
                no_range.add(f.name)
                continue
            lo, hi = _value(st.min, f.type), _value(st.max, f.type)
            if isinstance(lo, str) and (len(lo) > MAX_STRING_STAT_CHARS or len(hi) > MAX_STRING_STAT_CHARS):
                no_range.add(f.name)
                continue
            mins[f.name] = lo if f.name not in mins else min(mins[f.name], lo)
            maxs[f.name] = hi if f.name not in maxs else max(maxs[f.name], hi)
    return json.dumps(
        {
            "numRecords": meta.num_rows,
            "minValues": {k: _json_stat(v) for k, v in mins.items() if k not in no_range},
            "maxValues": {k: _json_stat(v) for k, v in maxs.items() if k not in no_range},
            "nullCount": {k: v for k, v in nulls.items() if k not in no_nulls},
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


def _value(v: Any, t: pa.DataType) -> Any:
    if isinstance(v, (bytes, bytearray)) and pa.types.is_string(t):
        return bytes(v).decode("utf-8")
    return v
