"""Direct stream writes: a sink's stream work that starts in the binlog source's own tasks.

The task that decodes a binlog range holds its changes as Arrow. On the row path they go
through the JVM (Arrow -> rows -> projection, shuffle, -> Arrow) before a sink sees them,
which cost more CPU than decoding. A sink that can take its input from the range directly
returns a ``DirectSpec`` from ``Sink.direct_write()``; the source then runs
``spec.write_range`` in each task and yields that spec's records (``spec.arrow_schema``)
instead of change rows, and the stream's ``foreachBatch`` hands the micro-batch's records to
``Sink.publish_parts``. Two kinds:

- ``changelog-json`` (``changelog_direct.DirectWrite``): the task writes the range's
  changelog lines to part files; the sink joins them.
- ``last-change`` (``last_change.LastChange``): the task reduces the range to the last change
  per row identity and returns those rows (Arrow IPC in the record); the sink reduces across
  ranges and applies them. Delta and PostgreSQL use it.

The spec travels to the tasks as the source option ``direct_write`` (its ``to_json()``), and
the micro-batch id as the Spark local property ``BATCH_ID_PROPERTY``, which the stream's
``foreachBatch`` sets before it collects the records (local properties travel with the job's
tasks).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Iterable

import pyarrow as pa

from .base import BATCH_ID_PROPERTY


class DirectSpec(ABC):
    """What the binlog source's tasks need to do a sink's direct stream write."""

    kind: ClassVar[str]

    @abstractmethod
    def options(self) -> dict[str, Any]:
        """The spec's settings, JSON-able (``to_json`` adds the kind)."""

    @classmethod
    @abstractmethod
    def from_options(cls, options: dict[str, Any]) -> "DirectSpec":
        ...

    @abstractmethod
    def arrow_schema(self) -> pa.Schema:
        """The records the source yields in this mode (non-nullable fields)."""

    @abstractmethod
    def write_range(self, layout: Any, batches: Iterable[pa.RecordBatch], batch_id: int, part: int
                    ) -> pa.RecordBatch:
        """Do the task's share for one binlog range (``SourceLayout`` batches); return its
        records, one per table with changes, each with a ``changes`` count."""

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, **self.options()}, sort_keys=True)

    def spark_schema(self) -> Any:
        """``arrow_schema`` as Spark's StructType (pyspark imported on use)."""
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self.arrow_schema())


def spec_from_json(text: str) -> DirectSpec:
    """The spec a ``direct_write`` source option names; refuses kinds this version lacks."""
    from .changelog_direct import DirectWrite
    from .last_change import LastChange

    kinds: dict[str, type[DirectSpec]] = {DirectWrite.kind: DirectWrite, LastChange.kind: LastChange}
    options = json.loads(text)
    kind = options.pop("kind", DirectWrite.kind)
    if kind not in kinds:
        raise ValueError(f"direct_write: unknown kind {kind!r} (this version has {', '.join(sorted(kinds))})")
    return kinds[kind].from_options(options)


def current_batch_id() -> int:
    """The micro-batch id the running task works for (see the module docstring)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    value = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
    if value is None:
        raise RuntimeError(
            f"the binlog source in direct-write mode was read without the Spark local property "
            f"{BATCH_ID_PROPERTY}: it is only read by the stream's foreachBatch (spark/stream.py), which sets it.")
    return int(value)
