"""PostgreSQL sink (psycopg 3): tables from the MySQL schema, COPY-staged snapshots, upserts.

Tables
    ``prepare`` creates ``<schema>.<table_name_format>`` (default ``{database}__{table}``)
    with the types below and the row identity as PRIMARY KEY (or, when an identity column
    is nullable -- only for tables whose identity is "every column" -- as a
    ``UNIQUE NULLS NOT DISTINCT`` constraint, PostgreSQL >= 15). One extra column,
    ``_mysqlcdc_batch integer``, tags every row with the snapshot batch that wrote it (see
    below); a BRIN index on it keeps the rerun DELETE cheap (a batch's rows are inserted by
    one statement, so they sit in adjacent pages). Bookkeeping tables live in the same
    schema: ``_mysqlcdc_snapshot_batches`` and ``_mysqlcdc_progress``.

    ==============================  ===============================  =========================
    MySQL type (ColumnMapping.kind)  PostgreSQL type                  note
    ==============================  ===============================  =========================
    TINYINT, TINYINT UNSIGNED,      smallint                         PG has no 1-byte int
    SMALLINT
    SMALLINT UNSIGNED, MEDIUMINT,   integer
    INT
    INT UNSIGNED, BIGINT            bigint
    BIGINT UNSIGNED                 numeric(20,0)                    no wrap-around
    DECIMAL(p,s)                    numeric(p,s)                     p up to 65 (PG: 1000)
    FLOAT / DOUBLE                  real / double precision
    DATETIME(fsp)                   timestamp without time zone      wall clock, microseconds
    TIMESTAMP(fsp)                  timestamp with time zone         the instant
    DATE                            date
    TIME(fsp)                       bigint                           signed microseconds, as
                                                                     in Spark (TIME spans
                                                                     +-838 h; PG time cannot)
    YEAR                            smallint
    BIT(n<64) / BIT(64)             bigint / numeric(20,0)
    CHAR/VARCHAR/TEXT, ENUM, SET    text                             SET: comma-joined members
    JSON                            text                             exact server text
    BINARY/VARBINARY/BLOB           bytea
    ==============================  ===============================  =========================

    JSON is ``text``, not ``jsonb``: jsonb reorders keys, drops duplicate keys and reprints
    numbers, so the sink would no longer equal the source byte for byte, and MariaDB's JSON
    (a LONGTEXT) may hold text jsonb rejects. Cast in queries (``col::jsonb``) where needed.

Snapshot (``write_snapshot`` = ``stage_snapshot`` + ``commit_snapshot``)
    Executors COPY their partitions in parallel (CSV produced by Arrow's C++ writer, one
    psycopg connection and one transaction per task) into an UNLOGGED staging table
    ``_mysqlcdc_stg_<hash(table, batch)>_<run id>``. Each task tags its rows with a random
    token and returns (token, rows); the driver only takes the rows of the tokens it got
    back, so a task that Spark retried or ran speculatively cannot duplicate rows.

    The driver then, in ONE transaction: locks the batch's row in
    ``_mysqlcdc_snapshot_batches`` (which maps the batch id to a small ``batch_no``),
    deletes the rows tagged with that ``batch_no`` (what earlier runs of this batch
    wrote), inserts the staged rows tagged ``batch_no`` with ``ON CONFLICT (identity) DO
    UPDATE``, records the run, and drops the staging table.

    Why a tag and not a key-range DELETE: the batch's ranges are in MySQL's order (its
    collation for strings: ``'a' = 'A'``, ``'a' = 'a '`` under PAD SPACE, accent rules ...).
    PostgreSQL orders text by its own collation, so ``DELETE WHERE k >= start AND k < end``
    on a string key would delete rows of a neighbouring batch or miss rows of this one. The
    tag records exactly which rows this batch wrote, whatever the key type. Rows the stream
    later inserts into the range carry no tag; a rerun overwrites them if the source still
    has them (ON CONFLICT) and leaves them otherwise -- the stream owns them.

    A job that dies before the commit leaves the target untouched (only the staging table
    exists); the next run of the same batch drops stale staging tables of that batch first.
    Running a batch twice deletes and re-inserts the same rows: the table ends unchanged.

Stream (``publish_steps``, or ``write_changes`` with ``direct_write=False``)
    The micro-batch is reduced to the last change per identity (by ``_seq``): by default
    first by the binlog source's tasks, each for the range it decoded, then across ranges
    on the driver (``last_change.py``); with ``direct_write=False`` by Spark (a window). A
    last op of ``-D`` or ``-U`` (the old key of a key-changing update) is a delete, ``+I`` /
    ``+U`` an upsert. The reduced rows (bounded by the stream's rate limit, never a table)
    come to the driver and are applied in ONE transaction: COPY into temp tables, ``DELETE
    ... USING``, ``INSERT ... ON CONFLICT DO UPDATE``, and ``_mysqlcdc_progress`` set to the
    batch id. A batch id <= the recorded one is skipped, so a replay is a no-op. (A new
    stream checkpoint restarts batch ids at 0: call ``reset_progress`` for its tables.)

Credentials: the conninfo kept (and shown in repr/logs) never holds the password. It comes
from ``password=``, ``password_file=`` or the ``PGPASSWORD`` variable (read on the driver),
is kept out of repr, and travels to executors only inside the pickled task closure.
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
from typing import Any, Callable, Mapping, Sequence

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg.conninfo import conninfo_to_dict
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ....cdc.chunks import KeyRange
from ....cdc.errors import REPORT_BUG, ConfigError
from ....cdc.faults import BETWEEN_STEPS, crash_point
from ....cdc.model import TableId, TableSchema, quote_ident
from ..base import META_OP, META_SEQ, Sink, SnapshotWrite, direct_write_option
from ..last_change import LastChange
from .connection import PgConnection, fetch_one
from .copy import NUL_POLICIES, StagedSnapshot, StageTask, copy_arrow, copy_frame, csv_bytes, handle_nul
from .tables import (
    BATCH_COLUMN,
    DELETE_OPS,
    PART_COLUMN,
    PROGRESS,
    SNAPSHOT_BATCHES,
    STAGING_PREFIX,
    UPSERT_OPS,
    PgTable,
    _check_distinct_names,
    _check_ident,
    build_table,
    map_column_of,
    pg_type,
    qi,
)

log = logging.getLogger(__name__)


class PostgresSink(Sink):
    """Writes snapshot batches and stream micro-batches into PostgreSQL (module docstring)."""

    name = "postgres"

    def __init__(
        self,
        dsn: str | Mapping[str, Any],
        *,
        schema: str = "public",
        table_name_format: str = "{database}__{table}",
        password: str | None = None,
        password_file: str | os.PathLike | None = None,
        direct_write: bool = True,
        nul_in_text: str = "fail",
    ) -> None:
        if nul_in_text not in NUL_POLICIES:
            raise ConfigError(
                f"sink_options.nul_in_text: found {nul_in_text!r}, need one of "
                f"{', '.join(NUL_POLICIES)}. Fix: 'fail' stops at a text value holding U+0000, "
                "'replace' stores U+FFFD in its place."
            )
        self.nul_in_text = nul_in_text
        self.direct = direct_write_option(direct_write)
        self.conn_info = PgConnection.resolve(dsn, password, password_file)
        self._schemas: dict[TableId, TableSchema] = {}  # the tables prepare() was given
        self.schema = _check_ident(schema, "schema")
        self.table_name_format = table_name_format
        self._conn: psycopg.Connection | None = None
        self._prepared: set[TableId] = set()
        self._replaced: Callable[[str, str, int], None] | None = None

    def observe_replaced_values(self, callback: Callable[[str, str, int], None]) -> None:
        self._replaced = callback

    def __repr__(self) -> str:
        return f"PostgresSink({self.conn_info.conninfo!r}, schema={self.schema!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_conn"] = None
        state["_replaced"] = None  # the driver's status recorder stays on the driver
        return state

    # --- connections --------------------------------------------------------------------------

    def _driver_conn(self) -> psycopg.Connection:
        """One reused driver connection (stream micro-batches come every few seconds)."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = self.conn_info.connect(autocommit=True)  # transactions are explicit
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def table(self, schema: TableSchema) -> PgTable:
        return build_table(schema, self.schema, self.table_name_format)

    def asset_uri(self, table_id: TableId) -> str:
        """``postgres://host:port/database/schema/table``, the form Airflow's PostgreSQL provider uses."""

        params = conninfo_to_dict(self.conn_info.conninfo)
        name = self.table_name_format.format(database=table_id.database, table=table_id.table)
        return (
            f"postgres://{params.get('host') or 'localhost'}:{params.get('port') or 5432}/"
            f"{params.get('dbname') or params.get('user') or 'postgres'}/{self.schema}/{name}"
        )

    def _bookkeeping(self, name: str) -> str:
        return f"{qi(self.schema)}.{qi(name)}"

    # --- prepare ------------------------------------------------------------------------------

    def prepare(self, schemas: Sequence[TableSchema]) -> None:
        tables = [self.table(s) for s in schemas]  # name/type errors before touching the server
        _check_distinct_names(tables)
        self._schemas.update((s.table_id, s) for s in schemas)
        conn = self._driver_conn()
        with conn.transaction():
            # Concurrent prepares (mapped tasks) would race on CREATE ... IF NOT EXISTS.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('mysqlcdc.prepare'))")
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {qi(self.schema)}")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._bookkeeping(SNAPSHOT_BATCHES)} ("
                "batch_no serial PRIMARY KEY, sink_table text NOT NULL, batch_id text NOT NULL, "
                "run_id text, rows_written bigint, committed_at timestamptz, "
                "UNIQUE (sink_table, batch_id))"
            )
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._bookkeeping(PROGRESS)} ("
                "sink_table text PRIMARY KEY, last_batch_id bigint NOT NULL, updated_at timestamptz)"
            )
            for t in tables:
                if self._exists(conn, t):
                    self._check_compatible(conn, t)
                else:
                    self._create(conn, t)
        self._prepared.update(t.table_id for t in tables)

    def _ensure_prepared(self, schema: TableSchema) -> PgTable:
        if schema.table_id not in self._prepared:
            self.prepare([schema])
        return self.table(schema)

    @staticmethod
    def _exists(conn: psycopg.Connection, t: PgTable) -> bool:
        return fetch_one(conn.execute("SELECT to_regclass(%s)", (t.qualified,)))[0] is not None

    @staticmethod
    def _create(conn: psycopg.Connection, t: PgTable) -> None:
        cols = [
            f"{qi(n)} {typ}" + (" NOT NULL" if n in t.identity and not t.nullable_identity else "")
            for n, typ, _ in t.columns
        ]
        cols.append(f"{qi(BATCH_COLUMN)} integer")
        ident = t.column_list(t.identity)
        cols.append(f"UNIQUE NULLS NOT DISTINCT ({ident})" if t.nullable_identity else f"PRIMARY KEY ({ident})")
        conn.execute(f"CREATE TABLE {t.qualified} ({', '.join(cols)})")
        # BRIN: tiny and free to maintain; a batch's rows are adjacent (one INSERT ... SELECT).
        index = f"_mysqlcdc_brin_{hashlib.sha1(t.key.encode()).hexdigest()[:16]}"
        conn.execute(
            f"CREATE INDEX {qi(index)} ON {t.qualified} USING brin ({qi(BATCH_COLUMN)}) WITH (autosummarize = on)"
        )
        log.info("created %s", t.qualified)

    @staticmethod
    def _check_compatible(conn: psycopg.Connection, t: PgTable) -> None:
        """Every column with our type, the batch column, a unique index on the identity."""
        have = {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT attname, format_type(atttypid, atttypmod), attnotnull, atthasdef FROM pg_attribute "
                "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                (t.qualified,),
            )
        }
        problems = []
        for name, typ, _ in list(t.columns) + [(BATCH_COLUMN, "integer", "")]:
            if name not in have:
                problems.append(
                    f"column {name!r} is missing (add it: ALTER TABLE {t.qualified} ADD COLUMN {qi(name)} {typ})"
                )
            elif have[name][0] != typ:
                problems.append(f"column {name!r} is {have[name][0]}, want {typ}")
        ours = set(t.column_names) | {BATCH_COLUMN}
        for name, (_typ, notnull, hasdef) in have.items():
            if name not in ours and notnull and not hasdef:
                problems.append(f"extra column {name!r} is NOT NULL without a default")
        uniques = [
            set(r[0])
            for r in conn.execute(
                "SELECT array_agg(a.attname) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisunique "
                "AND i.indpred IS NULL GROUP BY i.indexrelid",
                (t.qualified,),
            )
        ]
        if set(t.identity) not in uniques:
            problems.append(f"no unique index or primary key on exactly {list(t.identity)}")
        if problems:
            raise ConfigError(
                f"PostgreSQL table {t.qualified} exists but does not fit {t.table_id}: "
                + "; ".join(problems)
                + ". Fix: drop or rename the table so it is created again, "
                "or alter it to match."
            )

    # --- snapshot -----------------------------------------------------------------------------

    @staticmethod
    def staging_prefix(t: PgTable, batch_id: str) -> str:
        digest = hashlib.sha1(f"{t.key}\0{batch_id}".encode()).hexdigest()[:16]
        return f"{STAGING_PREFIX}{digest}_"

    def forget_tables(self, table_ids: Sequence[TableId]) -> list[str]:
        """Each sink table and its rows in the bookkeeping tables (snapshot batches, the
        stream's last applied micro-batch), in one transaction."""
        removed: list[str] = []
        conn = self._driver_conn()
        with conn.transaction():
            for tid in table_ids:
                name = self.table_name_format.format(database=tid.database, table=tid.table)
                key, qualified = f"{self.schema}.{name}", f"{qi(self.schema)}.{qi(name)}"
                if fetch_one(conn.execute("SELECT to_regclass(%s)", (qualified,)))[0] is not None:
                    conn.execute(f"DROP TABLE {qualified}")
                    removed.append(key)
                for book in (SNAPSHOT_BATCHES, PROGRESS):
                    if fetch_one(conn.execute("SELECT to_regclass(%s)", (self._bookkeeping(book),)))[0] is not None:
                        conn.execute(f"DELETE FROM {self._bookkeeping(book)} WHERE sink_table = %s", (key,))
        self._prepared.difference_update(table_ids)
        return removed

    def _drop_stale_staging(self, conn: psycopg.Connection, t: PgTable, batch_id: str) -> list[str]:
        """Staging tables an earlier (dead) run of this batch left behind."""
        prefix = self.staging_prefix(t, batch_id)
        names = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s AND starts_with(tablename, %s)",
                (self.schema, prefix),
            )
        ]
        for n in names:
            conn.execute(f"DROP TABLE IF EXISTS {self._bookkeeping(n)}")
        return names

    def stage_snapshot(
        self, schema: TableSchema, frame: DataFrame, batch_id: str, ranges: Sequence[KeyRange] = ()
    ) -> StagedSnapshot:
        """Executors COPY the frame into a new staging table; the target is not touched."""
        t = self._ensure_prepared(schema)
        run_id = uuid.uuid4().hex[:12]
        staging = self.staging_prefix(t, batch_id) + run_id
        conn = self._driver_conn()
        with conn.transaction():
            stale = self._drop_stale_staging(conn, t, batch_id)
            cols = ", ".join(f"{qi(n)} {typ}" for n, typ, _ in t.columns)
            conn.execute(f"CREATE UNLOGGED TABLE {self._bookkeeping(staging)} ({cols}, {qi(PART_COLUMN)} bigint)")
        if stale:
            log.info("%s batch %s: dropped stale staging tables %s", t.qualified, batch_id, stale)
        copy_sql = (
            f"COPY {self._bookkeeping(staging)} ({t.column_list(list(t.column_names) + [PART_COLUMN])}) "
            "FROM STDIN (FORMAT csv)"
        )
        task = StageTask(
            self.conn_info,
            copy_sql,
            table=str(schema.table_id),
            identity=tuple(t.identity),
            nul_in_text=self.nul_in_text,
        )
        parts = copy_frame(frame, t).mapInArrow(task, "token bigint, rows bigint, nul_replaced bigint").collect()
        replaced = sum(p.nul_replaced for p in parts)
        if replaced:
            log.warning(
                "%s batch %s: %d text value(s) held U+0000 and were stored with U+FFFD in its place "
                "(nul_in_text='replace')",
                t.qualified,
                batch_id,
                replaced,
            )
        return StagedSnapshot(
            t, batch_id, run_id, staging, tuple((p.token, p.rows) for p in parts if p.rows), tuple(ranges)
        )

    def commit_snapshot(self, staged: StagedSnapshot) -> SnapshotWrite:
        """In one transaction: remove this batch's earlier rows, insert the staged ones, drop staging."""
        t = staged.table
        staging = self._bookkeeping(staged.staging)
        conn = self._driver_conn()
        with conn.transaction():
            batch_no, first_run = self._lock_batch(conn, t, staged.batch_id)
            if fetch_one(conn.execute("SELECT to_regclass(%s)", (staging,)))[0] is None:
                raise RuntimeError(
                    f"{t.qualified} batch {staged.batch_id}: staging table {staged.staging} is gone "
                    "(another run of the same batch dropped it). Fix: read the batch again (clear its snapshot task), "
                    "with one run of it at a time."
                )
            deleted = 0
            if not first_run:  # a first run has no rows to take back: skip the scan
                deleted = conn.execute(f"DELETE FROM {t.qualified} WHERE {qi(BATCH_COLUMN)} = %s", (batch_no,)).rowcount
            tokens = [tok for tok, _ in staged.parts]
            src = f"(SELECT * FROM {staging} WHERE {qi(PART_COLUMN)} = ANY(%s::bigint[])) AS s"
            inserted = conn.execute(t.upsert_sql(src, [(BATCH_COLUMN, "%s::integer")]), (batch_no, tokens)).rowcount
            if inserted != staged.rows:
                raise RuntimeError(
                    f"{t.qualified} batch {staged.batch_id}: staged {staged.rows} rows but "
                    f"{inserted} reached the table; nothing was committed. Fix: read the batch again (clear its snapshot "
                    "task); if it happens again, report this message."
                )
            conn.execute(
                f"UPDATE {self._bookkeeping(SNAPSHOT_BATCHES)} SET run_id = %s, rows_written = %s, "
                "committed_at = now() WHERE batch_no = %s",
                (staged.run_id, inserted, batch_no),
            )
            conn.execute(f"DROP TABLE {staging}")
        log.info(
            "%s batch %s (run %s): %d rows replaced %d", t.qualified, staged.batch_id, staged.run_id, inserted, deleted
        )
        return SnapshotWrite(
            inserted,
            {
                "sink": self.name,
                "table": t.key,
                "batch_no": batch_no,
                "run_id": staged.run_id,
                "deleted_previous": deleted,
                "parts": len(staged.parts),
                "ranges": [r.to_dict() for r in staged.ranges],
            },
        )

    def _lock_batch(self, conn: psycopg.Connection, t: PgTable, batch_id: str) -> tuple[int, bool]:
        """(``batch_no``, first run?) of the batch; its bookkeeping row stays locked until commit.

        "First run" means no run of this batch ever committed: the row is new, or a run that
        created it died before its commit (``committed_at`` is still NULL)."""
        table = self._bookkeeping(SNAPSHOT_BATCHES)
        conn.execute(
            f"INSERT INTO {table} (sink_table, batch_id) VALUES (%s, %s) ON CONFLICT DO NOTHING", (t.key, batch_id)
        )
        batch_no, committed_at = fetch_one(
            conn.execute(
                f"SELECT batch_no, committed_at FROM {table} WHERE sink_table = %s AND batch_id = %s FOR UPDATE",
                (t.key, batch_id),
            )
        )
        return batch_no, committed_at is None

    def write_snapshot(
        self, schema: TableSchema, frame: DataFrame, ranges: Sequence[KeyRange], batch_id: str
    ) -> SnapshotWrite:
        wrong = [str(r.table_id) for r in ranges if r.table_id != schema.table_id]
        if wrong:
            raise ValueError(f"write_snapshot({schema.table_id}): ranges of other tables {wrong}")
        staged = self.stage_snapshot(schema, frame, batch_id, ranges)
        try:
            return self.commit_snapshot(staged)
        except Exception:
            self._drop_staging_quietly(staged)
            raise

    def _drop_staging_quietly(self, staged: StagedSnapshot) -> None:
        try:
            conn = self._driver_conn()
            with conn.transaction():
                conn.execute(f"DROP TABLE IF EXISTS {self._bookkeeping(staged.staging)}")
        except psycopg.Error as e:  # the rerun drops it anyway
            log.warning("could not drop staging table %s: %s", staged.staging, e)

    def cleanup_staging(self, schema: TableSchema, batch_id: str) -> list[str]:
        """Drop what a dead run of this batch staged (the next ``stage_snapshot`` does it too)."""
        t = self.table(schema)
        conn = self._driver_conn()
        with conn.transaction():
            return self._drop_stale_staging(conn, t, batch_id)

    # --- stream -------------------------------------------------------------------------------

    def last_batch_id(self, schema: TableSchema) -> int | None:
        conn = self._driver_conn()
        with conn.transaction():
            row = conn.execute(
                f"SELECT last_batch_id FROM {self._bookkeeping(PROGRESS)} WHERE sink_table = %s",
                (self.table(schema).key,),
            ).fetchone()
        return None if row is None else int(row[0])

    def reset_progress(self, schema: TableSchema) -> None:
        """Forget the applied batch ids (a new stream checkpoint starts again at batch 0)."""
        conn = self._driver_conn()
        with conn.transaction():
            conn.execute(f"DELETE FROM {self._bookkeeping(PROGRESS)} WHERE sink_table = %s", (self.table(schema).key,))

    def direct_write(self) -> LastChange | None:
        return LastChange() if self.direct else None

    def write_changes(self, schema: TableSchema, changes: DataFrame, batch_id: int) -> None:
        t = self._ensure_prepared(schema)
        last = self.last_batch_id(schema)
        if last is not None and last >= batch_id:
            log.info("%s: micro-batch %d already applied (last %d), skipped", t.qualified, batch_id, last)
            return
        latest = reduce_latest(changes, t).toArrow()  # bounded by the stream's rate limit
        self.apply_changes(t, latest, batch_id)

    def apply_changes(self, t: PgTable, latest: pa.Table, batch_id: int) -> bool:
        """Apply reduced change rows (table columns as COPY text + ``_op``) in one transaction.

        Returns False when the batch was applied before (nothing changed)."""
        deletes, upserts, replaced = self._split_ops(t, latest, batch_id)
        conn = self._driver_conn()
        with conn.transaction():
            if not self._claim_batch(conn, t, batch_id):
                return False
            self._write_ops(conn, t, deletes, upserts)
        if replaced and self._replaced is not None:  # counted once, when the micro-batch commits
            self._replaced(str(t.table_id), "nul_in_text", replaced)
        log.info(
            "%s: micro-batch %d applied (%d deletes, %d upserts)",
            t.qualified,
            batch_id,
            deletes.num_rows,
            upserts.num_rows,
        )
        return True

    def _split_ops(self, t: PgTable, latest: pa.Table, batch_id: int) -> tuple[pa.Table, pa.Table, int]:
        op = latest.column(META_OP)
        deletes = latest.filter(pc.is_in(op, value_set=pa.array(DELETE_OPS))).select(list(t.identity))
        upserts = latest.filter(pc.is_in(op, value_set=pa.array(UPSERT_OPS))).select(list(t.column_names))
        name = str(t.table_id)
        deletes, _ = handle_nul(deletes, self.nul_in_text, name, t.identity)  # keys replaced alike
        upserts, replaced = handle_nul(upserts, self.nul_in_text, name, t.identity)
        if replaced:
            log.warning(
                "%s micro-batch %d: %d text value(s) held U+0000 and were stored with U+FFFD in its place "
                "(nul_in_text='replace')",
                t.qualified,
                batch_id,
                replaced,
            )
        return deletes, upserts, replaced

    def _write_ops(self, conn: psycopg.Connection, t: PgTable, deletes: pa.Table, upserts: pa.Table) -> None:
        if deletes.num_rows:
            self._temp_copy(conn, "_mysqlcdc_del", t.identity_types, deletes)
            conn.execute(f"DELETE FROM {t.qualified} AS t USING _mysqlcdc_del AS d WHERE {t.key_match('t', 'd')}")
            conn.execute("DROP TABLE _mysqlcdc_del")
        if upserts.num_rows:
            self._temp_copy(conn, "_mysqlcdc_up", t.columns, upserts)
            conn.execute(t.upsert_sql("_mysqlcdc_up"))
            conn.execute("DROP TABLE _mysqlcdc_up")

    # --- schema changes -----------------------------------------------------------------------

    def keys_in_sink(self, schema: TableSchema, key_range: KeyRange | None = None) -> pa.Table:
        """Identity and chunk-key columns of the table's rows (a re-snapshot's deletes come from them);
        only the range's for an integer chunk key (an index range scan on the identity)."""
        from ..resnapshot_rows import integer_bounds

        t = self._ensure_prepared(schema)
        cols = list(dict.fromkeys([*schema.row_identity, *schema.chunk_key]))
        where, args = "", []
        bounds = integer_bounds(schema, key_range)
        if bounds is not None:
            col, lo, hi = bounds
            terms = [
                *([f"{qi(col)} >= %s"] if lo is not None else []),
                *([f"{qi(col)} < %s"] if hi is not None else []),
            ]
            args = [v for v in (lo, hi) if v is not None]
            where = " WHERE " + " AND ".join(terms) if terms else ""
        cur = self._driver_conn().execute(f"SELECT {t.column_list(cols)} FROM {t.qualified}{where}", args)
        values = list(zip(*cur.fetchall())) or [() for _ in cols]
        return pa.table({c: pa.array(list(v)) for c, v in zip(cols, values)})

    def consistency_keys(self, schema: TableSchema, upto_batch: int) -> tuple[pa.Table, int]:
        """The table's keys and its last applied micro-batch, read in one REPEATABLE READ
        transaction: a micro-batch commits a table's rows and its progress row together, so the
        two agree (the batch may be one after ``upto_batch``; the check then compares there)."""
        t = self._ensure_prepared(schema)
        cols = list(dict.fromkeys([*schema.row_identity, *schema.chunk_key]))
        conn = self._driver_conn()
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            row = conn.execute(
                f"SELECT last_batch_id FROM {self._bookkeeping(PROGRESS)} WHERE sink_table = %s", (t.key,)
            ).fetchone()
            cur = conn.execute(f"SELECT {t.column_list(cols)} FROM {t.qualified}")
            values = list(zip(*cur.fetchall())) or [() for _ in cols]
        applied = int(row[0]) if row is not None else -1
        return pa.table({c: pa.array(list(v)) for c, v in zip(cols, values)}), max(int(upto_batch), applied)

    def schema_capabilities(self) -> frozenset[str]:
        from ....cdc.schema.behavior import ACTION_KINDS

        return frozenset(ACTION_KINDS)

    def publish_steps(self, table_id: TableId, steps: Sequence[Any], batch_id: int) -> int:
        """A table's micro-batch in ONE transaction: its rows and its DDL in order (PostgreSQL DDL
        is transactional), and the progress row, so a replay changes nothing."""
        from ....cdc.schema.steps import RowsStep
        from ..last_change import merged_rows
        from ..projection import project_rows

        first = steps[0]
        sink0 = first.sink if isinstance(first, RowsStep) else first.sink_before
        if sink0 is not None:
            t = self._ensure_prepared(sink0)
        else:  # the sink table was dropped in an earlier batch; a schema step brings it back
            named = next(
                (s.sink_after for s in steps if not isinstance(s, RowsStep) and s.sink_after is not None), None
            )
            if named is None:
                raise ConfigError(f"{table_id}: micro-batch {batch_id} starts with no live sink table. {REPORT_BUG}")
            t = self.table(named)
        changes = 0
        replaced = 0
        conn = self._driver_conn()
        with conn.transaction():
            if not self._claim_batch(conn, t, batch_id):
                log.info("%s: micro-batch %d already applied, skipped", t.qualified, batch_id)
                return 0
            for step in steps:
                if isinstance(step, RowsStep):
                    rows = merged_rows(step.source, [bytes(r["payload"]) for r in step.records])
                    log.info(step.describe("postgres", batch_id, rows.num_rows))
                    target = self.table(step.sink)
                    projected = project_rows(rows, step.sink, keep=[META_OP])
                    deletes, upserts, n = self._split_ops(
                        target, copy_arrow(projected, target, extra=[META_OP]), batch_id
                    )
                    replaced += n
                    self._write_ops(conn, target, deletes, upserts)
                    changes += step.changes
                    log.info(
                        "%s micro-batch %d: %d changes, %d deletes, %d upserts",
                        target.qualified,
                        batch_id,
                        step.changes,
                        deletes.num_rows,
                        upserts.num_rows,
                    )
                else:
                    self._apply_schema_step(conn, t, step)
                    if step.sink_after is not None:
                        self._schemas[table_id] = step.sink_after
                    crash_point(BETWEEN_STEPS)  # inside the transaction: a crash here rolls all of it back
        if replaced and self._replaced is not None:  # counted once, when the micro-batch commits
            self._replaced(str(table_id), "nul_in_text", replaced)
        return changes

    def _apply_schema_step(self, conn: psycopg.Connection, t: PgTable, step: Any) -> None:
        from psycopg import sql

        from ....cdc.schema import behavior as B

        table = sql.SQL(t.qualified)
        for a in step.actions:
            if a.kind == B.ADD_COLUMN:
                typ = pg_type(map_column_of(a.column, step))
                column = sql.Identifier(a.column.name)
                exists = (
                    conn.execute(
                        "SELECT 1 FROM pg_attribute WHERE attrelid = %s::regclass AND attname = %s "
                        "AND NOT attisdropped",
                        (t.qualified, a.column.name),
                    ).fetchone()
                    is not None
                )
                if not exists and a.fill is not None:  # a constant DEFAULT fills existing rows without a rewrite
                    conn.execute(
                        sql.SQL("ALTER TABLE {} ADD COLUMN {} {} DEFAULT {}").format(
                            table, column, sql.SQL(typ), sql.Literal(str(a.fill))
                        )
                    )
                    conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN {} DROP DEFAULT").format(table, column))
                elif not exists:
                    conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(table, column, sql.SQL(typ)))
                elif a.refill:
                    value = (
                        sql.NULL if a.fill is None else sql.SQL("{}::{}").format(sql.Literal(str(a.fill)), sql.SQL(typ))
                    )
                    conn.execute(sql.SQL("UPDATE {} SET {} = {}").format(table, column, value))
                if a.copy_from:
                    conn.execute(
                        sql.SQL("UPDATE {} SET {} = {}::{}").format(
                            table, column, sql.Identifier(a.copy_from), sql.SQL(typ)
                        )
                    )
            elif a.kind == B.DROP_COLUMN:
                conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN IF EXISTS {}").format(table, sql.Identifier(a.name)))
            elif a.kind == B.RENAME_COLUMN:
                conn.execute(
                    sql.SQL("ALTER TABLE {} RENAME COLUMN {} TO {}").format(
                        table, sql.Identifier(a.name), sql.Identifier(a.new_name)
                    )
                )
            elif a.kind == B.ALTER_COLUMN_TYPE:
                typ = pg_type(map_column_of(a.column, step))
                conn.execute(
                    sql.SQL("ALTER TABLE {} ALTER COLUMN {} TYPE {} USING {}::{}").format(
                        table, sql.Identifier(a.name), sql.SQL(typ), sql.Identifier(a.name), sql.SQL(typ)
                    )
                )
            elif a.kind == B.TRUNCATE:
                conn.execute(sql.SQL("TRUNCATE {}").format(table))
            elif a.kind == B.DROP_TABLE:
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
                self._prepared.discard(t.table_id)
            elif a.kind == B.CREATE_TABLE:
                created = self.table(step.sink_after)
                empty = (
                    self._exists(conn, created)
                    and fetch_one(
                        conn.execute(sql.SQL("SELECT NOT EXISTS (SELECT 1 FROM {})").format(sql.SQL(created.qualified)))
                    )[0]
                )
                if empty:  # prepared when the query started (the history listed it): take it as it is
                    self._check_compatible(conn, created)
                elif self._exists(conn, created):  # rows that are not the new table's
                    raise ConfigError(
                        f"{created.qualified} holds rows, but {created.table_id} is created (again) by the DDL at "
                        f"{step.offset.get('file')}:{step.offset.get('position')}, so they are not the new table's. "
                        f"Fix: drop or rename {created.qualified}, then restart the stream."
                    )
                else:
                    self._create(conn, created)
                self._prepared.add(t.table_id)
            log.info("%s: %s", t.qualified, a.describe())
        for note in step.notes:
            log.warning("%s: %s", t.qualified, note)

    def _claim_batch(self, conn: psycopg.Connection, t: PgTable, batch_id: int) -> bool:
        """Lock the table's progress row; record ``batch_id`` unless it (or a later one) is done."""
        table = self._bookkeeping(PROGRESS)
        conn.execute(
            f"INSERT INTO {table} (sink_table, last_batch_id) VALUES (%s, -1) ON CONFLICT DO NOTHING", (t.key,)
        )
        last = fetch_one(conn.execute(f"SELECT last_batch_id FROM {table} WHERE sink_table = %s FOR UPDATE", (t.key,)))[
            0
        ]
        if last >= batch_id:
            return False
        conn.execute(
            f"UPDATE {table} SET last_batch_id = %s, updated_at = now() WHERE sink_table = %s", (batch_id, t.key)
        )
        return True

    @staticmethod
    def _temp_copy(
        conn: psycopg.Connection, name: str, columns: Sequence[tuple[str, str, str]], rows: pa.Table
    ) -> None:
        cols = ", ".join(f"{qi(n)} {typ}" for n, typ, _ in columns)
        conn.execute(f"CREATE TEMP TABLE {qi(name)} ({cols}) ON COMMIT DROP")
        with conn.cursor().copy(f"COPY {qi(name)} FROM STDIN (FORMAT csv)") as cp:
            cp.write(csv_bytes(rows))


def reduce_latest(changes: DataFrame, t: PgTable) -> DataFrame:
    """The last change row per identity (by ``_seq``), as COPY-ready columns plus ``_op``.

    Spark compares strings by code point, so 'a' and 'A' are different identities here,
    exactly as they are in the PostgreSQL primary key (a key-changing UPDATE from 'a' to
    'A' is a delete of 'a' and an upsert of 'A').
    """
    w = Window.partitionBy(*[F.col(quote_ident(c)) for c in t.identity]).orderBy(F.col(META_SEQ).desc())
    latest = changes.withColumn("__rn", F.row_number().over(w)).where(F.col("__rn") == 1)
    return copy_frame(latest, t, extra=[META_OP])
