"""Key comparisons in Python that agree with the server's ordering.

Chunk boundaries come from the server (``ORDER BY`` in the column's collation). Code that
asks "is key k inside [start, end)" for every binlog event (the handoff filter, the
backfill of a batch) must give the answer the server would give for the chunk predicate,
or a change is applied twice or lost. Python's own ``<`` is wrong for most string keys:
``'a' == 'A '`` in ``utf8mb4_general_ci`` (case-insensitive, PAD SPACE), ``'é' == 'e'``,
every emoji is equal to every other one in ``utf8mb4_general_ci``, and ``'a\\t' < 'a'``
in any PAD SPACE collation (``'a'`` is compared as if padded with spaces).

How each chunk-key column is compared (decided once per column, see ``_ColumnOrder``):

* numbers (int, DECIMAL, float, BIT, YEAR): natively; ``int`` vs ``Decimal`` is exact;
* DATE/DATETIME/TIMESTAMP: as naive UTC datetimes (aware values are converted; a
  ``date`` is midnight); TIME: as timedelta;
* binary strings (``binary`` charset): bytes, ``BINARY(n)`` right-padded with zero bytes
  as the server stores them;
* ``utf8mb4_bin`` / ``utf8mb3_bin`` / ``ascii_bin`` (PAD SPACE, code point order) and the
  NO PAD ``*_nopad_bin`` / ``utf8mb4_0900_bin``: in Python, no server round-trip;
* every other collation: the server's ``WEIGHT_STRING(CONVERT(v USING cs) COLLATE c)``,
  fetched for many values in one query and kept in a bounded LRU cache. Weights compare
  bytewise, except that MariaDB's weights keep trailing spaces although PAD SPACE
  collations ignore them: for those, trailing space weights are stripped and the shorter
  weight is compared as if padded with space weights (``PadKey``). Collations whose weight
  is not a simple concatenation of per-character weights (multi-level ``_as_cs`` /
  ``_as_ci`` UCA collations) are compared by the server itself with ``STRCMP``.

``KeyOrder`` is picklable (it runs on Spark executors): it holds a ``SourceConfig`` and
connects lazily; the connection and cache are not pickled.
"""

from __future__ import annotations

import bisect
import collections
import datetime as dt
import decimal
import re
import threading
from typing import Any, Iterable, Sequence

from ..chunks import Key
from ..errors import ConfigError
from ..model import Column, TableSchema
from ..source.config import SourceConfig
from ..sql import _bit_to_int, python_codec

NUMERIC_TYPES = frozenset(
    {
        "tinyint",
        "smallint",
        "mediumint",
        "int",
        "integer",
        "bigint",
        "decimal",
        "numeric",
        "float",
        "double",
        "real",
        "year",
    }
)
DATETIME_TYPES = frozenset({"date", "datetime", "timestamp"})
BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})

# String collations Python compares by code point, with or without PAD SPACE.
_PY_PAD_BIN = frozenset({"utf8mb4_bin", "utf8mb3_bin", "utf8_bin", "ascii_bin"})
_PY_NOPAD_BIN = frozenset(
    {"utf8mb4_nopad_bin", "utf8mb3_nopad_bin", "utf8_nopad_bin", "ascii_nopad_bin", "utf8mb4_0900_bin"}
)
_SPACE_CP = b"\x00\x00\x00 "  # U+0020 in UTF-32-BE
_IDENT = re.compile(r"^[A-Za-z0-9_]+$")
WEIGHT_BATCH = 200


class PadKey:
    """A weight string compared with PAD SPACE semantics.

    ``w`` has its trailing space units stripped; when one weight is a prefix of the other,
    the rest of the longer one is compared against space units (so ``'a\\t' < 'a' < 'ab'``,
    and ``'a' == 'a  '``), which is how the server compares PAD SPACE strings.
    """

    __slots__ = ("w", "sp")

    def __init__(self, weight: bytes, space: bytes) -> None:
        u = len(space)
        while weight and weight.endswith(space) and len(weight) % u == 0:
            weight = weight[:-u]
        self.w = weight
        self.sp = space

    def _cmp(self, other: "PadKey") -> int:
        a, b = self.w, other.w
        n = min(len(a), len(b))
        if a[:n] != b[:n]:
            return -1 if a[:n] < b[:n] else 1
        if len(a) == len(b):
            return 0
        if len(a) > len(b):
            rest = a[n:]
            return 1 if rest > self.sp * (len(rest) // len(self.sp)) else -1
        rest = b[n:]
        return -1 if rest > self.sp * (len(rest) // len(self.sp)) else 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PadKey) and self.w == other.w

    def __hash__(self) -> int:
        return hash(self.w)

    def __lt__(self, other: "PadKey") -> bool:
        return self._cmp(other) < 0

    def __le__(self, other: "PadKey") -> bool:
        return self._cmp(other) <= 0

    def __gt__(self, other: "PadKey") -> bool:
        return self._cmp(other) > 0

    def __ge__(self, other: "PadKey") -> bool:
        return self._cmp(other) >= 0

    def __reduce__(self):
        return (PadKey, (self.w, self.sp))

    def __repr__(self) -> str:
        return f"PadKey({self.w.hex()})"


class ServerCmpKey:
    """A string compared by the server (``STRCMP`` in the column's collation), for collations
    whose ``WEIGHT_STRING`` does not order bytewise. Slow; cached per pair."""

    __slots__ = ("value", "owner", "col")

    def __init__(self, value: Any, owner: "KeyOrder", col: int) -> None:
        self.value, self.owner, self.col = value, owner, col

    def _cmp(self, other: "ServerCmpKey") -> int:
        return self.owner._server_strcmp(self.col, self.value, other.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ServerCmpKey) and self._cmp(other) == 0

    def __hash__(self) -> int:  # equal values may hash differently: do not put in sets
        raise TypeError("ServerCmpKey is not hashable")

    def __lt__(self, other: "ServerCmpKey") -> bool:
        return self._cmp(other) < 0

    def __le__(self, other: "ServerCmpKey") -> bool:
        return self._cmp(other) <= 0

    def __gt__(self, other: "ServerCmpKey") -> bool:
        return self._cmp(other) > 0

    def __ge__(self, other: "ServerCmpKey") -> bool:
        return self._cmp(other) >= 0


class _LRU:
    """A small bounded LRU map (weights of recently seen string values)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._d: collections.OrderedDict = collections.OrderedDict()

    def get(self, k: Any) -> Any:
        v = self._d.get(k)
        if v is not None:
            self._d.move_to_end(k)
        return v

    def put(self, k: Any, v: Any) -> None:
        self._d[k] = v
        self._d.move_to_end(k)
        while len(self._d) > self.size:
            self._d.popitem(last=False)

    def __len__(self) -> int:
        return len(self._d)


# --- per-column normalisation ------------------------------------------------------------------


def _num(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float, decimal.Decimal)):
        return v
    if isinstance(v, (bytes, bytearray)):
        v = v.decode("ascii")
    if isinstance(v, str):
        return decimal.Decimal(v)
    raise TypeError(f"not a number: {v!r}")


def _datetime(v: Any) -> tuple[int, ...]:
    """(year, month, day, hour, minute, second, microsecond): also for the text of zero and
    invalid dates ('0000-00-00', '2020-00-15 ...'; zero_dates 'text'), which sort as the server does."""
    if isinstance(v, str):
        try:
            v = dt.datetime.fromisoformat(v)
        except ValueError:
            head, _, frac = v.partition(".")
            parts = [int(p) for p in head.replace("-", " ").replace(":", " ").split()][:6]
            return (*(parts + [0] * 6)[:6], int(frac.ljust(6, "0")[:6]) if frac else 0)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return (v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond)
    if isinstance(v, dt.date):
        return (v.year, v.month, v.day, 0, 0, 0, 0)
    raise TypeError(f"not a date/time: {v!r}")


def _time(v: Any) -> dt.timedelta:
    """A TIME as a signed duration: pymysql's timedelta (chunk boundaries), the canonical signed
    microseconds (binlog rows, ``types.py``) or the server's text (``-838:59:59.999999``)."""
    if isinstance(v, dt.timedelta):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return dt.timedelta(microseconds=v)
    if isinstance(v, dt.time):
        return dt.timedelta(hours=v.hour, minutes=v.minute, seconds=v.second, microseconds=v.microsecond)
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).decode("ascii")
    if isinstance(v, str) and v.strip():
        text = v.strip()
        sign = -1 if text.startswith("-") else 1
        head, _, frac = text.lstrip("+-").partition(".")
        parts = [int(p) for p in head.split(":")]
        h, m, sec = ([0, 0] + parts)[-3:]
        micros = int(frac.ljust(6, "0")[:6]) if frac else 0
        return sign * dt.timedelta(hours=h, minutes=m, seconds=sec, microseconds=micros)
    raise TypeError(f"not a TIME value: {v!r}")


class _ColumnOrder:
    """How one chunk-key column's values become sort keys (picklable, no connection)."""

    def __init__(self, column: Column) -> None:
        self.column = column
        dtype = column.data_type.lower()
        charset = (column.charset or "").lower()
        coll = (column.collation or "").lower()
        if dtype == "bit":
            self.kind = "bit"
        elif dtype in NUMERIC_TYPES:
            self.kind = "num"
        elif dtype in DATETIME_TYPES:
            self.kind = "datetime"
        elif dtype == "time":
            self.kind = "time"
        elif dtype in BINARY_TYPES or charset == "binary":
            self.kind = "bytes"
        elif coll in _PY_PAD_BIN:
            self.kind = "str_pad_bin"
        elif coll in _PY_NOPAD_BIN:
            self.kind = "str_nopad_bin"
        else:
            self.kind = "str_server"  # refined on first use: "weight" (pad or not) or "strcmp"
        self.server_mode: str | None = None  # "pad", "nopad" or "strcmp" once probed
        self.space_weight: bytes = b""

    def local_key(self, v: Any) -> Any:
        """The sort key of a non-NULL value for every kind Python handles on its own."""
        k = self.kind
        if k == "num":
            return _num(v)
        if k == "bit":
            return _bit_to_int(v)
        if k == "datetime":
            return _datetime(v)
        if k == "time":
            return _time(v)
        if k == "bytes":
            b = v.encode("utf-8") if isinstance(v, str) else bytes(v)
            n = self.column.char_max_length
            if self.column.data_type.lower() == "binary" and n and len(b) < n:
                b = b.ljust(n, b"\x00")
            return b
        if k == "str_pad_bin":
            return PadKey(self._text(v).encode("utf-32-be", "surrogatepass"), _SPACE_CP)
        if k == "str_nopad_bin":
            return self._text(v)
        raise AssertionError(k)

    def _text(self, v: Any) -> str:
        if isinstance(v, str):
            return v
        if isinstance(v, (bytes, bytearray)):
            return bytes(v).decode(python_codec(self.column.charset) or "utf-8", "surrogateescape")
        return str(v)

    def conversion_sql(self) -> str:
        """``CONVERT(%s USING cs) COLLATE coll`` for this column (names validated)."""
        cs, coll = self.column.charset or "", self.column.collation or ""
        if not (_IDENT.match(cs) and _IDENT.match(coll)):
            raise ConfigError(
                f"column {self.column.name}: unexpected charset/collation {cs!r}/{coll!r}. Fix: report this "
                "message with the table's SHOW CREATE TABLE; meanwhile leave the table out, or chunk it on "
                "another column (chunk_key_columns)."
            )
        return f"CONVERT(%s USING {cs}) COLLATE {coll}"


# --- KeyOrder ------------------------------------------------------------------------------------


class KeyOrder:
    """Orders chunk-key tuples of one table exactly as the server does.

    ``sort_key(key)`` gives a comparable value (NULL first, then per column as described
    in the module docstring); ``contains(start, end, includes_null, key)`` answers "is key
    in the chunk/range ``[start, end)``" the way the chunk predicate would.
    """

    def __init__(
        self, columns: Sequence[Column], source: SourceConfig | None = None, cache_size: int = 200_000
    ) -> None:
        self.columns = tuple(columns)
        self.source = source
        self.cache_size = cache_size
        self._orders = [_ColumnOrder(c) for c in self.columns]
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._conn = None
        self._cache = _LRU(self.cache_size)
        self._strcmp_cache = _LRU(self.cache_size)
        self._lock = threading.RLock()

    def __getstate__(self) -> dict[str, Any]:
        return {"columns": self.columns, "source": self.source, "cache_size": self.cache_size, "_orders": self._orders}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    @property
    def needs_server(self) -> bool:
        """True when some key column is compared with the server's help."""
        return any(o.kind == "str_server" for o in self._orders)

    # --- sort keys ----------------------------------------------------------------------

    def sort_key(self, key: Sequence[Any] | None) -> tuple:
        return self.sort_keys([key])[0]

    def sort_keys(self, keys: Iterable[Sequence[Any] | None]) -> list[tuple]:
        """Sort keys for many keys at once: one server round-trip for all missing weights."""
        keys = [k for k in keys]
        for k in keys:
            if k is not None and len(k) != len(self.columns):
                raise ValueError(f"key {tuple(k)!r} has {len(k)} values, the key has {len(self.columns)} columns")
        with self._lock:
            self._prefetch(keys)
            return [self._build(k) for k in keys]

    def _build(self, key: Sequence[Any] | None) -> tuple:
        if key is None:  # an unbounded start sorts before everything, NULL included
            return ()
        out: list[tuple[Any, ...]] = []  # per column: (0,) for NULL, (1, its sort key)
        for i, (o, v) in enumerate(zip(self._orders, key)):
            if v is None:
                out.append((0,))
            elif o.kind != "str_server":
                out.append((1, o.local_key(v)))
            elif o.server_mode == "strcmp":
                out.append((1, ServerCmpKey(v, self, i)))
            else:
                out.append((1, self._cache_get(i, v)))
        return tuple(out)

    # --- membership ---------------------------------------------------------------------

    def compare(self, a: Sequence[Any], b: Sequence[Any]) -> int:
        """-1, 0 or 1 as the server orders keys ``a`` and ``b`` (row-value order)."""
        ka, kb = self.sort_keys([a, b])
        return -1 if ka < kb else (1 if ka > kb else 0)

    def contains(self, start: Key | None, end: Key | None, includes_null: bool, key: Sequence[Any]) -> bool:
        """Is ``key`` in ``[start, end)``, as ``range_predicate(start, end, includes_null)`` says.

        A key with a NULL column belongs only to ranges with ``includes_null`` (or to the
        unbounded range, whose predicate is TRUE).
        """
        if start is None and end is None:
            return True
        if any(v is None for v in key):
            return includes_null
        ks, kk, ke = self.sort_keys([start, key, end])
        if start is not None and kk < ks:
            return False
        return end is None or kk < ke

    def locate(self, sorted_boundaries: Sequence[Key], key: Sequence[Any]) -> int:
        """How many boundaries are ``<= key``: the index of the chunk ``key`` is in, for
        chunks ``[None, b0), [b0, b1), ..., [bn, None)``. NULL keys are in chunk 0."""
        if any(v is None for v in key):
            return 0
        sks = self.sort_keys([*sorted_boundaries, key])
        return bisect.bisect_right(sks, sks[-1], 0, len(sks) - 1)

    # --- server weights -----------------------------------------------------------------

    def _cache_get(self, col: int, v: Any) -> Any:
        w = self._cache.get((col, v))
        if w is None:  # evicted between prefetch and use (tiny cache): fetch again
            self._fetch_weights(col, [v])
            w = self._cache.get((col, v))
        return w

    def _prefetch(self, keys: Sequence[Sequence[Any] | None]) -> None:
        for i, o in enumerate(self._orders):
            if o.kind != "str_server":
                continue
            if o.server_mode is None:
                self._probe(i)
            if o.server_mode == "strcmp":
                continue
            missing = {k[i] for k in keys if k is not None and k[i] is not None and self._cache.get((i, k[i])) is None}
            if missing:
                self._fetch_weights(i, list(missing))

    def _probe(self, col: int) -> None:
        """Learn how the column's collation pads and whether its weights order bytewise."""
        o = self._orders[col]
        conv = o.conversion_sql()
        row = self._query_one(
            f"SELECT {conv} = {conv}, WEIGHT_STRING({conv}), "
            f"WEIGHT_STRING({conv}) = CONCAT(WEIGHT_STRING({conv}), WEIGHT_STRING({conv}))",
            ["a", "a ", " ", "ab", "a", "b"],
        )
        pads, space, concatenative = bool(row[0]), bytes(row[1] or b""), bool(row[2])
        if not concatenative or not space:
            o.server_mode = "strcmp"
        else:
            o.server_mode = "pad" if pads else "nopad"
            o.space_weight = space

    def _fetch_weights(self, col: int, values: list[Any]) -> None:
        o = self._orders[col]
        conv = o.conversion_sql()
        for j in range(0, len(values), WEIGHT_BATCH):
            part = values[j : j + WEIGHT_BATCH]
            row = self._query_one(
                "SELECT " + ", ".join([f"WEIGHT_STRING({conv})"] * len(part)),
                [bytes(v) if isinstance(v, bytearray) else v for v in part],
            )
            for v, w in zip(part, row):
                w = bytes(w or b"")
                self._cache.put((col, v), PadKey(w, o.space_weight) if o.server_mode == "pad" else w)

    def _server_strcmp(self, col: int, a: Any, b: Any) -> int:
        if a == b and type(a) is type(b):
            return 0
        with self._lock:
            hit = self._strcmp_cache.get((col, a, b))
            if hit is not None:
                return hit
            conv = self._orders[col].conversion_sql()
            (r,) = self._query_one(f"SELECT STRCMP({conv}, {conv})", [a, b])
            r = int(r)
            self._strcmp_cache.put((col, a, b), r)
            return r

    def _query_one(self, sql: str, args: Sequence[Any]) -> tuple:
        """One row from the server, reconnecting once (long-lived binlog jobs outlive
        ``wait_timeout``)."""
        import pymysql

        for attempt in (0, 1):
            try:
                conn = self._connection()
                with conn.cursor() as cur:
                    cur.execute(sql, tuple(args))
                    return tuple(cur.fetchone())
            except (pymysql.err.OperationalError, pymysql.err.InterfaceError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _connection(self):
        if self._conn is None:
            if self.source is None:
                raise ConfigError(
                    f"key columns {[c.name for c in self.columns]} use collations that need the server "
                    "to compare strings, but this KeyOrder has no SourceConfig. Fix: build it with "
                    "key_order_for(schema, source)."
                )
            self._conn = self.source.connect()
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None


def key_order_for(schema: TableSchema, source: SourceConfig | None = None, cache_size: int = 200_000) -> KeyOrder:
    """The KeyOrder of ``schema``'s chunk key."""
    return KeyOrder(tuple(schema.column(n) for n in schema.chunk_key), source, cache_size)
