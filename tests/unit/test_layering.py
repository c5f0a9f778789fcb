"""The package's layers, read from every module's imports (ast: nothing is imported or run).

``cdc/`` is the engine: it runs on Spark executors and on Airflow workers, so it imports neither
Airflow nor Spark, nor any other part of this package (``spark/``, the operators, hooks, sensors,
pipeline files, jobs). Inside ``cdc/`` the rooms (``source/``, ``snapshot/``, ``binlog/``,
``transform/``, ``store/``, ``schema/``; each module at the top of ``cdc/`` is a room of its own)
import each other without a circle, so every room stands above what it uses. Every import counts,
the ones inside a function or under ``TYPE_CHECKING`` too: a lazy import still ties two rooms.

Across the whole package, a module whose name starts with ``_`` is private to the package that holds
it: that package and the packages below it may import it, no other (``operators/_spark_output.py`` is
the snapshot operator's; ``_airflow_compat.py`` at the top serves every package). What two packages
share gets a public home.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import airflow_provider_mysqlcdc
from mysqlcdc_harness.error_catalogue import parse_source

PACKAGE = airflow_provider_mysqlcdc.__name__
ROOT = Path(airflow_provider_mysqlcdc.__file__).parent
CDC = f"{PACKAGE}.cdc"
# What the engine must never import: third-party frameworks, and this package's upper layers.
FORBIDDEN_OUTSIDE = ("airflow", "pyspark", "py4j", "delta")


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _modules() -> dict[str, Path]:
    return {_module_name(p)[0]: p for p in sorted(ROOT.rglob("*.py"))}


MODULES = _modules()


def _imports(name: str) -> list[tuple[str, int]]:
    """Every module ``name`` imports, absolute, with the line; ``from pkg import sub`` names ``pkg.sub``
    when ``sub`` is a module of this package."""
    path = MODULES[name]
    is_package = path.name == "__init__.py"
    tree = parse_source(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in MODULES]
            found += [(sub, node.lineno) for sub in subs] or [(target, node.lineno)]
    return found


def _own(target: str) -> str | None:
    """The module of this package that an import names (the longest one it starts with)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def _room(module: str) -> str:
    """``cdc.source.config`` -> ``source``; ``cdc.model`` -> ``model``; the package ``cdc`` itself -> ``cdc``."""
    rest = module[len(CDC) + 1 :]
    return rest.split(".")[0] if rest else "cdc"


CDC_MODULES = sorted(m for m in MODULES if m == CDC or m.startswith(CDC + "."))


def test_the_engine_finds_its_modules():
    assert len(CDC_MODULES) > 40, "the walk over cdc/ found too few modules: the test reads the wrong tree"
    assert {"source", "snapshot", "binlog", "transform", "store", "schema"} <= {_room(m) for m in CDC_MODULES}


@pytest.mark.parametrize("module", CDC_MODULES)
def test_the_engine_imports_neither_airflow_nor_spark_nor_the_layers_above(module):
    wrong = []
    for target, line in _imports(module):
        top = target.split(".")[0]
        if top in FORBIDDEN_OUTSIDE:
            wrong.append(f"line {line}: {target}")
        elif top == PACKAGE:
            own = _own(target)
            if own is None or not (own == CDC or own.startswith(CDC + ".")):
                wrong.append(f"line {line}: {target} (outside cdc/)")
    assert not wrong, f"{module} imports what the engine must not: {wrong}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _cdc_edges() -> list[tuple[str, str, int]]:
    edges = []
    for module in CDC_MODULES:
        for target, line in _imports(module):
            own = _own(target) if target.startswith(CDC + ".") or target == CDC else None
            if own and own != module:
                edges.append((module, own, line))
    return edges


def test_the_engine_rooms_import_each_other_without_a_circle():
    graph: dict[str, set[str]] = {}
    why: dict[tuple[str, str], str] = {}
    for module, target, line in _cdc_edges():
        a, b = _room(module), _room(target)
        if a != b and "cdc" not in (a, b):
            graph.setdefault(a, set()).add(b)
            why.setdefault((a, b), f"{module}:{line} -> {target}")
    circles = _cycles(graph)
    detail = [[why[(a, b)] for a in c for b in c if (a, b) in why] for c in circles]
    assert not circles, f"rooms of cdc/ that import each other: {circles}; the imports: {detail}"


def test_no_module_of_the_engine_imports_itself_back():
    graph: dict[str, set[str]] = {}
    for module, target, _line in _cdc_edges():
        graph.setdefault(module, set()).add(target)
    assert not _cycles(graph), f"modules of cdc/ in an import circle: {_cycles(graph)}"


def _private_owner(module: str) -> str | None:
    """The package a private module belongs to (``pkg.operators._x`` -> ``pkg.operators``), else None."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _package_of(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def test_the_private_check_sees_a_private_module():
    assert _private_owner(f"{PACKAGE}.operators._spark_output") == f"{PACKAGE}.operators"
    assert _private_owner(f"{PACKAGE}.operators.snapshot") is None
    assert _private_owner(f"{PACKAGE}.__main__") is None


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_another_packages_private_module(module):
    here = _package_of(module)
    wrong = []
    for target, line in _imports(module):
        own = _own(target) if target.split(".")[0] == PACKAGE else None
        owner = _private_owner(own) if own else None
        if owner is not None and not (here == owner or here.startswith(owner + ".")):
            wrong.append(f"line {line}: {own} (private to {owner})")
    assert not wrong, f"{module} imports another package's private module: {wrong}; give what they share a public home"


HOOKS = f"{PACKAGE}.hooks"
ABOVE_HOOKS = tuple(f"{PACKAGE}.{p}" for p in ("operators", "sensors", "pipelines"))


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m == HOOKS or m.startswith(HOOKS + ".")))
def test_the_hooks_import_nothing_above_them(module):
    """Operators and sensors stand on the hooks (the process and connections they own), never the
    other way round."""
    wrong = [
        f"line {line}: {target}"
        for target, line in _imports(module)
        if any(target == a or target.startswith(a + ".") for a in ABOVE_HOOKS)
    ]
    assert not wrong, f"{module} imports a layer above the hooks: {wrong}"
