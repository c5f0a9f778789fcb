"""The consistency check's engine: per batch range, a row count and an order-independent key checksum.

Why it exists: every health signal can be green while the sink holds rows the source deleted
(a sink that pruned the files a delete needed, a key that lost its identity on the way). The
check compares, for each table and each batch range of the plan, the number of rows and the
sum (mod 2^64) of a 64-bit hash of each row's identity key, in the source and in the sink,
at one binlog position.

Why it is cheap (far less than a ``COUNT(*)`` and a checksum scan of the source each time):
the source side is kept as a *baseline* (the sums per range at a binlog position) and moved
forward with the binlog: a change subtracts the hash of its before-image key and adds the one
of its after-image key. Sums are additive, so the source at any position ``X`` is
``baseline + D(X) - D(P_b)`` where ``D`` sums the changes read from one window of the binlog.
Only the first check (or a table whose key columns changed) scans the source in full; later
checks read the binlog since the last check and re-scan a few ranges per run (a rolling
re-verification of the baseline itself, so over the runs every range is scanned again).

Hashes: a single integer identity column (the common case) uses a multiply-xor mix of the
64-bit two's complement value that MariaDB/MySQL can compute in SQL without overflow (32-bit
halves times 32-bit constants), so a full source scan is one aggregate query per range and
the sink side is numpy over a column. Any other key is hashed in Python from a canonical
encoding of its values (``canonical_key``), which agrees across pymysql values, the binlog
decoders' values and the sink's Arrow values (ints vs Decimals, aware vs naive UTC datetimes,
TIME as microseconds or timedelta, BIT as bytes or int, padded BINARY).

Nothing here imports Spark or Airflow; the sink side (``spark/consistency.py``) gives the
sink's keys, this module counts them.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..chunks import Batch, KeyRange
from ..model import Column, TableId, TableSchema
from ..offsets import BinlogOffset
from ..sql import python_codec, range_predicate
from ..values import decode_key, encode_key
from .keyorder import (
    BINARY_TYPES,
    DATETIME_TYPES,
    NUMERIC_TYPES,
    KeyOrder,
    _bit_to_int,
    _datetime,
    _num,
    _time,
    key_order_for,
)
from .splitter import INTEGER_TYPES

MASK64 = (1 << 64) - 1
MASK32 = (1 << 32) - 1
_C1 = 0x9E3779B1
_C2 = 0xC2B2AE3D
STATE_DIR = "consistency"
BASELINE_REL = f"{STATE_DIR}/baseline.json"
REPORT_REL = f"{STATE_DIR}/last.json"


# --- hashes ------------------------------------------------------------------------------------


def int_hash(v: int) -> int:
    """The 64-bit hash of an integer key (its 64-bit two's complement), as ``int_hash_sql`` computes it."""
    u = int(v) & MASK64
    a = (u & MASK32) * _C1
    b = (u >> 32) * _C2
    x = a ^ (((b << 7) | (b >> 57)) & MASK64)
    return x ^ (x >> 31)


def int_hash_sql(column_sql: str) -> str:
    """``int_hash`` in MariaDB/MySQL SQL: bit operators work on unsigned 64-bit values (a negative
    BIGINT becomes its two's complement, ``<<`` drops the bits shifted out) and each product is
    of two 32-bit numbers, so nothing overflows."""
    u = f"({column_sql} & {MASK64})"
    a = f"(({u} & {MASK32}) * {_C1})"
    b = f"(({u} >> 32) * {_C2})"
    x = f"({a} ^ (({b} << 7) | ({b} >> 57)))"
    return f"({x} ^ ({x} >> 31))"


def int_hash_array(values: Any) -> Any:
    """``int_hash`` over a numpy array of int64 or uint64 (wrapping arithmetic, as the SQL)."""
    import numpy as np

    u = np.asarray(values).astype(np.uint64, copy=False)
    a = (u & np.uint64(MASK32)) * np.uint64(_C1)
    b = (u >> np.uint64(32)) * np.uint64(_C2)
    x = a ^ ((b << np.uint64(7)) | (b >> np.uint64(57)))
    return x ^ (x >> np.uint64(31))


def _canonical_number(v: Any) -> bytes:
    n = _num(v)
    if isinstance(n, float):
        return b"f" + repr(n).encode()
    d = decimal.Decimal(n)
    if d == d.to_integral_value():
        return b"i" + str(int(d)).encode()
    return b"d" + format(d.normalize(), "f").encode()


def canonical_value(column: Column, v: Any) -> bytes:
    """One key value as bytes that are equal exactly when the server's stored values are equal,
    whichever reader produced the Python value."""
    if v is None:
        return b"N"
    dtype = column.data_type.lower()
    if dtype == "bit":
        return b"i" + str(_bit_to_int(v)).encode()
    if dtype in DATETIME_TYPES:
        return b"t" + ",".join(map(str, _datetime(v))).encode()
    if dtype == "time":
        td = _time(v)
        return b"T" + str((td.days * 86_400 + td.seconds) * 1_000_000 + td.microseconds).encode()
    if dtype in NUMERIC_TYPES:
        return _canonical_number(v)
    if dtype in BINARY_TYPES or (column.charset or "").lower() == "binary":
        b = v.encode("utf-8") if isinstance(v, str) else bytes(v)
        n = column.char_max_length
        if dtype == "binary" and n and len(b) < n:
            b = b.ljust(n, b"\x00")
        return b"b" + b
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).decode(python_codec(column.charset) or "utf-8", "surrogateescape")
    if isinstance(v, (dt.date, dt.datetime, dt.timedelta)):  # an odd reader: keep it comparable
        v = str(v)
    return b"s" + str(v).encode("utf-8", "surrogatepass")


def key_hash(columns: Sequence[Column], key: Sequence[Any]) -> int:
    """The 64-bit hash of a composite (or non-integer) key: blake2b over its canonical values,
    each length-prefixed so no two keys share an encoding."""
    h = hashlib.blake2b(digest_size=8)
    for c, v in zip(columns, key):
        b = canonical_value(c, v)
        h.update(len(b).to_bytes(4, "little"))
        h.update(b)
    return int.from_bytes(h.digest(), "little")


# --- one table -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableLayout:
    """How one table is counted: its identity columns (hashed), its chunk-key columns (which
    range a row belongs to) and the plan's ranges in key order."""

    schema: TableSchema
    ranges: tuple[tuple[str, KeyRange], ...]  # (batch id, range), in chunk-key order
    order: KeyOrder = field(compare=False, repr=False, default=None)  # type: ignore[assignment]

    @property
    def identity(self) -> tuple[Column, ...]:
        return tuple(self.schema.column(n) for n in self.schema.row_identity)

    @property
    def chunk_columns(self) -> tuple[Column, ...]:
        return tuple(self.schema.column(n) for n in self.schema.chunk_key)

    @property
    def integer_identity(self) -> bool:
        """One integer identity column: hashed in SQL on the source and with numpy on the sink."""
        ident = self.identity
        return len(ident) == 1 and ident[0].data_type.lower() in INTEGER_TYPES

    @property
    def integer_chunks(self) -> bool:
        """The chunk key is the integer identity column: ranges are found with a binary search."""
        return self.integer_identity and tuple(self.schema.chunk_key) == tuple(self.schema.row_identity)

    def boundaries(self) -> list[Any]:
        return [r.start[0] if self.integer_chunks else r.start for _, r in self.ranges[1:]]  # type: ignore[index]

    def fingerprint(self) -> str:
        """Changes when what the sums mean changes: the key columns' types or the ranges."""
        parts = [
            ",".join(f"{c.name}:{c.column_type}:{c.collation}" for c in self.identity),
            ",".join(f"{c.name}:{c.column_type}:{c.collation}" for c in self.chunk_columns),
            repr([(b, encode_key(r.start), encode_key(r.end)) for b, r in self.ranges]),
        ]
        return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]

    def row_hash(self, row: Mapping[str, Any]) -> int:
        if self.integer_identity:
            return int_hash(_num(row[self.schema.row_identity[0]]))
        return key_hash(self.identity, [row[n] for n in self.schema.row_identity])

    def chunk_key_of(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(row[n] for n in self.schema.chunk_key)


def table_layouts(
    schemas: Mapping[TableId, TableSchema], batches: Sequence[Batch], source: Any = None
) -> dict[TableId, TableLayout]:
    """Each table's batch ranges, sorted in chunk-key order (a plan lists batches in chunk order
    per table, but an extended plan appends). ``source``: the server that orders string keys
    whose collation Python cannot (``KeyOrder``)."""
    by_table: dict[TableId, list[tuple[str, KeyRange]]] = {}
    for b in batches:
        for r in b.ranges():
            by_table.setdefault(r.table_id, []).append((b.batch_id, r))
    out = {}
    for t, rs in by_table.items():
        if t not in schemas:
            continue
        order = key_order_for(schemas[t], source)
        rs.sort(
            key=lambda br: (br[1].start is not None, order.sort_key(br[1].start) if br[1].start is not None else ())
        )
        out[t] = TableLayout(schemas[t], tuple(rs), order)
    return out


@dataclass
class RangeSums:
    """Rows and key-hash sums per range of one table (index = position in ``TableLayout.ranges``)."""

    counts: list[int]
    sums: list[int]

    @classmethod
    def zeros(cls, n: int) -> "RangeSums":
        return cls([0] * n, [0] * n)

    def copy(self) -> "RangeSums":
        return RangeSums(list(self.counts), list(self.sums))

    def add(self, i: int, h: int, sign: int = 1) -> None:
        self.counts[i] += sign
        self.sums[i] = (self.sums[i] + sign * h) & MASK64

    def plus(self, other: "RangeSums", sign: int = 1) -> "RangeSums":
        return RangeSums(
            [a + sign * b for a, b in zip(self.counts, other.counts)],
            [(a + sign * b) & MASK64 for a, b in zip(self.sums, other.sums)],
        )

    def to_dict(self) -> dict[str, Any]:
        return {"counts": self.counts, "sums": [str(s) for s in self.sums]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RangeSums":
        return cls([int(c) for c in d["counts"]], [int(s) for s in d["sums"]])


class RangeLocator:
    """Which range a chunk key is in, as the server's chunk predicates say (collations included)."""

    def __init__(self, layout: TableLayout) -> None:
        self.layout = layout
        self.order = layout.order or key_order_for(layout.schema)
        self._bounds = layout.boundaries()
        self._bound_keys: list[Any] | None = None

    def locate(self, chunk_key: Sequence[Any]) -> int:
        return self.locate_many([chunk_key])[0]

    def locate_many(self, chunk_keys: Sequence[Sequence[Any]]) -> list[int]:
        """Ranges of many chunk keys: their sort keys fetched together (server weights in bulk)."""
        import bisect

        if not self._bounds:
            return [0] * len(chunk_keys)
        if self.layout.integer_chunks:
            return [bisect.bisect_right(self._bounds, int(_num(k[0]))) for k in chunk_keys]
        if self._bound_keys is None:
            self._bound_keys = self.order.sort_keys(self._bounds)
        out = []
        keys = list(chunk_keys)
        for k, sk in zip(keys, self.order.sort_keys([None if any(v is None for v in k) else k for k in keys])):
            out.append(0 if any(v is None for v in k) else bisect.bisect_right(self._bound_keys, sk))
        return out

    def locate_array(self, values: Any) -> Any:
        """Ranges of many integer chunk keys at once (``integer_chunks`` only)."""
        import numpy as np

        unsigned = self.layout.identity[0].unsigned
        dtype = np.uint64 if unsigned else np.int64
        bounds = np.array([int(b) for b in self._bounds], dtype=dtype)
        return np.searchsorted(bounds, np.asarray(values).astype(dtype, copy=False), side="right")


def sums_of_keys(layout: TableLayout, keys: Any, locator: RangeLocator | None = None, threads: int = 2) -> RangeSums:
    """The sums of a table of keys (a pyarrow Table with the identity and chunk-key columns):
    the sink's side. Integer identities with numpy, a record batch at a time on ``threads``
    threads (numpy and Arrow release the GIL); others row by row."""
    n = len(layout.ranges)
    locator = locator or RangeLocator(layout)
    if keys.num_rows == 0:
        return RangeSums.zeros(n)
    if layout.integer_identity and layout.integer_chunks:
        column = keys.column(layout.schema.row_identity[0])
        unsigned = layout.identity[0].unsigned
        pieces = [c for c in column.chunks if len(c)]
        if threads > 1 and len(pieces) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(threads) as pool:
                parts = list(pool.map(lambda c: _integer_sums(c, unsigned, locator, n), pieces))
        else:
            parts = [_integer_sums(c, unsigned, locator, n) for c in pieces]
        total = RangeSums.zeros(n)
        for part in parts:
            total = total.plus(part)
        return total
    if layout.integer_identity:
        import numpy as np

        values = integer_column(keys.column(layout.schema.row_identity[0]), layout.identity[0].unsigned)
        chunk = [keys.column(c).to_pylist() for c in layout.schema.chunk_key]
        idx = np.array(locator.locate_many(list(zip(*chunk))), dtype=np.int64)
        return _range_sums(idx, int_hash_array(values), n)
    out = RangeSums.zeros(n)
    names = list(dict.fromkeys([*layout.schema.row_identity, *layout.schema.chunk_key]))
    cols = {c: keys.column(c).to_pylist() for c in names}
    rows = [{c: cols[c][i] for c in names} for i in range(keys.num_rows)]
    for row, i in zip(rows, locator.locate_many([layout.chunk_key_of(r) for r in rows])):
        out.add(i, layout.row_hash(row))
    return out


def _integer_sums(chunk: Any, unsigned: bool, locator: RangeLocator, n: int) -> RangeSums:
    values = integer_column(chunk, unsigned)
    return _range_sums(locator.locate_array(values), int_hash_array(values), n)


def _range_sums(idx: Any, hashes: Any, n: int) -> RangeSums:
    """Counts and hash sums (mod 2^64) per range index. A record batch of a table written in key
    order usually lies in one range: then it is one sum."""
    import numpy as np

    sums = [0] * n
    lo, hi = int(idx.min()), int(idx.max())
    if lo == hi:
        counts = [0] * n
        counts[lo] = len(idx)
        sums[lo] = int(np.add.reduce(hashes, dtype=np.uint64))
        return RangeSums(counts, sums)
    bins = np.bincount(idx, minlength=n)
    present = np.flatnonzero(bins)
    if len(present) <= 32:  # a masked sum per range beats sorting millions of indexes
        for i in present:
            sums[int(i)] = int(np.add.reduce(hashes[idx == i], dtype=np.uint64))
    else:
        order = np.argsort(idx, kind="stable")
        sorted_h = hashes[order]
        ends = np.cumsum(bins)
        for i in present:
            sums[int(i)] = int(np.add.reduce(sorted_h[ends[i] - bins[i] : ends[i]], dtype=np.uint64))
    return RangeSums([int(c) for c in bins], sums)


def integer_column(col: Any, unsigned: bool) -> Any:
    """An integer key column (int64, uint64, or DECIMAL(20,0) for BIGINT UNSIGNED) as numpy."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if pa.types.is_decimal(col.type) or not pa.types.is_integer(col.type):
        # DECIMAL(20,0) holds BIGINT UNSIGNED (its values fit uint64 exactly; the cast checks it)
        col = pc.cast(col, pa.uint64() if unsigned else pa.int64())
    return col.to_numpy(zero_copy_only=False).astype(np.uint64 if unsigned else np.int64, copy=False)


# --- the source side ------------------------------------------------------------------------------


def scan_range_sql(layout: TableLayout, r: KeyRange) -> str:
    """``COUNT(*)`` and the key-hash sum of one range, in one aggregate query (integer identity)."""
    col = layout.schema.row_identity[0]
    from ..model import quote_ident

    where = range_predicate(layout.schema, r.start, r.end, r.includes_null)
    return (
        f"SELECT COUNT(*), COALESCE(SUM({int_hash_sql(quote_ident(col))}), 0) "
        f"FROM {layout.schema.table_id.quoted} WHERE {where}"
    )


def scan_range(conn: Any, layout: TableLayout, index: int) -> tuple[int, int]:
    """One range of the source, read inside the caller's snapshot: (rows, key-hash sum)."""
    _, r = layout.ranges[index]
    with conn.cursor() as cur:
        if layout.integer_identity:
            cur.execute(scan_range_sql(layout, r))
            count, total = cur.fetchone()
            return int(count), int(total) & MASK64
        from ..model import quote_ident

        names = list(dict.fromkeys([*layout.schema.row_identity]))
        cur.execute(
            f"SELECT {', '.join(quote_ident(n) for n in names)} FROM {layout.schema.table_id.quoted} "
            f"WHERE {range_predicate(layout.schema, r.start, r.end, r.includes_null)}"
        )
        count = total = 0
        while True:
            rows = cur.fetchmany(10_000)
            if not rows:
                break
            for row in rows:
                count += 1
                total += key_hash(layout.identity, row)
        return count, total & MASK64


# --- the binlog window -------------------------------------------------------------------------------


@dataclass
class WindowSums:
    """Changes of the binlog window ``[start, stop)`` summed per table, with the running sums
    captured at each table's checkpoints (the positions its source sums are wanted at)."""

    start: BinlogOffset
    layouts: Mapping[TableId, TableLayout]
    checkpoints: Mapping[TableId, Sequence[BinlogOffset]]
    running: dict[TableId, RangeSums] = field(default_factory=dict)
    at: dict[TableId, dict[BinlogOffset, RangeSums]] = field(default_factory=dict)
    ddl: dict[TableId, str] = field(default_factory=dict)
    changes: int = 0

    def __post_init__(self) -> None:
        self._locators = {t: RangeLocator(lay) for t, lay in self.layouts.items()}
        self._pending = {t: sorted(set(cps)) for t, cps in self.checkpoints.items()}
        for t, lay in self.layouts.items():
            self.running[t] = RangeSums.zeros(len(lay.ranges))
            self.at[t] = {}
            self._settle(t, self.start)

    def _settle(self, t: TableId, offset: BinlogOffset) -> None:
        """Capture the running sums at every checkpoint of ``t`` that is not after ``offset``."""
        pending = self._pending.get(t) or []
        while pending and not offset < pending[0]:
            self.at[t][pending.pop(0)] = self.running[t].copy()

    def feed(self, items: Iterable[Any]) -> None:
        from ..events import RowChange, SchemaChange

        for item in items:
            if isinstance(item, RowChange):
                t = item.table_id
                lay = self.layouts.get(t)
                if lay is None:
                    continue
                self._settle(t, item.offset)
                self.changes += 1
                loc = self._locators[t]
                if item.before is not None:
                    self.running[t].add(loc.locate(lay.chunk_key_of(item.before)), lay.row_hash(item.before), -1)
                if item.after is not None:
                    self.running[t].add(loc.locate(lay.chunk_key_of(item.after)), lay.row_hash(item.after), 1)
            elif isinstance(item, SchemaChange):
                for t in self.layouts:
                    if t in (getattr(item, "tables", None) or ()) or getattr(item, "table_id", None) == t:
                        self.ddl.setdefault(t, str(getattr(item, "sql", "") or item)[:200])

    def finish(self) -> None:
        """Capture every checkpoint not yet passed (nothing changed the table after them)."""
        for t in self.layouts:
            for cp in list(self._pending.get(t) or []):
                self.at[t][cp] = self.running[t].copy()
            self._pending[t] = []

    def between(self, t: TableId, a: BinlogOffset, b: BinlogOffset) -> RangeSums:
        """What the changes of ``[a, b)`` added to ``t``'s sums (negative when ``b < a``)."""
        return self.at[t][b].plus(self.at[t][a], -1)


# --- state ------------------------------------------------------------------------------------------


@dataclass
class Baseline:
    """The source's sums per range at one binlog position, kept between checks."""

    position: BinlogOffset
    tables: dict[str, dict[str, Any]]  # table text -> {"fingerprint", "sums", "next_rescan"}

    def to_dict(self) -> dict[str, Any]:
        return {"position": self.position.to_dict(), "tables": self.tables}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Baseline":
        return cls(BinlogOffset.from_dict(d["position"]), dict(d.get("tables") or {}))

    def sums_of(self, layout: TableLayout) -> RangeSums | None:
        entry = self.tables.get(layout.schema.table_id.text)
        if not entry or entry.get("fingerprint") != layout.fingerprint():
            return None
        return RangeSums.from_dict(entry["sums"])


@dataclass
class RangeResult:
    batch_id: str
    key_range: KeyRange
    source_rows: int
    sink_rows: int
    source_sum: int
    sink_sum: int

    @property
    def ok(self) -> bool:
        return self.source_rows == self.sink_rows and self.source_sum == self.sink_sum

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": self.batch_id,
            "start": encode_key(self.key_range.start),
            "end": encode_key(self.key_range.end),
            "source_rows": self.source_rows,
            "sink_rows": self.sink_rows,
            "source_checksum": f"{self.source_sum:016x}",
            "sink_checksum": f"{self.sink_sum:016x}",
        }


def compare(layout: TableLayout, source: RangeSums, sink: RangeSums) -> list[RangeResult]:
    return [
        RangeResult(b, r, source.counts[i], sink.counts[i], source.sums[i], sink.sums[i])
        for i, (b, r) in enumerate(layout.ranges)
    ]


def decode_range(d: Mapping[str, Any], table_id: TableId) -> KeyRange:
    return KeyRange(table_id, decode_key(d.get("start")), decode_key(d.get("end")))
