"""Reading what the fast decoder refuses with python-mysql-replication, event by event.

The fast path must be exactly as correct as the library, so it declines tables it cannot
decode with certainty (``Unsupported``: e.g. pre-5.6 temporal columns) and reports each of
their rows events as ``UnsupportedRows``. Those events, and only those, are read here with
the library. The library silently returns nothing for MariaDB's compressed events; an
event it returns no rows for fails loudly instead of vanishing.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from ...errors import CdcError
from ...events import Heartbeat, RowChange, SchemaChange
from ...model import TableSchema
from ...offsets import BinlogOffset
from ...source.config import SourceConfig
from ...types import row_normalizer
from ..reader import BinlogReader
from .batches import UnsupportedRows
from .reader import FastBinlogReader


def library_changes(
    source: SourceConfig,
    schemas: Sequence[TableSchema],
    items: Sequence[UnsupportedRows],
    start: BinlogOffset,
    end: BinlogOffset,
    server_id: int,
) -> list[RowChange]:
    """The rows in ``[start, end)`` of the events the fast path reported as unsupported, read by
    python-mysql-replication in one dump (call it once the fast reader's connection is closed:
    it may use the same server id)."""

    by_id = {s.table_id: s for s in schemas}
    tables = sorted({u.table_id for u in items})
    wanted = {(u.offset.file, u.offset.position) for u in items}
    dump_from = min(u.transaction_start or u.offset for u in items)
    first = min(u.offset for u in items)
    last = max(u.offset for u in items)
    normalizers = {t: row_normalizer(by_id[t], source.server_time_zone) for t in tables}
    reader = BinlogReader(
        source,
        server_id,
        max(first, start),
        stop=BinlogOffset(last.file, last.position + 1),
        tables=tables,
        normalizers=normalizers,
        blocking=False,
        dump_from=dump_from,
        heartbeat_s=0,
    )
    out: list[RowChange] = []
    try:
        for ev in reader:
            if (
                isinstance(ev, RowChange)
                and (ev.offset.file, ev.offset.position) in wanted
                and start <= ev.offset < end
            ):
                out.append(ev)
    finally:
        reader.close()
    missing = wanted - {(c.offset.file, c.offset.position) for c in out}
    if missing:
        where = ", ".join(f"{f}:{p}" for f, p in sorted(missing)[:5])
        reasons = sorted({u.reason for u in items if (u.offset.file, u.offset.position) in missing})
        raise CdcError(
            f"binlog rows events at {where} ({len(missing)} in all) of {', '.join(map(str, tables))} cannot be "
            f"read: the fast decoder refuses them ({'; '.join(reasons)}) and python-mysql-replication returned "
            "no rows for them (it silently drops compressed events, log_bin_compress=ON). Fix: the reason above "
            "names what to change in the table; then restart the stream."
        )
    return out


def changes_with_fallback(
    source: SourceConfig,
    server_id: int,
    start: BinlogOffset,
    stop: BinlogOffset,
    schemas: Sequence[TableSchema],
    dump_from: BinlogOffset | None = None,
) -> Iterator[RowChange | SchemaChange | Heartbeat]:
    """Every captured change of ``[start, stop)`` in binlog order, as ``RowChange`` with canonical
    values: the fast decoder's, and the library's for the events it refuses.

    For bounded reads (snapshot corrections between a chunk's watermarks): the range is read
    in full before anything is yielded when some event needs the library, because both
    readers cannot hold one server id at once. ``dump_from``: where the dump starts when
    ``start`` is inside a transaction (its table maps come before it).
    """
    items: list[RowChange | SchemaChange | Heartbeat | UnsupportedRows] = []
    unsupported: list[UnsupportedRows] = []
    with FastBinlogReader(
        source,
        server_id,
        start,
        stop=stop,
        tables=[s.table_id for s in schemas],
        blocking=False,
        heartbeat_s=None,
        on_unsupported="report",
        dump_from=dump_from,
    ) as reader:
        for item in reader.changes():
            if isinstance(item, UnsupportedRows):
                unsupported.append(item)
                items.append(item)
            elif unsupported:
                items.append(item)
            else:
                yield item
    if not unsupported:
        return
    by_event: dict[tuple[str, int], list[RowChange]] = {}
    for c in library_changes(source, schemas, unsupported, start, stop, server_id):
        by_event.setdefault((c.offset.file, c.offset.position), []).append(c)
    for item in items:
        if isinstance(item, UnsupportedRows):
            yield from by_event.get((item.offset.file, item.offset.position), [])
        else:
            yield item
