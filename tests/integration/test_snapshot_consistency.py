"""The contract (design.md §6) for the snapshot + handoff, on real MariaDB and real Spark.

For each seed: a 50k-row table (int, composite and case-insensitive string keys) is read
in several batches while writers insert, update, delete and move keys — aimed at chunk
boundaries and at the first and last chunks. Then the binlog from the minimum HW to a
final offset, through the handoff filter, applied to the batches' rows, must equal a
fresh SELECT taken at that final offset after the writers stopped. Row by row.
"""

from __future__ import annotations

import time

import pytest

from airflow_provider_mysqlcdc.cdc.model import TableId
from tests.support import pipeline
from tests.support.tables import VARIANTS
from tests.support.verify import diff
from tests.support.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROWS = 50_000
CASES = [(variant, seed) for seed in range(7) for variant in VARIANTS]  # 21 seeded runs


@pytest.mark.parametrize("variant,seed", CASES, ids=[f"{v}-seed{s}" for v, s in CASES])
def test_snapshot_then_stream_equals_source(mariadb, fresh_db, spark, variant, seed):
    spec = VARIANTS[variant](mariadb, fresh_db, ROWS)
    source = mariadb.source_config()
    table_id = TableId(fresh_db, spec.table)
    plan = pipeline.plan_table(source, table_id, chunk_size=3000 + 300 * seed, chunks_per_batch=3)
    assert len(plan.batches) >= 3, "the test must exercise several batches"

    boundaries = [c.start for c in plan.chunks if c.start is not None]
    first_last = mariadb.query(
        f"(SELECT {', '.join(spec.key_columns)} FROM `{spec.table}` ORDER BY {', '.join(spec.key_columns)} LIMIT 3) "
        f"UNION ALL (SELECT {', '.join(spec.key_columns)} FROM `{spec.table}` "
        f"ORDER BY {', '.join(c + ' DESC' for c in spec.key_columns)} LIMIT 3)", database=fresh_db)
    writer = ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=seed, threads=2,
                              hot_keys=boundaries + [tuple(r) for r in first_last], hot_ratio=0.5)
    with writer:
        time.sleep(0.3)
        rows, finished = pipeline.snapshot(spark, source, plan)
        time.sleep(0.5)
    stats = writer.stats
    assert stats.total > 50, f"the writer must really have written during the snapshot ({stats})"
    final = pipeline.offset_now(source)
    hws = {f.high_watermark for f in finished}
    assert len(hws) == len(finished), "each batch must have its own HW (writes ran between them)"

    applied = pipeline.stream_into(rows, source, plan.schema, finished, final)
    expected = pipeline.fresh_select(spark, source, plan.schema)
    problem = diff(expected, rows)
    assert not problem, f"{variant} seed {seed}: sink != source after {stats} and {applied} streamed changes\n{problem}"
    assert len(expected) > ROWS * 0.9
