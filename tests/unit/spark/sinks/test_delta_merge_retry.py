"""A commit conflict on the stream's Delta merge (another writer committed meanwhile: OPTIMIZE, a
manual fix) is merged again on the new version instead of failing the micro-batch."""

from __future__ import annotations

import pyarrow as pa
from deltalake.exceptions import CommitFailedError

from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.spark.sinks.base import META_OP
from airflow_provider_mysqlcdc.spark.sinks.delta.sink import DeltaSink

T = TableId("shop", "orders")
SCHEMA = TableSchema(
    T,
    (Column("id", 1, "bigint", "bigint", False), Column("s", 2, "varchar", "varchar(20)", True)),
    ("id",),
    ("id",),
    ("id",),
)


class _Conflicting:
    """A table whose first merge loses the commit race."""

    def __init__(self, real):
        self.real = real

    def merge(self, *a, **kw):
        builder = self.real.merge(*a, **kw)

        class Once:
            def __getattr__(self, name):
                inner = getattr(builder, name)
                if name == "execute":

                    def fail():
                        raise CommitFailedError("a concurrent transaction has written data")

                    return fail
                return lambda *x, **y: setattr(Once, "_b", inner(*x, **y)) or self

        return Once()


def test_a_conflicting_merge_is_merged_again_on_the_new_version(tmp_path):
    sink = DeltaSink(str(tmp_path))
    sink.prepare([SCHEMA])
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["a", "b"], META_OP: ["+I", "+I"]})
    source = sink._merge_source(SCHEMA, rows)
    table = sink.open_table(T)
    sink._merge(_Conflicting(table), SCHEMA, source, batch_id=3)
    got = sorted(sink.open_table(T).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": 1, "s": "a"}, {"id": 2, "s": "b"}]
    assert sink.open_table(T).transaction_version(sink.app_id) == 3
