"""README.md is the front page: short, with working commands, and links that work off GitHub.

The README is also the package's long description on PyPI, where relative links break; and CI
(``.ci/run``) runs the suite the README's "Develop / test" commands name. These checks keep the
front page from growing back into a manual (the manual is ``docs/``, built by mkdocs).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
DOCS_BASE = "https://github.com/mysqlcdc/airflow-provider-mysqlcdc/blob/main/"
MAX_WORDS = 2000


def test_the_readme_is_read_in_five_minutes() -> None:
    words = len(README.split())
    assert words <= MAX_WORDS, f"README.md has {words} words (at most {MAX_WORDS}): move details into docs/"


def test_develop_and_test_name_the_two_commands() -> None:
    section = README[README.index("## Develop / test") :]
    assert re.search(r"^make demo\b", section, re.M), "the README's Develop / test section lost `make demo`"
    assert re.search(r"^make test\b", section, re.M), "the README's Develop / test section lost `make test`"
    assert "make test" in (REPO / ".ci" / "run").read_text(encoding="utf-8"), "CI no longer runs make test"


def test_links_are_absolute_and_name_existing_files() -> None:
    """Relative links break on PyPI; a link into this repository must name a file that exists."""
    links = re.findall(r"\]\(([^)\s]+)\)|<(https?://[^>\s]+)>", README)
    targets = [a or b for a, b in links]
    assert targets, "no links found"
    relative = [t for t in targets if not re.match(r"https?://", t)]
    assert not relative, f"relative links in README.md: {relative}"
    for t in targets:
        if t.startswith(DOCS_BASE):
            path = t[len(DOCS_BASE) :].split("#", 1)[0]
            assert (REPO / path).is_file(), f"README.md links to {path}, which is not in the repository"
    raw = "https://raw.githubusercontent.com/mysqlcdc/airflow-provider-mysqlcdc/main/"
    for path in re.findall(re.escape(raw) + r"(\S+)", README):
        assert (REPO / path).is_file(), f"README.md downloads {path}, which is not in the repository"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    for page in sorted((REPO / "docs").glob("*.md")):
        if page.name == "index.md":
            continue
        assert f"{DOCS_BASE}docs/{page.name}" in README, f"README.md does not link docs/{page.name}"
