"""The interface of a sink's direct stream write (see ``direct.py`` for the two kinds and how they travel).

Kept apart from ``direct.py``, which knows every kind: the kinds implement this interface, and
the registry imports the kinds, so neither imports the other.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Iterable

import pyarrow as pa


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
