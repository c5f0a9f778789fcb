"""Where a new query starts, per startup mode, and the lookups that find it.

``initial`` starts at the lowest high watermark of the finished snapshot batches; the moving
modes (``latest-offset``, ``earliest-offset``) are asked once per checkpoint and kept there, so a
replayed first micro-batch reads the same range; ``timestamp`` and ``specific-offset`` with a GTID
set scan the retained binlog for the first transaction that qualifies.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterator

from ....cdc.errors import ConfigError
from ....cdc.offsets import BinlogOffset
from ....cdc.source.config import SourceConfig
from ..offsets.stream_offset import StreamOffset
from ..settings import OFFSET_SCAN_SLOT, StreamSettings
from .binlog_server import check_available, head_offset
from .reconnect import with_reconnect

if TYPE_CHECKING:
    from .placement import Placement

log = logging.getLogger(__name__)


def initial_offset(settings: StreamSettings) -> StreamOffset:
    """Where a new query starts, per startup mode (see PipelineConfig.startup_mode)."""
    from ....cdc.source.server import earliest_offset

    mode = settings.startup_mode
    src = settings.source
    if mode == "initial":
        if not settings.finished:
            raise ConfigError(
                f"startup_mode 'initial': no finished snapshot batches in {settings.state_location} "
                "(finished_batches.json missing or empty). Fix: run the snapshot first, or choose "
                "another startup_mode (latest-offset, earliest-offset, specific-offset, timestamp)."
            )
        return StreamOffset.boundary(min(b.high_watermark for b in settings.finished))
    if mode == "snapshot":
        raise ConfigError(
            "startup_mode 'snapshot' stops after the snapshot: the stream job must not run. Fix: choose another "
            "startup_mode to stream, or do not start the stream."
        )
    if mode == "latest-offset":
        return StreamOffset.boundary(head_offset(src))
    if mode == "earliest-offset":
        conn = src.connect_binlog()
        try:
            return StreamOffset.boundary(earliest_offset(conn))
        finally:
            conn.close()
    if mode == "specific-offset":
        spec = dict(settings.startup_offset or {})
        if spec.get("file"):
            off = BinlogOffset(str(spec["file"]), int(spec.get("position") or 4))
            check_available(src, off, settings.tables)
            return StreamOffset.boundary(off)
        if spec.get("gtid"):
            return StreamOffset.boundary(
                offset_after_gtid_set(src, src.server_id_range.pick(OFFSET_SCAN_SLOT), str(spec["gtid"]))
            )
        raise ConfigError(
            "startup_offset needs 'file' (+ 'position') or 'gtid'. Fix: give {'file': 'mysql-bin.000003', "
            "'position': 4} or {'gtid': '<gtid set>'}."
        )
    if mode == "timestamp":
        return StreamOffset.boundary(
            offset_at_timestamp(src, src.server_id_range.pick(OFFSET_SCAN_SLOT), float(settings.startup_timestamp or 0))
        )
    raise ConfigError(
        f"startup_mode: unknown {mode!r}. Fix: pick one of the modes the trigger form's Startup mode lists."
    )


# Startup modes whose offset depends on when it is asked (the head moves, old files get purged).
MOVING_STARTUP_MODES = ("latest-offset", "earliest-offset")
INITIAL_OFFSET_FILE = "mysqlcdc_initial_offset.json"


def stable_initial_offset(settings: StreamSettings, places: "Placement | None" = None) -> dict:
    """The query's initial offset, asked of the server once per checkpoint.

    Spark asks a source for its initial offset both to plan micro-batch 0 and to run it,
    and again when it replays micro-batch 0 after a crash before its commit (the offset log
    holds only end offsets). For ``latest-offset`` two answers differ as soon as the server
    writes in between, and changes between them would be skipped, so the first answer is
    kept in the query's checkpoint directory and returned from then on.

    The offset is marked with the server it belongs to and the GTID state there (``placement.py``):
    for ``initial`` those of the snapshot's high watermark (taken by the snapshot), else asked of
    the server now.
    """
    store = None
    if settings.startup_mode in MOVING_STARTUP_MODES and settings.checkpoint_location:
        from ....cdc.state import StateStore

        store = StateStore(settings.checkpoint_location)
        if store.exists(INITIAL_OFFSET_FILE):
            kept = StreamOffset.from_dict(store.read_json(INITIAL_OFFSET_FILE))
            log.info(
                "binlog stream: the query starts at %s (startup_mode %s, recorded in the checkpoint)",
                kept,
                settings.startup_mode,
            )
            return kept.to_dict()
    off = with_reconnect(lambda: _placed_initial(settings, places), settings.reconnect_timeout_s, "initial offset")
    if store is not None:
        store.write_json(INITIAL_OFFSET_FILE, off.to_dict())
    log.info("binlog stream: new query starts at %s (startup_mode %s)", off, settings.startup_mode)
    return off.to_dict()


def _placed_initial(settings: StreamSettings, places: "Placement | None") -> StreamOffset:
    if settings.startup_mode == "initial" and settings.finished:
        first = min(settings.finished, key=lambda b: b.high_watermark)
        return StreamOffset.boundary(first.high_watermark, first.server)
    off = initial_offset(settings)
    if places is None:
        return off
    _, server = places.resolve(off)
    placed = places.place(off, server)
    if placed is None:  # the server changed between the two questions: ask again
        return _placed_initial(settings, places)
    return placed


# --- the Spark data source ------------------------------------------------------------------------


# --- startup lookups: timestamp and GTID set -> offset (driver, slot OFFSET_SCAN_SLOT) ----------


def _raw_events(
    source: SourceConfig, server_id: int, file: str, position: int, only_events: list[type]
) -> Iterator[tuple[str, Any]]:
    """(current file, event) of a non-blocking dump from ``file:position`` to the binlog's end."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import RotateEvent

    settings = source.connect_kwargs()
    settings.pop("autocommit", None)
    stream = BinLogStreamReader(
        connection_settings=settings,
        server_id=server_id,
        is_mariadb=False,
        resume_stream=True,
        log_file=file,
        log_pos=position,
        blocking=False,
        only_events=[RotateEvent, *only_events],
        enable_logging=False,
    )
    current = file
    try:
        for ev in stream:
            if isinstance(ev, RotateEvent):
                current = ev.next_binlog
                continue
            yield current, ev
    finally:
        stream.close()


def _event_offset(file: str, ev: Any) -> BinlogOffset:
    return BinlogOffset(file, ev.packet.log_pos - ev.packet.event_size)


def _file_start_time(source: SourceConfig, server_id: int, file: str) -> int | None:
    """The time the binlog file was started (its format description event's timestamp)."""
    from pymysqlreplication.event import FormatDescriptionEvent

    for _, ev in _raw_events(source, server_id, file, 4, [FormatDescriptionEvent]):
        if ev.timestamp:
            return int(ev.timestamp)
    return None


def offset_at_timestamp(source: SourceConfig, server_id: int, ts: float) -> BinlogOffset:
    """The start of the first transaction written at or after ``ts`` (epoch seconds).

    Cost: one short dump per binlog file (newest first) to read its start time until a file
    starts at or before ``ts``, then one scan of the binlog from that file (all events,
    undecoded rows) until the first transaction at or after ``ts``; the head if none. Binlog
    event times have second resolution.
    """
    from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, QueryEvent

    from ....cdc.source.server import list_binlogs

    conn = source.connect_binlog()
    try:
        files = [f for f, _ in list_binlogs(conn)]
    finally:
        conn.close()
    first = files[0]
    for f in reversed(files):
        started = _file_start_time(source, server_id, f)
        if started is not None and started <= ts:
            first = f
            break
    for file, ev in _raw_events(source, server_id, first, 4, [GtidEvent, MariadbGtidEvent, QueryEvent]):
        if not ev.packet.log_pos or ev.timestamp < ts:
            continue
        if isinstance(ev, QueryEvent):
            from ....cdc.schema.detect import BEGIN, OTHER, statement_kind

            if statement_kind(str(ev.query)) not in (BEGIN, OTHER):
                continue
        return _event_offset(file, ev)
    return head_offset(source)


def offset_after_gtid_set(source: SourceConfig, server_id: int, gtid_text: str) -> BinlogOffset:
    """The start of the first transaction whose GTID is not in ``gtid_text`` (a set already applied).

    Cost: a scan of the retained binlog from the oldest file (GTID events only, rows
    undecoded) up to that transaction; the head if every transaction is in the set.
    """
    from pymysqlreplication.event import GtidEvent, MariadbGtidEvent

    from ....cdc.source.gtid import guess_flavor, parse_gtid_set
    from ....cdc.source.server import earliest_offset

    flavor = guess_flavor(gtid_text)
    applied = parse_gtid_set(gtid_text, flavor)
    conn = source.connect_binlog()
    try:
        start = earliest_offset(conn)
    finally:
        conn.close()
    for file, ev in _raw_events(source, server_id, start.file, start.position, [GtidEvent, MariadbGtidEvent]):
        if not ev.packet.log_pos:
            continue
        if not applied.contains(parse_gtid_set(ev.gtid, flavor)):
            return _event_offset(file, ev)
    return head_offset(source)
