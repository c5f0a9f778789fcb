"""A test sink: every (table, micro-batch) becomes one JSON-lines file, written atomically.

It stands in for the real ChangelogSink until that exists. Idempotent like a real sink: a
replayed batch id finds its file and changes nothing -- and since the source promises that a
replay reads the same rows, it *asserts* that the replayed rows equal the stored ones.

Layout: ``<path>/<db.table>/batch-<batch id, 10 digits>.jsonl``; each line is one change row,
values JSON-encoded losslessly (``json_values.encode_value``), read back typed with
``read_changes``. Collects each micro-batch to the driver: test tables only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from airflow_provider_mysqlcdc.cdc.model import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.pipeline import SinkConfig
from airflow_provider_mysqlcdc.cdc.types import map_table
from airflow_provider_mysqlcdc.spark.sinks.base import META_OP, META_SEQ, Sink, SnapshotWrite
from mysqlcdc_harness.json_values import encode_value, image_decoder

BATCH_KEY = "_batch_id"


class MemorySink(Sink):
    name = "memory"

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def prepare(self, schemas: Sequence[TableSchema]) -> None:
        for s in schemas:
            (self.path / str(s.table_id)).mkdir(parents=True, exist_ok=True)

    def write_snapshot(self, schema, frame, ranges, batch_id: str) -> SnapshotWrite:
        rows = frame.toArrow().to_pylist()
        self._write(self.path / str(schema.table_id) / f"snapshot-{batch_id}.jsonl", rows)
        return SnapshotWrite(len(rows), {})

    def write_changes(self, schema: TableSchema, changes, batch_id: int) -> None:
        rows = sorted(changes.toArrow().to_pylist(), key=lambda r: r[META_SEQ])
        if not rows:
            return  # like the changelog sink: no file for a micro-batch without changes
        self._write(self.path / str(schema.table_id) / f"batch-{batch_id:010d}.jsonl", rows)

    @staticmethod
    def _write(target: Path, rows: list[Mapping[str, Any]]) -> None:
        text = "".join(json.dumps({k: encode_value(v) for k, v in r.items()}, sort_keys=True) + "\n" for r in rows)
        if target.exists():
            old = target.read_text()
            if old != text:
                raise AssertionError(
                    f"replayed micro-batch {target.name} differs from the stored one:\n"
                    f"stored {old[:500]}\nnew    {text[:500]}"
                )
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, target)


def build(config: SinkConfig) -> MemorySink:
    """``--sink-factory mysqlcdc_harness.memory_sink:build`` for spark_jobs/binlog_stream.py."""
    return MemorySink(**dict(config.options))


def batch_files(path: str | Path, table_id: TableId) -> dict[int, Path]:
    d = Path(path) / str(table_id)
    if not d.exists():
        return {}
    return {int(p.stem.split("-")[1]): p for p in d.glob("batch-*.jsonl")}


def read_changes(path: str | Path, schema: TableSchema, tz: str = "UTC") -> list[dict[str, Any]]:
    """Every stored change row of a table, typed, in (batch id, _seq) order, with ``_batch_id``."""
    decode = image_decoder(map_table(schema, tz))
    out = []
    for bid, p in sorted(batch_files(path, schema.table_id).items()):
        for line in p.read_text().splitlines():
            raw = json.loads(line)
            row = decode(raw)
            row.update({k: v for k, v in raw.items() if k.startswith("_")})
            row[BATCH_KEY] = bid
            out.append(row)
    return out


def apply_rows(state: dict[tuple, dict], changes: Iterable[Mapping[str, Any]], schema: TableSchema) -> None:
    """Apply change rows in order to ``state`` (row identity -> row), as an upsert sink would."""
    names = schema.column_names
    ident = schema.row_identity
    for ch in changes:
        key = tuple(ch[c] for c in ident)
        if ch[META_OP] in ("-U", "-D"):
            state.pop(key, None)
        else:
            state[key] = {n: ch[n] for n in names}
