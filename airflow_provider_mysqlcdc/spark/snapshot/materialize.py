"""Making a batch's SELECTs finish before its high watermark is read.

Spark is lazy: without an action the JDBC SELECTs would run whenever the rows are first
used, after HW, outside the window the corrections cover. Two ways to force them:

* ``CachedMaterializer`` persists the rows (memory, then disk) and counts them. Cheap to set
  up, but Spark recomputes lost cache blocks (an executor dies) by running the SELECT
  again, now outside the window: fine in local mode, a risk on a cluster.
* ``StagedMaterializer`` writes the rows once as Parquet to a staging directory and reads
  them back from there. Recomputation then reads the staged files, never the database, and
  the write is about as fast as the cache (one JVM pass, no Python). Use it on clusters,
  with a staging directory every executor can reach (HDFS, S3, a shared mount).

* ``SinkFilesMaterializer`` writes the rows straight into the sink's own (uncommitted) files
  (``sinks/files/snapshot.py``): rows written once. Its frame must not be used afterwards (it
  would run the SELECTs again); the sink commits the files after the corrections.

All return row counts per JDBC partition, i.e. per chunk, without another pass.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F


@dataclass
class Materialized:
    frame: DataFrame
    rows_per_partition: dict[int, int]
    _release: list = field(default_factory=list, repr=False)

    def release(self) -> None:
        for fn in self._release:
            fn()
        self._release.clear()


class Materializer(Protocol):
    def materialize(self, df: DataFrame, label: str, table_id: Any = None) -> Materialized: ...


@dataclass
class CachedMaterializer:
    storage_level: StorageLevel = field(default_factory=lambda: StorageLevel.MEMORY_AND_DISK)

    def materialize(self, df: DataFrame, label: str, table_id: Any = None) -> Materialized:
        df = df.persist(self.storage_level)
        per_part = df.groupBy(F.spark_partition_id().alias("p")).count().collect()
        return Materialized(df, {int(r["p"]): int(r["count"]) for r in per_part}, [df.unpersist])


@dataclass
class SinkFilesMaterializer:
    """Each table's chunks written by ``sink.write_chunk_files`` into ``files(table_id)`` files;
    the records wait in ``records`` for ``sink.commit_chunk_files``."""

    sink: Any
    schemas: Mapping[Any, Any]
    batch_id: str
    files: Callable[[Any], int]
    records: dict = field(default_factory=dict)

    def materialize(self, df: DataFrame, label: str, table_id: Any = None) -> Materialized:
        records, per_chunk = self.sink.write_chunk_files(
            self.schemas[table_id], df, self.batch_id, self.files(table_id)
        )
        self.records[table_id] = records
        return Materialized(df, per_chunk, [])

    def arrow_spec(self, table_id: Any) -> Any:
        """The sink's spec for the Arrow reader's files of the table, or None (it cannot take them)."""
        spec = getattr(self.sink, "arrow_snapshot_spec", None)
        return spec(self.schemas[table_id], self.batch_id) if spec is not None else None

    def materialize_arrow(self, spark: Any, source: Any, table_id: Any, groups: Any) -> Materialized:
        """The groups' SELECTs read by the Arrow reader's tasks straight into the sink's files
        (``snapshot/arrow_tasks.py``); no frame: nothing reads the rows again."""
        from .arrow_tasks import write_files

        schema = self.schemas[table_id]
        unique = tuple(schema.primary_key) if len(schema.primary_key) == 1 else ()
        records, per_group = write_files(
            spark, source, schema, groups, self.arrow_spec(table_id), self.files(table_id), unique
        )
        self.records[table_id] = records
        return Materialized(None, per_group, [])  # type: ignore[arg-type]


_PART_RE = re.compile(r"part-(\d{5,})-")


@dataclass
class StagedMaterializer:
    """Stages under ``<staging_dir>/<label>-<random>/`` (a local path or any URI Spark and pyarrow read)."""

    spark: SparkSession
    staging_dir: str

    def materialize(self, df: DataFrame, label: str, table_id: Any = None) -> Materialized:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)
        path = f"{self.staging_dir.rstrip('/')}/{safe}-{uuid.uuid4().hex[:8]}"
        df.write.mode("error").parquet(path)
        frame = self.spark.read.schema(df.schema).parquet(path)
        return Materialized(frame, _rows_per_part_file(path), [lambda: _remove_tree(path)])


def _filesystem(path: str):
    import pyarrow.fs as pafs

    if "://" in path:
        return pafs.FileSystem.from_uri(path)
    return pafs.LocalFileSystem(), path


def _rows_per_part_file(path: str) -> dict[int, int]:
    """Row counts from the Parquet footers: Spark names each task's file part-<partition>-..."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    fs, root = _filesystem(path)
    counts: dict[int, int] = {}
    for info in fs.get_file_info(pafs.FileSelector(root)):
        m = _PART_RE.match(info.base_name)
        if info.type != pafs.FileType.File or not m or not info.base_name.endswith(".parquet"):
            continue
        with fs.open_input_file(info.path) as f:
            n = pq.ParquetFile(f).metadata.num_rows
        p = int(m.group(1))
        counts[p] = counts.get(p, 0) + n
    return counts


def _remove_tree(path: str) -> None:
    fs, root = _filesystem(path)
    try:
        fs.delete_dir(root)
    except FileNotFoundError:
        pass
