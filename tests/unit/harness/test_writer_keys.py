"""The writer's live-key bookkeeping: a list to choose from uniformly and each key's index in it,
kept in step through inserts, deletes and key moves (checked against a plain set)."""

from __future__ import annotations

import random

from mysqlcdc_harness.writer import ConcurrentWriter, TableSpec


def test_live_keys_stay_the_set_of_added_minus_dropped_keys():
    spec = TableSpec("d", "t", ("id",), ("v",), new_key=lambda r: (r.randrange(1000),), values=lambda r: (1,))
    w = ConcurrentWriter(connect=lambda: None, spec=spec)  # type: ignore[arg-type,return-value]
    rng = random.Random(7)
    expected: set = set()
    for _ in range(20_000):
        k = (rng.randrange(300),)
        if rng.random() < 0.5:
            w._remember(add=k)
            expected.add(k)
        elif rng.random() < 0.5:
            w._remember(drop=k)
            expected.discard(k)
        else:
            nk = (rng.randrange(300),)
            if nk not in expected:
                w._remember(add=nk, drop=k)
                expected.discard(k)
                expected.add(nk)
        assert len(w._keys) == len(expected)
    assert set(w._keys) == expected
    assert all(w._keys[i] == k for k, i in w._key_set.items()) and len(w._key_set) == len(expected)
