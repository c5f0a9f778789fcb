"""Delta Lake sink through delta-rs (the ``deltalake`` package): no JVM Delta needed.

One Delta table per captured table at ``<root>/<database>/<table>`` (a local path or any
URI delta-rs supports; ``storage_options`` are delta-rs' object store options).

Snapshot (``write_snapshot``): executors write the batch's rows as Parquet files under
``_snapshot/<batch>/`` in the table directory and report (path, size, rows, stats); the
driver checks every file is really there, then commits ONE transaction that adds them and
removes the files an earlier run of the same batch added. So a rerun replaces exactly its
chunks, readers see the old or the new rows of the batch, and a job that dies before the
commit leaves only unreferenced files (harmless; ``vacuum`` removes them).

Stream: the micro-batch is reduced to the last change per row identity (by ``_seq``), then
merged in one transaction that records the micro-batch id as this sink's application
transaction version; a batch id at or below the recorded version is skipped, so a replayed
micro-batch changes nothing. By default the reduction starts in the binlog source's tasks
(``direct_write()``, ``last_change.py``): each reduces the range it decoded, and
``publish_steps`` reduces the ranges' rows again on the driver. With ``direct_write: false``
Spark reduces the change rows with a window instead (``write_changes``, the row path).

Choices, and why:
- DATETIME columns are Delta ``timestamp_ntz`` (the timestampNtz table feature, reader v3 /
  writer v7): storing wall-clock values as instants would silently shift them in readers.
- File stats: numRecords and nullCount for every column, min/max for integer, DATE and
  short string columns only (what MERGE and reads prune on: keys). See files/arrow.py.
- delta-rs' own writer (MERGE rewrites files with it) records wrong min/max for decimals it
  cannot hold exactly (precision > 18 clamped to the int64 range; a scale > 0 beyond 15
  digits rounded through a double), and its MERGE prunes files by those stats: a delete of
  a BIGINT UNSIGNED key >= 2^63 (DECIMAL(20,0)) then matched nothing and was lost, an update
  inserted a second row. So a table with such a column names the columns Delta may keep
  stats for (``delta.dataSkippingStatsColumns``, every other column): the wrong stats are
  neither written nor read, old ones included (``stats_columns``).
- Gotcha: MERGE rewrites touched files outside ``_snapshot/``; rerunning a snapshot batch
  after the stream has merged into its rows would leave those rewritten rows in place.
  Re-snapshotting a table that is already streaming means recreating its Delta table.
"""

from __future__ import annotations

import contextlib
import decimal
import json
import logging
import random
import time
from typing import Any, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame

from ....cdc.chunks import KeyRange
from ....cdc.errors import REPORT_BUG, ConfigError
from ....cdc.faults import BETWEEN_STEPS, crash_point
from ....cdc.model import TableId, TableSchema
from ...runtime.job_labels import describe
from ..base import (
    META_OP,
    Sink,
    SnapshotWrite,
    direct_write_option,
    last_changes,
    plain_type,
    schema_differences,
)
from ..files.arrow import (
    DEFAULT_ROW_GROUP_ROWS,
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
from ..last_change import LastChange

log = logging.getLogger(__name__)

SNAPSHOT_DIR = "_snapshot"
# A micro-batch's steps (rows, DDL operations) as versions of one application id: batch * STEP_SCALE + step.
STEP_SCALE = 1_000_000
# The op column's name in the MERGE source: one no MySQL table of ours would use.
MERGE_OP = "__mysqlcdc_op"


def _sql_type(t: pa.DataType) -> str:
    """DataFusion's name for a type we cast a DEFAULT constant or a copied column to."""
    ints = {
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INT",
        pa.int64(): "BIGINT",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.binary(): "BYTEA",
    }
    if t in ints:
        return ints[t]
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP" if t.tz is None else "TIMESTAMPTZ"
    return "STRING"


# The Delta table property naming the columns whose min/max a writer records and a reader prunes by.
STATS_COLUMNS = "delta.dataSkippingStatsColumns"


def exact_stats(t: pa.DataType) -> bool:
    """Whether delta-rs records exact min/max stats for a column of this type. Decimals only when
    their unscaled values fit an int64 at scale 0 or a double holds them (15 digits); every other
    type of ours is exact, or (timestamps: milliseconds) widened by its readers."""
    if pa.types.is_decimal(t):
        return t.precision <= 15 or (t.scale == 0 and t.precision <= 18)
    return True


def stats_columns(schema: pa.Schema) -> dict[str, str]:
    """The table configuration that keeps Delta's stats to the columns they are exact for; empty when
    every column's are (the default, all columns, is then right)."""
    if all(exact_stats(f.type) for f in schema):
        return {}
    names = [f.name for f in schema if exact_stats(f.type)]
    return {STATS_COLUMNS: ",".join("`" + n.replace("`", "``") + "`" for n in names)}


def _commit_info(fs: Any, base: str, version: int) -> dict[str, Any] | None:
    """The ``commitInfo`` action of one version's log file (its custom metadata at the top
    level, as delta-rs writes it), ``{}`` when it has none, None when the file is gone."""
    import pyarrow.fs as pafs

    path = f"{base}_delta_log/{version:020d}.json"
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return None
    with fs.open_input_stream(path) as f:
        text = f.read().decode("utf-8")
    for line in text.splitlines():
        if '"commitInfo"' in line:
            action = json.loads(line)
            if "commitInfo" in action:
                return dict(action["commitInfo"])
    return {}


def sql_ident(name: str) -> str:
    """A column name quoted for delta-rs (DataFusion) SQL: case and odd characters kept."""
    return '"' + name.replace('"', '""') + '"'


# How a snapshot batch's rows become the table's files (sinks/files/spark_parquet.py, files/snapshot.py).
SNAPSHOT_WRITERS = ("auto", "spark", "arrow")


class DeltaSink(Sink):
    """One Delta table per captured table; see the module docstring for the protocol."""

    name = "delta"

    def __init__(
        self,
        root: str,
        storage_options: dict[str, str] | None = None,
        app_id: str = "mysqlcdc",
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        direct_write: bool = True,
        snapshot_writer: str = "auto",
    ) -> None:
        if snapshot_writer not in SNAPSHOT_WRITERS:
            raise ConfigError(
                f"sink_options.snapshot_writer: found {snapshot_writer!r}, need one of "
                f"{', '.join(SNAPSHOT_WRITERS)}. Fix: 'auto' (Spark's Parquet writer where Spark can "
                "write the table's path, else Arrow), 'spark' or 'arrow'."
            )
        self.snapshot_writer = snapshot_writer
        self.root = local_or_uri(root).rstrip("/")
        self.storage_options = dict(storage_options or {})
        self.app_id = app_id
        self.row_group_rows = row_group_rows
        self.direct = direct_write_option(direct_write)
        self._schemas: dict[TableId, TableSchema] = {}  # the tables prepare() was given

    # --- locations ------------------------------------------------------------------------------

    def forget_tables(self, table_ids: Sequence[TableId]) -> list[str]:
        """The whole Delta table of each (data files and log, with the stream's app versions)."""
        return [self.table_uri(t) for t in table_ids if remove_tree(self.table_uri(t))]

    def table_uri(self, table_id: TableId) -> str:
        return f"{self.root}/{table_id.database}/{table_id.table}"

    def asset_uri(self, table_id: TableId) -> str:
        return location_uri(self.table_uri(table_id))

    def _fs(self, table_id: TableId) -> FsSpec:
        return FsSpec("delta", self.table_uri(table_id), self.storage_options or None)

    def open_table(self, table_id: TableId):
        from deltalake import DeltaTable

        return DeltaTable(self.table_uri(table_id), storage_options=self.storage_options or None)

    # --- prepare --------------------------------------------------------------------------------

    def prepare(self, schemas: Sequence[TableSchema]) -> None:
        for schema in schemas:
            self._prepare_one(schema)
            self._schemas[schema.table_id] = schema

    def _prepare_one(self, schema: TableSchema) -> None:
        from deltalake import DeltaTable

        uri = self.table_uri(schema.table_id)
        expected = table_arrow_schema(schema)
        opts = self.storage_options or None
        if DeltaTable.is_deltatable(uri, storage_options=opts):
            table = DeltaTable(uri, storage_options=opts)
            actual = pa.schema(table.schema().to_arrow())
            diffs = schema_differences(expected, actual)
            if diffs:
                raise ConfigError(
                    f"Delta table for {schema.table_id} at {uri} does not match the source table: "
                    f"{'; '.join(diffs)}. Fix: drop or move the Delta table (a fresh snapshot recreates "
                    "it), or capture into another sink root."
                )
            self._keep_stats_exact(table)
            return
        DeltaTable.create(
            uri,
            expected,
            mode="ignore",
            storage_options=opts,
            configuration=stats_columns(expected),
            name=f"{schema.table_id.database}.{schema.table_id.table}",
            description=f"mysqlcdc replica of {schema.table_id}",
        )
        log.info("created Delta table for %s at %s", schema.table_id, uri)

    # --- snapshot -------------------------------------------------------------------------------

    def snapshot_prefix(self, batch_id: str) -> str:
        return f"{SNAPSHOT_DIR}/{safe_name(batch_id)}/"

    def write_snapshot(
        self, schema: TableSchema, frame: DataFrame, ranges: Sequence[KeyRange], batch_id: str
    ) -> SnapshotWrite:
        t0 = time.monotonic()
        records = self.write_snapshot_files(schema, frame, batch_id)
        t1 = time.monotonic()
        details = self.commit_snapshot(schema, batch_id, records, ranges)
        details.update(write_s=round(t1 - t0, 3), commit_s=round(time.monotonic() - t1, 3))
        return SnapshotWrite(sum(r.num_rows for r in records), details)

    def snapshot_spec(self, schema: TableSchema, batch_id: str, count_by: str | None = None) -> FileWriteSpec:
        """Where and how a batch's data files of the table are written (under the batch's prefix)."""
        return FileWriteSpec(
            fs=self._fs(schema.table_id),
            directory=self.snapshot_prefix(batch_id).rstrip("/"),
            name_prefix=f"part-{new_run_tag()}",
            schema=table_arrow_schema(schema),
            fmt="parquet",
            suffix=".snappy.parquet",
            row_group_rows=self.row_group_rows,
            with_stats=True,
            count_by=count_by,
        )

    def writes_snapshot_files(self) -> bool:
        return True

    def write_chunk_files(
        self, schema: TableSchema, frame: DataFrame, batch_id: str, files: int
    ) -> tuple[list[FileRecord], dict[int, int]]:
        """The batch's SELECTs written straight into the table's (uncommitted) files: rows per chunk
        group. Spark's own Parquet writer where Spark can write the table (a local or mounted path:
        no rows through Python, ``files/spark_parquet.py``), else the Arrow writer through delta-rs' store."""
        from ..files.snapshot import CHUNK_COLUMN, write_chunks
        from ..files.spark_parquet import local_table_path, write_partitions

        describe(frame.sparkSession, f"mysqlcdc delta snapshot {schema.table_id} {batch_id}")
        try:
            path = local_table_path(self.table_uri(schema.table_id)) if self.snapshot_writer != "arrow" else None
            if path is None and self.snapshot_writer == "spark":
                raise ConfigError(
                    f"sink_options.snapshot_writer 'spark' needs a table path Spark writes as a file "
                    f"path, not {self.table_uri(schema.table_id)}. Fix: use 'auto' or 'arrow' (which "
                    "writes object stores through delta-rs, no Hadoop jars needed)."
                )
            if path is not None:
                unique = tuple(schema.primary_key) if len(schema.primary_key) == 1 else ()
                return write_partitions(frame, path, self.snapshot_prefix(batch_id), table_arrow_schema(schema), unique)
            return write_chunks(frame, self.snapshot_spec(schema, batch_id, count_by=CHUNK_COLUMN), files)
        finally:
            describe(frame.sparkSession, None)

    def arrow_snapshot_spec(self, schema: TableSchema, batch_id: str) -> FileWriteSpec | None:
        """Where the Arrow reader's tasks write the batch's files of the table (``snapshot/arrow_tasks.py``);
        None when ``snapshot_writer`` is 'spark' (Spark's own reader and writer asked for). A local table
        is written through pyarrow's own file system, not delta-rs' store (no Python in the write path)."""
        from dataclasses import replace as _replace

        from ..files.spark_parquet import local_table_path

        if self.snapshot_writer == "spark":
            return None
        spec = self.snapshot_spec(schema, batch_id)
        path = local_table_path(self.table_uri(schema.table_id))
        return _replace(spec, fs=FsSpec("uri", path)) if path is not None else spec

    def commit_chunk_files(
        self,
        spark: Any,
        schema: TableSchema,
        batch_id: str,
        records: Sequence[FileRecord],
        corrections: Any,
        ranges: Sequence[KeyRange],
    ) -> SnapshotWrite:
        """The files corrected to the batch's HW (``files/snapshot.py``: ``correct_files``), one commit."""
        from ..files.snapshot import correct_files, delete_files

        t0 = time.monotonic()
        spec = self.snapshot_spec(schema, batch_id)
        final, superseded = correct_files(spark, spec, schema, records, corrections)
        t1 = time.monotonic()
        details = self.commit_snapshot(schema, batch_id, final, ranges)
        delete_files(spec, superseded)
        details.update(
            correct_s=round(t1 - t0, 3), commit_s=round(time.monotonic() - t1, 3), files_rewritten=len(superseded)
        )
        return SnapshotWrite(sum(r.num_rows for r in final), details)

    def discard_uncommitted(self, schema: TableSchema, batch_id: str) -> int:
        """Delete the files under the batch's prefix that no commit added (a failed or killed run's,
        failed task attempts' included), and the prefix's directories left empty. How many files."""
        import pyarrow.fs as pafs
        from deltalake import DeltaTable

        fs, base = self._fs(schema.table_id).open()
        prefix = self.snapshot_prefix(batch_id).rstrip("/")
        info = fs.get_file_info(base + prefix)
        if info.type == pafs.FileType.NotFound:
            return 0
        committed = set()
        if DeltaTable.is_deltatable(self.table_uri(schema.table_id), storage_options=self.storage_options or None):
            committed = {p for p, _ in self._current_files(self.open_table(schema.table_id))}
        gone = 0
        for f in fs.get_file_info(pafs.FileSelector(base + prefix, recursive=True)):
            rel = f.path[len(base) :] if base else f.path
            if f.type == pafs.FileType.File and rel.lstrip("/") not in committed:
                fs.delete_file(f.path)
                gone += 1
        uri = self.table_uri(schema.table_id)
        if "://" not in uri or uri.startswith("file://"):
            # Object stores have no directories; a local table's would stay behind, empty.
            import os

            local = uri[len("file://") :] if uri.startswith("file://") else uri
            for d in (prefix, prefix.rsplit("/", 1)[0]):  # the batch's directory, then _snapshot/
                path = os.path.join(local, d)
                for root, dirs, _files in os.walk(path, topdown=False):
                    for name in dirs:
                        with contextlib.suppress(OSError):
                            os.rmdir(os.path.join(root, name))
                with contextlib.suppress(OSError):
                    os.rmdir(path)
        if gone:
            log.info("delta %s batch %s: removed %d file(s) no commit added", schema.table_id, batch_id, gone)
        return gone

    def write_snapshot_files(self, schema: TableSchema, frame: DataFrame, batch_id: str) -> list[FileRecord]:
        """Executors write the frame's rows under the batch's prefix; returns the file records."""
        spec = self.snapshot_spec(schema, batch_id)
        if list(frame.columns) != spec.schema.names:
            raise ValueError(
                f"{schema.table_id}: frame columns {frame.columns} are not the table's columns {spec.schema.names}"
            )
        describe(frame.sparkSession, f"mysqlcdc delta snapshot {schema.table_id} {batch_id}")
        try:
            return write_files(frame, spec)
        finally:
            describe(frame.sparkSession, None)

    def commit_snapshot(
        self,
        schema: TableSchema,
        batch_id: str,
        records: Sequence[FileRecord],
        ranges: Sequence[KeyRange] = (),
        attempts: int = 20,
    ) -> dict[str, Any]:
        """Check the files, then one transaction: add them, remove the batch's earlier files.

        Batches of one table commit concurrently (one mapped task each). delta-rs treats a
        transaction that removes files as having read the whole table, so a rerun's commit
        fails when another batch committed meanwhile ("a concurrent transaction deleted data
        this operation read"). The conflict is spurious for us (every batch removes only
        files under its own prefix), so the commit is rebuilt on the new version and retried.
        """
        from deltalake.exceptions import CommitFailedError

        check_files(self._fs(schema.table_id), records)
        for attempt in range(1, attempts + 1):
            try:
                return self._commit_once(schema, batch_id, records, ranges)
            except CommitFailedError as e:
                if attempt == attempts:
                    raise
                delay = min(2.0, 0.05 * 2**attempt) * (0.5 + random.random())
                log.info(
                    "delta %s batch %s: commit conflict (%s), retry %d in %.2fs",
                    schema.table_id,
                    batch_id,
                    str(e).splitlines()[0],
                    attempt,
                    delay,
                )
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _commit_once(
        self, schema: TableSchema, batch_id: str, records: Sequence[FileRecord], ranges: Sequence[KeyRange]
    ) -> dict[str, Any]:
        from deltalake import CommitProperties
        from deltalake.transaction import AddAction, RemoveAction

        table = self.open_table(schema.table_id)
        prefix = self.snapshot_prefix(batch_id)
        new_paths = {r.path for r in records}
        old = [(p, s) for p, s in self._current_files(table) if p.startswith(prefix) and p not in new_paths]
        now = int(time.time() * 1000)
        actions: list[Any] = [
            AddAction(r.path, r.size, {}, now, True, r.stats or json.dumps({"numRecords": r.num_rows})) for r in records
        ]
        actions += [RemoveAction(p, True, now, s, {}) for p, s in old]
        if not actions:
            return {"version": table.version(), "files_added": 0, "files_removed": 0}
        meta = {
            "mysqlcdc.snapshot_batch": str(batch_id),
            "mysqlcdc.ranges": json.dumps([r.to_dict() for r in ranges], default=str),
        }
        table.create_write_transaction(
            actions,
            mode="append",
            schema=table_arrow_schema(schema),
            commit_properties=CommitProperties(custom_metadata=meta),
        )
        table.update_incremental()
        log.info(
            "delta %s batch %s: committed %d files, removed %d earlier ones (version %d)",
            schema.table_id,
            batch_id,
            len(records),
            len(old),
            table.version(),
        )
        return {"version": table.version(), "files_added": len(records), "files_removed": len(old)}

    def _keep_stats_exact(self, table):
        """The table (reopened if changed) with ``stats_columns`` of its current schema set: a table
        made before that setting existed, or that gained a decimal column by a DDL, gets it before
        any MERGE prunes by wrong stats (setting it also hides the stats already written)."""
        want = stats_columns(pa.schema(table.schema().to_arrow()))
        have = table.metadata().configuration or {}
        if not want or have.get(STATS_COLUMNS) == want[STATS_COLUMNS]:
            return table
        table.alter.set_table_properties(want)
        log.info(
            "delta %s: min/max stats kept to columns they are exact for (%s = %s)",
            table.table_uri,
            STATS_COLUMNS,
            want[STATS_COLUMNS],
        )
        table.update_incremental()
        return table

    @staticmethod
    def _current_files(table) -> list[tuple[str, int]]:
        adds = pa.table(table.get_add_actions())
        return list(zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist()))

    # --- stream ---------------------------------------------------------------------------------

    def direct_write(self) -> LastChange | None:
        return LastChange() if self.direct else None

    # --- schema changes -------------------------------------------------------------------------

    def keys_in_sink(self, schema: TableSchema, key_range: KeyRange | None = None) -> pa.Table:
        """Identity and chunk-key columns of the table's rows (a re-snapshot's deletes come from them);
        only the range's for an integer chunk key (the files' statistics skip the rest)."""
        from ..resnapshot_rows import integer_bounds

        table = self.open_table(schema.table_id)
        cols = list(dict.fromkeys([*schema.row_identity, *schema.chunk_key]))
        bounds = integer_bounds(schema, key_range)
        if bounds is None:
            return table.to_pyarrow_table(columns=cols)
        lo: int | decimal.Decimal | None
        hi: int | decimal.Decimal | None
        col, lo, hi = bounds
        if pa.types.is_decimal(table_arrow_schema(schema).field(col).type):
            # BIGINT UNSIGNED is DECIMAL(20,0) here: an int bound >= 2^63 overflows the filter's int64
            lo, hi = (None if v is None else decimal.Decimal(v) for v in (lo, hi))
        filters = [*([(col, ">=", lo)] if lo is not None else []), *([(col, "<", hi)] if hi is not None else [])]
        return table.to_pyarrow_table(columns=cols, filters=filters or None)

    def consistency_keys(self, schema: TableSchema, upto_batch: int) -> tuple[pa.Table, int]:
        """The table's keys at the version before the first commit of a micro-batch after
        ``upto_batch`` (a micro-batch may span several commits, one per step: reading at the
        latest version could catch half of one). Delta keeps every version, so this is exact
        while the stream keeps writing; the log is read back only as far as that commit.

        Each version's commit info is read from that version's own log file: delta-rs'
        ``history()`` lists the newest commits on storage but numbers them down from the version
        the table object was loaded at, so a commit landing between the two shifts every number
        (seen: the check read the table one micro-batch too early and reported a lost row)."""
        from deltalake import DeltaTable

        table = self.open_table(schema.table_id)
        cols = list(dict.fromkeys([*schema.row_identity, *schema.chunk_key]))
        version = table.version()
        fs, base = self._fs(schema.table_id).open()
        first_after = None
        for v in range(version, max(-1, version - 200), -1):
            info = _commit_info(fs, base, v)
            if info is None:  # cleaned up by log retention: nothing older is needed
                break
            batch = info.get("mysqlcdc.stream_batch")
            if batch is None or int(batch) <= int(upto_batch):
                if info.get("operation") != "SET TBLPROPERTIES":
                    break
                continue
            first_after = v
        if first_after is not None:
            version = first_after - 1
            table = DeltaTable(
                self.table_uri(schema.table_id), version=version, storage_options=self.storage_options or None
            )
        return table.to_pyarrow_table(columns=cols), int(upto_batch)

    def schema_capabilities(self) -> frozenset[str]:
        """delta-rs adds columns and deletes rows; renaming or dropping a column needs Delta's column
        mapping, which it does not write. A type change is a rewrite of the table (only taken when
        it widens: a lenient pipeline must not lose the new values)."""
        from ....cdc.schema import behavior as B

        return frozenset({B.ADD_COLUMN, B.TRUNCATE, B.ALTER_COLUMN_TYPE})

    def publish_steps(self, table_id: TableId, steps: Sequence[Any], batch_id: int) -> int:
        """Each step is its own Delta commit, recorded under the ``<app_id>.step`` application id as
        ``batch * STEP_SCALE + step * 1000 + operation``; the last also records the micro-batch
        under ``app_id``. A replay skips what those versions say is done."""
        from ....cdc.schema import behavior as B
        from ....cdc.schema.steps import RowsStep
        from ..last_change import merged_rows
        from ..projection import project_rows

        for step in steps:  # a table that comes (back) under a captured name: created before anything else
            if (
                not isinstance(step, RowsStep)
                and step.sink_after is not None
                and any(a.kind == B.CREATE_TABLE for a in step.actions)
            ):
                self._prepare_one(step.sink_after)
        table = self._unapplied(table_id, batch_id)
        if table is None:
            return 0
        done = table.transaction_version(self._step_app)
        ops: list[tuple[int, Any, Any]] = []  # (sub-version, step, action or None)
        for k, step in enumerate(steps):
            if isinstance(step, RowsStep):
                ops.append((k * 1000, step, None))
            else:
                ops += [(k * 1000 + j, step, a) for j, a in enumerate(step.actions)]
                if step.sink_after is not None:
                    self._schemas[table_id] = step.sink_after
        changes = 0
        for i, (sub, step, action) in enumerate(ops):
            version = batch_id * STEP_SCALE + sub
            if done is not None and done >= version:
                continue
            last = i == len(ops) - 1
            if action is None:
                rows = merged_rows(step.source, [bytes(r["payload"]) for r in step.records])
                log.info(step.describe("delta", batch_id, rows.num_rows))
                source = self._merge_source(step.sink, project_rows(rows, step.sink, keep=[META_OP]))
                self._merge(table, step.sink, source, batch_id, step_version=version, final=last)
                changes += step.changes
            else:
                self._apply_action(table, step, action, batch_id, version, last)
                crash_point(BETWEEN_STEPS)
            table = self._keep_stats_exact(self.open_table(table_id))
        for step in steps:
            if not isinstance(step, RowsStep):
                for note in step.notes:
                    log.warning("delta %s: %s", table_id, note)
        return changes

    @property
    def _step_app(self) -> str:
        return f"{self.app_id}.step"

    def _commit_props(self, batch_id: int, step_version: int | None, final: bool):
        from deltalake import CommitProperties, Transaction

        txns = []
        if final or step_version is None:
            txns.append(Transaction(self.app_id, int(batch_id)))
        if step_version is not None:
            txns.append(Transaction(self._step_app, int(step_version)))
        return CommitProperties(app_transactions=txns, custom_metadata={"mysqlcdc.stream_batch": int(batch_id)})

    def _apply_action(self, table, step: Any, action: Any, batch_id: int, version: int, final: bool) -> None:
        from deltalake import Field, write_deltalake

        from ....cdc.schema import behavior as B
        from ....cdc.types import map_column_in

        props = self._commit_props(batch_id, version, final)
        shaped = step.sink_after or step.sink_before  # its zero_dates decides date columns' types
        if action.kind == B.ADD_COLUMN:
            arrow = map_column_in(shaped, action.column).arrow_type
            present = {f.name for f in table.schema().fields}
            if action.column.name not in present:
                follow_up = action.fill is not None or action.copy_from
                table.alter.add_columns(
                    [Field.from_arrow(pa.field(action.column.name, arrow, True))],
                    commit_properties=None if follow_up else props,
                )
                table = self.open_table(step.sink_before.table_id)
            if action.copy_from:
                current = pa.schema(table.schema().to_arrow()).field(action.copy_from).type
                source = sql_ident(action.copy_from)
                expr = source if plain_type(current) == arrow else f"CAST({source} AS {_sql_type(arrow)})"
                table.update(updates={sql_ident(action.column.name): expr}, commit_properties=props)
            elif action.fill is None and action.refill:
                table.update(updates={sql_ident(action.column.name): "NULL"}, commit_properties=props)
            elif action.fill is not None:
                value = action.fill
                if pa.types.is_decimal(arrow) or pa.types.is_timestamp(arrow) or pa.types.is_date(arrow):
                    text = str(value).replace("'", "''")
                    updates = {sql_ident(action.column.name): f"CAST('{text}' AS {_sql_type(arrow)})"}
                    table.update(updates=updates, commit_properties=props)
                else:
                    table.update(new_values={action.column.name: value}, commit_properties=props)
        elif action.kind == B.CREATE_TABLE:
            pass  # created before the micro-batch's steps (publish_steps)
        elif action.kind == B.TRUNCATE:
            table.delete(commit_properties=props)
        elif action.kind == B.ALTER_COLUMN_TYPE:
            arrow = map_column_in(shaped, action.column).arrow_type
            data = table.to_pyarrow_table()
            i = data.schema.get_field_index(action.name)
            data = data.set_column(i, pa.field(action.name, arrow, True), data.column(i).cast(arrow))
            write_deltalake(table, data, mode="overwrite", schema_mode="overwrite", commit_properties=props)
        else:
            raise ConfigError(f"delta {step.sink_before.table_id}: cannot {action.describe()}. {REPORT_BUG}")
        log.info("delta %s: %s", step.sink_before.table_id if step.sink_before else "?", action.describe())

    def write_changes(self, schema: TableSchema, changes: DataFrame, batch_id: int) -> None:
        table = self._unapplied(schema.table_id, batch_id)
        if table is None:
            return
        source = self.merge_source(schema, changes)
        if source.num_rows == 0:
            return
        self._merge(table, schema, source, batch_id)

    def _unapplied(self, table_id: TableId, batch_id: int):
        """The Delta table, or None when this micro-batch was merged into it already."""
        table = self.open_table(table_id)
        done = table.transaction_version(self.app_id)
        if done is not None and done >= batch_id:
            log.info("delta %s: micro-batch %d already applied (version %d), skipped", table_id, batch_id, done)
            return None
        return self._keep_stats_exact(table)

    def merge_source(self, schema: TableSchema, changes: DataFrame) -> pa.Table:
        """The last change per row identity, reduced in Spark; only this reduced micro-batch
        (bounded by the stream's rate limit) comes to the driver, as Arrow."""
        latest = last_changes(
            changes, [spark_col(c) for c in schema.row_identity], [spark_col(c) for c in schema.column_names]
        )
        return self._merge_source(schema, latest.toArrow())

    @staticmethod
    def _merge_source(schema: TableSchema, rows: pa.Table) -> pa.Table:
        """The table's columns in the Delta table's types, and the op as ``MERGE_OP``."""
        target = table_arrow_schema(schema)
        columns = [rows.column(f.name).cast(f.type) for f in target] + [rows.column(META_OP).cast(pa.string())]
        return pa.Table.from_arrays(columns, schema=target.append(pa.field(MERGE_OP, pa.string())))

    def _merge(
        self,
        table,
        schema: TableSchema,
        source: pa.Table,
        batch_id: int,
        step_version: int | None = None,
        final: bool = True,
    ) -> Mapping[str, Any]:
        def eq(c: str) -> str:
            op = "IS NOT DISTINCT FROM" if schema.column(c).nullable else "="
            # parenthesized: DataFusion's parser binds AND tighter than IS NOT DISTINCT FROM
            return f"(t.{sql_ident(c)} {op} s.{sql_ident(c)})"

        predicate = " AND ".join(eq(c) for c in schema.row_identity)
        assign = {sql_ident(c): f"s.{sql_ident(c)}" for c in schema.column_names}
        upsert = f"s.{MERGE_OP} IN ('+I', '+U')"
        removed = f"s.{MERGE_OP} IN ('-D', '-U')"
        from deltalake.exceptions import CommitFailedError

        props = self._commit_props(batch_id, step_version, final)
        for attempt in range(1, 7):
            try:
                metrics = (
                    table.merge(
                        source,
                        predicate,
                        source_alias="s",
                        target_alias="t",
                        streamed_exec=False,
                        commit_properties=props,
                    )
                    .when_matched_delete(removed)
                    .when_matched_update(assign, upsert)
                    .when_not_matched_insert(assign, upsert)
                    .execute()
                )
                break
            except CommitFailedError as e:
                # Another writer committed meanwhile (OPTIMIZE, a manual fix): the merge is the micro-batch's
                # last word on its keys whatever the table holds, so it is run again on the new version.
                if attempt == 6:
                    raise
                delay = min(2.0, 0.1 * 2**attempt) * (0.5 + random.random())
                log.warning(
                    "delta %s micro-batch %d: commit conflict (%s), merging again in %.2f s",
                    schema.table_id,
                    batch_id,
                    str(e).splitlines()[0],
                    delay,
                )
                time.sleep(delay)
                table = self.open_table(schema.table_id)
        log.info(
            "delta %s micro-batch %d: %d source rows, +%d ~%d -%d",
            schema.table_id,
            batch_id,
            metrics.get("num_source_rows", 0),
            metrics.get("num_target_rows_inserted", 0),
            metrics.get("num_target_rows_updated", 0),
            metrics.get("num_target_rows_deleted", 0),
        )
        return metrics
