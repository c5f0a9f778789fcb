"""Change rows in Arrow, for the binlog source's own tasks (direct stream writes).

The same rules as ``change_rows.ChangeProjection``, which does this in the JVM for the row
path: an insert is a ``+I`` of the after-image, a delete a ``-D`` of the before-image, an
update a ``-U`` of the before-image then a ``+U`` of the after-image, and
``_seq = 2 * seq (+1 for the +U)``. Kept free of pyspark so the encoders built on it load
without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...cdc.events import OP_DELETE, OP_INSERT, OP_UPDATE_AFTER, OP_UPDATE_BEFORE

# A change row's op as a small integer: its index here.
OP_CODES = (OP_INSERT, OP_UPDATE_BEFORE, OP_DELETE, OP_UPDATE_AFTER)
OP_ARRAY = pa.array(OP_CODES, pa.string())


@dataclass(frozen=True)
class ArrowChanges:
    """One table's change rows of a source-layout batch, in ``_seq`` order when the batch's
    ``seq`` is ascending (as every batch the binlog reader yields is)."""

    source_row: np.ndarray  # the batch row each change row comes from
    op_code: np.ndarray  # index into OP_CODES
    images: pa.StructArray  # the row image of each change row (the table's snapshot row type)
    seq: np.ndarray  # ``_seq``, int64

    def __len__(self) -> int:
        return len(self.seq)


def rows_by_table(layout: Any, batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[Any, Any, pa.RecordBatch]]:
    """(table id, its ``SourceLayout`` slot, its rows) for each table with rows in each batch."""
    slots = list(layout.slots.items())
    for batch in batches:
        for t, slot in slots:
            pair = batch.column(slot.column)
            if pair.null_count == len(pair):
                continue
            yield t, slot, (batch if pair.null_count == 0 else batch.filter(pair.is_valid()))


def explode_changes(batch: pa.RecordBatch, column: str) -> ArrowChanges:
    """The change rows of ``batch``'s rows, whose images are in the struct column ``column``
    (``struct<before, after>``; every row must belong to that column's table)."""
    n = batch.num_rows
    op = batch.column("op")
    is_upd = pc.equal(op, "update").to_numpy(zero_copy_only=False)
    is_ins = pc.equal(op, "insert").to_numpy(zero_copy_only=False)
    counts = 1 + is_upd.astype(np.int64)
    row_of = np.repeat(np.arange(n), counts)
    half = np.zeros(len(row_of), np.int64)
    half[(np.cumsum(counts) - counts)[is_upd] + 1] = 1  # an update's second row is its +U
    code = np.where(half == 1, 3, np.where(is_upd[row_of], 1, np.where(is_ins[row_of], 0, 2)))
    use_after = (half == 1) | is_ins[row_of]
    before, after = batch.column(column).flatten()
    images = pa.concat_arrays([before, after]).take(pa.array(row_of + n * use_after))
    seq = batch.column("seq").to_numpy(zero_copy_only=False).astype(np.int64)[row_of] * 2 + half
    return ArrowChanges(row_of, code, images, seq)


def last_per_identity(rows: pa.Table, identity: Sequence[str], seq: str) -> pa.Table:
    """The row with the highest ``seq`` for each value of the ``identity`` columns.

    What the row path's window (``row_number() over (partition by identity order by _seq
    desc) = 1``) keeps, as a hash aggregation. NULLs group together (the merges match
    identities with IS NOT DISTINCT FROM), and -0.0 groups with 0.0, as Spark normalizes
    floating-point keys before grouping.
    """
    if rows.num_rows <= 1:
        return rows
    keys: dict[str, Any] = {}  # k0, k1, ...: the identity columns, -0.0 made 0.0
    for name in identity:
        col = rows.column(name)
        if pa.types.is_floating(col.type):
            col = pc.add(col, pa.scalar(0.0, col.type))  # -0.0 + 0.0 is 0.0
        keys[f"k{len(keys)}"] = col
    grouped = (
        pa.table({**keys, "s": rows.column(seq)}).group_by(list(keys), use_threads=False).aggregate([("s", "max")])
    )
    if grouped.num_rows == rows.num_rows:
        return rows
    keep = pc.is_in(rows.column(seq), value_set=grouped.column("s_max"))
    return rows.filter(keep)
