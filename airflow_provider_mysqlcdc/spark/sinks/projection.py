"""Rows logged with one table version, written into a sink table of another shape.

Under ``lenient`` a dropped column stays in the sink and a renamed one is added under its
new name; under ``ignore`` the sink never changes. So the rows a micro-batch holds (in the
shape the binlog logged them) are matched to the sink's columns by name -- exactly, else
ignoring case, as MySQL names are -- missing ones become NULL, extra ones are left out, and
values are cast to the sink column's type (a type only changes in the sink when it widens).
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from ...cdc.errors import SchemaMismatchError
from ...cdc.model import TableSchema
from ...cdc.types import map_column_in


def project_rows(rows: pa.Table, sink: TableSchema, keep: Sequence[str] = ()) -> pa.Table:
    """``rows`` with exactly the sink's columns (in its order) plus the ``keep`` columns."""
    have = {n: n for n in rows.column_names}
    lower = {n.lower(): n for n in rows.column_names}
    names, columns = [], []
    for c in sink.columns:
        target = map_column_in(sink, c).arrow_type
        src = have.get(c.name) or lower.get(c.name.lower())
        if src is None:
            if c.name in sink.row_identity:
                raise SchemaMismatchError(
                    f"{sink.table_id}: rows lack identity column {c.name!r} of the sink table. Fix: if the "
                    "table's key columns changed, load it again (trigger the pipeline with reset=true); else "
                    "report this message."
                )
            col = pa.nulls(rows.num_rows, target)
        else:
            col = rows.column(src)
            if col.type != target:
                try:
                    col = col.cast(target)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SchemaMismatchError(
                        f"{sink.table_id}: column {c.name!r} values ({col.type}) do not convert to the sink's "
                        f"{c.column_type} ({target}): {e}. Fix: set schema_change_behavior to 'evolve' or "
                        "'try_evolve' so the sink takes the new type, or reload the table."
                    ) from e
        names.append(c.name)
        columns.append(col)
    for k in keep:
        names.append(k)
        columns.append(rows.column(k))
    return pa.table(columns, names=names)


def same_shape(a: TableSchema, b: TableSchema) -> bool:
    """True when rows of ``a`` need no projection to be written as ``b``."""
    return [(c.name, map_column_in(a, c).arrow_type) for c in a.columns] == [
        (c.name, map_column_in(b, c).arrow_type) for c in b.columns
    ]
