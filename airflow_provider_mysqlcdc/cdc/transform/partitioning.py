"""A transform rule's ``partition_keys``: how a sink table is partitioned, as Iceberg writes it.

Each entry is a column name (Iceberg's ``identity``) or a transform over one column:
``year(col)``, ``month(col)``, ``day(col)``, ``hour(col)``, ``bucket(N, col)``, ``truncate(W, col)``
(Iceberg's partition transforms, which Flink CDC 3.6 takes too). The columns are the *sink*
table's (after a projection), because that is the table that is partitioned.

Checked here, without a server or a sink, so a pipeline file, the plan step and the sink all
refuse the same entries with the same words: the text, then against the sink table's Arrow
columns (a column it does not have, a transform Iceberg does not define for the column's type,
two entries over one column). Pure Python; no Spark, no Airflow, no pyiceberg.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Sequence

import pyarrow as pa

from ..errors import ConfigError
from ..model import TableId

TIME_TRANSFORMS = ("year", "month", "day", "hour")
WIDTH_TRANSFORMS = ("bucket", "truncate")
TRANSFORMS = ("identity", *TIME_TRANSFORMS, *WIDTH_TRANSFORMS)
EXAMPLE = "[region, day(created_at), bucket(16, id)]"
# A column name as a pipeline file writes it: plain, or quoted with backticks (any character but `).
_NAME = r"(?:`[^`]+`|[A-Za-z_][A-Za-z0-9_$]*)"
_ENTRY = re.compile(
    rf"^\s*(?:(?P<plain>{_NAME})|(?P<fn>[A-Za-z_]+)\s*\(\s*(?:(?P<n>[+-]?\d+)\s*,\s*)?(?P<col>{_NAME})\s*\))\s*$"
)
_MAX_WIDTH = 2**31 - 1


@dataclass(frozen=True)
class PartitionKey:
    """One entry: ``transform`` over ``column`` (``width``: a bucket's count or a truncation's width)."""

    transform: str
    column: str
    width: int | None = None

    @property
    def text(self) -> str:
        """The entry as a pipeline file writes it (``day(ts)``, ``bucket(4, id)``, ``region``; a
        name that is not a plain one in backticks)."""
        column = self.column if re.fullmatch(_NAME, self.column) else f"`{self.column}`"
        if self.transform == "identity":
            return column
        if self.width is not None:
            return f"{self.transform}({self.width}, {column})"
        return f"{self.transform}({column})"

    @property
    def field_name(self) -> str:
        """The partition field's name in the table's spec (Iceberg's convention: ``ts_day``,
        ``id_bucket``; the column's own name for identity)."""
        return self.column if self.transform == "identity" else f"{self.column}_{self.transform}"


def parse_partition_key(text: Any) -> PartitionKey:
    """One entry, or ConfigError with the reason and the fix (the caller names where it is)."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(
            f"found {text!r}, need a column name or a transform over one, e.g. {EXAMPLE}. Fix: write each entry as text"
        )
    m = _ENTRY.match(text)
    if m is None:
        raise ConfigError(
            f"found {text!r}, not a column name nor a transform over one ({', '.join(_forms())}). "
            f"Fix: write e.g. {EXAMPLE}"
        )
    if m.group("plain"):
        return PartitionKey("identity", _unquote(m.group("plain")))
    fn, n, column = m.group("fn").lower(), m.group("n"), _unquote(m.group("col"))
    if fn not in TRANSFORMS:
        raise ConfigError(
            f"found {text!r}: {fn} is not a partition transform. Fix: use one of {', '.join(_forms())}, "
            "or the column's name alone"
        )
    if fn in WIDTH_TRANSFORMS:
        if n is None:
            raise ConfigError(f"found {text!r}: {fn} takes a {_width_word(fn)} first. Fix: write {fn}(16, {column})")
        width = int(n)
        if not 0 < width <= _MAX_WIDTH:
            raise ConfigError(
                f"found {text!r}: the {_width_word(fn)} must be a whole number from 1 to {_MAX_WIDTH}. "
                f"Fix: write e.g. {fn}(16, {column})"
            )
        return PartitionKey(fn, column, width)
    if n is not None:
        raise ConfigError(f"found {text!r}: {fn} takes the column only. Fix: write {fn}({column})")
    return PartitionKey(fn, column)


def parse_partition_keys(entries: Iterable[Any]) -> tuple[PartitionKey, ...]:
    """Every entry parsed; ConfigError (prefixed with the entry's index) for the first bad one,
    or for two entries over one column (Iceberg partitions a file by one value per column)."""
    keys: list[PartitionKey] = []
    for i, entry in enumerate(entries):
        try:
            keys.append(parse_partition_key(entry))
        except ConfigError as e:
            raise ConfigError(f"[{i}]: {e}") from None
    seen: dict[str, PartitionKey] = {}
    for i, key in enumerate(keys):
        other = seen.get(key.column.lower())
        if other is not None:
            raise ConfigError(
                f"[{i}]: found {key.text!r} and {other.text!r}: two entries over the column {key.column}. "
                "Fix: keep one entry per column"
            )
        seen[key.column.lower()] = key
    return tuple(keys)


def _unquote(name: str) -> str:
    return name[1:-1] if name.startswith("`") else name


def _width_word(fn: str) -> str:
    return "bucket count" if fn == "bucket" else "width"


def _forms() -> list[str]:
    return [*(f"{t}(col)" for t in TIME_TRANSFORMS), "bucket(N, col)", "truncate(W, col)"]


# --- which column types each transform takes (Iceberg's spec, over the sink's Arrow types) ----------


def _text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _bytes(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)


_TAKES: dict[str, tuple[Callable[[pa.DataType], bool], str]] = {
    "identity": (lambda t: not pa.types.is_nested(t), "a column of a plain type"),
    "year": (lambda t: pa.types.is_date(t) or pa.types.is_timestamp(t), "a DATE, DATETIME or TIMESTAMP column"),
    "month": (lambda t: pa.types.is_date(t) or pa.types.is_timestamp(t), "a DATE, DATETIME or TIMESTAMP column"),
    "day": (lambda t: pa.types.is_date(t) or pa.types.is_timestamp(t), "a DATE, DATETIME or TIMESTAMP column"),
    "hour": (pa.types.is_timestamp, "a DATETIME or TIMESTAMP column"),
    "bucket": (
        lambda t: (
            pa.types.is_integer(t)
            or pa.types.is_decimal(t)
            or pa.types.is_date(t)
            or pa.types.is_timestamp(t)
            or _text(t)
            or _bytes(t)
        ),
        "an integer, DECIMAL, DATE, DATETIME, TIMESTAMP, text or binary column (not FLOAT, DOUBLE or BOOLEAN)",
    ),
    "truncate": (
        lambda t: pa.types.is_integer(t) or pa.types.is_decimal(t) or _text(t) or _bytes(t),
        "an integer, DECIMAL, text or binary column",
    ),
}


def check_partition_keys(
    table_id: TableId, keys: Sequence[PartitionKey], columns: pa.Schema, where: str | None = None
) -> tuple[PartitionKey, ...]:
    """The entries with their columns spelled as the sink table ``table_id`` (Arrow ``columns``)
    spells them (entries match names case-blind); ConfigError unless each names a column of it
    whose type its transform takes. ``where`` names the rule in the message."""
    where = where or f"transform of {table_id}"
    by_lower = {f.name.lower(): f for f in columns}
    out = []
    for key in keys:
        field = by_lower.get(key.column.lower())
        if field is None:
            raise ConfigError(
                f"{where}: partition_keys entry {key.text!r} names {key.column}, which the sink table "
                f"{table_id} does not have ({', '.join(columns.names)}). Fix: partition by one of its columns, or "
                "remove the entry"
            )
        takes, what = _TAKES[key.transform]
        if not takes(field.type):
            raise ConfigError(
                f"{where}: partition_keys entry {key.text!r}: {key.transform} needs {what}, and "
                f"{field.name} is {field.type} in the sink table (Iceberg defines no {key.transform} over it). "
                f"Fix: use another transform (a plain {field.name} partitions by each value; bucket(N, {field.name}) "
                "spreads integers and text), or another column"
            )
        out.append(replace(key, column=field.name))
    return tuple(out)


__all__ = [
    "PartitionKey",
    "TRANSFORMS",
    "check_partition_keys",
    "parse_partition_key",
    "parse_partition_keys",
]
