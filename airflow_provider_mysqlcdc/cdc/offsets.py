"""Binlog offsets: (file, position) plus the GTID set, totally ordered by (file index, position).

Never compare file names or "file.pos" strings: ``mysql-bin.000010`` sorts before
``mysql-bin.000009`` as a string once the index grows a digit, and positions are numbers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import total_ordering
from typing import Any, Mapping

_FILE_RE = re.compile(r"^(?P<base>.*?)\.(?P<index>\d+)$")


def split_binlog_file(name: str) -> tuple[str, int]:
    """``mysql-bin.000123`` -> (``mysql-bin``, 123)."""
    m = _FILE_RE.match(name)
    if not m:
        raise ValueError(f"not a binlog file name (expected '<base>.<number>'): {name!r}")
    return m.group("base"), int(m.group("index"))


@total_ordering
@dataclass(frozen=True)
class BinlogOffset:
    """A position in the binlog.

    ``position`` is the byte offset of the next event to read in ``file`` (what
    ``SHOW MASTER STATUS`` reports, and where a binlog dump may start). ``gtid`` is the
    server's executed GTID set at that point in its native text form, when known.
    ``row`` orders the rows of one multi-row event (0 for offsets between events).
    Offsets compare by (file index, position, row); the GTID set does not take part.
    """

    file: str
    position: int
    gtid: str | None = None
    row: int = 0

    def __post_init__(self) -> None:
        split_binlog_file(self.file)
        if self.position < 0:
            raise ValueError(f"binlog position must be >= 0, got {self.position}")

    @property
    def file_index(self) -> int:
        return split_binlog_file(self.file)[1]

    def sort_key(self) -> tuple[int, int, int]:
        return (self.file_index, self.position, self.row)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, BinlogOffset):
            return NotImplemented
        return self.sort_key() < other.sort_key()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BinlogOffset):
            return NotImplemented
        return self.sort_key() == other.sort_key()

    def __hash__(self) -> int:
        return hash(self.sort_key())

    def to_dict(self) -> dict[str, Any]:
        # A stable key order: Spark compares serialized streaming offsets as strings.
        d: dict[str, Any] = {"file": self.file, "position": self.position}
        if self.row:
            d["row"] = self.row
        if self.gtid:
            d["gtid"] = self.gtid
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "BinlogOffset":
        return cls(str(d["file"]), int(d["position"]), d.get("gtid") or None, int(d.get("row", 0)))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "BinlogOffset":
        return cls.from_dict(json.loads(text))

    def __str__(self) -> str:
        s = f"{self.file}:{self.position}"
        if self.row:
            s += f"#{self.row}"
        return s
