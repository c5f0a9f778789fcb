"""GTID sets of both flavors, as values: parse, compare, merge, print canonically.

MySQL: ``uuid:1-5:7-9,uuid2:1-3`` -- every transaction ever executed, as intervals per
source uuid (MySQL 8.4 adds tags: ``uuid:1-5:mytag:1-2``). MariaDB: ``0-1-100,1-2-5`` --
domain-server-sequence, the *last* transaction per replication domain; sequence numbers
grow monotonically inside a domain, so "contains" compares them per domain.

The canonical string is what the engine stores (offsets, checkpoints): it must not depend
on how the server happened to print the set (whitespace, newlines, order, case), or two
equal offsets would serialize differently and Spark compares serialized offsets as text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Literal, Mapping, Union

Flavor = Literal["mysql", "mariadb"]

_UUID_RE = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_TAG_RE = re.compile(r"^[a-z_][a-z0-9_]{0,31}$")
_INTERVAL_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
_MARIADB_GTID_RE = re.compile(r"^(\d+)-(\d+)-(\d+)$")

Interval = tuple[int, int]  # inclusive


def _normalize_uuid(text: str) -> str:
    u = text.strip().lower()
    if not _UUID_RE.match(u):
        raise ValueError(f"not a server uuid in a MySQL GTID set: {text!r}")
    u = u.replace("-", "")
    return f"{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}"


def _merge(intervals: Iterable[Interval]) -> tuple[Interval, ...]:
    """Sorted, with overlapping and adjacent intervals joined (1-5 and 6-9 make 1-9)."""
    out: list[list[int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return tuple((a, b) for a, b in out)


def _covers(big: tuple[Interval, ...], small: tuple[Interval, ...]) -> bool:
    """Every interval of ``small`` lies inside one interval of ``big`` (both merged)."""
    return all(any(a <= s and e <= b for a, b in big) for s, e in small)


# Key of a MySQL GTID "source": (uuid, tag); the tag is "" for untagged GTIDs.
SourceKey = tuple[str, str]


@dataclass(frozen=True)
class MysqlGtidSet:
    """A MySQL GTID set: executed transaction numbers per (server uuid, tag)."""

    sources: Mapping[SourceKey, tuple[Interval, ...]] = field(default_factory=dict)
    flavor: Flavor = field(default="mysql", init=False)

    @classmethod
    def parse(cls, text: str | None) -> "MysqlGtidSet":
        sources: dict[SourceKey, list[Interval]] = {}
        compact = re.sub(r"\s+", "", text or "")
        for part in filter(None, compact.split(",")):
            uuid_text, *items = part.split(":")
            uuid = _normalize_uuid(uuid_text)
            if not items or not _INTERVAL_RE.match(items[-1]):
                raise ValueError(f"GTID set entry {part!r} ends without a transaction interval in {text!r}")
            tag = ""
            for item in items:
                m = _INTERVAL_RE.match(item)
                if m:
                    start = int(m.group(1))
                    end = int(m.group(2) or start)
                    if start < 1 or end < start:
                        raise ValueError(f"bad GTID interval {item!r} in {text!r}")
                    sources.setdefault((uuid, tag), []).append((start, end))
                elif _TAG_RE.match(item.lower()):
                    tag = item.lower()
                else:
                    raise ValueError(f"bad GTID interval or tag {item!r} in {text!r}")
        return cls({k: _merge(v) for k, v in sources.items() if v})

    def __post_init__(self) -> None:
        # Store merged and sorted, so equality and hashing are by value.
        object.__setattr__(self, "sources", {k: _merge(v) for k, v in sorted(self.sources.items()) if v})

    @property
    def is_empty(self) -> bool:
        return not self.sources

    def contains(self, other: "GtidSet") -> bool:
        """Whether every transaction of ``other`` is in this set (superset or equal)."""
        _same_flavor(self, other)
        assert isinstance(other, MysqlGtidSet)  # _same_flavor raised otherwise
        return all(_covers(self.sources.get(k, ()), iv) for k, iv in other.sources.items())

    def union(self, other: "MysqlGtidSet") -> "MysqlGtidSet":
        _same_flavor(self, other)
        merged: dict[SourceKey, list[Interval]] = {k: list(v) for k, v in self.sources.items()}
        for k, iv in other.sources.items():
            merged.setdefault(k, []).extend(iv)
        return MysqlGtidSet({k: tuple(v) for k, v in merged.items()})

    def add(self, gtid: str) -> "MysqlGtidSet":
        """Add one transaction, ``uuid:N`` or ``uuid:tag:N``."""
        one = MysqlGtidSet.parse(gtid)
        if sum(b - a + 1 for iv in one.sources.values() for a, b in iv) != 1:
            raise ValueError(f"not a single MySQL GTID: {gtid!r}")
        return self.union(one)

    def __str__(self) -> str:
        by_uuid: dict[str, list[str]] = {}
        for (uuid, tag), intervals in self.sources.items():  # sorted: untagged ("") first
            items = by_uuid.setdefault(uuid, [uuid])
            if tag:
                items.append(tag)
            items.extend(f"{a}" if a == b else f"{a}-{b}" for a, b in intervals)
        return ",".join(":".join(items) for items in by_uuid.values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MysqlGtidSet):
            return NotImplemented
        return dict(self.sources) == dict(other.sources)

    def __hash__(self) -> int:
        return hash(str(self))

    def to_json(self) -> str:
        return str(self)


@dataclass(frozen=True)
class MariadbGtidSet:
    """A MariaDB GTID position: the last (server_id, seq_no) per replication domain."""

    domains: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    flavor: Flavor = field(default="mariadb", init=False)

    @classmethod
    def parse(cls, text: str | None) -> "MariadbGtidSet":
        domains: dict[int, tuple[int, int]] = {}
        compact = re.sub(r"\s+", "", text or "")
        for part in filter(None, compact.split(",")):
            m = _MARIADB_GTID_RE.match(part)
            if not m:
                raise ValueError(f"not a MariaDB GTID (domain-server-seq): {part!r} in {text!r}")
            domain, server, seq = (int(g) for g in m.groups())
            domains[domain] = _later(domains.get(domain), (server, seq))
        return cls(domains)

    def __post_init__(self) -> None:
        object.__setattr__(self, "domains", dict(sorted(self.domains.items())))

    @property
    def is_empty(self) -> bool:
        return not self.domains

    def contains(self, other: "GtidSet") -> bool:
        """Whether this position is at or past ``other`` in every domain ``other`` has."""
        _same_flavor(self, other)
        assert isinstance(other, MariadbGtidSet)  # _same_flavor raised otherwise
        return all(d in self.domains and self.domains[d][1] >= seq for d, (_, seq) in other.domains.items())

    def union(self, other: "MariadbGtidSet") -> "MariadbGtidSet":
        _same_flavor(self, other)
        merged = dict(self.domains)
        for d, pos in other.domains.items():
            merged[d] = _later(merged.get(d), pos)
        return MariadbGtidSet(merged)

    def add(self, gtid: str) -> "MariadbGtidSet":
        """Record one transaction ``domain-server-seq``."""
        one = MariadbGtidSet.parse(gtid)
        if len(one.domains) != 1:
            raise ValueError(f"not a single MariaDB GTID: {gtid!r}")
        return self.union(one)

    def __str__(self) -> str:
        return ",".join(f"{d}-{server}-{seq}" for d, (server, seq) in self.domains.items())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MariadbGtidSet):
            return NotImplemented
        return dict(self.domains) == dict(other.domains)

    def __hash__(self) -> int:
        return hash(str(self))

    def to_json(self) -> str:
        return str(self)


def _later(current: tuple[int, int] | None, new: tuple[int, int]) -> tuple[int, int]:
    """The later of two (server, seq) in one domain: sequence numbers order a domain."""
    if current is None or new[1] >= current[1]:
        return new
    return current


GtidSet = Union[MysqlGtidSet, MariadbGtidSet]


def _same_flavor(a: GtidSet, b: GtidSet) -> None:
    if type(a) is not type(b):
        raise TypeError(f"cannot combine a {a.flavor} GTID set with a {b.flavor} one")


def parse_gtid_set(text: str | None, flavor: Flavor) -> GtidSet:
    """Parse a GTID set as the server prints it (empty or None gives the empty set)."""
    if flavor == "mysql":
        return MysqlGtidSet.parse(text)
    if flavor == "mariadb":
        return MariadbGtidSet.parse(text)
    raise ValueError(f"unknown GTID flavor {flavor!r} (expected 'mysql' or 'mariadb')")


def guess_flavor(text: str) -> Flavor:
    """Tell the flavors apart by shape: MySQL sets contain ':' (uuid:interval), MariaDB's never do."""
    return "mysql" if ":" in text else "mariadb"


def canonical_gtid(text: str | None, flavor: Flavor | None = None) -> str | None:
    """The canonical text of a GTID set, or None when it is empty (no GTIDs on the server)."""
    if not text or not text.strip():
        return None
    s = str(parse_gtid_set(text, flavor or guess_flavor(text)))
    return s or None
