"""Changelog-json lines built in Python with Arrow compute, straight from the stream's source rows.

Why a second encoder beside the JVM's (``changelog.JsonLines``): the stream's executors
already hold every change as Arrow after decoding the binlog. Handing those rows to the
JVM to print them with ``to_json`` and back to Python to write them cost more CPU than
decoding the binlog did. Here each value column is turned into JSON texts by Arrow
compute (``json_texts``), the texts are joined into lines, and the executor that read a
binlog range writes its lines itself (``changelog/direct.py``).

The bytes follow the JVM encoder's (Jackson's) conventions, so a stream line looks like a
snapshot line: control characters as ``\\b \\t \\n \\f \\r`` or ``\\u00XX`` with upper-case
hex, other characters (including U+2028) as they are, decimals as plain strings with their
scale, floats in Java's notation (``1.0E7``, ``9.9E-4``, ``100.0``). One known difference:
the digits of a float are the shortest that give back the same double, while Java 17 is
sometimes longer (``Double.toString(2e23)`` is ``1.9999999999999998E23``, here ``2.0E23``);
both parse to the same double.
"""

from __future__ import annotations

import base64
import decimal
import math
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .change_arrow import OP_CODES, explode_changes

# Jackson's escapes: U+0000..U+001F as \\u00XX, except the short forms, and the quote and backslash.
_SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}
_ESCAPE_TABLE = str.maketrans({**{chr(i): f"\\u{i:04X}" for i in range(0x20)}, **_SHORT_ESCAPES})


def json_string(text: str) -> str:
    """One JSON string literal, escaped as Jackson does (see the module docstring)."""
    return '"' + text.translate(_ESCAPE_TABLE) + '"'


def java_double(value: float) -> str:
    """A finite double as Java prints it (``Double.toString``'s layout, shortest digits).

    Java writes plain digits with at least one after the point for 1e-3 <= |v| < 1e7,
    else ``d.dddE<exp>``; Python's repr has the digits, only the layout differs.
    """
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits, exp = decimal.Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + int(exp)  # the decimal point sits after this many digits
    lead = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{lead}0.{'0' * -point}{text}"
        whole, frac = text[:point].ljust(point, "0"), text[point:]
        return f"{lead}{whole}.{frac or '0'}"
    return f"{lead}{text[0]}.{text[1:] or '0'}E{point - 1}"


def _quoted(texts: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise('"', texts, '"', "")


def _strings(array: pa.Array) -> pa.Array:
    texts = array.cast(pa.string())
    if not pc.any(pc.match_substring_regex(texts, '[\\x00-\\x1f"\\\\]')).as_py():
        return _quoted(texts)  # nothing to escape (most text): one scan instead of three
    esc = pc.replace_substring(pc.replace_substring(texts, "\\", "\\\\"), '"', '\\"')
    ctrl = pc.match_substring_regex(texts, "[\\x00-\\x1f]")
    if pc.any(ctrl).as_py():  # rare: control characters get their escapes one value at a time
        fixed = [json_string(v)[1:-1] if f else None for v, f in zip(texts.to_pylist(), ctrl.to_pylist())]
        esc = pc.if_else(ctrl, pa.array(fixed, pa.string()), esc)
    return _quoted(esc)


def _per_value(array: pa.Array, fn: Any) -> pa.Array:
    return pa.array([None if v is None else fn(v) for v in array.to_pylist()], pa.string())


def _float_text(v: float) -> str:
    if math.isfinite(v):
        return java_double(v)
    return '"NaN"' if math.isnan(v) else ('"Infinity"' if v > 0 else '"-Infinity"')


def _decimals(array: pa.Array) -> pa.Array:
    text = array.cast(pa.string())
    sci = pc.match_substring(text, "E")
    if pc.any(sci).as_py():  # Arrow prints some values as 1E-30 or 0E-10; the changelog has plain digits
        fixed = [format(v, "f") for v in array.filter(sci).to_pylist()]
        text = pc.replace_with_mask(text, sci, pa.array(fixed, pa.string()))
    return _quoted(text)


_US_PER_DAY = 86_400_000_000
_EPOCH_DAY = np.datetime64("1970-01-01", "D")


def _timestamps(array: pa.Array, utc: bool) -> pa.Array:
    """Quoted ISO-8601 texts with 6 fraction digits ('Z' for instants), written digit by digit
    into a fixed-width byte matrix with numpy: Arrow's strftime took half the encoder's time."""
    micros = array.cast(pa.timestamp("us", tz=array.type.tz)).cast(pa.int64()).fill_null(0)
    us = micros.to_numpy(zero_copy_only=False).astype(np.int64)
    days = us // _US_PER_DAY
    day = _EPOCH_DAY + days.astype("m8[D]")
    year = day.astype("M8[Y]").astype(np.int64) + 1970
    if len(us) and (int(year.min()) < 0 or int(year.max()) > 9999):  # not 4 digits: Arrow's formatter
        text = pc.strftime(array.cast(pa.timestamp("us", tz="UTC" if utc else None)), format="%Y-%m-%dT%H:%M:%S")
        return _quoted(pc.binary_join_element_wise(text, "Z", "") if utc else text).fill_null("null")
    month_start = day.astype("M8[M]")
    month = month_start.astype(np.int64) % 12 + 1
    dom = (day - month_start.astype("M8[D]")).astype(np.int64) + 1
    rem = us - days * _US_PER_DAY
    layout = '"0000-00-00T00:00:00.000000' + ('Z"' if utc else '"')
    out = np.tile(np.frombuffer(layout.encode(), np.uint8), (len(us), 1))
    for start, width, value in (
        (1, 4, year),
        (6, 2, month),
        (9, 2, dom),
        (12, 2, rem // 3_600_000_000),
        (15, 2, rem // 60_000_000 % 60),
        (18, 2, rem // 1_000_000 % 60),
        (21, 6, rem % 1_000_000),
    ):
        for k in range(width):
            out[:, start + width - 1 - k] += (value // 10**k % 10).astype(np.uint8)
    offsets = np.arange(len(us) + 1, dtype=np.int32) * len(layout)
    texts = pa.StringArray.from_buffers(len(us), pa.py_buffer(offsets), pa.py_buffer(out))
    return pc.if_else(array.is_valid(), texts, "null") if array.null_count else texts


def json_texts(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column's values as JSON texts (``null`` for NULL), column at a time: what the JVM's
    ``to_json`` writes for the same values with ``changelog.SPARK_JSON_OPTIONS``."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    t = array.type
    if pa.types.is_integer(t):
        out = array.cast(pa.string())
    elif pa.types.is_floating(t):
        out = _per_value(array.cast(pa.float64()), _float_text)
    elif pa.types.is_timestamp(t):
        out = _timestamps(array, utc=t.tz is not None)
    elif pa.types.is_decimal(t):
        out = _decimals(array)
    elif pa.types.is_date(t):
        out = _quoted(array.cast(pa.string()))
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        out = _strings(array)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        out = _per_value(array, lambda v: '"' + base64.b64encode(v).decode("ascii") + '"')
    elif pa.types.is_boolean(t):
        out = pc.if_else(array, "true", "false")
    else:
        raise TypeError(f"no changelog-json encoding for Arrow type {t}")
    return out.fill_null("null")


def joined_bytes(lines: pa.Array) -> bytes:
    """A string array's values, each followed by a newline, as one bytes object (no copy per line)."""
    if len(lines) == 0:
        return b""
    joined = pc.binary_join_element_wise(lines, "\n", "")
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)[joined.offset : joined.offset + len(joined) + 1]
    return joined.buffers()[2].to_pybytes()[int(offsets[0]) : int(offsets[-1])]


def text_buffer(lines: pa.Array) -> pa.Buffer:
    """A string array's values back to back, as a slice of its own data buffer (no copy): for
    lines that end in a newline (``ChangeLines.lines(..., newline=True)``), a file's content."""
    if len(lines) == 0:
        return pa.py_buffer(b"")
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset : lines.offset + len(lines) + 1]
    return lines.buffers()[2].slice(int(offsets[0]), int(offsets[-1]) - int(offsets[0]))


def concat_texts(pieces: Sequence[str | pa.Array]) -> pa.Array:
    """Row-wise concatenation of constant texts and per-row text arrays."""
    return pc.binary_join_element_wise(*[pa.scalar(p, pa.string()) if isinstance(p, str) else p for p in pieces], "")


# --- change lines from the stream's source rows --------------------------------------------------

# Op texts by code: 0 insert, 1 an update's first line, 2 delete, 3 an update's second line.
_OP_TEXTS = pa.array([json_string(op) for op in OP_CODES], pa.string())


class ChangeLines:
    """One table's changelog-json lines from source rows (``change_rows.SourceLayout``).

    A source row becomes one line per op, exactly as ``change_rows.ChangeProjection`` turns it
    into change rows (insert -> +I of the after-image, delete -> -D of the before-image,
    update -> -U then +U, ``seq`` = 2 * source seq + half), and each line reads as the JVM's
    ``JsonLines`` writes it for those rows (same keys, same order). Built once per table.
    """

    def __init__(
        self, database: str, table: str, column: str, names: Sequence[str], schema_id: str | None = None
    ) -> None:
        self.column = column
        self.names = tuple(names)
        self.meta_head = (
            ',"meta":{"database":' + json_string(database) + ',"table":' + json_string(table) + ',"binlog_file":'
        )
        # after "batch": the layout's id in the changelog's schema registry (changelog/schemas.py)
        self.meta_tail = "" if schema_id is None else ',"schema_id":' + json_string(schema_id)
        self.data_keys = [("{" if i == 0 else ",") + json_string(n) + ":" for i, n in enumerate(self.names)]

    def lines(self, batch: pa.RecordBatch, batch_id: int, newline: bool = False) -> tuple[pa.Array, np.ndarray]:
        """(lines, their ``_seq``) of the batch's rows, in ``_seq`` order if the batch's ``seq`` is
        ascending (as every batch the binlog reader yields is). ``newline``: each line ends with
        one, so the array's data buffer is the text to write (``text_buffer``): joining them again
        copied ~150 MB per 200,000 changes twice."""
        if batch.num_rows == 0:
            return pa.array([], pa.string()), np.zeros(0, np.int64)
        ch = explode_changes(batch, self.column)
        rows = pa.array(ch.source_row)
        files = batch.column("binlog_file")
        file_names = pc.unique(files) if files.null_count == 0 else None  # mostly one per batch
        one_file = file_names is not None and len(file_names) == 1
        meta = concat_texts(
            [
                json_string(file_names[0].as_py()) if one_file and file_names is not None else json_texts(files),
                ',"binlog_pos":',
                batch.column("binlog_pos").cast(pa.string()),
                ',"binlog_row":',
                batch.column("binlog_row").cast(pa.string()),
                ',"gtid":',
                json_texts(batch.column("gtid")),
                ',"event_time":',
                json_texts(batch.column("event_time")),
                ',"seq":',
            ]
        ).take(rows)
        pieces: list[str | pa.Array] = ['{"data":']
        if not self.names:
            pieces.append("{")
        for key, values in zip(self.data_keys, ch.images.flatten()):
            pieces += [key, json_texts(values)]
        pieces += [
            '},"op":',
            _OP_TEXTS.take(pa.array(ch.op_code)),
            self.meta_head,
            meta,
            pa.array(ch.seq).cast(pa.string()),
            f',"batch":{int(batch_id)}{self.meta_tail}}}}}' + ("\n" if newline else ""),
        ]
        return concat_texts(_merged(pieces)), ch.seq


def _merged(pieces: list[str | pa.Array]) -> list[str | pa.Array]:
    """Adjacent constant texts as one (fewer inputs to the row-wise join)."""
    out: list[str | pa.Array] = []
    for p in pieces:
        if isinstance(p, str) and out and isinstance(out[-1], str):
            out[-1] += p
        else:
            out.append(p)
    return out
