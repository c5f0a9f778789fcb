"""The documentation site builds with ``mkdocs build --strict``.

Strict mode makes every warning an error: a link to a page or anchor that is gone, a page left
out of the navigation, a relative link that leaves ``docs/``. Building the site in the test suite
is what keeps the docs from drifting away from themselves as pages move (about a second).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")  # Material's banner about its successor, not a finding
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(REPO / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "troubleshooting" / "index.html").is_file()


def test_every_page_is_in_the_navigation() -> None:
    """mkdocs only warns (strict: fails) for pages missing from nav; this names them plainly."""
    import yaml

    config = yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)

    def pages(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [p for v in node.values() for p in pages(v)]
        if isinstance(node, list):
            return [p for v in node for p in pages(v)]
        return []

    in_nav = set(pages(config["nav"]))
    on_disk = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert on_disk - in_nav == set(), f"pages not in mkdocs.yml's nav: {sorted(on_disk - in_nav)}"
    assert in_nav - on_disk == set(), f"nav entries without a page: {sorted(in_nav - on_disk)}"


def test_every_screenshot_the_docs_show_is_taken_by_a_ui_test():
    """docs/ui/*.png come from the UI tests (`make docs-screenshots` refreshes them): each image is
    shown by a docs page and taken under its name by a test in tests/ui, so none goes stale unnoticed."""
    import re

    from mysqlcdc_harness.browser import DOCS_SCREENSHOTS

    repo = DOCS_SCREENSHOTS.parents[1]
    pages = "\n".join(p.read_text(encoding="utf-8") for p in (repo / "docs").glob("*.md"))
    taken: list[str] = []
    for test in (repo / "tests" / "ui").glob("test_*.py"):
        taken += re.findall(r'screenshot\("([\w.-]+)"\)', test.read_text(encoding="utf-8"))
    images = sorted(DOCS_SCREENSHOTS.glob("*.png"))
    assert images
    for image in images:
        assert f"ui/{image.name}" in pages, f"{image.name} is on no docs page"
        assert image.stem in taken, f"{image.name} is taken by no UI test: it cannot be refreshed"
        assert taken.count(image.stem) == 1, (
            f"{image.name} is taken by {taken.count(image.stem)} UI tests: the last wins"
        )
