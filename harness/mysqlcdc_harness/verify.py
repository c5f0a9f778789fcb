"""Row-by-row comparison helpers for the consistency tests (driver-side; test tables only)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from airflow_provider_mysqlcdc.cdc.events import RowChange


def rows_by_identity(rows: Iterable[Mapping[str, Any]], identity: Sequence[str]) -> dict[tuple, dict]:
    out: dict[tuple, dict] = {}
    for r in rows:
        d = dict(r)
        k = tuple(d[c] for c in identity)
        if k in out:
            raise AssertionError(f"duplicate row for key {k}: {out[k]} and {d}")
        out[k] = d
    return out


def collect(df, identity: Sequence[str]) -> dict[tuple, dict]:
    return rows_by_identity((r.asDict() for r in df.collect()), identity)


def apply_changes(state: dict[tuple, dict], changes: Iterable[RowChange], identity: Sequence[str]) -> int:
    """Apply row changes in order to ``state`` (identity -> row), as a sink would."""
    n = 0
    for ch in changes:
        if not isinstance(ch, RowChange):
            continue
        n += 1
        if ch.before is not None:
            state.pop(tuple(ch.before[c] for c in identity), None)
        if ch.after is not None:
            state[tuple(ch.after[c] for c in identity)] = dict(ch.after)
    return n


def diff(expected: dict[tuple, dict], actual: dict[tuple, dict], limit: int = 5) -> str:
    """'' when equal, else a short description of the first differences."""
    missing = [k for k in expected if k not in actual]
    extra = [k for k in actual if k not in expected]
    changed = [k for k in expected if k in actual and expected[k] != actual[k]]
    if not (missing or extra or changed):
        return ""
    lines = [f"{len(missing)} missing, {len(extra)} extra, {len(changed)} different rows"]
    for k in missing[:limit]:
        lines.append(f"  missing {k}: {expected[k]}")
    for k in extra[:limit]:
        lines.append(f"  extra   {k}: {actual[k]}")
    for k in changed[:limit]:
        lines.append(f"  differs {k}: expected {expected[k]} got {actual[k]}")
    return "\n".join(lines)
