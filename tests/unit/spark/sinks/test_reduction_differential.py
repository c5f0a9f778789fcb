"""The task-side reduction (``change_arrow`` + ``last_change``: what the binlog source's tasks and
the driver compute for a merge-based sink) against its reference, on generated change sequences.

The reference is the row path's rule written plainly: every binlog row becomes change rows (an
insert ``+I`` of the after-image, a delete ``-D`` of the before-image, an update ``-U`` of the
before then ``+U`` of the after, ``_seq = 2 * seq (+1)``), and per row identity the change row
with the highest ``_seq`` is kept (Spark's window; NULLs group together, -0.0 with 0.0). The fast
path reduces in Arrow per range, the ranges again on the driver after an IPC round trip.

Hypothesis draws the identity's column types (integers at their ends, BIGINT UNSIGNED as
DECIMAL(20,0) at 0 / 2^63 - 1 / 2^63 / 2^64 - 1, wide decimals, strings differing only by case
or trailing spaces, binary with 0x00 / 0xFF, doubles with -0.0 and infinities, timestamps), a
sequence of inserts, updates, key moves and deletes over a small key domain (so keys collide),
and where the binlog is cut into ranges. Both must give the same rows, and applying them to the
state before must give the state after.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_mysqlcdc.spark.sinks.change_arrow import explode_changes
from airflow_provider_mysqlcdc.spark.sinks.change_meta import META_OP, META_SEQ
from airflow_provider_mysqlcdc.spark.sinks.last_change import _Reduced, change_table, merged_rows, to_ipc

D = decimal.Decimal
UTC = dt.timezone.utc

# (arrow type, strategy of values): each type's extremes drawn often
KEY_TYPES: dict[str, tuple[pa.DataType, Any]] = {
    "int8": (pa.int8(), st.sampled_from([-128, -1, 0, 1, 127])),
    "int64": (pa.int64(), st.sampled_from([-(2**63), -1, 0, 1, 2**63 - 1]) | st.integers(-(2**63), 2**63 - 1)),
    "uint64": (
        pa.decimal128(20, 0),
        st.sampled_from([D(0), D(1), D(2**63 - 1), D(2**63), D(2**63 + 1), D(2**64 - 2), D(2**64 - 1)])
        | st.integers(0, 2**64 - 1).map(D),
    ),
    "decimal38": (
        pa.decimal128(38, 10),
        st.sampled_from(
            [
                D("-9999999999999999999999999999.9999999999"),
                D("0E-10"),
                D("1.5000000000"),
                D("9999999999999999999999999999.9999999999"),
            ]
        ),
    ),
    "string": (pa.string(), st.sampled_from(["", " ", "a", "a ", "A", "\u00e9", "e\u0301", "\U0001f600"])),
    "binary": (pa.binary(), st.sampled_from([b"", b"\x00", b"\x00\x00", b"\xff", b"\xff\x00", b"a"])),
    "double": (pa.float64(), st.sampled_from([-0.0, 0.0, 1.5, -math.inf, math.inf, 1.7976931348623157e308])),
    "timestamp": (
        pa.timestamp("us", tz="UTC"),
        st.sampled_from(
            [
                dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
                dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC),
                dt.datetime(2000, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
            ]
        ),
    ),
}


def _ident(v: Any) -> Any:
    """A value as the identity groups it: -0.0 with 0.0 (Python's == already does; the hash too)."""
    return 0.0 if isinstance(v, float) and v == 0.0 else v


def _same(a: Any, b: Any) -> bool:
    """Equal values, and a stored -0.0 still -0.0 (the identity groups it with 0.0, the row keeps it)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return type(a) is type(b) and a == b


@st.composite
def scenarios(draw):
    names = draw(st.lists(st.sampled_from(sorted(KEY_TYPES)), min_size=1, max_size=2))
    key_cols = [f"k{i}_{n}" for i, n in enumerate(names)]
    nullable = draw(st.booleans())
    key_values = [st.one_of(st.none(), KEY_TYPES[n][1]) if nullable else KEY_TYPES[n][1] for n in names]
    key = st.tuples(*key_values)
    state: dict[tuple, dict] = {}
    before_state = {}
    for _ in range(draw(st.integers(0, 4))):  # rows present before the range
        k = draw(key)
        ik = tuple(_ident(v) for v in k)
        if ik not in before_state:
            before_state[ik] = {**dict(zip(key_cols, k)), "v": draw(st.integers(-5, 5))}
    state = dict(before_state)
    events = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["insert", "update", "move", "delete"]))
        present = sorted(state, key=repr)
        if kind == "insert" or not present:
            k = draw(key)
            ik = tuple(_ident(v) for v in k)
            if ik in state:
                continue
            after = {**dict(zip(key_cols, k)), "v": draw(st.integers(-5, 5))}
            events.append(("insert", None, after))
            state[ik] = after
            continue
        ik = draw(st.sampled_from(present))
        before = state[ik]
        if kind == "delete":
            events.append(("delete", before, None))
            del state[ik]
        elif kind == "update":
            after = {**before, "v": draw(st.integers(-5, 5))}
            events.append(("update", before, after))
            state[ik] = after
        else:
            k = draw(key)
            nk = tuple(_ident(v) for v in k)
            if nk in state and nk != ik:
                continue
            after = {**dict(zip(key_cols, k)), "v": before["v"]}
            events.append(("update", before, after))
            del state[ik]
            state[nk] = after
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(events) - 1)), max_size=3)))) if events else []
    return names, key_cols, before_state, events, state, cuts


def _batch(names, key_cols, events, first_seq: int) -> pa.RecordBatch:
    fields = [pa.field(c, KEY_TYPES[n][0]) for c, n in zip(key_cols, names)] + [pa.field("v", pa.int64())]
    image = pa.struct(fields)
    rows = {
        "op": [e[0] for e in events],
        "seq": list(range(first_seq, first_seq + len(events))),
        "pair": [{"before": e[1], "after": e[2]} for e in events],
    }
    return pa.RecordBatch.from_pydict(
        rows,
        schema=pa.schema(
            [("op", pa.string()), ("seq", pa.int64()), ("pair", pa.struct([("before", image), ("after", image)]))]
        ),
    )


def _reference(key_cols, events) -> dict[tuple, tuple]:
    """identity -> (op, row, _seq) of the last change row, the row path's way."""
    last: dict[tuple, tuple] = {}
    for seq, (op, before, after) in enumerate(events):
        rows = {
            "insert": [("+I", after, 0)],
            "delete": [("-D", before, 0)],
            "update": [("-U", before, 0), ("+U", after, 1)],
        }[op]
        for code, image, half in rows:
            last[tuple(_ident(image[c]) for c in key_cols)] = (code, image, 2 * seq + half)
    return last


def _fast(names, key_cols, events, cuts) -> pa.Table:
    """Ranges cut at ``cuts``, each reduced as a task does (in pieces, compacted), then the driver's merge."""
    payloads = []
    bounds = [0, *cuts, len(events)]
    columns = [*key_cols, "v"]
    for lo, hi in zip(bounds, bounds[1:]):
        if lo == hi:
            continue
        reduced = _Reduced(key_cols)
        for start in range(lo, hi, 3):  # a task gets its range's rows in several batches
            piece = events[start : min(hi, start + 3)]
            table = change_table(explode_changes(_batch(names, key_cols, piece, start), "pair"), columns)
            reduced.add(table, len(piece))
        payloads.append(to_ipc(reduced.result()))
    return merged_rows(SimpleNamespace(row_identity=tuple(key_cols)), payloads)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_the_task_side_reduction_equals_the_row_paths_last_change_per_identity(scenario):
    names, key_cols, before_state, events, after_state, cuts = scenario
    expected = _reference(key_cols, events)
    got = _fast(names, key_cols, events, cuts).to_pylist() if events else []
    by_ident = {}
    for r in got:
        ik = tuple(_ident(r[c]) for c in key_cols)
        assert ik not in by_ident, f"two rows for one identity {ik!r}: {by_ident[ik]} and {r}"
        by_ident[ik] = r
    assert set(by_ident) == set(expected)
    for ik, (op, image, seq) in expected.items():
        r = by_ident[ik]
        assert (r[META_OP], r[META_SEQ]) == (op, seq), (ik, r)
        assert all(_same(r[c], image[c]) for c in image), (ik, r, image)
    # the merge a sink does with them: deletes then upserts onto the state before
    state = dict(before_state)
    for ik, r in by_ident.items():
        state.pop(ik, None)
        if r[META_OP] in ("+I", "+U"):
            state[ik] = {c: r[c] for c in [*key_cols, "v"]}
    assert state == after_state
