"""The declared public surface: ``PUBLIC_API`` in the package's ``__init__.py`` and ``docs/api.md``.

Every listed name imports, from the package and from its module, and is defined (or re-exported on
purpose) there; the docs page lists exactly the same names with the same modules; importing the
package imports no Airflow, since the names are imported on first use.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import airflow_provider_mysqlcdc as package

REPO = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| `(\w+)` \| `([\w.]+)` \|", re.M)


def test_the_surface_names_the_operators_sensor_hooks_dag_builders_and_engine():
    modules = set(package.PUBLIC_API.values())
    for room in ("operators.", "sensors.", "hooks.", "pipelines.", "cdc.", "spark."):
        assert any(m.startswith(room) for m in modules), f"no public name from {room}"
    assert set(package.PUBLIC_API) <= set(package.__all__)


@pytest.mark.parametrize("name", sorted(package.PUBLIC_API))
def test_each_public_name_imports(name: str) -> None:
    module = importlib.import_module(f"{package.__name__}.{package.PUBLIC_API[name]}")
    value = getattr(module, name)
    assert getattr(package, name) is value
    assert not any(part.startswith("_") for part in package.PUBLIC_API[name].split(".")), "a private module"


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError):
        package.NoSuchName  # noqa: B018


def test_the_docs_page_lists_the_same_names():
    documented = dict(ROW.findall((REPO / "docs" / "api.md").read_text(encoding="utf-8")))
    declared = {name: f"{package.__name__}.{module}" for name, module in package.PUBLIC_API.items()}
    assert documented == declared, (
        f"docs/api.md and PUBLIC_API differ: only in the docs {sorted(documented.keys() - declared.keys())}, "
        f"only in PUBLIC_API {sorted(declared.keys() - documented.keys())}, other module "
        f"{sorted(n for n in documented.keys() & declared.keys() if documented[n] != declared[n])}"
    )


def test_importing_the_package_imports_no_airflow():
    code = f"import sys, {package.__name__} as p; p.SourceConfig; print('airflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False"
