"""What the fast reader yields: ``ChangeBatch`` (one Arrow record batch of one table structure, the
metadata columns then ``before``/``after`` structs) and ``UnsupportedRows``, and the ``Builder`` that
keeps the raw rows events of one table structure and decodes them all at once when the batch is
built (column by column with numpy, ``columnar.py``, or the generated row decoder, ``decoder.py``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import REPORT_BUG, RESTART_OR_REPORT
from ...events import Heartbeat, RowChange, SchemaChange
from ...model import TableId
from ...offsets import BinlogOffset
from . import constants as C
from .columnar import decode_events, select
from .decoder import TableDecoder
from .errors import (
    PartialImageError,
    ProtocolError,
)

if TYPE_CHECKING:
    from typing_extensions import Buffer
from .frames import KIND_OF_TYPE, gather_u16, gather_u32

META_FIELDS = [
    pa.field("database", pa.string(), nullable=False),
    pa.field("table", pa.string(), nullable=False),
    pa.field("op", pa.string(), nullable=False),
    pa.field("binlog_file", pa.string(), nullable=False),
    pa.field("binlog_pos", pa.int64(), nullable=False),
    pa.field("binlog_row", pa.int32(), nullable=False),
    pa.field("gtid", pa.string(), nullable=True),
    pa.field("event_time", pa.timestamp("us", tz="UTC"), nullable=True),
]


def batch_schema(decoder: TableDecoder) -> pa.Schema:
    """The record batch schema of one table structure: metadata columns, then before/after."""
    return pa.schema(
        META_FIELDS
        + [pa.field("before", decoder.image_type, nullable=True), pa.field("after", decoder.image_type, nullable=True)]
    )


@dataclass(frozen=True)
class ChangeBatch:
    """Decoded row changes of one table structure, as an Arrow record batch (``batch_schema``)."""

    table_id: TableId
    decoder: TableDecoder
    batch: pa.RecordBatch

    @property
    def num_rows(self) -> int:
        return self.batch.num_rows

    def changes(self) -> list[RowChange]:
        """The rows as ``RowChange`` objects (canonical Python values), in batch order."""
        d = self.batch.to_pydict()
        out = []
        for op, f, pos, row, gtid, ts, before, after in zip(
            d["op"],
            d["binlog_file"],
            d["binlog_pos"],
            d["binlog_row"],
            d["gtid"],
            d["event_time"],
            d["before"],
            d["after"],
        ):
            out.append(
                RowChange(
                    op,
                    self.table_id,
                    before,
                    after,
                    BinlogOffset(f, pos, row=row),
                    gtid,
                    int(ts.timestamp()) if ts is not None else 0,
                )
            )
        return out


@dataclass(frozen=True)
class UnsupportedRows:
    """A rows event of a captured table the fast path cannot decode: read it with the library.

    ``offset`` is where the event starts; ``transaction_start`` where its transaction
    starts (a library reader must begin there to see the TABLE_MAP).
    """

    table_id: TableId
    offset: BinlogOffset
    transaction_start: BinlogOffset | None
    reason: str


Item = ChangeBatch | SchemaChange | Heartbeat | UnsupportedRows


class Builder:
    """Rows events of one table structure waiting to become a record batch.

    The walk only keeps each event's bytes, its GTID and (rarely) a file change or a start
    row: everything else -- op, position, timestamp, where the row data starts, the
    full-image check -- is read back from the joined event bytes with numpy in ``build``,
    where the rows are decoded column by column (``columnar.decode_events``) or, for
    tables that cannot be, by the generated row decoder.
    """

    __slots__ = ("decoder", "first_seq", "columnar", "crc", "tid_len", "pieces", "n", "gtids", "files", "skips")

    def __init__(
        self, decoder: TableDecoder, first_seq: int, columnar: bool, crc: int, tid_len: int, file: str
    ) -> None:
        self.decoder = decoder
        self.first_seq = first_seq
        self.columnar = columnar
        self.crc = crc
        self.tid_len = tid_len
        # event bytes: one event (bytes, None) or several back to back (bytes, their lengths)
        self.pieces: list[tuple[bytes | np.ndarray, np.ndarray | None]] = []
        self.n = 0  # events so far
        # per event, in runs: a list of str / (domain, server id, seq) / None, or a uint64 (n, 3) array
        self.gtids: list[list[Any] | np.ndarray] = []
        self.files: list[tuple[int, str]] = [(0, file)]  # (first event index, file name)
        self.skips: dict[int, int] = {}  # event index -> rows to drop (the start row)

    def add(self, ev: bytes, gtid: Any, file: str, skip: int) -> None:
        if file != self.files[-1][1]:
            self.files.append((self.n, file))
        if skip:
            self.skips[self.n] = skip
        self.pieces.append((ev, None))
        run = self.gtids[-1] if self.gtids else None
        if not isinstance(run, list):
            run = []
            self.gtids.append(run)
        run.append(gtid)
        self.n += 1

    def add_many(self, blob: bytes | np.ndarray, lengths: np.ndarray, gtids: list[Any] | np.ndarray, file: str) -> None:
        if file != self.files[-1][1]:
            self.files.append((self.n, file))
        self.pieces.append((blob, lengths))
        self.gtids.append(gtids)
        self.n += len(lengths)

    def build(self) -> ChangeBatch:
        dec = self.decoder
        n_ev = self.n
        pieces = self.pieces
        if all(lens is None for _, lens in pieces):
            lengths = np.fromiter((len(b) for b, _ in pieces), dtype=np.int64, count=n_ev)
        else:
            lengths = np.concatenate(
                [np.array([len(b)], dtype=np.int64) if lens is None else lens for b, lens in pieces]
            )
        base = np.cumsum(lengths) - lengths
        blob = b"".join(cast("Iterable[Buffer]", (b for b, _ in pieces)))  # bytes and uint8 arrays
        B = np.frombuffer(blob, dtype=np.uint8)
        typ = B[base + 4]
        size = gather_u32(B, base + 9)
        pos = gather_u32(B, base + 13) - size
        ts = gather_u32(B, base)
        kind = KIND_OF_TYPE[typ]  # 0 insert, 1 update, 2 delete
        if (kind < 0).any():
            raise ProtocolError(f"not a rows event in the batch of {dec.table_id}. {REPORT_BUG}")
        starts = self._data_starts(B, base, typ, kind, pos)
        ends = base + lengths - self.crc
        if self.columnar:
            decoded = decode_events(dec, blob, starts, ends)
            columns, ev_of, image = decoded.columns, decoded.event, decoded.image
        else:
            columns, ev_of, image = self._decode_rows(blob, starts, ends, pos)
        skips = np.zeros(n_ev, dtype=np.int64)
        for i, k in self.skips.items():
            skips[i] = k
        update = kind == 1
        n_images = np.bincount(ev_of, minlength=n_ev)
        if (update & (n_images % 2 == 1)).any():
            raise ProtocolError(
                f"an UPDATE rows event of {dec.table_id} has an odd number of row images. {RESTART_OR_REPORT}"
            )
        img_update = update[ev_of]
        row_in_event = np.where(img_update, image // 2, image)
        is_after = np.where(img_update, image % 2 == 1, kind[ev_of] == 0)
        keep = row_in_event >= skips[ev_of]
        per_event = np.maximum(np.where(update, n_images // 2, n_images) - skips, 0)
        row_base = np.cumsum(per_event) - per_event
        total = int(per_event.sum())
        row_id = row_base[ev_of] + row_in_event - skips[ev_of]
        before = np.full(total, -1, dtype=np.int64)
        after = np.full(total, -1, dtype=np.int64)
        img = np.arange(len(ev_of), dtype=np.int64)
        sel = keep & is_after
        after[row_id[sel]] = img[sel]
        sel = keep & ~is_after
        before[row_id[sel]] = img[sel]
        fields = list(dec.image_type)
        # per-row metadata: every event's values repeated for its rows
        ev_row = np.repeat(np.arange(n_ev, dtype=np.int64), per_event)
        take = pa.array(ev_row)
        rows = _row_numbers(per_event, skips)
        file_idx = np.zeros(n_ev, dtype=np.int64)
        for k, (first, _) in enumerate(self.files[1:], 1):
            file_idx[first:] = k
        tid = dec.table_id
        columns_out = [
            pa.repeat(pa.scalar(tid.database), total),
            pa.repeat(pa.scalar(tid.table), total),
            _ops().take(pa.array(kind[ev_row])),
            pa.array([f for _, f in self.files], pa.string()).take(pa.array(file_idx[ev_row])),
            pa.array(pos[ev_row]),
            pa.array(rows.astype(np.int32)),
            _gtid_array(self.gtids).take(take),
            pa.array(ts[ev_row] * 1_000_000, pa.timestamp("us", tz="UTC")),
            select(columns, before, fields),
            select(columns, after, fields),
        ]
        return ChangeBatch(tid, dec, pa.RecordBatch.from_arrays(columns_out, schema=batch_schema(dec)))

    def _data_starts(
        self, B: np.ndarray, base: np.ndarray, typ: np.ndarray, kind: np.ndarray, pos: np.ndarray
    ) -> np.ndarray:
        """Where each event's row images start; checks the column count and the full-image bitmaps."""
        dec = self.decoder
        p = base + 19 + self.tid_len + 2
        v2 = typ >= C.WRITE_ROWS_EVENT_V2
        if v2.any():
            p = p + np.where(v2, gather_u16(B, p), 0)  # extra data; its length counts its own 2 bytes
        ncols = len(dec.columns)
        if ncols < 0xFB:
            ok = B[p] == ncols
            p = p + 1
        else:
            ok = (B[p] == 0xFC) & (gather_u16(B, p + 1) == ncols)
            p = p + 3
        nb = (ncols + 7) // 8
        full = np.frombuffer(dec.full_bitmap, dtype=np.uint8)
        for i in range(nb):
            ok &= B[p + i] == full[i]
        upd = kind == 1
        if upd.any():
            q = p + nb
            for i in range(nb):
                ok &= ~upd | (B[q + i] == full[i])
        if not ok.all():
            bad = int(np.argmin(ok))
            raise PartialImageError(
                f"rows event at {self._file_of(bad)}:{int(pos[bad])} for {dec.table_id} does not carry every "
                "column (or not the table map's column count): binlog_row_image must be FULL. Fix: SET GLOBAL "
                "binlog_row_image = FULL; rows logged before the change cannot be read completely."
            )
        return p + nb * np.where(upd, 2, 1)

    def _file_of(self, event_index: int) -> str:
        name = self.files[0][1]
        for first, f in self.files:
            if first <= event_index:
                name = f
        return name

    def _decode_rows(
        self, blob: bytes, starts: np.ndarray, ends: np.ndarray, pos: np.ndarray
    ) -> tuple[list[pa.Array], np.ndarray, np.ndarray]:
        """The row decoder over every event: (columns, event index, image index) of every image."""
        dec = self.decoder
        images: list[tuple] = []
        ev_of: list[int] = []
        image: list[int] = []
        decode = dec.decode_rows
        for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
            try:
                got, q = decode(blob, s, e)
            except (IndexError, ValueError, struct.error, KeyError, UnicodeDecodeError) as err:
                raise ProtocolError(
                    f"cannot decode rows event at {self._file_of(i)}:{int(pos[i])} for {dec.table_id}: "
                    f"{type(err).__name__}: {err}. {RESTART_OR_REPORT}"
                ) from None
            if q != e:
                raise ProtocolError(
                    f"rows event at {self._file_of(i)}:{int(pos[i])} for {dec.table_id}: row data ends at "
                    f"{q - s}, the event's at {e - s}: the table map does not describe these rows. {RESTART_OR_REPORT}"
                )
            images.extend(got)
            ev_of.extend([i] * len(got))
            image.extend(range(len(got)))
        return dec.image_arrays(images), np.array(ev_of, dtype=np.int64), np.array(image, dtype=np.int64)


_OP_NAMES = ("insert", "update", "delete")
_ops_array: pa.Array | None = None


def _ops() -> pa.Array:
    """The op names as an Arrow array, built on first use: ``pa.array`` at import time makes
    pyarrow import pandas (0.18 s measured, in every process that imports the decoder: each of
    Spark's Python workers), which nothing here needs."""
    global _ops_array
    if _ops_array is None:
        _ops_array = pa.array(list(_OP_NAMES), pa.string())
    return _ops_array


def _gtid_array(runs: list[list[Any] | np.ndarray]) -> pa.Array:
    """GTIDs of the events as strings (see ``Builder.gtids``); MariaDB's (domain, server, seq)
    triples formatted in bulk, anything else (MySQL's, none) one by one."""
    arrays: list[np.ndarray] = []
    for run in runs:
        if isinstance(run, np.ndarray):
            arrays.append(run)
        elif run and all(type(g) is tuple for g in run):
            arrays.append(np.array(run, dtype=np.uint64).reshape(-1, 3))
        else:
            values = [g for r in runs for g in (map(tuple, r.tolist()) if isinstance(r, np.ndarray) else r)]
            return pa.array(
                [g if g is None or isinstance(g, str) else f"{g[0]}-{g[1]}-{g[2]}" for g in values], pa.string()
            )
    if not arrays:
        return pa.array([], pa.string())
    parts = np.concatenate(arrays)
    return pc.binary_join_element_wise(*(pa.array(parts[:, k]).cast(pa.string()) for k in range(3)), "-")


def _row_numbers(counts: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Row index inside its event of every row: first[i], first[i] + 1, ... for counts[i] rows."""
    c = np.asarray(counts, dtype=np.int64)
    starts = np.cumsum(c) - c
    return (
        np.arange(int(c.sum()), dtype=np.int64) - np.repeat(starts, c) + np.repeat(np.asarray(first, dtype=np.int64), c)
    )
