"""The DAG file of each pipeline file: three lines that Airflow parses, one per pipeline.

Airflow keeps import errors per DAG file, and Airflow 3 marks every DAG of a file that has an
import error stale (``is_stale``, ``has_import_errors``: not scheduled, not triggered from the
UI). One DAG file for all pipeline files would therefore take every pipeline down with one
broken file. With one DAG file per pipeline file, a broken file is one import error, on its
own DAG file, naming the pipeline file, the key and the fix; the other pipelines are untouched.

``write_dag_files`` writes them (``python -m airflow_provider_mysqlcdc.pipelines dag-files``),
``check_dag_files`` finds a pipeline file without one, or a DAG file whose pipeline file is
gone (``validate --dags``). No Airflow import here.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path
from typing import Iterable

from .loader import SUFFIXES
from .spec import Problem

FUNCTION = "pipeline_dags"
MARKER = "written by: python -m airflow_provider_mysqlcdc.pipelines dag-files"
DAG_FILE_KEY = "(dag file)"

TEMPLATE = '''"""The DAGs of the pipeline file {shown} ({marker}; edit the pipeline file, not this one)."""
from airflow_provider_mysqlcdc.pipelines.factory import {function}
{function}({path}, globals())
'''


def dag_file_name(pipeline_file: Path) -> str:
    """``pipelines/shop-orders.yaml`` -> ``mysqlcdc_shop_orders.py``."""
    return "mysqlcdc_" + re.sub(r"\W", "_", pipeline_file.stem) + ".py"


def dag_file_text(pipeline_file: Path, dags_dir: Path) -> str:
    rel = Path(os.path.relpath(pipeline_file.resolve(), dags_dir.resolve())).as_posix()
    return TEMPLATE.format(shown=rel, marker=MARKER, function=FUNCTION, path=json.dumps(rel))


def _dag_files(dags_dir: Path) -> list[Path]:
    return sorted(
        p
        for p in dags_dir.rglob("*.py")
        if not any(part.startswith((".", "__pycache__")) for part in p.relative_to(dags_dir).parts)
    )


def built_pipeline_files(dags_dir: Path) -> dict[Path, list[Path]]:
    """Pipeline file (resolved) -> the DAG files of ``dags_dir`` calling ``pipeline_dags`` on it."""
    out: dict[Path, list[Path]] = {}
    for dag_file in _dag_files(dags_dir):
        try:
            text = dag_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if FUNCTION not in text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name == FUNCTION:
                target = (dag_file.parent / node.args[0].value).resolve()
                out.setdefault(target, []).append(dag_file)
    return out


def check_dag_files(pipeline_files: Iterable[tuple[Path, str]], dags_dir: str | os.PathLike[str]) -> list[Problem]:
    """Each pipeline file has exactly one DAG file in ``dags_dir``, and no DAG file of a checked
    folder builds a pipeline file that is gone."""
    files = list(pipeline_files)
    dags_dir = Path(dags_dir)
    built = built_pipeline_files(dags_dir)
    problems: list[Problem] = []
    for path, file in files:
        fix = f"run python -m airflow_provider_mysqlcdc.pipelines dag-files {os.path.dirname(file) or '.'} {dags_dir}"
        dag_files = built.get(path.resolve(), [])
        if not dag_files:
            problems.append(
                Problem(
                    file,
                    DAG_FILE_KEY,
                    f"found no DAG file in {dags_dir} that builds it, so Airflow "
                    f"would not load this pipeline. Fix: {fix} (it writes "
                    f"{dags_dir / dag_file_name(path)}).",
                )
            )
        elif len(dag_files) > 1:
            names = ", ".join(str(p) for p in dag_files)
            problems.append(
                Problem(
                    file,
                    DAG_FILE_KEY,
                    f"found {len(dag_files)} DAG files that build it ({names}): "
                    "they would define its DAGs twice. Fix: delete all but one.",
                )
            )
    folders = {path.resolve().parent: os.path.dirname(file) or "." for path, file in files}
    for target, dag_files in sorted(built.items()):
        if target.parent in folders and not target.exists():
            fix = f"python -m airflow_provider_mysqlcdc.pipelines dag-files {folders[target.parent]} {dags_dir}"
            for dag_file in dag_files:
                problems.append(
                    Problem(
                        str(dag_file),
                        DAG_FILE_KEY,
                        f"found it building {target.name}, which does "
                        f"not exist in {folders[target.parent]}: Airflow would show an import "
                        f"error. Fix: delete this DAG file (or run {fix}, which removes it).",
                    )
                )
    return problems


def write_dag_files(pipelines_dir: Path, dags_dir: Path) -> list[str]:
    """One DAG file per pipeline file of ``pipelines_dir`` (those this command wrote are kept up to
    date; one a person wrote is left alone); DAG files it wrote whose pipeline file is gone are
    removed. Returns one line per file written, removed or kept."""
    dags_dir.mkdir(parents=True, exist_ok=True)
    built = built_pipeline_files(dags_dir)
    lines: list[str] = []
    pipeline_paths = sorted(p for p in pipelines_dir.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
    for path in pipeline_paths:
        existing = built.get(path.resolve(), [])
        target = existing[0] if existing else dags_dir / dag_file_name(path)
        text = dag_file_text(path, dags_dir)
        if target.exists():
            current = target.read_text(encoding="utf-8")
            if current == text:
                lines.append(f"unchanged {target}")
                continue
            if MARKER not in current:
                lines.append(
                    f"kept {target} (not written by this command: it builds {path.name} its own way)"
                    if existing
                    else f"skipped {path}: {target} exists and was not written by this command"
                )
                continue
        target.write_text(text, encoding="utf-8")
        lines.append(f"wrote {target} for {path}")
    for target, dag_files in sorted(built.items()):
        if target.parent == pipelines_dir.resolve() and not target.exists():
            for dag_file in dag_files:
                if MARKER in dag_file.read_text(encoding="utf-8"):
                    dag_file.unlink()
                    lines.append(f"removed {dag_file} ({target.name} is gone)")
    return lines
