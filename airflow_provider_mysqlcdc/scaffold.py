"""``python -m airflow_provider_mysqlcdc init DIR``: the template DAG and an example pipeline file.

A team that installed the provider from PyPI has no checkout of this repository, so "copy
dags/mysql_cdc_pipeline.py" was a download from GitHub at whatever version ``main`` holds. The
files ship inside the package instead (``templates/``, package data), so what ``init`` writes
always matches the installed code. ``templates/mysql_cdc_pipeline.py.tmpl`` is
``dags/mysql_cdc_pipeline.py`` byte for byte (a unit test keeps the two equal); its suffix keeps
it from being imported, compiled or type-checked as a module of the package.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path


@dataclass(frozen=True)
class Template:
    """A shipped file and where ``init`` puts it, relative to the target folder."""

    resource: str
    target: str
    what: str


TEMPLATES: tuple[Template, ...] = (
    Template(
        "mysql_cdc_pipeline.py.tmpl",
        "dags/mysql_cdc_pipeline.py",
        "the DAG template: mysql_cdc_pipeline and mysql_cdc_stream_watchdog",
    ),
    Template(
        "shop_orders.yaml",
        "pipelines/shop_orders.yaml",
        "an example pipeline file (its DAG file is written by the dag-files command)",
    ),
)


class ScaffoldError(Exception):
    """A file ``init`` would write is there already (nothing was written)."""


def template_text(resource: str) -> str:
    """A shipped template's text, read from the installed package (wheel or checkout)."""
    return resources.files("airflow_provider_mysqlcdc").joinpath("templates", resource).read_text(encoding="utf-8")


def write_templates(folder: Path, *, force: bool = False) -> list[tuple[Path, str]]:
    """Write every template under ``folder``; returns (path, what) per file written.

    Refuses before writing anything when a target exists and ``force`` is false: a DAG file a
    team has edited must not be replaced by a rerun of ``init``.
    """
    targets = [(folder / t.target, t) for t in TEMPLATES]
    existing = [p for p, _ in targets if p.exists()]
    if existing and not force:
        names = ", ".join(str(p) for p in existing)
        raise ScaffoldError(
            f"{names} already exist{'s' if len(existing) == 1 else ''}; nothing was written. "
            "Fix: choose another folder, move the file(s) away, or pass --force to overwrite them."
        )
    written = []
    for path, t in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template_text(t.resource), encoding="utf-8")
        written.append((path, t.what))
    return written
