"""Apache Iceberg sink through pyiceberg: no Iceberg runtime jars in Spark.

One Iceberg table ``<database>.<table>`` per captured table, in the catalog of ``catalog.py``
(a SQLite SQL catalog under ``root`` by default), format version 2, the primary key as the
table's identifier fields.

Snapshot: the batch's SELECTs write its rows as Parquet files under the table's
``data/_snapshot/<batch>/`` themselves (``writes_snapshot_files``: the Arrow reader's tasks, or
Spark's JDBC reader's, no staging copy; ``write_snapshot`` for rows staged elsewhere); the
driver corrects them to the batch's high watermark, turns their footers into Iceberg data files
and commits ONE overwrite snapshot that adds them and removes the files an earlier run of the
same batch added; files no commit took are deleted before a rerun (``discard_uncommitted``). So a rerun replaces exactly its batch, readers see the old or the new rows of
it, and a job that dies before the commit leaves only unreferenced files. The files carry no
field ids: the table's name mapping (set when it is created) reads them by name, in every
engine.

Stream: each micro-batch is reduced to the last change per row identity (in the binlog
source's tasks with the direct write, ``last_change.py``, or by Spark on the row path) and
applied copy-on-write in one commit (``apply.py``): the data files that may hold a touched key
are read, rewritten without those rows, and the upserted rows added. The commit's snapshot
summary records the micro-batch (``mysqlcdc.stream-batch``); a micro-batch at or below the one
recorded is skipped, so a replay after a kill changes nothing.

Partitioning: a transform's ``partition_keys`` (``partition_tables``) give the table its
partition spec when it is created (an existing table partitioned otherwise is refused); every
write puts each data file in one partition (``partitioning.py``): the snapshot's tasks split their
rows by partition value, the stream's commits too.

Schema changes: a column added (Iceberg's schema evolution; old rows read it as NULL) and a
TRUNCATE; other changes take the lenient way where the pipeline's ``schema_change_behavior``
allows it, and stop the stream under ``evolve``.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame

from ....cdc.chunks import KeyRange
from ....cdc.errors import ConfigError
from ....cdc.model import TableId, TableSchema
from ....cdc.transform.partitioning import PartitionKey
from ...runtime.job_labels import describe
from ..base import META_OP, Sink, SnapshotWrite, direct_write_option, last_changes, schema_differences
from ..files.arrow import (
    DEFAULT_ROW_GROUP_ROWS,
    RECORD_SCHEMA,
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
from . import catalog as cat
from . import partitioning as part
from .apply import BATCH_KEY, STEP_KEY, apply_changes, last_recorded, overwrite, transaction, with_op

log = logging.getLogger(__name__)

SNAPSHOT_DIR = "data/_snapshot"
SNAPSHOT_BATCH_KEY = "mysqlcdc.snapshot-batch"
# A micro-batch's steps (rows, DDL operations) as one number each: batch * STEP_SCALE + step.
STEP_SCALE = 1_000_000
# The stream keeps this many of a table's newest snapshots (sink option snapshots_kept).
DEFAULT_SNAPSHOTS_KEPT = 100
# Identifier fields must be primitive and not floating point (the Iceberg spec).
_NO_IDENTIFIER = (pa.types.is_floating,)


class IcebergSink(Sink):
    """One Iceberg table per captured table; see the module docstring for the protocol."""

    name = "iceberg"

    def __init__(
        self,
        root: str,
        catalog: dict[str, Any] | None = None,
        catalog_name: str = cat.DEFAULT_CATALOG_NAME,
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        direct_write: bool = True,
        storage_options: dict[str, str] | None = None,
        password: str | None = None,
        snapshots_kept: int = DEFAULT_SNAPSHOTS_KEPT,
    ) -> None:
        """``storage_options`` (the ``aws`` connection's, for an S3 warehouse) and ``password`` (the
        ``sink_conn_id`` connection's, for a PostgreSQL catalog) are handed in memory by the
        operators and never stored; without them the process's environment gives both."""
        if catalog is not None and not isinstance(catalog, dict):
            raise ConfigError(
                f"sink_options.catalog: found {catalog!r}, need an object of catalog properties. Fix: e.g. "
                '{"type": "sql", "uri": "postgresql+psycopg://user@host/db"}, or leave it out (a SQLite '
                "catalog beside a local warehouse)."
            )
        self.root = local_or_uri(root).rstrip("/")
        self.catalog_name = str(catalog_name)
        self.catalog_props = cat.check_catalog_options(self.root, catalog)
        self.row_group_rows = row_group_rows
        if isinstance(snapshots_kept, bool) or not isinstance(snapshots_kept, int) or snapshots_kept < 0:
            raise ConfigError(
                f"sink_options.snapshots_kept: found {snapshots_kept!r}, need a whole number >= 0. Fix: give e.g. "
                f"{DEFAULT_SNAPSHOTS_KEPT} (the stream keeps a table's newest commits for time travel), or 0 to "
                "leave expiry to the watchdog's maintenance alone."
            )
        self.snapshots_kept = snapshots_kept
        self.direct = direct_write_option(direct_write)
        self.storage_options = dict(storage_options or {})
        self._password = password
        self._catalog: Any = None
        self._schemas: dict[TableId, TableSchema] = {}
        self._partitioning: dict[TableId, tuple[PartitionKey, ...]] = {}

    # --- the catalog --------------------------------------------------------------------------

    @classmethod
    def catalog_takes_password(cls, options: Mapping[str, Any]) -> bool:
        """A SQL catalog on PostgreSQL (``options["catalog"]``) logs in with the sink connection's password."""
        catalog = options.get("catalog")
        return isinstance(catalog, Mapping) and cat.takes_password({str(k): str(v) for k, v in catalog.items()})

    @property
    def catalog(self) -> Any:
        if self._catalog is None:
            if self.catalog_props.get("uri", "").startswith("sqlite:///"):
                import os

                os.makedirs(os.path.dirname(self.catalog_props["uri"][len("sqlite:///") :]), exist_ok=True)
            # the connections' parts join the stored properties here, in memory only
            props = {**cat.storage_properties(self.root, self.storage_options), **self.catalog_props}
            self._catalog = cat.load(self.catalog_name, props, cat.catalog_password(self._password))
        return self._catalog

    def open_table(self, table_id: TableId) -> Any:
        return self.catalog.load_table(cat.identifier(table_id))

    def table_location(self, table_id: TableId) -> str:
        return str(self.open_table(table_id).location()).rstrip("/")

    def forget_tables(self, table_ids: Sequence[TableId]) -> list[str]:
        """Each table's catalog entry and its files (data and metadata, with the stream's records)."""
        gone = []
        for t in table_ids:
            ident = cat.identifier(t)
            if not self.catalog.table_exists(ident):
                continue
            location = self.table_location(t)
            self.catalog.drop_table(ident)
            remove_tree(location)
            gone.append(f"{'.'.join(ident)} ({location})")
        return gone

    def asset_uri(self, table_id: TableId) -> str:
        ident = cat.identifier(table_id)
        if self.catalog.table_exists(ident):
            return location_uri(self.table_location(table_id))
        return location_uri(f"{self.root}/{table_id.database}/{table_id.table}")

    # --- prepare --------------------------------------------------------------------------------

    def partition_tables(self, keys: Mapping[TableId, Sequence[Any]]) -> None:
        """The sink tables' partition keys (checked against their columns by the views)."""
        self._partitioning = {t: tuple(k) for t, k in keys.items() if k}

    def prepare(self, schemas: Sequence[TableSchema]) -> None:
        for schema in schemas:
            self._prepare_one(schema)
            self._schemas[schema.table_id] = schema

    def _prepare_one(self, schema: TableSchema) -> None:
        ident = cat.identifier(schema.table_id)
        expected = cat.plain_arrow_schema(table_arrow_schema(schema))
        if self.catalog.table_exists(ident):
            actual = cat.plain_arrow_schema(self.open_table(schema.table_id).schema().as_arrow())
            diffs = schema_differences(expected, actual)
            if diffs:
                raise ConfigError(
                    f"Iceberg table {'.'.join(ident)} does not match the source table {schema.table_id}: "
                    f"{'; '.join(diffs)}. Fix: drop the Iceberg table (a fresh snapshot recreates it), or "
                    "capture into another catalog or root."
                )
            table = self.open_table(schema.table_id)
            part.check_spec(schema.table_id, table.spec(), table.schema(), self._partitioning.get(schema.table_id, ()))
            return
        from pyiceberg.catalog import Catalog
        from pyiceberg.schema import Schema, assign_fresh_schema_ids
        from pyiceberg.table import TableProperties

        keys = (
            []
            if any(p(expected.field(c).type) for c in schema.primary_key for p in _NO_IDENTIFIER)
            else schema.primary_key
        )
        required = pa.schema([f.with_nullable(f.nullable and f.name not in keys) for f in expected])
        converted = assign_fresh_schema_ids(Catalog._convert_schema_if_needed(required))
        keys = (
            []
            if any(p(expected.field(c).type) for c in schema.primary_key for p in _NO_IDENTIFIER)
            else schema.primary_key
        )
        ids = [converted.find_field(c).field_id for c in keys]
        iceberg_schema = Schema(*converted.fields, identifier_field_ids=ids)
        spec = part.build_spec(schema.table_id, iceberg_schema, self._partitioning.get(schema.table_id, ()))
        self.catalog.create_namespace_if_not_exists(ident[0])
        table = self.catalog.create_table(
            ident,
            schema=iceberg_schema,
            partition_spec=spec,
            properties={
                "format-version": "2",
                "comment": f"mysqlcdc replica of {schema.table_id}",
                TableProperties.DEFAULT_NAME_MAPPING: iceberg_schema.name_mapping.model_dump_json(),
            },
        )
        log.info(
            "created Iceberg table %s at %s%s",
            ".".join(ident),
            table.location(),
            f", partitioned by {', '.join(part.describe_spec(table.spec(), table.schema()))}"
            if not table.spec().is_unpartitioned()
            else "",
        )

    # --- snapshot -------------------------------------------------------------------------------

    def snapshot_prefix(self, batch_id: str) -> str:
        return f"{SNAPSHOT_DIR}/{safe_name(batch_id)}/"

    def write_snapshot(
        self, schema: TableSchema, frame: DataFrame, ranges: Sequence[KeyRange], batch_id: str
    ) -> SnapshotWrite:
        t0 = time.monotonic()
        table = self.open_table(schema.table_id)
        location = str(table.location()).rstrip("/")
        spec = FileWriteSpec(
            # the executors' filesystem: from their environment, or the options a Connect server's lack
            fs=FsSpec("uri", location, self.storage_options or None),
            directory=self.snapshot_prefix(batch_id).rstrip("/"),
            name_prefix=f"part-{new_run_tag()}",
            schema=cat.plain_arrow_schema(table.schema().as_arrow()),
            fmt="parquet",
            suffix=".parquet",
            row_group_rows=self.row_group_rows,
        )
        describe(frame.sparkSession, f"mysqlcdc iceberg snapshot {schema.table_id} {batch_id}")
        try:
            rows = frame.select(*[spark_col(c) for c in schema.column_names])
            if table.spec().is_unpartitioned():
                records = write_files(rows, spec)
            else:  # each task splits its rows by partition value: one partition per file
                columns = part.PartitionColumns.of(table.spec(), table.schema())
                got = rows.mapInArrow(part.partitioned_writer(spec, columns), RECORD_SCHEMA).collect()
                records = sorted(
                    (FileRecord(r["path"], r["size"], r["num_rows"], r["stats"], r["counts"]) for r in got),
                    key=lambda r: r.path,
                )
        finally:
            describe(frame.sparkSession, None)
        t1 = time.monotonic()
        details = self.commit_snapshot(schema, batch_id, location, spec.fs, records)
        details.update(write_s=round(t1 - t0, 3), commit_s=round(time.monotonic() - t1, 3))
        return SnapshotWrite(sum(r.num_rows for r in records), details)

    # the batch's SELECTs write the table's files (spark/snapshot/job.py, files/snapshot.py)

    def writes_snapshot_files(self) -> bool:
        """The batch's SELECTs write the table's files themselves, unless a table is partitioned:
        its files must each hold one partition with the value recorded beside them, which the
        Spark write path (``write_snapshot``, ``partitioning.write_partitioned``) does."""
        return not self._partitioning

    def snapshot_spec(self, schema: TableSchema, batch_id: str, count_by: str | None = None) -> FileWriteSpec:
        """Where and how a batch's data files of the table are written: under its prefix in the
        table's location, in the table's Arrow schema (Iceberg's types, no field ids), with the
        key's bounds for the corrections' pruning."""
        table = self.open_table(schema.table_id)
        return FileWriteSpec(
            fs=FsSpec("uri", str(table.location()).rstrip("/"), self.storage_options or None),
            directory=self.snapshot_prefix(batch_id).rstrip("/"),
            name_prefix=f"part-{new_run_tag()}",
            schema=cat.plain_arrow_schema(table.schema().as_arrow()),
            fmt="parquet",
            suffix=".parquet",
            row_group_rows=self.row_group_rows,
            with_stats=True,
            count_by=count_by,
        )

    def arrow_snapshot_spec(self, schema: TableSchema, batch_id: str) -> FileWriteSpec:
        """Where the Arrow reader's tasks write the batch's files (``snapshot/arrow_tasks.py``): the
        rows go from the source to the table's Parquet files without Spark's JVM or a staging copy."""
        return self.snapshot_spec(schema, batch_id)

    def write_chunk_files(
        self, schema: TableSchema, frame: DataFrame, batch_id: str, files: int
    ) -> tuple[list[FileRecord], dict[int, int]]:
        """The batch's SELECTs (Spark's JDBC reader) written straight into the table's uncommitted
        files by the Arrow writer: rows per chunk."""
        from ..files.snapshot import CHUNK_COLUMN, write_chunks

        describe(frame.sparkSession, f"mysqlcdc iceberg snapshot {schema.table_id} {batch_id}")
        try:
            cols = [spark_col(c) for c in schema.column_names]
            return write_chunks(frame.select(*cols), self.snapshot_spec(schema, batch_id, count_by=CHUNK_COLUMN), files)
        finally:
            describe(frame.sparkSession, None)

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
        details = self.commit_snapshot(schema, batch_id, spec.fs.base, spec.fs, final)
        delete_files(spec, superseded)
        details.update(
            correct_s=round(t1 - t0, 3), commit_s=round(time.monotonic() - t1, 3), files_rewritten=len(superseded)
        )
        return SnapshotWrite(sum(r.num_rows for r in final), details)

    def discard_uncommitted(self, schema: TableSchema, batch_id: str) -> int:
        """Delete the files under the batch's prefix that the table's current snapshot does not hold
        (a failed or killed run's, failed task attempts' included). How many files."""
        import pyarrow.fs as pafs

        spec = self.snapshot_spec(schema, batch_id)
        fs, base = spec.fs.open()
        prefix = spec.directory
        if fs.get_file_info(base + prefix).type == pafs.FileType.NotFound:
            return 0
        table = self.open_table(schema.table_id)
        committed = {_relative(f.file_path, spec.fs.base) for f in _data_files(table)}
        gone = 0
        for f in fs.get_file_info(pafs.FileSelector(base + prefix, recursive=True)):
            rel = f.path[len(base) :] if base else f.path
            if f.type == pafs.FileType.File and rel.lstrip("/") not in committed:
                fs.delete_file(f.path)
                gone += 1
        if gone:
            log.info("iceberg %s batch %s: removed %d file(s) no commit added", schema.table_id, batch_id, gone)
        return gone

    def commit_snapshot(
        self, schema: TableSchema, batch_id: str, location: str, fs: FsSpec, records: Sequence[FileRecord]
    ) -> dict[str, Any]:
        """One overwrite snapshot: the batch's new files in, the files an earlier run of it added out.
        Batches of one table commit concurrently: a commit that lost the race is rebuilt on the
        table's new state and tried again (each touches only its own batch's files). A partitioned
        table's files each come with their partition value (``partitioning.write_partitioned``)."""
        from pyiceberg.exceptions import CommitFailedException, ValidationException

        check_files(fs, records)
        base = location if "://" in location else f"file://{location}"
        paths = [f"{base}/{r.path}" for r in records]
        prefix = f"/{self.snapshot_prefix(batch_id)}"
        for attempt in range(1, 21):
            table = self.open_table(schema.table_id)
            files = [
                part.snapshot_data_file(
                    table.io, table.metadata, p, part.decode_value(r.stats) if r.stats is not None else None
                )
                for p, r in zip(paths, records)
            ]
            new = set(paths)
            old = [f for f in _data_files(table) if prefix in f.file_path and f.file_path not in new]
            if not files and not old:
                return {"files_added": 0, "files_removed": 0}
            try:
                with transaction(table) as tx:
                    with overwrite(tx, {SNAPSHOT_BATCH_KEY: str(batch_id)}) as ow:
                        for f in old:
                            ow.delete_data_file(f)
                        for f in files:
                            ow.append_data_file(f)
                break
            except (CommitFailedException, ValidationException) as e:  # e.g. a compaction replaced a file
                if attempt == 20:
                    raise
                log.info("iceberg %s batch %s: commit conflict (%s), retry %d", schema.table_id, batch_id, e, attempt)
                time.sleep(min(2.0, 0.05 * 2**attempt))
        log.info(
            "iceberg %s batch %s: committed %d files, removed %d earlier ones",
            schema.table_id,
            batch_id,
            len(files),
            len(old),
        )
        return {"files_added": len(files), "files_removed": len(old)}

    # --- stream ---------------------------------------------------------------------------------

    def direct_write(self) -> LastChange | None:
        return LastChange() if self.direct else None

    def schema_capabilities(self) -> frozenset[str]:
        """Iceberg adds columns by schema evolution, deletes every row for a TRUNCATE and widens a
        column's type (in place where Iceberg promotes it: int to long, float to double, a decimal's
        precision; else the column is rewritten)."""
        from ....cdc.schema import behavior as B

        return frozenset({B.ADD_COLUMN, B.TRUNCATE, B.ALTER_COLUMN_TYPE})

    def _change_type(
        self, table: Any, table_id: TableId, action: Any, arrow_type: pa.DataType, props: dict[str, str]
    ) -> None:
        """The column in its new type: nothing when Iceberg's type is the same (TINYINT to INT are both
        ``int``), Iceberg's own promotion where it has one, else the column dropped, added again in
        the new type and every row rewritten with its values converted, in one commit."""
        from pyiceberg.catalog import Catalog
        from pyiceberg.types import DecimalType, DoubleType, FloatType, IntegerType, LongType

        name = action.name
        new_arrow = cat.plain_arrow_schema(pa.schema([pa.field(name, arrow_type)])).field(0).type
        new_type = Catalog._convert_schema_if_needed(pa.schema([pa.field(name, new_arrow)])).fields[0].field_type
        field = table.schema().find_field(name)
        old = field.field_type
        promotes = (
            (isinstance(old, IntegerType) and isinstance(new_type, LongType))
            or (isinstance(old, FloatType) and isinstance(new_type, DoubleType))
            or (
                isinstance(old, DecimalType)
                and isinstance(new_type, DecimalType)
                and old.scale == new_type.scale
                and new_type.precision >= old.precision
            )
        )
        with table.transaction() as tx:
            if old == new_type:
                pass
            elif promotes:
                with tx.update_schema() as us:
                    us.update_column(name, field_type=new_type)
            else:
                if field.field_id in table.schema().identifier_field_ids:
                    raise ConfigError(
                        f"iceberg {table_id}: cannot change key column {name} from {old} to {new_type}. Fix: "
                        "recreate the sink table (trigger the pipeline with reset=true)."
                    )
                if any(f.source_id == field.field_id for f in table.spec().fields):
                    raise ConfigError(
                        f"iceberg {table_id}: cannot change partition column {name} from {old} to {new_type} (the "
                        "table's partition spec is over the column as it is). Fix: recreate the sink table (trigger "
                        "the pipeline with reset=true), or drop it from partition_keys and reset."
                    )
                data = table.scan().to_arrow()
                values = data.column(name).cast(new_arrow)
                with tx.update_schema() as us:
                    us.delete_column(name)
                with tx.update_schema() as us:
                    us.add_column(name, new_type)
                target = cat.plain_arrow_schema(tx.table_metadata.schema().as_arrow())
                cols = {f.name: (values if f.name == name else data.column(f.name)) for f in target}
                rows = pa.table({n: c.cast(target.field(n).type) for n, c in cols.items()}, schema=target)
                _replace_rows(tx, table, rows, props)
            from pyiceberg.table import TableProperties

            mapping = tx.table_metadata.schema().name_mapping.model_dump_json()
            tx.set_properties(**{TableProperties.DEFAULT_NAME_MAPPING: mapping, **props})

    def write_changes(self, schema: TableSchema, changes: DataFrame, batch_id: int) -> None:
        """The row path: Spark reduces the micro-batch to the last change per row identity (only that
        comes to the driver, as Arrow), which is applied in one commit."""
        table = self._unapplied(schema.table_id, batch_id * STEP_SCALE)
        if table is None:
            return
        latest = last_changes(
            changes, [spark_col(c) for c in schema.row_identity], [spark_col(c) for c in schema.column_names]
        )
        rows = with_op(table, latest.toArrow())
        if rows.num_rows:
            apply_changes(table, schema, rows, self._props(batch_id, batch_id * STEP_SCALE, final=True))
            self._bound_history(schema.table_id)

    def publish_steps(self, table_id: TableId, steps: Sequence[Any], batch_id: int) -> int:
        """Each step is its own commit, recorded as ``batch * STEP_SCALE + step * 1000 + operation``;
        the last also records the micro-batch. A replay skips what the table's snapshots say is done."""
        from ....cdc.faults import BETWEEN_STEPS, crash_point
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
        table = self._unapplied(table_id, batch_id * STEP_SCALE)
        if table is None:
            return 0
        done_step = last_recorded(table, STEP_KEY)
        ops: list[tuple[int, Any, Any]] = []
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
            if done_step is not None and done_step >= version:
                continue
            props = self._props(batch_id, version, final=i == len(ops) - 1)
            table = self.open_table(table_id)
            if action is None:
                rows = merged_rows(step.source, [bytes(r["payload"]) for r in step.records])
                log.info(step.describe("iceberg", batch_id, rows.num_rows))
                applied = with_op(table, project_rows(rows, step.sink, keep=[META_OP]))
                apply_changes(table, step.sink, applied, props)
                changes += step.changes
            else:
                self._apply_action(table, step, action, props)
                crash_point(BETWEEN_STEPS)
        for step in steps:
            if not isinstance(step, RowsStep):
                for note in step.notes:
                    log.warning("iceberg %s: %s", table_id, note)
        if ops:
            self._bound_history(table_id)
        return changes

    def _bound_history(self, table_id: TableId) -> None:
        """Expire the stream's oldest snapshots once there are half as many again as ``snapshots_kept``.

        A commit's cost grows with the snapshots the table's metadata lists (pyiceberg copies the
        whole metadata a dozen times per commit: measured 0.17 s per micro-batch commit with 10
        snapshots, 0.75 s with 300), so a stream committing every second cannot wait for the hourly
        maintenance: it keeps the newest ``snapshots_kept`` itself (the files only the expired ones
        read are deleted), in batches so the work is paid once per ``snapshots_kept / 2`` commits."""
        if not self.snapshots_kept:
            return
        from .maintenance import expire_beyond

        expire_beyond(self.open_table(table_id), self.snapshots_kept)

    def _props(self, batch_id: int, step_version: int, final: bool) -> dict[str, str]:
        props = {STEP_KEY: str(step_version)}
        if final:
            props[BATCH_KEY] = str(batch_id)
        return props

    def _unapplied(self, table_id: TableId, step_version: int) -> Any:
        """The table, or None when this micro-batch was committed to it already."""
        table = self.open_table(table_id)
        done = last_recorded(table, BATCH_KEY)
        batch_id = step_version // STEP_SCALE
        if done is not None and done >= batch_id:
            log.info("iceberg %s: micro-batch %d already applied (up to %d), skipped", table_id, batch_id, done)
            return None
        return table

    def _apply_action(self, table: Any, step: Any, action: Any, props: dict[str, str]) -> None:
        """One schema action, in one commit with the step's record (a schema change adds no data
        snapshot: the record is the table's properties, written in the same commit)."""
        from pyiceberg.table import TableProperties

        from ....cdc.schema import behavior as B
        from ....cdc.types import map_column_in

        shaped = step.sink_after or step.sink_before
        table_id = (step.sink_before or step.sink_after).table_id
        if action.kind == B.ADD_COLUMN:
            from pyiceberg.catalog import Catalog

            arrow = cat.plain_arrow_schema(
                pa.schema([pa.field(action.column.name, map_column_in(shaped, action.column).arrow_type)])
            )
            field_type = Catalog._convert_schema_if_needed(arrow).fields[0].field_type
            fills = action.fill is not None or bool(action.copy_from) or action.refill
            with table.transaction() as tx:
                if not _has(table, action.column.name):
                    with tx.update_schema() as us:
                        us.add_column(action.column.name, field_type)
                mapping = tx.table_metadata.schema().name_mapping.model_dump_json()
                tx.set_properties(**{TableProperties.DEFAULT_NAME_MAPPING: mapping})
                if fills:  # Iceberg v2 has no column default: the existing rows are rewritten with it
                    _rewrite_column(tx, table, action, arrow.field(0).type, props)
                tx.set_properties(**props)
        elif action.kind == B.ALTER_COLUMN_TYPE:
            self._change_type(table, table_id, action, map_column_in(shaped, action.column).arrow_type, props)
        elif action.kind == B.CREATE_TABLE:
            with table.transaction() as tx:
                tx.set_properties(**props)
        elif action.kind == B.TRUNCATE:
            from pyiceberg.expressions import AlwaysTrue

            with table.transaction() as tx:
                tx.delete(AlwaysTrue(), snapshot_properties=props)
                tx.set_properties(**props)
        else:
            raise ConfigError(
                f"iceberg {table_id}: cannot {action.describe()}. Fix: set schema_change_behavior to lenient or "
                "try_evolve (the change is then kept the way a sink that cannot apply it keeps it), or use a "
                "Delta or PostgreSQL sink."
            )
        log.info("iceberg %s: %s", table_id, action.describe())

    # --- reads for the re-snapshot and the consistency check -------------------------------------

    def keys_in_sink(self, schema: TableSchema, key_range: KeyRange | None = None) -> pa.Table:
        from ..resnapshot_rows import integer_bounds

        table = self.open_table(schema.table_id)
        cols = list(dict.fromkeys([*schema.row_identity, *schema.chunk_key]))
        bounds = integer_bounds(schema, key_range)
        scan = table.scan(selected_fields=tuple(cols))
        if bounds is not None:
            from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

            col, lo, hi = bounds
            terms = [
                *([GreaterThanOrEqual(col, lo)] if lo is not None else []),
                *([LessThan(col, hi)] if hi is not None else []),
            ]
            if terms:
                scan = table.scan(selected_fields=tuple(cols), row_filter=terms[0] if len(terms) == 1 else And(*terms))
        return scan.to_arrow()

    def consistency_keys(self, schema: TableSchema, upto_batch: int) -> tuple[pa.Table, int]:
        """The keys at the snapshot before the first commit of a micro-batch after ``upto_batch`` (a
        micro-batch may span several commits, one per step), read while the stream keeps writing."""
        table = self.open_table(schema.table_id)
        cols = tuple(dict.fromkeys([*schema.row_identity, *schema.chunk_key]))
        snap = table.current_snapshot()
        at = snap.snapshot_id if snap is not None else None
        while snap is not None:
            step = snap.summary.get(STEP_KEY) if snap.summary is not None else None
            if step is not None and int(step) // STEP_SCALE <= int(upto_batch):
                break
            if step is not None:
                at = snap.parent_snapshot_id
            parent = snap.parent_snapshot_id
            snap = table.snapshot_by_id(parent) if parent is not None else None
            if parent is not None and snap is None:
                raise RuntimeError(
                    f"iceberg {schema.table_id}: the snapshot of micro-batch {upto_batch} has expired (the sink keeps "
                    f"its newest {self.snapshots_kept or 'few'} snapshots): the check compares a micro-batch the "
                    "table no longer holds. Run the check again: it takes the newest committed micro-batch."
                )
        if at is None:
            return pa.table({c: pa.array([], type=table_arrow_schema(schema).field(c).type) for c in cols}), int(
                upto_batch
            )
        return table.scan(selected_fields=cols, snapshot_id=at).to_arrow(), int(upto_batch)


def _rewrite_column(tx: Any, table: Any, action: Any, arrow_type: pa.DataType, props: dict[str, str]) -> None:
    """Every existing row with ``action``'s column set (a DEFAULT, another column's values, or
    NULL for a column the sink kept), in the transaction's one overwrite of the table's files."""
    data = table.scan().to_arrow()
    target = cat.plain_arrow_schema(tx.table_metadata.schema().as_arrow())
    n = data.num_rows
    if action.copy_from:
        values = data.column(action.copy_from).cast(arrow_type)
    elif action.fill is None:
        values = pa.nulls(n, arrow_type)
    else:
        try:
            values = pa.array([action.fill] * n, arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            values = pa.array([str(action.fill)] * n, pa.string()).cast(arrow_type)
    columns = {f.name: (values if f.name == action.column.name else data.column(f.name)) for f in target}
    rows = pa.table({name: col.cast(target.field(name).type) for name, col in columns.items()}, schema=target)
    _replace_rows(tx, table, rows, props)


def _replace_rows(tx: Any, table: Any, rows: pa.Table, props: dict[str, str]) -> None:
    """Every row of the table replaced by ``rows`` in the transaction (its schema as updated so far):
    pyiceberg's overwrite, or -- for a partitioned table, whose partition values pyiceberg's writer
    computes only with its optional Rust package -- the same overwrite with the files written here."""
    meta = tx.table_metadata
    if meta.spec().is_unpartitioned():
        from pyiceberg.expressions import AlwaysTrue

        tx.overwrite(rows, overwrite_filter=AlwaysTrue(), snapshot_properties=props)
        return
    import itertools
    import uuid

    write_uuid = uuid.uuid4()
    added = part.data_files(meta, rows, table.io, write_uuid, itertools.count(0)) if rows.num_rows else []
    with overwrite(tx, props, write_uuid) as ow:
        for f in _data_files(table):
            ow.delete_data_file(f)
        for f in added:
            ow.append_data_file(f)


def _has(table: Any, column: str) -> bool:
    return any(f.name == column for f in table.schema().fields)


def _relative(file_path: str, location: str) -> str:
    """A data file's path relative to the table's location (both as URIs or plain paths)."""

    def plain(p: str) -> str:
        return p[len("file://") :] if p.startswith("file://") else p

    path, base = plain(file_path), plain(location).rstrip("/") + "/"
    return path[len(base) :] if path.startswith(base) else path


def _data_files(table: Any) -> list[Any]:
    """The data files of the table's current snapshot."""
    snap = table.current_snapshot()
    if snap is None:
        return []
    return [task.file for task in table.scan(snapshot_id=snap.snapshot_id).plan_files()]
