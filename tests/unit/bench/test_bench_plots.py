"""bench/plots.py draws real PNGs from the shapes the benches hand it (synthetic data, no bench run)."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("matplotlib")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOTS_PY = Path(__file__).resolve().parents[3] / "bench" / "plots.py"


@pytest.fixture(scope="module")
def plots() -> ModuleType:
    """Loaded by path: bench/ is a scripts folder, not a package the tests can import by name."""
    spec = importlib.util.spec_from_file_location("bench_plots_under_test", PLOTS_PY)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def assert_png(path: Path, min_bytes: int = 5_000) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > min_bytes, f"{path} has only {len(data)} bytes: an empty figure?"


def test_task_timeline_writes_png(plots, tmp_path):
    tasks = [
        plots.Span("validate", 1.2, 3.0),
        plots.Span("plan", 3.4, 6.1),
        plots.Span("snapshot[0]", 6.5, 17.0, busy_s=9.8),
        plots.Span("snapshot[1]", 7.0, 19.5, busy_s=10.1),
        plots.Span("stream", 19.8, 20.0),
    ]
    out = plots.task_timeline(
        tmp_path / "timeline.png",
        tasks,
        {"mariadb CLI scan": 0.9, "plain Spark": 14.2},
        title="2,000,000 rows",
        total_s=19.5,
    )
    assert out == tmp_path / "timeline.png"
    assert_png(out)


def test_rows_per_second_writes_png(plots, tmp_path):
    out = plots.rows_per_second(
        tmp_path / "sub" / "rates.png",
        {"mariadb CLI": 2_300_000, "plain Spark": 140_000, "DAG": 100_000},
        title="rows/s",
        highlight="DAG",
    )
    assert_png(out)


def test_dag_run_writes_one_picture_with_both_panels(plots, tmp_path):
    tasks = [plots.Span("validate", 0.5, 2.0), plots.Span("snapshot[0]", 2.5, 12.0, busy_s=7.0)]
    out = plots.dag_run(
        tmp_path / "dag.png", tasks, {"CLI": 1.0}, {"DAG": 1e5, "CLI": 2e6}, title="t", total_s=12.0, highlight="DAG"
    )
    assert_png(out)


def test_latency_cdf_writes_png_and_tolerates_an_empty_label(plots, tmp_path):
    rng = random.Random(7)
    samples = {
        "baseline": [rng.expovariate(4) for _ in range(2_000)],
        "hand-off window": [rng.expovariate(1.5) for _ in range(800)],
        "nothing measured": [],
    }
    assert_png(plots.latency_cdf(tmp_path / "cdf.png", samples, title="latency"))


def test_percentile_matches_the_benches_nearest_rank(plots):
    xs = [float(i) for i in range(1, 101)]
    assert plots.percentile(xs, 50) == 51.0  # round(0.5 * 99) = 50 -> the 51st value, as the benches print
    assert plots.percentile(xs, 99) == 99.0
    assert plots.percentile([], 50) != plots.percentile([], 50)  # nan


def test_missing_matplotlib_names_the_extra(plots, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(SystemExit, match=r"\.\[dev\]"):
        plots.require()
