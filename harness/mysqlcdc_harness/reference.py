"""docs/reference.md, generated from the code, so the reference cannot drift from it; and the DAGs'
*Docs* blocks copied into the docs pages that show them (``DAG_DOC_PAGES``).

    python -m mysqlcdc_harness.reference            # write docs/reference.md
    python -m mysqlcdc_harness.reference --check    # exit 1 when the file is not what the code says

Three tables: the run settings (the trigger form's fields, ``cdc/settings.py``) with the key each
has in a pipeline file; the pipeline-file keys that are not run settings (the pydantic models of
``pipelines/spec.py``: the pipeline's name and schedule, ``route``, ``transform``); and the
parameters of the operators and the sensor, from their ``:param`` lines. ``undocumented()`` lists
what has no description, which ``tests/unit/test_reference_docs.py`` requires to be nothing.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[2]
TARGET = REPO / "docs" / "reference.md"
_PARAM = re.compile(r"^:param ([\w, ]+):\s*(.*)$")
_SKIP_PARAMS = {"self", "args", "kwargs"}


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(value: Any) -> str:
    if value is None or value == "" or value == [] or value == {}:
        return "empty"
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`"


def operators() -> list[type]:
    from airflow_provider_mysqlcdc.operators.consistency import MySqlCdcConsistencyCheckOperator
    from airflow_provider_mysqlcdc.operators.find_pipelines import MySqlCdcFindPipelinesOperator
    from airflow_provider_mysqlcdc.operators.maintenance import MySqlCdcSinkMaintenanceOperator
    from airflow_provider_mysqlcdc.operators.plan import MySqlCdcPlanOperator
    from airflow_provider_mysqlcdc.operators.snapshot import MySqlCdcSnapshotOperator
    from airflow_provider_mysqlcdc.operators.stream import MySqlCdcStreamOperator
    from airflow_provider_mysqlcdc.operators.validate import MySqlCdcValidateOperator
    from airflow_provider_mysqlcdc.sensors.stream import MySqlCdcStreamSensor

    return [
        MySqlCdcValidateOperator,
        MySqlCdcPlanOperator,
        MySqlCdcSnapshotOperator,
        MySqlCdcStreamOperator,
        MySqlCdcConsistencyCheckOperator,
        MySqlCdcSinkMaintenanceOperator,
        MySqlCdcStreamSensor,
        MySqlCdcFindPipelinesOperator,
    ]


def param_docs(cls: type) -> dict[str, str]:
    """``:param a:`` and ``:param a, b:`` lines of the class docstring, continuation lines joined."""
    docs: dict[str, str] = {}
    names: list[str] = []
    for line in (inspect.getdoc(cls) or "").splitlines():
        m = _PARAM.match(line.strip())
        if m:
            names = [n.strip() for n in m.group(1).split(",") if n.strip()]
            for n in names:
                docs[n] = m.group(2)
        elif names and line.startswith(" ") and line.strip():
            for n in names:
                docs[n] += " " + line.strip()
        else:
            names = []
    return docs


def operator_params(cls: type) -> Iterator[tuple[str, str, str]]:
    """(name, default, description) of each parameter of ``cls.__init__``."""
    docs = param_docs(cls)
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if name in _SKIP_PARAMS or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        default = "required" if p.default is inspect.Parameter.empty else _default(p.default)
        yield name, default, docs.get(name, "")


def file_only_keys() -> Iterator[tuple[str, str]]:
    """(key, description) of the pipeline-file keys that are not run settings."""
    from airflow_provider_mysqlcdc.pipelines import spec

    settings_keys = {f"{section}.{key}" for section, key in spec.FILE_KEYS.values()}
    for section, field in spec.PipelineSpec.model_fields.items():
        model = _model_of(field.annotation)
        if model is None:
            continue
        prefix = f"{section}[]" if section in ("route", "transform") else section
        for name, sub in model.model_fields.items():
            key = f"{prefix}.{sub.alias or name}"
            if key.replace("[]", "") in settings_keys:
                continue
            yield key, sub.description or ""


def _model_of(annotation: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def render() -> str:
    from airflow_provider_mysqlcdc.cdc.settings import SETTINGS
    from airflow_provider_mysqlcdc.pipelines.spec import FILE_KEYS

    out = [
        "# Reference",
        "",
        "Generated from the code (`python -m mysqlcdc_harness.reference`; the test suite fails when this",
        "page and the code disagree). The pages of these docs explain; this page lists.",
        "",
        "## Run settings",
        "",
        "The trigger form's fields, the operators' settings and a pipeline file's keys are one list. A",
        "setting without a pipeline-file key is a choice for one run (the trigger form only).",
        "",
        "| section | setting | pipeline file | default | what it does |",
        "|---|---|---|---|---|",
    ]
    for s in SETTINGS:
        key = f"`{'.'.join(FILE_KEYS[s.name])}`" if s.name in FILE_KEYS else "(one run)"
        out.append(f"| {s.section} | `{s.name}` | {key} | {_cell(_default(s.default))} | {_cell(s.description)} |")
    out += [
        "",
        "## Pipeline-file keys that are not run settings",
        "",
        "| key | what it does |",
        "|---|---|",
    ]
    out += [f"| `{key}` | {_cell(text)} |" for key, text in file_only_keys()]
    out += ["", "## Operators and sensor", ""]
    for cls in operators():
        out += [
            f"### {cls.__name__}",
            "",
            f"`{cls.__module__}.{cls.__name__}`: {_cell((inspect.getdoc(cls) or '').split(chr(10) + chr(10))[0])}",
            "",
            "| parameter | default | what it does |",
            "|---|---|---|",
        ]
        out += [f"| `{n}` | {_cell(d)} | {_cell(t)} |" for n, d, t in operator_params(cls)]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def undocumented() -> list[str]:
    """Every setting, pipeline-file key and operator parameter without a description."""
    from airflow_provider_mysqlcdc.cdc.settings import SETTINGS

    gaps = [f"setting {s.name}" for s in SETTINGS if not s.description.strip()]
    gaps += [f"pipeline-file key {k}" for k, t in file_only_keys() if not t.strip()]
    for cls in operators():
        gaps += [f"{cls.__name__}({n})" for n, _, t in operator_params(cls) if not t.strip()]
    return gaps


# Pages holding the DAGs' Docs blocks (airflow_provider_mysqlcdc/pipelines/dag_docs.py) between markers.
DAG_DOC_PAGES = (REPO / "docs" / "ui.md",)
_BLOCK = re.compile(r"(<!-- dag-docs:([\w-]+) -->\n)(.*?)(<!-- /dag-docs:\2 -->)", re.DOTALL)


def with_dag_doc_blocks(text: str) -> str:
    """``text`` with every ``<!-- dag-docs:NAME -->`` block replaced by the DAG docs' block NAME,
    rendered with the DAG template's defaults: the docs site says what the DAG's Docs tab says."""
    from airflow_provider_mysqlcdc.pipelines import dag_docs

    def fill(m: re.Match) -> str:
        name = m.group(2)
        if name not in dag_docs.BLOCKS:
            raise SystemExit(
                f"docs: <!-- dag-docs:{name} --> names no block of dag_docs.BLOCKS {sorted(dag_docs.BLOCKS)}"
            )
        return f"{m.group(1)}{dag_docs.render(name)}{m.group(4)}"

    return _BLOCK.sub(fill, text)


def dag_doc_blocks_in(text: str) -> list[str]:
    return [m.group(2) for m in _BLOCK.finditer(text)]


def outputs() -> dict[Path, str]:
    """Every generated file and what the code says it must hold."""
    out = {TARGET: render()}
    for page in DAG_DOC_PAGES:
        out[page] = with_dag_doc_blocks(page.read_text(encoding="utf-8"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mysqlcdc_harness.reference")
    ap.add_argument(
        "--check", action="store_true", help="exit 1 if docs/reference.md or a page's DAG docs block is not current"
    )
    args = ap.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current == text:
            continue
        if args.check:
            stale.append(path)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        names = ", ".join(str(p.relative_to(REPO)) for p in stale)
        print(f"{names}: not what the code says. Fix: python -m mysqlcdc_harness.reference", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
