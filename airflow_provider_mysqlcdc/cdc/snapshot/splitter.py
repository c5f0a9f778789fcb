"""The chunk planner: cuts a table into ``[start, end)`` ranges of its chunk key.

Two strategies, as in Flink CDC's ``MySqlChunkSplitter``:

* **even** — a single integer chunk key whose values are dense enough: the distribution
  factor ``(max - min + 1) / rows`` is within ``[lower, upper]``. Boundaries are computed
  from MIN/MAX and the row count alone (``min + i * width`` with
  ``width = max(1, int(factor * chunk_size))``), so planning costs two cheap queries.
  Python ints do the arithmetic, so keys near the top of BIGINT / BIGINT UNSIGNED cannot
  overflow: every boundary is ``<= max`` and the last chunk is ``[b, None)``.
* **uneven** — everything else (strings, dates, composite keys, sparse or non-unique
  ints). Each next boundary is the key ``chunk_size`` rows further in index order, asked
  of the server. Unlike Flink CDC, a composite key is split on the *whole* key as a row
  value, so a first column with few distinct values still gives chunks of about
  ``chunk_size`` rows.

The planner never compares keys in Python: boundaries come from the server's ``ORDER BY``
and "is the next boundary past the previous one" is asked of the server too, so string
keys follow the column's collation (``'a'`` = ``'A '`` in a ``_ci`` PAD SPACE column) and
chunks neither overlap nor leave gaps.

Rows with a NULL chunk key (only possible with a configured, nullable chunk key column)
belong to the first chunk (``includes_null=True``).
"""

from __future__ import annotations

import decimal
import logging
import time
from typing import Any, Sequence

from ..chunks import Chunk, Key
from ..model import Column, TableSchema, quote_ident
from ..source.config import SplitOptions
from ..sql import key_columns, key_compare, range_predicate

log = logging.getLogger(__name__)

UNSPLITTABLE_TYPES = frozenset({"enum", "set", "json", "geometry", "point", "linestring", "polygon"})
INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})

# Below this many estimated rows the planner counts exactly: InnoDB's TABLE_ROWS estimate
# is 0 or far off right after a bulk load into a small table, and COUNT(*) is cheap there.
EXACT_COUNT_BELOW_CHUNKS = 4


def is_even_candidate(cols: Sequence[Column]) -> bool:
    """A single integer-valued column: the only key even splitting can compute boundaries for."""
    if len(cols) != 1:
        return False
    c = cols[0]
    dtype = c.data_type.lower()
    if dtype in INTEGER_TYPES:
        return True
    return dtype == "decimal" and (c.numeric_scale or 0) == 0


def even_boundaries(min_value: int, max_value: int, width: int) -> list[int]:
    """``min + width, min + 2*width, ... <= max``: the starts of every chunk but the first.

    Every boundary lies within ``[min, max]``, so it is a valid value of the column's type.
    """
    if width < 1:
        raise ValueError("width must be >= 1")
    return list(range(min_value + width, max_value + 1, width))


def even_width(min_value: int, max_value: int, rows: int, chunk_size: int) -> int:
    """Flink CDC's dynamic chunk size ``max(1, int(factor * chunk_size))``, in exact integers."""
    return max(1, (max_value - min_value + 1) * chunk_size // rows)


def distribution_factor(min_value: int, max_value: int, rows: int) -> float:
    return (max_value - min_value + 1) / rows if rows > 0 else float("inf")


def chunks_from_boundaries(schema: TableSchema, boundaries: Sequence[Key], includes_null: bool) -> list[Chunk]:
    """Chunks ``[None, b0), [b0, b1), ..., [bn, None)`` with ids 0..n+1."""
    starts: list[Key | None] = [None, *boundaries]
    ends: list[Key | None] = [*boundaries, None]
    return [Chunk(schema.table_id, i, s, e, includes_null and i == 0) for i, (s, e) in enumerate(zip(starts, ends))]


class ChunkSplitter:
    """Plans the chunks of tables on one connection (autocommit, read-only queries)."""

    def __init__(self, conn, options: SplitOptions | None = None) -> None:
        self.conn = conn
        self.options = options or SplitOptions()

    # --- public -------------------------------------------------------------------------

    def split(self, schema: TableSchema) -> list[Chunk]:
        """Chunks of ``schema``'s table: ids 0..n-1, contiguous, first start and last end None."""
        cols = key_columns(schema)
        includes_null = any(c.nullable for c in cols)
        unsplittable = _unsplittable(cols)
        if unsplittable:
            log.warning(
                "%s: chunk key column %s is %s, which the server orders by member number but compares as "
                "text, so it cannot delimit chunks: the table is read as one chunk. Fix (to read it in "
                "parallel): set chunk_key_columns={'%s': '<another unique column>'}.",
                schema.table_id,
                unsplittable.name,
                unsplittable.data_type.upper(),
                schema.table_id,
            )
            return chunks_from_boundaries(schema, [], includes_null)
        boundaries = None
        if is_even_candidate(cols):
            boundaries = self._even(schema, cols[0])
        if boundaries is None:
            boundaries = self._uneven(schema, cols)
        chunks = chunks_from_boundaries(schema, boundaries, includes_null)
        log.info("%s: %d chunk(s) on %s", schema.table_id, len(chunks), ", ".join(schema.chunk_key))
        return chunks

    # --- even ---------------------------------------------------------------------------

    def _even(self, schema: TableSchema, col: Column) -> list[Key] | None:
        """Boundaries computed from MIN/MAX, or None when the key is too sparse or too dense."""
        name = quote_ident(col.name)
        lo, hi = self._aggregate(f"SELECT MIN({name}), MAX({name}) FROM {schema.table_id.quoted}")
        if lo is None:  # empty table, or every chunk key NULL
            return []
        as_decimal = isinstance(lo, decimal.Decimal)
        lo_i, hi_i = int(lo), int(hi)
        rows = self._row_count(schema)
        factor = distribution_factor(lo_i, hi_i, rows)
        opts = self.options
        if not (opts.distribution_factor_lower <= factor <= opts.distribution_factor_upper):
            log.info(
                "%s: distribution factor %.4g outside [%s, %s], splitting unevenly",
                schema.table_id,
                factor,
                opts.distribution_factor_lower,
                opts.distribution_factor_upper,
            )
            return None
        width = even_width(lo_i, hi_i, rows, opts.chunk_size)
        conv = decimal.Decimal if as_decimal else int
        return [(conv(b),) for b in even_boundaries(lo_i, hi_i, width)]

    def row_estimate(self, schema: TableSchema) -> int:
        """Rows the table holds, roughly: what batch sizing weighs chunks by."""
        return self._row_count(schema)

    def _row_count(self, schema: TableSchema) -> int:
        """The row estimate from information_schema.TABLES, or an exact count for small tables."""
        (estimate,) = self._one(
            "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (schema.table_id.database, schema.table_id.table),
        ) or (0,)
        estimate = int(estimate or 0)
        if estimate < EXACT_COUNT_BELOW_CHUNKS * self.options.chunk_size:
            (count,) = self._aggregate(f"SELECT COUNT(*) FROM {schema.table_id.quoted}")
            return int(count)
        return estimate

    # --- uneven -------------------------------------------------------------------------

    def _uneven(self, schema: TableSchema, cols: Sequence[Column]) -> list[Key]:
        """Boundaries from the server: each is ``chunk_size`` keys after the previous one.

        One indexed query per chunk: ``SELECT key, key > prev FROM t WHERE key >= prev
        ORDER BY key LIMIT 1 OFFSET chunk_size``. When that key is not past ``prev`` (a
        non-unique configured key with more than ``chunk_size`` equal values) the next
        larger key is taken instead. Every comparison is made by the server.
        """
        boundaries: list[Key] = []
        prev: Key | None = None
        while True:
            if boundaries:
                self._pause()
            nxt = self._next_boundary(schema, cols, prev)
            if nxt is None:
                return boundaries
            boundaries.append(nxt)
            prev = nxt

    def _next_boundary(self, schema: TableSchema, cols: Sequence[Column], prev: Key | None) -> Key | None:
        names = ", ".join(quote_ident(c.name) for c in cols)
        table = schema.table_id.quoted
        n = len(cols)
        if prev is None:
            where = " AND ".join(f"{quote_ident(c.name)} IS NOT NULL" for c in cols)
            row = self._one(
                f"SELECT {names} FROM {table} WHERE {where} ORDER BY {names} LIMIT 1 OFFSET {self.options.chunk_size}"
            )
            return None if row is None else tuple(row)
        ge = range_predicate(cols, prev, None)
        gt = _strictly_after(cols, prev)
        row = self._one(
            f"SELECT {names}, ({gt}) FROM {table} WHERE {ge} ORDER BY {names} LIMIT 1 OFFSET {self.options.chunk_size}"
        )
        if row is None:
            return None
        if row[n]:
            return tuple(row[:n])
        self._pause()
        row = self._one(f"SELECT {names} FROM {table} WHERE {gt} ORDER BY {names} LIMIT 1")
        return None if row is None else tuple(row)

    # --- helpers ------------------------------------------------------------------------

    def _pause(self) -> None:
        if self.options.boundary_query_pause_s > 0:
            time.sleep(self.options.boundary_query_pause_s)

    def _one(self, sql: str, args: Any = None) -> tuple | None:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            row = cur.fetchone()
            return None if row is None else tuple(row)

    def _aggregate(self, sql: str, args: Any = None) -> tuple:
        """The one row of an aggregate without GROUP BY (MIN/MAX, COUNT): there is always one."""
        row = self._one(sql, args)
        assert row is not None
        return row


def _unsplittable(cols: Sequence[Column]) -> Column | None:
    """The first chunk-key column that cannot delimit chunks: ENUM/SET sort by member number in
    ORDER BY but compare as text in WHERE, so boundaries taken from ORDER BY would not delimit
    ranges. Such a table (an ENUM primary key is legal) is one chunk: exact, read by one SELECT."""
    return next((c for c in cols if c.data_type.lower() in UNSPLITTABLE_TYPES), None)


def _strictly_after(cols: Sequence[Column], key: Key) -> str:
    """``key_columns > key`` (row-value order) as SQL."""
    return key_compare(cols, key, ">")
