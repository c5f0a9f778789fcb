"""Direct stream writes: a sink's stream work that starts in the binlog source's own tasks.

The task that decodes a binlog range holds its changes as Arrow. On the row path they go
through the JVM (Arrow -> rows -> projection, shuffle, -> Arrow) before a sink sees them,
which cost more CPU than decoding. A sink that can take its input from the range directly
returns a ``DirectSpec`` from ``Sink.direct_write()``; the source then runs
``spec.write_range`` in each task and yields that spec's records (``spec.arrow_schema``)
instead of change rows, and the stream's ``foreachBatch`` hands the micro-batch's records to
``Sink.publish_steps``. Two kinds:

- ``changelog-json`` (``changelog/direct.py``: ``DirectWrite``): the task writes the range's
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

from .base import BATCH_ID_PROPERTY
from .changelog.direct import DirectWrite
from .console.direct import ConsoleLines
from .direct_spec import DirectSpec
from .last_change import LastChange


def spec_from_json(text: str) -> DirectSpec:
    """The spec a ``direct_write`` source option names; refuses kinds this version lacks."""
    kinds: dict[str, type[DirectSpec]] = {
        DirectWrite.kind: DirectWrite,
        LastChange.kind: LastChange,
        ConsoleLines.kind: ConsoleLines,
    }
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
            f"{BATCH_ID_PROPERTY}: it is only read by the stream's foreachBatch (spark/stream/query.py), which sets it."
        )
    return int(value)
