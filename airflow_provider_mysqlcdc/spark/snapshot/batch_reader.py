"""Read a batch of chunks on Spark, exactly as of the batch's high watermark (design.md §3).

1. LW: the backfill start. On MariaDB the binlog position of a consistent snapshot, which
   is exact (every transaction before it is visible to any later SELECT). On MySQL the
   current offset, read ``visibility_margin_s`` before the SELECTs start, so a transaction
   already in the binlog but not yet visible in InnoDB is still inside the backfill.
2. The batch's SELECTs: Spark's own JDBC reader, one predicate per chunk, on the executors;
   materialized (cached, or staged as Parquet: spark/snapshot/materialize.py) so every SELECT has
   finished before step 3.
3. HW: the current offset.
4. If HW > LW: one bounded binlog read LW..HW, reduced to the last change per row inside the
   batch's ranges, applied as Spark operations: anti-join of the changed keys, union of the
   surviving after-images. Nothing is collected onto the driver but the (small) corrections.

A table whose columns differ from the plan's at LW, or that a DDL changes between LW and HW,
fails the batch before anything is written (``TableChangedError``): its chunks could hold rows
of two shapes. So the binlog from the snapshot's watermarks on was logged with the plan's
schemas, which is where the stream's schema history starts.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ...cdc.binlog.failover import ServerIdentity, SourceChangedError, gtid_state_at, server_identity
from ...cdc.binlog.fast.fallback import changes_with_fallback
from ...cdc.chunks import Batch, Chunk
from ...cdc.errors import TableChangedError
from ...cdc.events import SchemaChange
from ...cdc.model import TableId, TableSchema, quote_ident
from ...cdc.offsets import BinlogOffset
from ...cdc.plan import FIRST_BATCH_SLOT
from ...cdc.snapshot.corrections import TableCorrections, reduce_changes
from ...cdc.snapshot.keyorder import key_order_for
from ...cdc.source.config import SourceConfig
from ...cdc.source.server import consistent_snapshot_offset, current_offset, server_version
from ...cdc.sql import range_predicate
from ...cdc.types import ColumnMapping, map_table
from ..runtime.job_labels import describe
from ..runtime.session import JDBC_DRIVER_CLASS
from ..types import finalize_columns, jdbc_custom_schema, rows_to_dataframe
from ..types import jdbc_url as _jdbc_url
from .materialize import CachedMaterializer, Materialized, Materializer, StagedMaterializer

log = logging.getLogger(__name__)


def _short(sql: str, n: int = 160) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= n else text[: n - 3] + "..."


# A SELECT per chunk costs a JDBC connection and a Spark task each: with Flink CDC's 8,096-row
# chunks that is thousands per table. Chunks only size the SELECTs -- a batch is one window --
# so consecutive chunks are read together, about this many rows a SELECT.
ROWS_PER_SELECT = 250_000


def select_groups(chunks: Sequence[Chunk], rows_per_select: int, chunk_rows: int | None) -> list[list[Chunk]]:
    """Runs of consecutive chunks of one table, each read by one SELECT; at least two runs when
    there are two chunks (two cores read)."""
    if rows_per_select <= 1 or len(chunks) <= 1 or not chunk_rows:
        return [[c] for c in chunks]
    take = max(1, rows_per_select // max(1, chunk_rows))
    take = min(take, max(1, -(-len(chunks) // 2)))
    return [list(chunks[i : i + take]) for i in range(0, len(chunks), take)]


def group_key(group: Sequence[Chunk]) -> Any:
    """A group's key in rows-per-chunk: the chunk id, or ``"first-last"`` for several chunks."""
    return group[0].chunk_id if len(group) == 1 else f"{group[0].chunk_id}-{group[-1].chunk_id}"


@dataclass
class TableRead:
    """One table's part of a batch: the corrected rows and what it took to get them."""

    table_id: TableId
    frame: DataFrame
    rows_per_chunk: dict[Any, int]  # chunk id, or "first-last" for chunks read by one SELECT
    deleted_keys: int = 0
    upserted_rows: int = 0
    corrections: TableCorrections | None = None  # the window's changes (applied to ``frame`` already)


@dataclass
class BatchRead:
    batch: Batch
    low_watermark: BinlogOffset
    high_watermark: BinlogOffset
    tables: dict[TableId, TableRead]
    backfill_events: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    readers: dict[TableId, str] = field(default_factory=dict)  # "arrow" or "jdbc": which read the table
    server: str | None = None  # the server both watermarks were taken on (cdc/binlog/failover.ServerIdentity)
    _held: list[Materialized] = field(default_factory=list, repr=False)

    def frame(self, table_id: TableId) -> DataFrame:
        return self.tables[table_id].frame

    def unpersist(self) -> None:
        """Release the materialized rows (cache blocks or staged files) once they are written."""
        for m in self._held:
            m.release()
        self._held.clear()


def jdbc_url(source: SourceConfig) -> str:
    """``jdbc:mysql://`` so Spark picks its MySQL dialect; no credentials in the URL."""
    return _jdbc_url(source.host, source.port, "", source.jdbc_tls_params())


class ConsistentBatchReader:
    """Reads batches of chunks of known tables; one instance per Spark application."""

    def __init__(
        self,
        spark: SparkSession,
        source: SourceConfig,
        schemas: Mapping[TableId, TableSchema],
        *,
        server_id: int | None = None,
        visibility_margin_s: float = 0.5,
        staging_dir: str | None = None,
        storage_level: StorageLevel = StorageLevel.MEMORY_AND_DISK,
        materializer: Materializer | None = None,
        rows_per_select: int = ROWS_PER_SELECT,
        chunk_rows: int | None = None,
        arrow_reader: bool = False,
    ) -> None:
        """``staging_dir``: materialize through Parquet files there (see spark/snapshot/materialize.py);
        without it, rows are persisted in Spark's cache with ``storage_level``. ``rows_per_select``:
        consecutive chunks are read by one SELECT of about that many rows (``chunk_rows``: the
        plan's chunk size; without it, or with 1, each chunk is read alone). ``arrow_reader``: a
        table the materializer takes Arrow files for is read by the Arrow reader's tasks
        (``arrow_tasks.py``), not Spark's JDBC reader."""
        self.spark = spark
        self.source = source
        self.schemas = dict(schemas)
        # Slots 0 and 1 belong to the stream (cdc/plan.py); a lone reader takes the first batch slot.
        self.server_id = server_id if server_id is not None else source.server_id_range.pick(FIRST_BATCH_SLOT)
        self.visibility_margin_s = visibility_margin_s
        self.materializer: Materializer = materializer or (
            StagedMaterializer(spark, staging_dir) if staging_dir else CachedMaterializer(storage_level)
        )
        self._mappings = {t: map_table(s, source.server_time_zone) for t, s in self.schemas.items()}
        self.rows_per_select = rows_per_select
        self.chunk_rows = chunk_rows
        self.arrow_reader = arrow_reader

    # --- the JDBC side --------------------------------------------------------------------------

    def _derived_table(self, schema: TableSchema, mappings: Sequence[ColumnMapping]) -> tuple[str, dict[str, str]]:
        """``(SELECT <mapped exprs> FROM t) q`` plus the SQL name of each chunk-key column in it.

        A chunk-key column whose mapped expression is not the bare column is also selected
        raw under an alias, so the chunk predicates compare stored values (index range scan).
        """
        select = []
        key_sql: dict[str, str] = {}
        for m in mappings:
            select.append(f"{m.select_sql} AS {quote_ident(m.column.name)}")
        for i, col in enumerate(schema.chunk_key):
            m = next(m for m in mappings if m.column.name == col)
            if m.select_sql.strip() == quote_ident(col):
                key_sql[col] = quote_ident(col)
            else:
                alias = f"__ck{i}"
                select.append(f"{quote_ident(col)} AS {quote_ident(alias)}")
                key_sql[col] = quote_ident(alias)
        sql = f"(SELECT {', '.join(select)} FROM {schema.table_id.quoted}) AS q"
        return sql, key_sql

    def _read_chunks(self, schema: TableSchema, groups: Sequence[Sequence[Chunk]]) -> DataFrame:
        """One JDBC partition (one SELECT, one connection) per group of consecutive chunks: its
        range runs from the first chunk's start to the last one's end."""
        mappings = self._mappings[schema.table_id]
        table_sql, key_sql = self._derived_table(schema, mappings)
        predicates = [
            range_predicate(schema, g[0].start, g[-1].end, g[0].includes_null, column_sql=key_sql) for g in groups
        ]
        props = {
            "user": self.source.user,
            "password": self.source.password,
            "driver": JDBC_DRIVER_CLASS,
            "fetchsize": str(self.source.jdbc_fetch_size),
            "customSchema": jdbc_custom_schema(mappings),
        }
        df = self.spark.read.jdbc(jdbc_url(self.source), table_sql, predicates=predicates, properties=props)
        extra = [c for c in df.columns if c.startswith("__ck")]
        if extra:
            df = df.drop(*extra)
        return finalize_columns(df, mappings)

    # --- the batch ------------------------------------------------------------------------------

    def _low_watermark(self, conn, version) -> BinlogOffset:
        snap = consistent_snapshot_offset(conn) if version.is_mariadb else None
        if snap is not None:
            return snap
        lw = current_offset(conn, version)
        time.sleep(self.visibility_margin_s)
        return lw

    def _high_watermark(self, conn, version) -> BinlogOffset:
        """The head, with the GTID state exactly at it (MariaDB's ``gtid_binlog_pos`` may lag the
        position by a transaction): the stream places the watermark by GTID after a failover."""
        hw = current_offset(conn, version)
        if version.is_mariadb:
            exact = gtid_state_at(conn, version, hw)
            if exact is not None:
                hw = BinlogOffset(hw.file, hw.position, exact)
        return hw

    def _same_server(self, before: ServerIdentity, version) -> None:
        """Fail the batch (nothing written; the task's retry reads it again) when the server behind
        the endpoint changed during its window: rows and watermarks of two servers never mix."""
        with contextlib.closing(self.source.connect()) as fresh:
            now = server_identity(fresh, version)
        if now != before:
            raise SourceChangedError(
                f"the source server changed during this batch's window ({before.describe()} at the low watermark, "
                f"{now.describe()} now: a failover): the batch wrote nothing. Fix: nothing while the task has "
                "retries left (a retry reads the batch again); once they are exhausted, clear the batch's task."
            )

    def read(self, batch: Batch) -> BatchRead:
        timings: dict[str, float] = {}
        t0 = time.monotonic()
        with contextlib.closing(self.source.connect()) as conn:
            version = server_version(conn)
            server = server_identity(conn, version)
            lw = self._low_watermark(conn, version)
            timings["low_watermark_s"] = time.monotonic() - t0
            self._check_unchanged(conn, batch)

            t1 = time.monotonic()
            raw: dict[TableId, DataFrame] = {}
            held: list[Materialized] = []
            counts: dict[TableId, dict[int, int]] = {}
            readers: dict[TableId, str] = {}
            for table_id in batch.tables:
                schema = self.schemas[table_id]
                chunks = batch.chunks_of(table_id)
                groups = select_groups(chunks, self.rows_per_select, self.chunk_rows)
                describe(self.spark, f"mysqlcdc snapshot {table_id} chunks {chunks[0].chunk_id}-{chunks[-1].chunk_id}")
                # Runs every SELECT to completion. JDBC partitions are the groups, in order,
                # so rows per partition are rows per group of chunks.
                readers[table_id] = "arrow" if self._reads_arrow(table_id) else "jdbc"
                if readers[table_id] == "arrow":
                    done = self.materializer.materialize_arrow(  # type: ignore[attr-defined]
                        self.spark, self.source, table_id, groups
                    )
                else:
                    done = self.materializer.materialize(
                        self._read_chunks(schema, groups), f"{batch.batch_id}-{table_id}", table_id
                    )
                held.append(done)
                counts[table_id] = {group_key(g): done.rows_per_partition.get(i, 0) for i, g in enumerate(groups)}
                raw[table_id] = done.frame
            timings["select_s"] = time.monotonic() - t1

            hw = self._high_watermark(conn, version)
            self._same_server(server, version)
        result = BatchRead(batch, lw, hw, {}, timings=timings, readers=readers, server=str(server), _held=held)

        t2 = time.monotonic()
        corrections: dict[TableId, TableCorrections] = {}
        if hw > lw:
            corrections, result.backfill_events = self._backfill(batch, lw, hw)
        timings["backfill_s"] = time.monotonic() - t2

        for table_id, df in raw.items():
            tc = corrections.get(table_id)
            frame, deleted, upserted = df, 0, 0
            if df is not None and tc is not None and (tc.deleted or tc.upserts):
                frame = self.apply_corrections(table_id, df, tc)
                deleted, upserted = len(tc.deleted), len(tc.upserts)
            result.tables[table_id] = TableRead(table_id, frame, counts[table_id], deleted, upserted, tc)
        describe(self.spark, None)
        timings["total_s"] = time.monotonic() - t0
        log.debug(
            "batch %s: LW=%s HW=%s rows=%d backfill_events=%d timings=%s",
            batch.batch_id,
            lw,
            hw,
            sum(sum(t.rows_per_chunk.values()) for t in result.tables.values()),
            result.backfill_events,
            {k: round(v, 3) for k, v in timings.items()},
        )
        return result

    def _reads_arrow(self, table_id: TableId) -> bool:
        spec = getattr(self.materializer, "arrow_spec", None)
        return self.arrow_reader and spec is not None and spec(table_id) is not None

    def _backfill(self, batch: Batch, lw: BinlogOffset, hw: BinlogOffset):
        schemas = {t: self.schemas[t] for t in batch.tables}
        key_orders = {t: key_order_for(s, self.source) for t, s in schemas.items()}
        counted = 0

        def counting(events):
            nonlocal counted
            for e in events:
                if isinstance(e, SchemaChange):
                    hit = [t for t in (e.tables or (e.table_id,)) if t in schemas]
                    if hit:
                        raise TableChangedError(
                            f"snapshot batch {batch.batch_id}: {', '.join(map(str, hit))} changed while the batch read it "
                            f"(DDL at {e.offset}: {_short(e.sql)!r}); its chunks could hold rows of two shapes, so "
                            "nothing of the batch was written. Fix: trigger the pipeline with reset=true to plan the "
                            "tables with their new schema (the stream, once running, follows DDL by itself)."
                        )
                counted += 1
                yield e

        changes = changes_with_fallback(self.source, self.server_id, lw, hw, list(schemas.values()))
        corrections = reduce_changes(counting(changes), batch, schemas, key_orders)
        return corrections, counted

    def _check_unchanged(self, conn, batch: Batch) -> None:
        """Each table's columns now (after LW) are the plan's: a DDL between the plan and LW would
        make the SELECTs read a shape the plan and the stream's schema history do not know. (A DDL
        after LW is in the backfill window, which ``_backfill`` checks.)"""
        for table_id in batch.tables:
            plan = self.schemas[table_id]
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                    "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                    (table_id.database, table_id.table),
                )
                now = [(str(n), str(ct).lower()) for n, ct in cur.fetchall()]
            want = [(c.name, c.column_type.lower()) for c in plan.columns]
            if now != want:
                raise TableChangedError(
                    f"snapshot batch {batch.batch_id}: {table_id} changed since the plan (columns now {now}, planned "
                    f"{want}); nothing of the batch was written. Fix: trigger the pipeline with reset=true to plan "
                    "the tables with their current schema."
                )

    def apply_corrections(self, table_id: TableId, df: DataFrame, tc: TableCorrections) -> DataFrame:
        """Drop every changed row, add back the last after-image of those still present."""
        schema = self.schemas[table_id]
        mappings = self._mappings[table_id]
        ident = list(schema.row_identity)
        by_name = {m.column.name: m for m in mappings}
        ident_mappings = [by_name[c] for c in ident]
        changed = set(tc.deleted) | set(tc.upserts)
        key_rows = [dict(zip(ident, k)) for k in changed]
        keys_df = rows_to_dataframe(self.spark, key_rows, ident_mappings)
        cond = None
        for c in ident:
            term = df[c].eqNullSafe(keys_df[c])
            cond = term if cond is None else cond & term
        kept = df.join(F.broadcast(keys_df), on=cond, how="left_anti")
        if not tc.upserts:
            return kept
        upserts = rows_to_dataframe(self.spark, list(tc.upserts.values()), mappings)
        return kept.unionByName(upserts)
