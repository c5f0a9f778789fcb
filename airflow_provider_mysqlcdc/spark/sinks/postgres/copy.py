"""Rows into PostgreSQL by COPY: DataFrames and Arrow tables as COPY-ready CSV (Arrow's C++ writer),
U+0000 handling (PostgreSQL text cannot hold it), and the executors' staging of a snapshot batch
(``StageTask``: one connection and transaction per task, each task's rows tagged with a token the
driver takes only once, so a retried or speculative task cannot duplicate rows).
"""

from __future__ import annotations

import contextlib
import io
import secrets
from dataclasses import dataclass
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ....cdc.chunks import KeyRange
from ....cdc.errors import REPORT_BUG, ConfigError
from ....cdc.model import quote_ident
from .connection import PgConnection
from .tables import PART_COLUMN, PgTable


def copy_frame(frame: DataFrame, table: PgTable, extra: Sequence[str] = ()) -> DataFrame:
    """The frame's columns in table order as COPY CSV can carry them: binary as ``\\x<hex>`` text."""
    missing = [c for c in table.column_names if c not in frame.columns]
    if missing:
        raise ConfigError(f"{table.table_id}: the frame lacks columns {missing} (has {frame.columns}). {REPORT_BUG}")
    out = []
    for name, typ, _kind in table.columns:
        c = F.col(quote_ident(name))
        if typ == "bytea":
            c = F.concat(F.lit("\\x"), F.hex(c))
        out.append(c.alias(name))
    return frame.select(*out, *[F.col(quote_ident(e)) for e in extra])


def copy_arrow(rows: pa.Table, table: PgTable, extra: Sequence[str] = ()) -> pa.Table:
    """``copy_frame`` for Arrow rows (the direct write's): binary as ``\\x<HEX>`` text, as Spark's hex writes it."""
    names, columns = [], []
    for name, typ, _kind in table.columns:
        col = rows.column(name)
        if typ == "bytea":
            col = pa.array([None if v is None else "\\x" + v.hex().upper() for v in col.to_pylist()], pa.string())
        names.append(name)
        columns.append(col)
    return pa.table(columns + [rows.column(e) for e in extra], names=names + list(extra))


def _utc_timestamps(data: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
    """Zoned timestamps relabelled UTC (same instants), so CSV prints them as ``...Z``."""
    for i, f in enumerate(data.schema):
        if pa.types.is_timestamp(f.type) and f.type.tz not in (None, "UTC"):
            data = data.set_column(i, f.name, data.column(i).cast(pa.timestamp(f.type.unit, tz="UTC")))
    return data


NUL_POLICIES = ("fail", "replace")
NUL = "\x00"
NUL_REPLACEMENT = "\ufffd"


def handle_nul(
    data: pa.RecordBatch | pa.Table, policy: str, table: str, identity: Sequence[str]
) -> tuple[pa.RecordBatch | pa.Table, int]:
    """PostgreSQL text cannot hold U+0000, which MySQL text can. ``fail``: a ConfigError naming
    the table, the row's key and the column, before anything of the batch is written;
    ``replace``: U+FFFD instead (returns how many values changed)."""
    changed = 0
    for i, f in enumerate(data.schema):
        if not (pa.types.is_string(f.type) or pa.types.is_large_string(f.type)):
            continue
        col = data.column(i)
        hits = pc.fill_null(pc.match_substring(col, NUL), False)
        n = pc.sum(hits).as_py() or 0
        if not n:
            continue
        if policy != "replace":
            row = pc.index(hits, True).as_py()
            key = {k: data.column(k)[row].as_py() for k in identity if k in data.schema.names}
            raise ConfigError(
                f"{table}: column {f.name!r} of the row with key {key} holds U+0000 (NUL), which PostgreSQL text "
                f"cannot store ({n} value(s) in this batch); nothing of the batch was written. Fix: set "
                "sink_options.nul_in_text to 'replace' to store U+FFFD in its place (each replacement is "
                "counted in the log), or remove the character at the source."
            )
        data = data.set_column(i, f.name, pc.replace_substring(col, NUL, NUL_REPLACEMENT))
        changed += n
    return data, changed


def csv_bytes(data: pa.RecordBatch | pa.Table) -> bytes:
    """COPY ... (FORMAT csv) input: Arrow quotes every string, so '' (empty) differs from NULL."""
    buf = io.BytesIO()
    pacsv.write_csv(_utc_timestamps(data), buf, pacsv.WriteOptions(include_header=False))
    return buf.getvalue()


@dataclass(frozen=True)
class StageTask:
    """What an executor needs to COPY its partition: picklable, holds no connection."""

    conn: PgConnection
    copy_sql: str
    token_column: str = PART_COLUMN
    table: str = ""
    identity: tuple[str, ...] = ()
    nul_in_text: str = "fail"

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        token = secrets.randbits(62)
        rows = replaced = 0
        # Connection exits last: the COPY ends, then commit (or rollback on error) and close.
        with contextlib.ExitStack() as stack:
            copy = None
            for b in batches:
                if b.num_rows == 0:
                    continue
                b, n = handle_nul(b, self.nul_in_text, self.table, self.identity)
                replaced += n
                if copy is None:  # empty partitions never connect
                    conn = stack.enter_context(self.conn.connect())
                    copy = stack.enter_context(conn.cursor().copy(self.copy_sql))
                tag = pa.repeat(pa.scalar(token, pa.int64()), b.num_rows)
                copy.write(csv_bytes(b.append_column(self.token_column, tag)))
                rows += b.num_rows
        yield pa.record_batch(
            [pa.array([token], pa.int64()), pa.array([rows], pa.int64()), pa.array([replaced], pa.int64())],
            names=["token", "rows", "nul_replaced"],
        )


@dataclass(frozen=True)
class StagedSnapshot:
    """A batch's rows in a staging table, not yet in the target: what ``commit_snapshot`` takes."""

    table: PgTable
    batch_id: str
    run_id: str
    staging: str
    parts: tuple[tuple[int, int], ...]  # (token, rows) of the successful task attempts
    ranges: tuple[KeyRange, ...] = ()

    @property
    def rows(self) -> int:
        return sum(r for _, r in self.parts)
