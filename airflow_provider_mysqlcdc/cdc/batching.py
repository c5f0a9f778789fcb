"""How many Spark jobs the snapshot takes, and which chunks each one reads.

Every batch is one spark-submit, and starting one costs several seconds (JVM, SparkSession,
JDBC pool) whatever it reads. So a batch holds millions of rows, not a handful of chunks;
the count follows the cluster's parallelism (a multiple of the snapshot tasks that run at
once, so no wave leaves slots idle; a table smaller than one wave of ``rows_per_batch`` is
still cut into one batch per slot while each keeps ``MIN_ROWS_PER_BATCH`` rows, so its load
uses every core), and it never exceeds Airflow's ``max_map_length``.

Chunks are packed in plan order, table after table, so a batch may end one table and start
the next: a database of many small tables becomes a few batches, not one per table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from .chunks import Batch, Chunk
from .errors import REPORT_BUG, ConfigError
from .model import TableId

# Below this a batch's fixed cost (watermarks, the binlog window, the commit: about a second on
# a shared Spark Connect application) outweighs what a second core gains on it.
MIN_ROWS_PER_BATCH = 500_000


@dataclass(frozen=True)
class BatchSizing:
    """``rows_per_batch`` is the largest size of one Spark job; ``parallelism`` the number of
    snapshot tasks that run at once; ``max_batches`` Airflow's ``max_map_length`` (1024);
    ``min_rows_per_batch`` how small a batch may get so that a table uses every slot."""

    rows_per_batch: int = 5_000_000
    parallelism: int = 4
    max_batches: int = 1024
    min_rows_per_batch: int = MIN_ROWS_PER_BATCH

    def __post_init__(self) -> None:
        if self.rows_per_batch < 1:
            raise ConfigError(f"rows_per_batch: found {self.rows_per_batch}, need >= 1. Fix: use e.g. 5000000.")
        if self.parallelism < 1:
            raise ConfigError(
                f"parallelism: found {self.parallelism}, need >= 1. "
                "Fix: the number of snapshot tasks that run at once, e.g. 4."
            )
        if self.max_batches < 1:
            raise ConfigError(
                f"max_batches: found {self.max_batches}, need >= 1. "
                "Fix: Airflow's [core] max_map_length (1024 by default)."
            )

    def batch_count(self, total_rows: int, chunk_count: int) -> int:
        if chunk_count == 0:
            return 0
        n = max(1, math.ceil(total_rows / self.rows_per_batch))
        if n < self.parallelism:  # one wave at least, where each batch stays worth its fixed cost
            n = max(n, min(self.parallelism, total_rows // max(self.min_rows_per_batch, 1)))
        if n > 1:  # whole waves: every concurrent task gets a batch of about the same size
            n = math.ceil(n / self.parallelism) * self.parallelism
        return max(1, min(n, self.max_batches, chunk_count))


def chunk_rows(
    chunks_by_table: Mapping[TableId, Sequence[Chunk]], row_estimates: Mapping[TableId, int]
) -> list[tuple[Chunk, float]]:
    """Every chunk with its estimated rows (a table's estimate spread evenly over its chunks)."""
    out: list[tuple[Chunk, float]] = []
    for table, chunks in chunks_by_table.items():
        if not chunks:
            continue
        per = max(int(row_estimates.get(table, 0)), 1) / len(chunks)
        out.extend((c, per) for c in chunks)
    return out


def pack_batches(
    chunks_by_table: Mapping[TableId, Sequence[Chunk]],
    row_estimates: Mapping[TableId, int],
    sizing: BatchSizing | None = None,
) -> list[Batch]:
    """Cut the chunks, in order, into ``sizing.batch_count`` batches of about equal rows."""
    sizing = sizing or BatchSizing()
    weighted = chunk_rows(chunks_by_table, row_estimates)
    total = sum(w for _, w in weighted)
    n = sizing.batch_count(int(total), len(weighted))
    if n == 0:
        return []
    if n > sizing.max_batches:  # pragma: no cover - batch_count caps it
        raise ConfigError(f"{n} batches exceed max_batches {sizing.max_batches}. {REPORT_BUG}")
    target = total / n
    groups: list[list[Chunk]] = [[]]
    acc = 0.0
    for i, (chunk, w) in enumerate(weighted):
        remaining_chunks = len(weighted) - i
        # Close the current batch when it reached its share, or when every later batch needs
        # one of the chunks left.
        if groups[-1] and len(groups) < n and (acc >= target * len(groups) or remaining_chunks <= n - len(groups)):
            groups.append([])
        groups[-1].append(chunk)
        acc += w
    width = max(4, len(str(len(groups) - 1)))
    return [Batch(f"batch-{i:0{width}d}", tuple(g)) for i, g in enumerate(groups)]


def batch_label(batch: Batch, max_tables: int = 2, estimated_rows: int | None = None) -> str:
    """A short, readable name for UIs: ``shop.orders chunks 0-63 + shop.items chunks 0-3 (~1.2M rows)``."""
    parts = []
    for t in batch.tables[:max_tables]:
        cs = batch.chunks_of(t)
        ids = f"{cs[0].chunk_id}" if len(cs) == 1 else f"{cs[0].chunk_id}-{cs[-1].chunk_id}"
        parts.append(f"{t} chunk{'s' if len(cs) > 1 else ''} {ids}")
    more = len(batch.tables) - max_tables
    if more > 0:
        parts.append(f"{more} more table{'s' if more > 1 else ''}")
    label = " + ".join(parts)
    if estimated_rows is not None:
        label += f" (~{short_count(estimated_rows)} rows)"
    return label


def short_count(n: float) -> str:
    """1234 -> '1.2k', 5_000_000 -> '5.0M': for labels, where the exact figure is noise."""
    n = float(n)
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


def batch_row_estimates(batches: Sequence[Batch], row_estimates: Mapping[TableId, int]) -> dict[str, int]:
    """Each batch's estimated rows: a table's estimate spread evenly over its chunks, as packed."""
    chunks_per_table: dict[TableId, int] = {}
    for b in batches:
        for c in b.chunks:
            chunks_per_table[c.table_id] = chunks_per_table.get(c.table_id, 0) + 1
    out = {}
    for b in batches:
        out[b.batch_id] = round(
            sum(int(row_estimates.get(c.table_id, 0)) / chunks_per_table[c.table_id] for c in b.chunks)
        )
    return out
