"""Batch sizing: millions of rows per Spark job, whole waves of the cluster's parallelism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_mysqlcdc.cdc.batching import BatchSizing, batch_label, pack_batches
from airflow_provider_mysqlcdc.cdc.chunks import Chunk
from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import TableId


def _chunks(table: TableId, n: int) -> list[Chunk]:
    return [Chunk(table, i, (i * 10,) if i else None, ((i + 1) * 10,) if i < n - 1 else None) for i in range(n)]


A, B, C = TableId("shop", "orders"), TableId("shop", "items"), TableId("shop", "tiny")


def test_a_small_database_is_one_batch_of_all_its_tables():
    batches = pack_batches({A: _chunks(A, 30), B: _chunks(B, 5), C: _chunks(C, 1)}, {A: 200_000, B: 40_000, C: 3})
    assert len(batches) == 1
    assert batches[0].tables == (A, B, C)
    assert batch_label(batches[0]) == "shop.orders chunks 0-29 + shop.items chunks 0-4 + 1 more table"


def test_a_big_table_is_cut_into_whole_waves_of_about_equal_batches():
    sizing = BatchSizing(rows_per_batch=5_000_000, parallelism=4)
    batches = pack_batches({A: _chunks(A, 2500)}, {A: 20_000_000}, sizing)
    assert len(batches) == 4
    sizes = [len(b.chunks) for b in batches]
    assert max(sizes) - min(sizes) <= 1
    assert [c.chunk_id for b in batches for c in b.chunks] == list(range(2500))
    batches = pack_batches({A: _chunks(A, 2500)}, {A: 21_000_000}, sizing)
    assert len(batches) == 8  # 5 batches' worth rounds up to two full waves of 4


def test_a_table_smaller_than_one_wave_still_uses_every_slot_while_batches_stay_worth_their_cost():
    sizing = BatchSizing(rows_per_batch=5_000_000, parallelism=2)
    assert len(pack_batches({A: _chunks(A, 250)}, {A: 2_000_000}, sizing)) == 2  # not one 2M batch on one core
    assert len(pack_batches({A: _chunks(A, 250)}, {A: 700_000}, sizing)) == 1  # two of 350k: not worth it
    assert len(pack_batches({A: _chunks(A, 250)}, {A: 3_000_000}, BatchSizing(5_000_000, 4))) == 4
    assert len(pack_batches({A: _chunks(A, 250)}, {A: 1_600_000}, BatchSizing(5_000_000, 4))) == 4  # 3 -> a wave
    assert len(pack_batches({A: _chunks(A, 250)}, {A: 20_000_000}, sizing)) == 4  # rows_per_batch still caps


def test_the_batch_count_never_exceeds_max_batches_or_the_chunks():
    assert (
        len(pack_batches({A: _chunks(A, 5000)}, {A: 10**9}, BatchSizing(rows_per_batch=1000, max_batches=1024))) == 1024
    )
    assert len(pack_batches({A: _chunks(A, 3)}, {A: 10**9}, BatchSizing(rows_per_batch=10))) == 3


def test_bad_sizing_names_the_setting():
    with pytest.raises(ConfigError, match="rows_per_batch"):
        BatchSizing(rows_per_batch=0)
    with pytest.raises(ConfigError, match="parallelism"):
        BatchSizing(parallelism=0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 60), st.integers(0, 5_000_000)), min_size=1, max_size=6),
    st.integers(1, 3_000_000),
    st.integers(1, 8),
    st.integers(1, 50),
)
def test_packing_keeps_every_chunk_once_in_order(tables, rows_per_batch, parallelism, max_batches):
    ids = [TableId("db", f"t{i}") for i in range(len(tables))]
    chunks = {t: _chunks(t, n) for t, (n, _) in zip(ids, tables)}
    estimates = {t: rows for t, (_, rows) in zip(ids, tables)}
    batches = pack_batches(chunks, estimates, BatchSizing(rows_per_batch, parallelism, max_batches))
    assert 1 <= len(batches) <= max_batches
    flat = [(c.table_id, c.chunk_id) for b in batches for c in b.chunks]
    assert flat == [(t, c.chunk_id) for t in ids for c in chunks[t]]
    assert len({b.batch_id for b in batches}) == len(batches)


def test_batch_server_ids_stay_clear_of_the_stream_and_its_catchup_ranges():
    from airflow_provider_mysqlcdc.cdc.plan import Plan
    from airflow_provider_mysqlcdc.cdc.source.config import ServerIdRange

    batches = pack_batches({A: _chunks(A, 400)}, {A: 40_000_000}, BatchSizing(rows_per_batch=1_000_000, parallelism=4))
    plan = Plan({}, tuple(batches))
    ids = ServerIdRange(5400, 5409)
    got = {plan.batch_server_id(b.batch_id, ids, reserved_top=2) for b in batches}
    assert len(batches) > 10
    assert got == set(range(5402, 5408))  # not the stream's 5400/5401, not catch-up's 5408/5409
    assert {plan.batch_server_id(b.batch_id, ids) for b in batches} == set(range(5402, 5410))
