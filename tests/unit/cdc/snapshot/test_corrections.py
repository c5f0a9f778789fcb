"""reduce_changes: the backfill window reduced to per-key corrections, checked against replay."""

from __future__ import annotations

import random

from airflow_provider_mysqlcdc.cdc.chunks import Batch, Chunk
from airflow_provider_mysqlcdc.cdc.events import RowChange
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.snapshot.corrections import TableCorrections, reduce_changes

T = TableId("db", "t")
U = TableId("db", "u")


class FakeKeyOrder:
    """Python tuple order; NULL keys only in a range with includes_null."""

    def contains(self, start, end, includes_null, key):
        if any(v is None for v in key):
            return includes_null
        return (start is None or key >= start) and (end is None or key < end)

    def sort_key(self, key):
        return key


def schema(t: TableId, cols=("id", "v"), chunk_key=("id",), identity=None) -> TableSchema:
    columns = tuple(Column(c, i + 1, "int", "int", False) for i, c in enumerate(cols))
    return TableSchema(t, columns, chunk_key, chunk_key, identity or chunk_key)


class Log:
    """Builds RowChanges at increasing offsets."""

    def __init__(self) -> None:
        self.pos = 100
        self.changes: list[RowChange] = []

    def _add(self, kind, t, before, after):
        self.pos += 10
        self.changes.append(RowChange(kind, t, before, after, BinlogOffset("bin.000001", self.pos)))

    def ins(self, t, **after):
        self._add("insert", t, None, after)
        return self

    def upd(self, t, before, **after):
        self._add("update", t, before, after)
        return self

    def dele(self, t, **before):
        self._add("delete", t, before, None)
        return self


def batch(*chunks: tuple) -> Batch:
    return Batch("b", tuple(Chunk(t, i, s, e, n) for i, (t, s, e, n) in enumerate(chunks)))


ORDERS = {T: FakeKeyOrder(), U: FakeKeyOrder()}
SCHEMAS = {T: schema(T), U: schema(U)}


def corrected(rows: dict, corr: TableCorrections) -> dict:
    out = {k: v for k, v in rows.items() if k not in corr.drop_keys}
    out.update(corr.upserts)
    return out


def test_five_updates_of_one_row_give_the_last_value_once():
    log = Log()
    row = {"id": 5, "v": 0}
    for i in range(1, 6):
        log.upd(T, dict(row), id=5, v=i)
        row = {"id": 5, "v": i}
    out = reduce_changes(log.changes, batch((T, (1,), (10,), False)), SCHEMAS, ORDERS)[T]
    assert out.upserts == {(5,): {"id": 5, "v": 5}}
    assert out.deleted == set()
    assert corrected({(5,): {"id": 5, "v": 0}}, out) == {(5,): {"id": 5, "v": 5}}


def test_insert_then_delete_leaves_nothing_but_drops_a_snapshot_copy():
    log = Log().ins(T, id=3, v=1).dele(T, id=3, v=1)
    out = reduce_changes(log.changes, batch((T, None, None, False)), SCHEMAS, ORDERS)[T]
    assert out.upserts == {}
    assert out.deleted == {(3,)}
    # The SELECT may have seen the row between the two events.
    assert corrected({(3,): {"id": 3, "v": 1}}, out) == {}


def test_delete_then_reinsert_is_an_upsert():
    log = Log().dele(T, id=3, v=1).ins(T, id=3, v=2)
    out = reduce_changes(log.changes, batch((T, None, None, False)), SCHEMAS, ORDERS)[T]
    assert out.upserts == {(3,): {"id": 3, "v": 2}} and out.deleted == set()


def test_key_moved_inside_the_batch_range():
    log = Log().upd(T, {"id": 2, "v": 1}, id=7, v=1)
    out = reduce_changes(log.changes, batch((T, (1,), (5,), False), (T, (5,), (10,), False)), SCHEMAS, ORDERS)[T]
    assert out.deleted == {(2,)} and out.upserts == {(7,): {"id": 7, "v": 1}}


def test_key_moved_out_of_the_batch_range_is_only_a_delete():
    log = Log().upd(T, {"id": 2, "v": 1}, id=70, v=1)
    out = reduce_changes(log.changes, batch((T, (1,), (10,), False)), SCHEMAS, ORDERS)[T]
    assert out.deleted == {(2,)} and out.upserts == {}


def test_key_moved_into_the_batch_range_is_only_an_insert():
    log = Log().upd(T, {"id": 70, "v": 1}, id=2, v=1)
    out = reduce_changes(log.changes, batch((T, (1,), (10,), False)), SCHEMAS, ORDERS)[T]
    assert out.deleted == set() and out.upserts == {(2,): {"id": 2, "v": 1}}


def test_changes_outside_the_ranges_or_tables_are_ignored():
    other = TableId("db", "other")
    log = (
        Log()
        .ins(T, id=0, v=1)
        .ins(T, id=10, v=1)
        .ins(T, id=5, v=1)
        .ins(U, id=5, v=1)
        .ins(other, id=5, v=1)
        .dele(T, id=11, v=1)
    )
    out = reduce_changes(log.changes, batch((T, (1,), (10,), False)), SCHEMAS, ORDERS)
    assert set(out) == {T}
    assert out[T].upserts == {(5,): {"id": 5, "v": 1}} and out[T].deleted == set()


def test_every_batch_table_gets_an_entry_and_tables_are_independent():
    log = Log().ins(U, id=5, v=1).ins(T, id=5, v=2)
    out = reduce_changes(log.changes, batch((T, None, (3,), False), (U, None, None, False)), SCHEMAS, ORDERS)
    assert not out[T] and out[U].upserts == {(5,): {"id": 5, "v": 1}}


def test_changes_are_processed_in_offset_order():
    log = Log().ins(T, id=1, v=1).upd(T, {"id": 1, "v": 1}, id=1, v=2).dele(T, id=1, v=2).ins(T, id=1, v=3)
    out = reduce_changes(list(reversed(log.changes)), batch((T, None, None, False)), SCHEMAS, ORDERS)[T]
    assert out.upserts == {(1,): {"id": 1, "v": 3}}


def test_multi_row_event_rows_order_by_row_index():
    off = BinlogOffset("bin.000001", 500)
    changes = [
        RowChange("update", T, {"id": 1, "v": 1}, {"id": 1, "v": 3}, BinlogOffset("bin.000001", 500, row=1)),
        RowChange("insert", T, None, {"id": 1, "v": 1}, off),
    ]
    out = reduce_changes(changes, batch((T, None, None, False)), SCHEMAS, ORDERS)[T]
    assert out.upserts == {(1,): {"id": 1, "v": 3}}


def test_composite_keys():
    c = TableId("db", "c")
    sch = {c: schema(c, cols=("a", "b", "v"), chunk_key=("a", "b"))}
    orders = {c: FakeKeyOrder()}
    b = batch((c, (1, "m"), (2, "c"), False))
    log = (
        Log()
        .ins(c, a=1, b="z", v=1)  # in: (1,'z') >= (1,'m')
        .ins(c, a=1, b="a", v=1)  # out: before start
        .ins(c, a=2, b="b", v=1)  # in: (2,'b') < (2,'c')
        .ins(c, a=2, b="c", v=1)  # out: at end
        .upd(c, {"a": 2, "b": "b", "v": 1}, a=2, b="b", v=9)
    )
    out = reduce_changes(log.changes, b, sch, orders)[c]
    assert out.upserts == {(1, "z"): {"a": 1, "b": "z", "v": 1}, (2, "b"): {"a": 2, "b": "b", "v": 9}}
    assert out.deleted == set()


def test_row_identity_differs_from_chunk_key():
    # No primary key: chunk on a unique column `k`, rows identified by every column.
    n = TableId("db", "nopk")
    sch = {n: schema(n, cols=("k", "v"), chunk_key=("k",), identity=("k", "v"))}
    orders = {n: FakeKeyOrder()}
    b = batch((n, (1,), (10,), False))
    log = Log().upd(n, {"k": 2, "v": "a"}, k=2, v="b").upd(n, {"k": 3, "v": "x"}, k=30, v="x")
    out = reduce_changes(log.changes, b, sch, orders)[n]
    assert out.deleted == {(2, "a"), (3, "x")}
    assert out.upserts == {(2, "b"): {"k": 2, "v": "b"}}
    snap = {(2, "a"): {"k": 2, "v": "a"}, (3, "x"): {"k": 3, "v": "x"}, (4, "y"): {"k": 4, "v": "y"}}
    assert corrected(snap, out) == {(2, "b"): {"k": 2, "v": "b"}, (4, "y"): {"k": 4, "v": "y"}}


def test_null_chunk_keys_belong_to_the_range_that_includes_null():
    n = TableId("db", "nul")
    sch = {n: schema(n, cols=("k", "v"), chunk_key=("k",), identity=("k", "v"))}
    log = Log().ins(n, k=None, v=1)
    with_null = reduce_changes(log.changes, batch((n, None, (5,), True)), sch, {n: FakeKeyOrder()})[n]
    without = reduce_changes(log.changes, batch((n, (5,), None, False)), sch, {n: FakeKeyOrder()})[n]
    assert with_null.upserts == {(None, 1): {"k": None, "v": 1}} and not without


def test_random_histories_match_replay_from_any_snapshot_moment():
    """The section 3 argument: whichever moment in the window the SELECT saw, corrections give HW."""
    rng = random.Random(7)
    lo, hi = (20,), (60,)
    for _ in range(200):
        table: dict[int, int] = {k: 0 for k in range(0, 80, 3)}
        states = [dict(table)]
        log = Log()
        for _ in range(rng.randint(0, 30)):
            op = rng.random()
            if op < 0.35 or not table:
                k = rng.randrange(0, 80)
                if k in table:
                    continue
                table[k] = rng.randrange(100)
                log.ins(T, id=k, v=table[k])
            elif op < 0.7:
                k = rng.choice(sorted(table))
                new_k = k if rng.random() < 0.6 else rng.randrange(0, 80)
                if new_k != k and new_k in table:
                    continue
                v = table.pop(k)
                table[new_k] = rng.randrange(100)
                log.upd(T, {"id": k, "v": v}, id=new_k, v=table[new_k])
            else:
                k = rng.choice(sorted(table))
                log.dele(T, id=k, v=table.pop(k))
            states.append(dict(table))
        out = reduce_changes(log.changes, batch((T, lo, hi, False)), SCHEMAS, ORDERS)[T]

        def in_range(state):
            return {(k,): {"id": k, "v": v} for k, v in state.items() if lo <= (k,) < hi}

        expected = in_range(table)
        for seen in states:
            assert corrected(in_range(seen), out) == expected


def test_works_with_the_real_key_order_for_numeric_keys():
    from airflow_provider_mysqlcdc.cdc.snapshot.keyorder import KeyOrder

    orders = {T: KeyOrder([Column("id", 1, "int", "int", False)])}
    log = Log().ins(T, id=5, v=1).ins(T, id=10, v=1).upd(T, {"id": 5, "v": 1}, id=12, v=1)
    out = reduce_changes(log.changes, batch((T, (1,), (10,), False)), SCHEMAS, orders)[T]
    assert out.deleted == {(5,)} and out.upserts == {}


def test_reduce_changes_orders_string_keys_a_run_at_a_time():
    """A batch's window of changes on a case-insensitive string key: the corrections equal the ones
    computed a key at a time, and the server is asked a few hundred keys per round-trip."""
    from airflow_provider_mysqlcdc.cdc.chunks import Batch, Chunk
    from airflow_provider_mysqlcdc.cdc.events import RowChange
    from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
    from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
    from airflow_provider_mysqlcdc.cdc.snapshot.corrections import reduce_changes
    from tests.unit.cdc.snapshot.test_handoff import CountingServerOrder

    c = TableId("db", "codes")
    sch = {c: TableSchema(c, (Column("code", 1, "varchar", "varchar(20)", False),), ("code",), ("code",), ("code",))}
    batch = Batch("b", (Chunk(c, 0, ("B",), ("n",), False),))
    keys = [f"{p}{i:04d}" for i in range(500) for p in ("a", "C", "m", "Z")]
    changes = [
        RowChange("insert", c, None, {"code": k}, BinlogOffset("bin.000001", 100 + i)) for i, k in enumerate(keys)
    ]
    many = CountingServerOrder.make()
    got = reduce_changes(changes, batch, sch, {c: many})[c]
    inside = {(k,) for k in keys if "b" <= k.casefold() < "n"}
    assert set(got.upserts) == inside and inside, (len(got.upserts), len(inside))
    assert type(many).queries <= len(keys) // 200 + 4, type(many).queries
