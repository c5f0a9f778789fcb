"""PNG pictures of the benchmarks' figures, for CONTRIBUTING.md's Benchmarks section.

The benches print text that other tools parse; a picture is an extra they write only when asked
(``--png PATH``). matplotlib is therefore imported here only when a picture is drawn, so a bench
runs without it, and a bench given ``--png`` calls :func:`require` before its minutes of work, so
a missing library fails at once instead of after the measurement.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DPI = 120
INSTALL_HINT = "pip install -e '.[dev]' -c constraints.txt  (the 'dev' extra declares matplotlib)"


class MatplotlibMissing(SystemExit):
    """A SystemExit: a bench given --png without matplotlib stops with this message, no traceback."""


def require() -> Any:
    """pyplot on the non-interactive Agg backend (benches run headless, often over ssh)."""
    try:
        import matplotlib
    except ImportError as e:
        raise MatplotlibMissing(
            f"--png needs matplotlib, which is not installed ({e}); install it with: {INSTALL_HINT}"
        ) from e
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


@dataclass(frozen=True)
class Span:
    """One task of a run, seconds from the trigger. ``busy_s``: the part of it doing the work
    itself (a snapshot task's seconds in Spark), drawn darker at the bar's end, so start-up and
    scheduling overhead stand out as the lighter rest."""

    label: str
    start_s: float
    end_s: float
    busy_s: float | None = None


def percentile(samples: Sequence[float], p: float) -> float:
    """Nearest-rank percentile, the benches' own rule, so the marks agree with the printed p50/p99."""
    if not samples:
        return math.nan
    xs = sorted(samples)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def _save(fig: Any, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    require().close(fig)
    return out


def _draw_timeline(ax: Any, tasks: Sequence[Span], baselines: Mapping[str, float], total_s: float | None) -> None:
    """Gantt bars top-down in run order; baselines as vertical lines from 0, since each is the
    wall time another tool needs for the same rows and so compares with the bars' right end."""
    ordered = sorted(tasks, key=lambda t: (t.start_s, t.label))
    for row, t in enumerate(ordered):
        width = max(t.end_s - t.start_s, 0.0)
        ax.barh(row, width, left=t.start_s, height=0.6, color="#9ecae1", edgecolor="#3182bd")
        if t.busy_s:
            busy = min(t.busy_s, width)
            ax.barh(row, busy, left=t.end_s - busy, height=0.6, color="#3182bd", edgecolor="#3182bd")
        ax.text(t.end_s, row, f" {width:.1f} s", va="center", fontsize=8)
    ax.set_yticks(range(len(ordered)), [t.label for t in ordered])
    ax.invert_yaxis()
    styles = ("--", ":", "-.")
    for i, (label, seconds) in enumerate(baselines.items()):
        ax.axvline(
            seconds,
            color="#d62728" if i == 0 else "#ff7f0e",
            linestyle=styles[i % len(styles)],
            label=f"{label}: {seconds:.1f} s",
        )
    if total_s is not None:
        ax.axvline(total_s, color="black", linewidth=1.2, label=f"last snapshot done: {total_s:.1f} s")
    if any(t.busy_s for t in ordered):
        ax.barh([], [], color="#3182bd", label="in Spark")  # legend entry for the dark part
    ax.set_xlabel("seconds since the trigger")
    right = max([t.end_s for t in ordered] + list(baselines.values()) + [total_s or 0.0, 1.0])
    ax.set_xlim(0, right * 1.1)  # room for the last bar's seconds label
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)  # off the bars


def _thousands() -> Any:
    """Axis ticks as 1,500,000 rather than 1.5 with a '1e6' offset the eye misses."""
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _pos: f"{v:,.0f}")


def _draw_rates(ax: Any, phases: Mapping[str, float], highlight: str | None, unit: str = "rows/s") -> None:
    """Horizontal bars in the order given: labels are long (a run variant each)."""
    labels = list(phases)
    values = [phases[k] for k in labels]
    colors = ["#31a354" if k == highlight else "#9e9ac8" for k in labels]
    ax.barh(range(len(labels)), values, color=colors)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    top = max(values, default=0.0) or 1.0
    for row, v in enumerate(values):
        ax.text(v + top * 0.01, row, f"{v:,.0f}", va="center", fontsize=8)
    ax.set_xlim(0, top * 1.18)
    ax.set_xlabel(unit)
    ax.xaxis.set_major_formatter(_thousands())
    ax.grid(axis="x", alpha=0.3)


def task_timeline(
    path: str | Path,
    tasks: Sequence[Span],
    baselines: Mapping[str, float],
    title: str = "",
    total_s: float | None = None,
) -> Path:
    """The DAG run as a timeline; ``baselines`` maps a label to its seconds for the same rows."""
    plt = require()
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.45 * max(len(tasks), 2)))
    _draw_timeline(ax, tasks, baselines, total_s)
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def rows_per_second(
    path: str | Path, phases: Mapping[str, float], title: str = "", highlight: str | None = None, unit: str = "rows/s"
) -> Path:
    """Rows/s per phase or run variant (label -> rows/s); ``highlight`` is drawn in another colour
    (the figure the bench's last line reports), ``unit`` names what is counted (changes/s)."""
    plt = require()
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.45 * max(len(phases), 2)))
    _draw_rates(ax, phases, highlight, unit)
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def dag_run(
    path: str | Path,
    tasks: Sequence[Span],
    baselines: Mapping[str, float],
    phases: Mapping[str, float],
    title: str = "",
    total_s: float | None = None,
    highlight: str | None = None,
) -> Path:
    """The timeline over the rows/s bars in one picture: CONTRIBUTING.md shows one image per bench."""
    plt = require()
    n = max(len(tasks), 2) + max(len(phases), 2)
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(11, 2.2 + 0.42 * n), gridspec_kw={"height_ratios": [max(len(tasks), 2), max(len(phases), 2)]}
    )
    _draw_timeline(top, tasks, baselines, total_s)
    _draw_rates(bottom, phases, highlight)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def latency_cdf(path: str | Path, samples_by_label: Mapping[str, Sequence[float]], title: str = "") -> Path:
    """Empirical CDF per label, p50 and p99 marked: a tail shows in a CDF where a percentile
    table hides its shape (one slow micro-batch vs many)."""
    plt = require()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, samples in samples_by_label.items():
        xs = sorted(samples)
        if not xs:
            ax.plot([], [], label=f"{label} (no samples)")
            continue
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        p50, p99 = percentile(xs, 50), percentile(xs, 99)
        (line,) = ax.step(xs, ys, where="post", label=f"{label}: p50 {p50:.3f} s, p99 {p99:.3f} s (n={len(xs):,})")
        ax.plot([p50, p99], [0.5, 0.99], "o", color=line.get_color())  # values are in the legend
    ax.axhline(0.5, color="grey", linewidth=0.6, linestyle=":")
    ax.axhline(0.99, color="grey", linewidth=0.6, linestyle=":")
    ax.set_xlabel("commit -> visible latency (s)")
    ax.set_ylabel("fraction of changes")
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title, fontsize=10)
    return _save(fig, path)
