"""The contract (design.md §6) for the snapshot + handoff, on real MariaDB and real Spark.

For each seed: a 50k-row table (int, composite and case-insensitive string keys) is read
in several batches while writers insert, update, delete and move keys — aimed at chunk
boundaries and at the first and last chunks. Then the binlog from the minimum HW to a
final offset, through the handoff filter, applied to the batches' rows, must equal a
fresh SELECT taken at that final offset after the writers stopped. Row by row.
A longer soak with more rows and seeds: bench/snapshot_soak.py.
"""

from __future__ import annotations

import pytest

from mysqlcdc_harness.pipeline import run_consistency_case
from mysqlcdc_harness.tables import VARIANTS

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROWS = 50_000
CASES = [(variant, seed) for seed in range(5) for variant in VARIANTS]  # 15 seeded runs


@pytest.mark.parametrize("variant,seed", CASES, ids=[f"{v}-seed{s}" for v, s in CASES])
def test_snapshot_then_stream_equals_source(mariadb, fresh_db, spark, tmp_dir, variant, seed):
    # Seeds 1 and 4 materialize batches through staged Parquet files, 0 through the cache, 2 and 3 by
    # writing a Delta table's own files (rows written once, the window's corrections applied to the
    # files): seed 2 with Spark's Parquet writer, seed 3 with the Arrow writer (object stores).
    staging = str(tmp_dir / "staging") if seed in (1, 4) else None
    lake = str(tmp_dir / "lake") if seed in (2, 3) else None
    r = run_consistency_case(
        mariadb,
        spark,
        fresh_db,
        variant,
        seed,
        ROWS,
        chunk_size=3000 + 300 * seed,
        chunks_per_batch=3,
        staging_dir=staging,
        lake=lake,
        delta_writer="spark" if seed == 2 else "arrow",
    )
    assert r.batches >= 3, "the test must exercise several batches"
    assert r.writer_changes > 50, f"the writer must really have written during the snapshot ({r})"
    assert r.streamed > 0, "changes after the batches' HWs must come through the stream"
    assert not r.problem, (
        f"{variant} seed {seed}: sink != source ({r.writer_changes} writer changes, {r.streamed} streamed)\n{r.problem}"
    )
    assert r.rows > ROWS * 0.9
