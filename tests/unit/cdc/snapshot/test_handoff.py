"""HandoffFilter: which stream events reach the sink after the snapshot batches."""

from __future__ import annotations

from airflow_provider_mysqlcdc.cdc.chunks import FinishedBatch, KeyRange
from airflow_provider_mysqlcdc.cdc.events import Heartbeat, RowChange, SchemaChange
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.snapshot.handoff import HandoffFilter

T = TableId("db", "t")
U = TableId("db", "u")
F = "bin.000001"


class FakeKeyOrder:
    """Python tuple order; NULL keys only in a range with includes_null. Counts lookups."""

    def __init__(self) -> None:
        self.sort_key_calls = 0

    def contains(self, start, end, includes_null, key):
        if any(v is None for v in key):
            return includes_null
        return (start is None or key >= start) and (end is None or key < end)

    def sort_key(self, key):
        self.sort_key_calls += 1
        return key


def schema(t: TableId, key=("id",)) -> TableSchema:
    cols = tuple(Column(c, i + 1, "int", "int", True) for i, c in enumerate((*key, "v")))
    return TableSchema(t, cols, key, key, key)


def off(pos: int, file: str = F, row: int = 0) -> BinlogOffset:
    return BinlogOffset(file, pos, row=row)


def fb(bid: str, hw: BinlogOffset, *ranges: tuple) -> FinishedBatch:
    return FinishedBatch(bid, tuple(KeyRange(t, s, e, n) for t, s, e, n in ranges), hw)


def upd(t, old, new, pos, row=0) -> RowChange:
    return RowChange("update", t, {"id": old, "v": 0}, {"id": new, "v": 1}, off(pos, row=row))


def ins(t, k, pos) -> RowChange:
    return RowChange("insert", t, None, {"id": k, "v": 1}, off(pos))


def dele(t, k, pos) -> RowChange:
    return RowChange("delete", t, {"id": k, "v": 1}, None, off(pos))


def design_example(order=None) -> HandoffFilter:
    """design.md: [1,100] HW=1000, [101,200] HW=800, [201,300] HW=1500 (one chunk per batch)."""
    finished = [
        fb("b1", off(1000), (T, (1,), (101,), False)),
        fb("b2", off(800), (T, (101,), (201,), False)),
        fb("b3", off(1500), (T, (201,), (301,), False)),
    ]
    return HandoffFilter(finished, {T: order or FakeKeyOrder()}, {T: schema(T)})


def test_design_example():
    f = design_example()
    assert f.start_offset == off(800)
    e1 = upd(T, 123, 123, 900)
    assert f.apply(e1) == [e1]  # 900 > 800
    assert f.apply(upd(T, 250, 250, 1200)) == []  # its chunk already holds it: 1200 <= 1500
    assert f.apply(upd(T, 50, 50, 900)) == []  # 900 < 1000
    e2 = upd(T, 50, 50, 1100)
    assert f.apply(e2) == [e2]


def test_event_exactly_at_hw_is_emitted_and_one_byte_before_is_not():
    f = design_example()
    assert f.apply(ins(T, 150, 800)) == [ins(T, 150, 800)]
    assert f.apply(ins(T, 150, 799)) == []
    # A later row of a multi-row event that starts before HW is still before HW.
    assert f.apply(RowChange("insert", T, None, {"id": 20, "v": 1}, off(999, row=5))) == []
    assert f.apply(dele(T, 20, 1000)) == [dele(T, 20, 1000)]


def test_boundary_keys_use_half_open_ranges():
    f = design_example()
    assert f.apply(ins(T, 101, 900)) == [ins(T, 101, 900)]  # [101,201) HW 800
    assert f.apply(ins(T, 100, 900)) == []  # [1,101)   HW 1000
    assert f.apply(ins(T, 200, 900)) == [ins(T, 200, 900)]  # [101,201) HW 800
    assert f.apply(ins(T, 201, 900)) == []  # [201,301) HW 1500


def test_offsets_compare_across_files():
    f = design_example()
    assert f.apply(ins(T, 250, 5)) == []  # same file, 5 < 1500
    late = RowChange("insert", T, None, {"id": 250, "v": 1}, off(5, file="bin.000002"))
    assert f.apply(late) == [late]


def test_key_change_across_batches_emits_only_the_missing_half():
    f = design_example()
    # Old key 50 (HW 1000) already reflects the move at 900; new key 150 (HW 800) does not.
    got = f.apply(upd(T, 50, 150, 900))
    assert [(c.kind, c.before, c.after) for c in got] == [("insert", None, {"id": 150, "v": 1})]
    assert got[0].offset == off(900)
    # Old key 150 (HW 800) needs the delete; new key 250 (HW 1500) already has the row.
    got = f.apply(upd(T, 150, 250, 900))
    assert [(c.kind, c.before, c.after) for c in got] == [("delete", {"id": 150, "v": 0}, None)]
    # Both batches already hold it / both need it.
    assert f.apply(upd(T, 50, 250, 900)) == []
    assert f.apply(upd(T, 50, 250, 1600)) == [upd(T, 50, 250, 1600)]


def test_fast_path_after_the_largest_hw_skips_the_lookup():
    order = FakeKeyOrder()
    f = design_example(order)
    before = order.sort_key_calls
    for pos in (1500, 1600, 10_000):
        assert f.apply(upd(T, 5, 5, pos)) == [upd(T, 5, 5, pos)]
    assert order.sort_key_calls == before
    f.apply(upd(T, 5, 5, 1499))
    assert order.sort_key_calls > before


def test_unknown_tables_and_uncovered_keys_are_emitted():
    f = design_example()
    assert f.apply(ins(U, 5, 10)) == [ins(U, 5, 10)]  # table in no batch
    assert f.apply(ins(T, 0, 900)) == [ins(T, 0, 900)]  # below every range
    assert f.apply(ins(T, 999, 900)) == [ins(T, 999, 900)]  # above every range


def test_schema_changes_and_heartbeats_pass_through():
    f = design_example()
    sc = SchemaChange("db", "ALTER TABLE t ADD COLUMN w INT", off(10), T)
    hb = Heartbeat(off(10))
    assert f.apply(sc) == [sc] and f.apply(hb) == [hb]


def test_unbounded_and_null_ranges_and_many_tables():
    finished = [
        fb("a", off(500), (T, None, (10,), True), (U, None, None, False)),
        fb("b", off(700), (T, (10,), None, False)),
    ]
    f = HandoffFilter(finished, {T: FakeKeyOrder(), U: FakeKeyOrder()}, {T: schema(T), U: schema(U)})
    assert f.start_offset == off(500)
    assert f.apply(ins(T, None, 600)) == [ins(T, None, 600)]  # NULL key lives in the first range (HW 500)
    assert f.apply(ins(T, None, 400)) == []
    assert f.apply(ins(T, -5, 600)) == [ins(T, -5, 600)]
    assert f.apply(ins(T, 10, 600)) == []
    assert f.apply(ins(U, 10**9, 499)) == []
    assert f.apply(ins(U, 10**9, 500)) == [ins(U, 10**9, 500)]


def test_many_ranges_bisect():
    n = 1000
    finished = [fb(f"b{i}", off(1000 + (i * 7919) % n), (T, (i * 10,), ((i + 1) * 10,), False)) for i in range(n)]
    f = HandoffFilter(list(reversed(finished)), {T: FakeKeyOrder()}, {T: schema(T)})
    for i in range(0, n, 37):
        hw = 1000 + (i * 7919) % n
        k = i * 10 + 3
        assert f.apply(ins(T, k, hw - 1)) == []
        assert f.apply(ins(T, k, hw)) == [ins(T, k, hw)]


def test_composite_keys():
    c = TableId("db", "c")
    sch = {
        c: TableSchema(
            c,
            (Column("a", 1, "int", "int", False), Column("b", 2, "varchar", "varchar(5)", False)),
            ("a", "b"),
            ("a", "b"),
            ("a", "b"),
        )
    }
    finished = [fb("x", off(100), (c, None, (1, "m"), False)), fb("y", off(200), (c, (1, "m"), None, False))]
    f = HandoffFilter(finished, {c: FakeKeyOrder()}, sch)
    e = RowChange("insert", c, None, {"a": 1, "b": "c"}, off(150))
    assert f.apply(e) == [e]
    e = RowChange("insert", c, None, {"a": 1, "b": "n"}, off(150))
    assert f.apply(e) == []


def test_no_batches():
    f = HandoffFilter([], {}, {})
    assert f.start_offset is None
    assert f.apply(ins(T, 1, 1)) == [ins(T, 1, 1)]


def test_works_with_the_real_key_order_for_numeric_keys():
    from airflow_provider_mysqlcdc.cdc.snapshot.keyorder import KeyOrder

    sch = schema(T)
    order = KeyOrder([Column("id", 1, "int", "int", True)])
    finished = [fb("a", off(1000), (T, None, (101,), True)), fb("b", off(800), (T, (101,), None, False))]
    f = HandoffFilter(finished, {T: order}, {T: sch})
    assert f.apply(ins(T, 150, 900)) == [ins(T, 150, 900)]
    assert f.apply(ins(T, 50, 900)) == []
    assert f.apply(ins(T, None, 900)) == []
    assert f.apply(ins(T, None, 1000)) == [ins(T, None, 1000)]


class CountingServerOrder:
    """A real KeyOrder on a case-insensitive VARCHAR key whose server is emulated: weights are the
    case-folded UTF-8 bytes (a PAD SPACE collation). Counts round-trips."""

    @staticmethod
    def make():
        from airflow_provider_mysqlcdc.cdc.snapshot.keyorder import KeyOrder

        class Order(KeyOrder):
            queries = 0

            def _query_one(self, sql, args):
                type(self).queries += 1
                if "STRCMP" in sql or "= CONCAT" in sql:  # the probe: pads, weight of ' ', concatenative
                    return (1, b" ", 1)
                return tuple(str(a).rstrip(" ").casefold().encode() for a in args)

        return Order([Column("code", 1, "varchar", "varchar(20)", False, "utf8mb4", "utf8mb4_general_ci")])


def test_apply_many_equals_apply_and_orders_string_keys_a_run_at_a_time():
    c = TableId("db", "codes")
    sch = {c: TableSchema(c, (Column("code", 1, "varchar", "varchar(20)", False),), ("code",), ("code",), ("code",))}
    finished = [fb("x", off(1000), (c, None, ("m",), False)), fb("y", off(2000), (c, ("m",), None, False))]
    keys = [f"{p}{i:04d}" for i in range(600) for p in ("a", "Q", "z")]
    changes = [
        RowChange("insert", c, None, {"code": k}, off(500 + 3 * i))
        if i % 2
        else RowChange("delete", c, {"code": k}, None, off(500 + 3 * i))
        for i, k in enumerate(keys)
    ]
    one = CountingServerOrder.make()
    expected = [out for ch in changes for out in HandoffFilter(finished, {c: one}, sch).apply(ch)]
    per_change = type(one).queries
    many = CountingServerOrder.make()
    got = HandoffFilter(finished, {c: many}, sch).apply_many(changes)
    assert got == expected
    assert any(got) and len(got) < len(changes), "some changes are in a batch's past, some not"
    assert per_change > 400, "one round-trip per key before the largest HW when applied one at a time"
    assert type(many).queries <= len(keys) // 200 + 4, type(many).queries
