"""The one interface every sink implements, and the shape of the change rows it receives.

Snapshot: ``write_snapshot`` replaces exactly the rows of a batch's key ranges with the
batch's rows, atomically (readers see the old or the new contents of each range, never a
mixture a rerun cannot repair), so running the same batch again leaves the sink unchanged.

Stream: ``write_changes`` applies one micro-batch of one table, idempotently keyed by the
micro-batch id (a replayed batch changes nothing). The rows are change rows: the table's
columns (the after-image for +I/+U, the before-image for -U/-D) plus the metadata columns
below, ordered by ``_seq`` within the micro-batch (binlog order).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame

from ...cdc.chunks import KeyRange
from ...cdc.model import TableId, TableSchema
from .change_meta import (  # noqa: F401  (the sinks' and the stream's names for them)
    META_COLUMNS,
    META_DATABASE,
    META_FILE,
    META_GTID,
    META_OP,
    META_POS,
    META_ROW,
    META_SEQ,
    META_TABLE,
    META_TS,
)

# The Spark local property that carries the micro-batch id to a direct write's tasks (set by
# the stream's foreachBatch around the job; local properties travel with a job's tasks).
BATCH_ID_PROPERTY = "mysqlcdc.stream.batchId"


@dataclass(frozen=True)
class SnapshotWrite:
    """What a snapshot write did, for the batch's result file."""

    rows_written: int
    details: Mapping[str, Any]


def direct_write_option(value: Any) -> bool:
    """``sink_options.direct_write``, checked: a JSON boolean (a string "false" would be true)."""
    if not isinstance(value, bool):
        from ...cdc.errors import ConfigError

        raise ConfigError(
            f"sink_options.direct_write: found {value!r}, need true or false. "
            "Fix: give a JSON boolean, or leave it out (true)."
        )
    return value


def plain_type(t: pa.DataType) -> pa.DataType:
    """Arrow types a table library may hand back for ours (large/view variants) mapped to ours."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    return t


def schema_differences(expected: pa.Schema, actual: pa.Schema) -> list[str]:
    """Human-readable differences between two flat schemas (names and types, not nullability)."""
    exp = {f.name: plain_type(f.type) for f in expected}
    act = {f.name: plain_type(f.type) for f in actual}
    out = [f"missing column {n!r} ({t})" for n, t in exp.items() if n not in act]
    out += [f"unexpected column {n!r} ({t})" for n, t in act.items() if n not in exp]
    out += [f"column {n!r} is {act[n]}, expected {t}" for n, t in exp.items() if n in act and act[n] != t]
    return out


def last_changes(changes: DataFrame, identity: Sequence[str], columns: Sequence[Any]) -> DataFrame:
    """The row path's reduction: the last change (highest ``_seq``) per row identity, as ``columns``
    and the op; Spark computes it with a window, so only the reduced rows leave the executors."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy(*identity).orderBy(F.col(META_SEQ).desc())
    return changes.withColumn("__rn", F.row_number().over(w)).where(F.col("__rn") == 1).select(*columns, F.col(META_OP))


class SnapshotFileSink(Protocol):
    """What a sink whose ``writes_snapshot_files()`` is True has besides ``Sink`` (Delta, and a
    routed sink around one): the batch's SELECTs write its files (``files/snapshot.py``)."""

    def write_chunk_files(self, schema: TableSchema, frame: DataFrame, batch_id: str, files: int) -> Any: ...

    def commit_chunk_files(
        self,
        spark: Any,
        schema: TableSchema,
        batch_id: str,
        records: Sequence[Any],
        corrections: Any,
        ranges: Sequence[KeyRange],
    ) -> SnapshotWrite: ...

    def discard_uncommitted(self, schema: TableSchema, batch_id: str) -> int: ...


class Sink(ABC):
    """A target the pipeline writes into. Instances are created on the driver from options."""

    name: str = "sink"

    @classmethod
    def catalog_takes_password(cls, options: Mapping[str, Any]) -> bool:
        """Whether ``options`` name a catalog whose database takes the ``sink_conn_id`` connection's
        password, for a sink whose registry entry has ``catalog_connection``: the plan refuses such
        options without a connection, since every job would otherwise fail to log in to it, after
        the first Spark job started. False for a sink without a catalog."""
        return False

    @abstractmethod
    def prepare(self, schemas: Sequence[TableSchema]) -> None:
        """Create the target tables if missing (idempotent); fail clearly if they are incompatible."""

    @abstractmethod
    def write_snapshot(
        self, schema: TableSchema, frame: DataFrame, ranges: Sequence[KeyRange], batch_id: str
    ) -> SnapshotWrite:
        """Replace the rows inside ``ranges`` (of the chunk key) with ``frame``, atomically."""

    @abstractmethod
    def write_changes(self, schema: TableSchema, changes: DataFrame, batch_id: int) -> None:
        """Apply one stream micro-batch of one table exactly once (a replay is a no-op)."""

    def observe_replaced_values(self, callback: Callable[[str, str, int], None]) -> None:
        """Have the stream's commits report values this sink had to store differently
        (``callback(table, what, count)``, e.g. U+0000 replaced), for ``stream/status.json``.
        Sinks that store every value as it is ignore it."""

    def partition_tables(self, keys: Mapping[TableId, Sequence[Any]]) -> None:
        """Partition the sink tables ``keys`` names by their transforms' ``partition_keys``
        (``cdc/transform/partitioning.py``), when they are created and in every write. A sink that
        does not partition refuses, before it creates or writes anything: its tables would come
        out unpartitioned, quietly unlike the pipeline file."""
        from ...cdc.errors import ConfigError
        from ...cdc.sinks import PARTITION_SINKS

        if any(keys.values()):
            table = next(t for t, k in keys.items() if k)
            raise ConfigError(
                f"the {self.name} sink does not partition its tables, and the transform of {table} has "
                f"partition_keys. Fix: remove partition_keys, or use the {' or '.join(PARTITION_SINKS)} sink"
            )

    def writes_snapshot_files(self) -> bool:
        """True when a snapshot batch's SELECTs can write the sink's files themselves
        (``write_chunk_files`` / ``commit_chunk_files``, see ``files/snapshot.py``): rows written
        once. Else the rows are staged and ``write_snapshot`` writes them."""
        return False

    def direct_write(self) -> Any:
        """A spec (with ``to_json()``) for the binlog source to write this sink's stream files
        itself, or None (the default): the stream then hands change rows to ``write_changes``."""
        return None

    def keys_in_sink(self, schema: TableSchema, key_range: KeyRange | None = None) -> Any:
        """An Arrow table of the identity and chunk-key columns of the rows the sink's table of
        ``schema`` holds -- at least those inside ``key_range`` (a re-snapshot deletes those of
        its range it does not have) -- or None for a sink that keeps no table (a log)."""
        from ...cdc.errors import ConfigError

        raise ConfigError(
            f"the {self.name} sink cannot take a batch read again while the stream runs. Fix: use "
            "a Delta, Iceberg, PostgreSQL or changelog sink, or trigger with reset=true to load everything again."
        )

    def consistency_keys(self, schema: TableSchema, upto_batch: int) -> tuple[Any, int]:
        """For the consistency check: the identity and chunk-key columns of every row the sink's
        table of ``schema`` holds once the stream's micro-batches up to ``upto_batch`` are applied
        and none after (or a later one's, if the sink cannot go back), with the last micro-batch
        applied. A sink that keeps no table state (a log) cannot be checked."""
        from ...cdc.errors import ConfigError

        raise ConfigError(
            f"the consistency check compares the rows a sink table holds with the source, and the "
            f"{self.name} sink keeps no table. Fix: check a Delta or PostgreSQL sink; a changelog "
            "is checked by replaying it into one."
        )

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
        """One more record of micro-batch ``batch_id`` that replaces ``key_range`` with ``rows``
        (exact at ``info["exact_at"]``) and deletes ``gone`` (``sinks/resnapshot_rows.py``): by
        default a last-change record, what the merge-based sinks (Delta, PostgreSQL) apply."""
        from .resnapshot_rows import last_change_record

        return last_change_record(schema, image, rows, gone, info, seq)

    def schema_capabilities(self) -> frozenset[str]:
        """The sink actions (``cdc/schema/behavior.py``) this sink can apply to its tables; the
        others fail under ``evolve`` and are taken the lenient way under ``try_evolve``."""
        return frozenset()

    def publish_steps(self, table_id: TableId, steps: Sequence[Any], batch_id: int) -> int:
        """Apply one table's share of a direct-write micro-batch: row steps and schema change
        steps (``cdc/schema/steps.py``) in order, exactly once; returns the changes applied."""
        raise NotImplementedError(
            f"the {self.name} sink cannot follow schema changes in the stream. Fix: use the Delta, Iceberg, "
            "PostgreSQL or changelog-json sink with its direct write (the default)."
        )

    def publish_micro_batch(self, planned: Mapping[TableId, Sequence[Any]], batch_id: int) -> int:
        """Apply a direct-write micro-batch: every table's steps (``publish_steps``), table by table.
        A sink that writes several source tables into one table (``routed.RoutedSink``) groups them."""
        return sum(self.publish_steps(table_id, steps, batch_id) for table_id, steps in planned.items())

    def forget_tables(self, table_ids: Sequence[TableId]) -> list[str]:
        """Remove what this sink holds for these source tables -- rows and the bookkeeping that
        makes micro-batches idempotent -- so a reset pipeline loads into empty tables and a new
        stream's micro-batch 0 is not taken for one already applied. Returns what was removed."""
        raise NotImplementedError(f"sink {self.name!r} cannot forget its tables")

    def asset_uri(self, table_id: TableId) -> str | None:
        """Where this sink keeps ``table_id``, as an Airflow Asset URI (downstream DAGs schedule
        on it), or None for a sink that keeps nothing (console)."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; default: nothing to release."""
