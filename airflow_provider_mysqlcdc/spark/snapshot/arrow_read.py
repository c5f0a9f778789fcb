"""A snapshot SELECT read straight into Arrow (connectorx), in the sink's exact column types.

Why: Spark's JDBC reader decodes every value into a JVM row and its Parquet writer encodes it
again; for a 5M-row batch that is ~4.3 s of both cores on a warm JVM and twice that on a cold
one, while the ``mariadb`` CLI scans the same rows in ~2.3 s. connectorx (Rust, the server's
binary protocol) fills Arrow arrays directly: ~2 s for those rows, no JIT warm-up, and pyarrow
writes them as Parquet in ~0.7 s (docs/performance.md).

The values must be exactly what the JDBC path and the binlog decoders give (``cdc/types.py``).
Columns the binary protocol carries exactly are selected as stored (``wire_sql``); the others
keep the JDBC path's zone-free expressions, and a DECIMAL connectorx cannot hold exactly (28
digits, a fixed scale of 10) travels as text. Each column is then cast to the mapping's Arrow
type with pyarrow's *safe* casts, so a value that does not fit fails the read instead of
changing.

The password is in the connection URL connectorx needs: the URL is built where it is used and
every error message is scrubbed of it before it is raised.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from typing import IO, Any, Iterator, Sequence
from urllib.parse import quote

import pyarrow as pa

from ...cdc.errors import ConfigError
from ...cdc.model import TableSchema, quote_ident
from ...cdc.sinks import sink_kind
from ...cdc.source.config import SourceConfig
from ...cdc.types import ColumnMapping, arrow_schema


def reader_missing() -> str | None:
    """Why the Arrow reader cannot run in this process (None: it can)."""
    try:
        import connectorx  # noqa: F401
    except ImportError as e:
        return f"connectorx is not installed ({e})"
    return None


def choose_reader(source: SourceConfig) -> str:
    """``"arrow"`` or ``"jdbc"`` for ``source.snapshot_reader``; ConfigError when ``arrow`` was
    asked for and cannot be used (before anything is read)."""
    asked = source.snapshot_reader
    why = (
        "the source uses TLS (ssl_* settings), which only the JDBC reader passes on" if source.ssl else reader_missing()
    )
    if asked == "arrow" and why:
        raise ConfigError(
            f"snapshot_reader 'arrow': {why}. Fix: set snapshot_reader to 'auto' or 'jdbc' in the "
            "MySQL connection's extras."
        )
    if asked == "jdbc" or why:
        return "jdbc"
    return "arrow"


# connectorx holds a decimal in rust_decimal (28 digits) rescaled to 10 places: a DECIMAL(p,s) is
# exact that way only when s <= 10 and p - s + 10 <= 28; any other travels as the server's text.
_NATIVE_DECIMAL_SCALE = 10
_NATIVE_DECIMAL_DIGITS = 28


def _native_decimal(m: ColumnMapping) -> bool:
    p, s = m.column.numeric_precision or 0, m.column.numeric_scale or 0
    return s <= _NATIVE_DECIMAL_SCALE and p - s + _NATIVE_DECIMAL_SCALE <= _NATIVE_DECIMAL_DIGITS


def reads_bypass_jvm(source: SourceConfig, sink_type: str | None, sink_options: Any = None) -> bool:
    """Whether a pipeline's snapshot rows go through the Arrow reader and never through Spark's JVM
    (a Delta sink, snapshot_writer not 'spark', and the Arrow reader usable for the source): the
    local Connect server's JVM then only plans and schedules, so it runs without the C2 JIT
    (docs/performance.md). Never raises: a wrong setting is reported by the snapshot task."""
    kind = sink_kind(str(sink_type or "").strip().lower())
    if kind is None or not kind.snapshot_bypasses_jvm:
        return False
    if isinstance(sink_options, dict) and str(sink_options.get("snapshot_writer") or "auto") == "spark":
        return False
    try:
        return choose_reader(source) == "arrow"
    except ConfigError:
        return False


def wire_sql(m: ColumnMapping, raw_dates: bool = True) -> str:
    """The SELECT expression of one column for the Arrow reader.

    Values the binary protocol carries exactly and connectorx decodes into the right Arrow type
    are selected as they are stored (cheaper for the server than the JDBC path's formatting):
    integers, FLOAT (float32), DOUBLE, decimals that fit (above), strings, ENUM/SET, binaries.
    ``raw_dates``: DATE and DATETIME too (connectorx cannot represent a zero or invalid date
    and fails the read: ``read_rows`` then reads the group again with ``raw_dates=False``, the
    JDBC path's text). TIMESTAMP (the wire value is in the session's zone), TIME (negative and
    >24 h values), YEAR, BIT and text-captured dates keep the JDBC path's zone-free expressions.
    """
    q = quote_ident(m.name)
    if m.kind in ("int", "uint64", "float", "double", "text", "enum", "set", "binary"):
        return q
    if m.kind == "decimal":
        return q if _native_decimal(m) else f"CAST({q} AS CHAR)"
    if m.kind in ("datetime", "date") and raw_dates:
        return q
    return m.select_sql


def has_raw_dates(mappings: Sequence[ColumnMapping]) -> bool:
    return any(m.kind in ("datetime", "date") for m in mappings)


def select_sql(schema: TableSchema, mappings: Sequence[ColumnMapping], predicate: str, raw_dates: bool = True) -> str:
    cols = ", ".join(f"{wire_sql(m, raw_dates)} AS {quote_ident(m.name)}" for m in mappings)
    return f"SELECT {cols} FROM {schema.table_id.quoted} WHERE {predicate}"


def _text_datetime(col: pa.ChunkedArray, kind: str) -> pa.ChunkedArray:
    """The JDBC path's DATE_FORMAT text as timestamps/dates; a date no calendar has ('2020-02-30',
    stored under ALLOW_INVALID_DATES) becomes NULL, as the binlog path makes it (the parser would
    roll it over into March: each parsed date is printed again and compared)."""
    import pyarrow.compute as pc

    day = pc.utf8_slice_codeunits(col, 0, 10)
    if kind == "date":
        parsed = pc.strptime(day, "%Y-%m-%d", "s", error_is_null=True)
    else:
        base = pc.strptime(pc.utf8_slice_codeunits(col, 0, 19), "%Y-%m-%d %H:%M:%S", "us", error_is_null=True)
        frac = pc.cast(pc.utf8_slice_codeunits(col, 20, 26), pa.int64())
        parsed = pc.add(base, pc.cast(frac, pa.duration("us")))
    real = pc.equal(pc.strftime(parsed, "%Y-%m-%d"), day)
    parsed = pc.if_else(real, parsed, pa.scalar(None, parsed.type))
    return pc.cast(parsed, pa.date32()) if kind == "date" else parsed


def _no_year_zero(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """A stored year-0 date ('0000-05-06') is a zero-part date: NULL, as on every other path."""
    import pyarrow.compute as pc

    if col.null_count == len(col):
        return col
    zero = pc.equal(pc.year(col), 0)
    if not pc.any(zero).as_py():
        return col
    return pc.if_else(zero, pa.scalar(None, col.type), col)


def conform(table: pa.Table, mappings: Sequence[ColumnMapping]) -> pa.Table:
    """``table`` (as connectorx typed it) in the sink's schema; safe casts only."""
    target = arrow_schema(list(mappings))
    if table.num_rows == 0:
        return target.empty_table()
    cols = []
    for m, f in zip(mappings, target):
        col = table.column(m.name)
        try:
            if m.kind in ("datetime", "date") and pa.types.is_string(col.type):
                col = _text_datetime(col, m.kind)
            if col.type != f.type:
                col = col.cast(f.type)
            if m.kind in ("datetime", "date"):
                col = _no_year_zero(col)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise ValueError(
                f"column {m.name!r} ({m.column.column_type}): the Arrow reader got {col.type} "
                f"and cannot make it {f.type}: {e}"
            ) from None
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=target)


def connection_url(source: SourceConfig, database: str) -> str:
    """connectorx's URL (binary protocol); holds the password: never log it."""
    user = quote(source.user, safe="")
    pw = quote(source.password or "", safe="")
    return f"mysql://{user}:{pw}@{source.host}:{int(source.port)}/{quote(database, safe='')}?cxprotocol=binary"


def scrub(text: str, source: SourceConfig) -> str:
    """``text`` without the password (as given and URL-quoted)."""
    pw = source.password or ""
    for secret in {pw, quote(pw, safe="")}:
        if secret:
            text = text.replace(secret, "***")
    return text


log = logging.getLogger(__name__)


@contextlib.contextmanager
def _stderr_held() -> Iterator[IO[bytes]]:
    """File descriptor 2 into a temporary file for the call: connectorx's Rust panic hook writes
    the panic there (and, with RUST_BACKTRACE set, a backtrace of ~950 lines) before the exception
    reaches Python, and the fallback that follows makes it noise in the task log. A Python worker
    runs one task at a time, so nothing else writes to fd 2 meanwhile."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield held
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def read_arrow(source: SourceConfig, database: str, sql: str) -> pa.Table:
    """Run ``sql`` and return its rows as Arrow (connectorx's types). A panic inside connectorx
    (a value it cannot decode) is raised as a RuntimeError naming the query, not the URL."""
    import connectorx as cx

    written = b""
    try:
        with _stderr_held() as held:
            try:
                got: Any = cx.read_sql(connection_url(source, database), sql, return_type="arrow")
            finally:
                held.seek(0)
                written = held.read()
    except BaseException as e:  # pyo3's PanicException derives from BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise RuntimeError(
            f"the Arrow reader (connectorx) failed on {source.host}:{source.port}: "
            f"{scrub(str(e), source)[:2000]} (query: {sql[:300]}). Fix: if the message names a "
            "column's value, set snapshot_reader to 'jdbc' in the MySQL connection's extras and "
            "report the column type."
        ) from None
    if written:  # what it wrote while succeeding (a warning) still belongs in the log
        os.write(2, written)
    if isinstance(got, pa.RecordBatchReader):
        got = got.read_all()
    return got


def read_rows(
    source: SourceConfig, database: str, mappings: Sequence[ColumnMapping], fast_sql: str, safe_sql: str | None
) -> tuple[pa.Table, bool]:
    """One SELECT's rows in the sink's schema, and whether the safe form had to be used: the fast
    one selects DATE/DATETIME as stored, which fails on a zero or invalid date; then ``safe_sql``
    (the dates as text) reads the same range again."""
    try:
        return conform(read_arrow(source, database, fast_sql), mappings), False
    except RuntimeError as e:
        if safe_sql is None:
            raise
        log.info(
            "the Arrow reader could not decode a DATE/DATETIME value of this range (a zero or invalid date: %s); "
            "read it again with those columns as text, which keeps the value as the type table says",
            str(e).split(" (query: ", 1)[0][-200:],
        )
        return conform(read_arrow(source, database, safe_sql), mappings), True
