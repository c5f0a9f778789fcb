"""docs/errors.md, the catalogue of every error message a user can meet, generated from the source.

    python -m mysqlcdc_harness.error_catalogue            # write docs/errors.md
    python -m mysqlcdc_harness.error_catalogue --check    # exit 1 when the file is not what the code says

The package's source is read with ``ast``: nothing of it is imported or run. A message is listed for

* every construction of a user-facing error class (``raise ConfigError(...)``, but also an error
  built into a list or returned): the subclasses of ``CdcError`` (``ConfigError`` and the rest),
  ``PipelineFileError``, ``ScaffoldError``, ``BytecodeError`` and ``MissingFilesError``, and the
  ``AirflowException`` family the operators and the sensor raise;
* the pipeline-file checks' ``invalid(...)``, which become lines of a ``PipelineFileError``;
* the few raises of Python's own classes whose message reaches a user (``REACHES_USER``).

Left out, on purpose: ``ValueError``/``TypeError``/``KeyError``/``AssertionError`` raised as
internal checks (a bug, not a user's input), the private control-flow classes (names starting with
``_``, ``StreamRestart``), ``SchemaChangeError`` (always caught, see ``INTERNAL``) and ``JsonbError``
(the fast decoder wraps it in a ``ProtocolError`` that names the event).

An error built by a helper (``raise explain_connect_failure(...)``, ``raise self.error(what, fix)``,
an exception class whose ``__init__`` builds the message) is followed into the helper: a call that
passes text fills the helper's template in; a helper only ever given values is listed once, with its
parameters as ``<placeholders>``.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "airflow_provider_mysqlcdc"
TARGET = REPO / "docs" / "errors.md"

# Roots of the package's own hierarchy; every subclass counts.
ROOTS = ("CdcError", "PipelineFileError", "ScaffoldError", "BytecodeError", "MissingFilesError")
AIRFLOW = ("AirflowException", "AirflowSkipException", "AirflowFailException")
# Not user-facing although they derive from a root: control flow, or caught by every caller
# (``SchemaChangeError``: applying a DDL to the tracked schema; the callers log it and let the next
# TABLE_MAP, or the server's information_schema, decide the table's shape).
INTERNAL = ("StreamRestart", "SchemaChangeError")
# What makes a message that a user-facing error carries: name -> (module, class shown, the message's
# position). A pipeline file's check raises ``invalid(message)``; each ``Problem(file, key, message)``
# is one line of a ``PipelineFileError``.
MESSAGE_FUNCTIONS = {
    "invalid": ("pipelines/spec_checks.py", "PipelineFileError", 0),
    "Problem": ("pipelines/spec.py", "PipelineFileError", 2),
}
# Raises of Python's own classes whose message a user reads (a task's log, a command's output):
# (module, function) -> why it reaches the user.
REACHES_USER = {
    ("spark/snapshot/arrow_read.py", "read_arrow"): "the snapshot task fails with it",
    ("spark/sinks/base.py", "Sink.publish_steps"): "the stream stops with it",
    ("spark/sinks/postgres/sink.py", "PostgresSink.commit_snapshot"): "the snapshot task fails with it",
    ("spark/snapshot/job.py", "run_snapshot_batch"): "the snapshot task fails with it",
}

AREAS = [  # (title, module prefixes): a module is in the first area one of whose prefixes it starts with
    ("Connections and the source server", ("cdc/source/", "cdc/types.py", "cdc/source/version.py", "hooks/")),
    ("Run settings and the plan", ("cdc/pipeline.py", "cdc/settings.py", "cdc/plan.py", "cdc/batching.py")),
    ("Snapshot", ("cdc/snapshot/", "spark/snapshot/", "cdc/chunks.py")),
    ("Binlog and the stream", ("cdc/binlog/", "spark/stream/", "spark/runtime/stream_", "jobs/", "cdc/store/lease")),
    ("Schema changes", ("cdc/schema/",)),
    ("Routes and transforms", ("cdc/transform/",)),
    ("Sinks", ("spark/sinks/",)),
    ("Consistency check", ("spark/consistency.py",)),
    ("State location", ("cdc/state.py", "cdc/store/")),
    ("Pipeline files", ("pipelines/",)),
    ("Operators, sensor and Airflow", ("operators/", "sensors/", "plugins/", "ui/", "api/")),
    ("Spark", ("spark/", "jobs/")),
    ("Commands and the rest", ("",)),
]


_Found = tuple[str, str, str, str]  # (class, template, module, function) of one message


def parse_source(text: str) -> ast.Module:
    """``ast.parse``, tried again on CPython 3.11's ``SystemError: AST constructor recursion depth
    mismatch``: its AST builder keeps one recursion count per interpreter, so a parse racing another
    thread's compile (a test's leftover thread importing a module) can fail spuriously (CPython
    gh-106905, fixed in later releases). A real syntax error is a SyntaxError and is not retried."""
    for attempt in range(5):
        try:
            return ast.parse(text)
        except SystemError:
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Message:
    module: str  # relative to the package, e.g. cdc/source/server.py
    where: str  # the function (Class.method) that builds it
    cls: str
    text: str  # the template: literal text, <placeholders> for what the code fills in
    line: int = field(default=0, compare=False)  # where the call is (for a test's report; not on the page)

    @property
    def problem(self) -> str:
        return self.text.split("Fix:", 1)[0].strip()

    @property
    def fix(self) -> str:
        return self.text.split("Fix:", 1)[1].strip() if "Fix:" in self.text else ""

    @property
    def carrier(self) -> bool:
        """Nothing but placeholders: the message is another error's (or a list of errors') text."""
        return not re.sub(r"<[^<>]*>|[\s:;,.()\-]", "", self.text)


# --- reading the source -------------------------------------------------------------------------


@dataclass
class _Func:
    module: str
    qualname: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    cls: Optional[str]  # the class it is a method of

    @property
    def params(self) -> list[str]:
        a = self.node.args
        names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
        return names[1:] if self.cls and names and names[0] in ("self", "cls") else names


class _Source:
    def __init__(self, root: Path = PACKAGE) -> None:
        self.trees: dict[str, ast.Module] = {}
        for path in sorted(root.rglob("*.py")):
            self.trees[path.relative_to(root).as_posix()] = parse_source(path.read_text(encoding="utf-8"))
        self.funcs: list[_Func] = []
        self.constants: dict[str, dict[str, ast.expr]] = {}  # module -> NAME -> its text
        self.bases: dict[str, list[str]] = {}
        self.inits: dict[str, _Func] = {}
        for module, tree in self.trees.items():
            self._collect(module, tree.body, "", None)
            self.constants[module] = {
                t.id: node.value
                for node in tree.body
                if isinstance(node, ast.Assign) and _is_text(node.value)
                for t in node.targets
                if isinstance(t, ast.Name)
            }
        self.classes = self._user_facing()
        self.builders: dict[int, _Func] = {}
        grew = True
        while grew:  # a function returning what a helper returns is a helper too
            names = {f.node.name for f in self.builders.values()}
            new = {
                id(f.node): f for f in self.funcs if id(f.node) not in self.builders and self._returns_error(f, names)
            }
            self.builders.update(new)
            grew = bool(new)

    def _collect(self, module: str, body: list[ast.stmt], prefix: str, cls: Optional[str]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                self.bases[node.name] = [ast.unparse(b).split(".")[-1] for b in node.bases]
                self._collect(module, node.body, f"{prefix}{node.name}.", node.name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                f = _Func(module, prefix + node.name, node, cls)
                self.funcs.append(f)
                if cls and node.name == "__init__":
                    self.inits[cls] = f
                self._collect(module, node.body, f"{prefix}{node.name}.", None)

    def _user_facing(self) -> set[str]:
        found = set(ROOTS) | set(AIRFLOW)
        grew = True
        while grew:
            grew = False
            for name, bases in self.bases.items():
                if name not in found and any(b in found for b in bases):
                    found.add(name)
                    grew = True
        return {n for n in found if not n.startswith("_") and n not in INTERNAL}

    # what a call makes ------------------------------------------------------------------------

    def constant(self, name: str, module: str) -> Optional[ast.expr]:
        """A module-level text constant: the module's own, else one of that name anywhere (if one)."""
        if name in self.constants.get(module, {}):
            return self.constants[module][name]
        found = [c[name] for c in self.constants.values() if name in c]
        return found[0] if len(found) == 1 else None

    def text_function(self, call: ast.Call, module: str) -> Optional[_Func]:
        """The package's function (not a method) a call names, when it returns text."""
        if not isinstance(call.func, ast.Name):
            return None
        cands = [f for f in self.funcs if f.node.name == call.func.id and f.cls is None]
        local = [f for f in cands if f.module == module]
        found = local or (cands if len(cands) == 1 else [])
        if found and any(
            isinstance(n, ast.Return) and n.value is not None and _is_text(n.value) for n in _own_nodes(found[0].node)
        ):
            return found[0]
        return None

    def error_class(self, call: ast.Call) -> Optional[str]:
        name = _callee(call)
        return name if name in self.classes else None

    def builder_of(self, call: ast.Call, module: str) -> list[_Func]:
        """The helper functions this call may be (by name: the same module's first, else any)."""
        name = _callee(call)
        if name is None or name in self.classes:
            return []
        method = isinstance(call.func, ast.Attribute)
        if method and re.search(r"(^|\.)_?(log|logger|logging|LOG|warnings)$", ast.unparse(call.func.value)):  # type: ignore[attr-defined]
            return []
        cands = [
            f
            for f in self.funcs
            if f.node.name == name and id(f.node) in self.builders and (f.cls is not None) == method
        ]
        local = [f for f in cands if f.module == module]
        return local or cands

    def _returns_error(self, f: _Func, helpers: set[str]) -> bool:
        for node in _own_nodes(f.node):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
                name = _callee(node.value)
                if self.error_class(node.value) or name in MESSAGE_FUNCTIONS or name in helpers:
                    return True
        return False


def _callee(call: ast.Call) -> Optional[str]:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _placeholder(expr: ast.expr) -> str:
    """``<name>`` for what the code fills in: the variable's, attribute's or key's name."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Subscript):
        if isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, str):
            return expr.slice.value
        return _placeholder(expr.value)
    if isinstance(expr, ast.Call):
        if expr.args and not isinstance(expr.args[0], ast.Constant):
            return _placeholder(expr.args[0])
        if isinstance(expr.func, ast.Attribute) and expr.args:
            return _placeholder(expr.func.value)
        return _callee(expr) or "value"
    if isinstance(expr, ast.BinOp):
        return _placeholder(expr.left)
    if isinstance(expr, ast.IfExp):
        return _placeholder(expr.body)
    if isinstance(expr, ast.Constant):
        return str(expr.value)
    text = ast.unparse(expr)
    return text if len(text) <= 30 else "value"


class _Renderer:
    """Templates of a message expression; ``env`` fills a helper's parameters with the caller's text."""

    def __init__(self, src: _Source, func: Optional[_Func], env: dict[str, str]) -> None:
        self.src, self.func, self.env = src, func, env

    def texts(self, expr: ast.expr, depth: int = 0) -> list[str]:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return [expr.value]
        if isinstance(expr, ast.JoinedStr):
            outs = [""]
            for part in expr.values:
                if isinstance(part, ast.Constant):
                    outs = [o + str(part.value) for o in outs]
                else:
                    assert isinstance(part, ast.FormattedValue)
                    outs = [o + self.value(part.value, depth) for o in outs]
            return outs
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return [a + b for a in self.texts(expr.left, depth) for b in self.texts(expr.right, depth)]
        if isinstance(expr, ast.IfExp) and _is_text(expr.body) and _is_text(expr.orelse):
            return self.texts(expr.body, depth) + self.texts(expr.orelse, depth)
        if isinstance(expr, ast.Name) and depth < 3:
            if expr.id in self.env:
                return [self.env[expr.id]]
            assigned = self._assigned(expr)
            if assigned:
                return [t for a in assigned for t in self.texts(a, depth + 1)]
        if isinstance(expr, ast.Call) and depth < 3 and self.func is not None:
            helper = self.src.text_function(expr, self.func.module)
            if helper is not None:  # a function of the package that words the message: its returns
                env = {}
                for p, arg in _bind(helper.params, expr).items():
                    if p in helper.params:
                        followed = _is_text(arg) or isinstance(arg, ast.Call)
                        env[p] = _alternatives(self.texts(arg, depth + 1)) if followed else self.value(arg, depth)
                env = {p: env.get(p, f"<{p}>") for p in helper.params}
                inner = _Renderer(self.src, helper, env)
                found = [
                    t
                    for n in _own_nodes(helper.node)
                    if isinstance(n, ast.Return) and n.value is not None and _returns_text(n.value, helper)
                    for t in inner.texts(n.value, depth + 1)
                ]
                # one that only adds to another (a log's tail after the message) is that one
                found = [t for t in found if not any(o != t and t.startswith(o) for o in found)]
                if found:
                    return list(dict.fromkeys(found))
        return [self.value(expr, depth)]

    def value(self, expr: ast.expr, depth: int) -> str:
        """A value inside an f-string: the caller's text for a helper's parameter, else <name>."""
        if isinstance(expr, ast.Name) and expr.id in self.env:
            return self.env[expr.id]
        if isinstance(expr, ast.Constant):
            return str(expr.value)
        if isinstance(expr, ast.Name) and depth < 3:
            known = self._assigned(expr)
            if known:
                return _alternatives([t for a in known for t in self.texts(a, depth + 1)])
        if _is_text(expr) and depth < 3:
            return _alternatives(self.texts(expr, depth + 1))
        return f"<{_placeholder(expr)}>"

    def _assigned(self, name: ast.Name) -> list[ast.expr]:
        """The texts a local variable is given before ``name`` reads it (each branch's), or a module's
        text constant."""
        if self.func is None:
            return []
        if name.id.isupper():
            found = self.src.constant(name.id, self.func.module)
            return [found] if found is not None else []
        given = [
            node.value
            for node in _own_nodes(self.func.node)
            if isinstance(node, ast.Assign)
            and node.lineno < name.lineno
            and any(isinstance(t, ast.Name) and t.id == name.id for t in node.targets)
        ]
        return [v for v in given if _is_text(v)]


def _returns_text(expr: ast.expr, func: _Func) -> bool:
    return _is_text(expr) or (isinstance(expr, ast.Name) and expr.id in func.params)


def _alternatives(texts: list[str]) -> str:
    """``A / B`` for a text that is one of several; an alternative that is empty is left out."""
    return " / ".join(dict.fromkeys(t for t in texts if t.strip())) or ""


def _is_text(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, str)
    if isinstance(expr, ast.JoinedStr):
        return True
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _is_text(expr.left) or _is_text(expr.right)
    if isinstance(expr, ast.IfExp):
        return _is_text(expr.body) or _is_text(expr.orelse)
    return False


def _message_arg(call: ast.Call, position: int = 0) -> Optional[ast.expr]:
    if len(call.args) > position and not isinstance(call.args[position], ast.Starred):
        return call.args[position]
    for kw in call.keywords:
        if kw.arg in ("message", "msg", "reason"):
            return kw.value
    return None


def _bind(params: list[str], call: ast.Call) -> dict[str, ast.expr]:
    bound = {p: a for p, a in zip(params, call.args) if not isinstance(a, ast.Starred)}
    bound.update({kw.arg: kw.value for kw in call.keywords if kw.arg})
    return bound


class _Catalogue:
    def __init__(self, src: _Source) -> None:
        self.src = src
        self.messages: list[Message] = []
        self.called: set[int] = set()  # helpers some call fills in with its text
        self.bare: set[int] = set()  # helpers called with values only somewhere: listed with placeholders

    def expand(self, call: ast.Call, func: Optional[_Func], env: dict[str, str], depth: int = 0) -> Iterator[_Found]:
        """(class, template, module, where) of what ``call`` builds, inside ``func`` with ``env``."""
        render = _Renderer(self.src, func, env)
        module = func.module if func else ""
        name = _callee(call)
        cls = self.src.error_class(call)
        if cls is not None and cls in self.src.inits and depth < 4:
            init = self.src.inits[cls]
            yield from self._through(init, call, render, depth, cls)
            return
        if cls is not None or name in MESSAGE_FUNCTIONS:
            shown = cls or MESSAGE_FUNCTIONS[name][1]  # type: ignore[index]
            arg = _message_arg(call, MESSAGE_FUNCTIONS[name][2] if cls is None else 0)  # type: ignore[index]
            if isinstance(arg, (ast.List, ast.ListComp)):
                return  # a list of Problem(...): each is listed itself
            for text in render.texts(arg) if arg is not None else [""]:
                yield shown, text, module, func.qualname if func else ""
            return
        if depth < 4:
            for helper in self.src.builder_of(call, module)[:1]:
                yield from self._through(helper, call, render, depth, None)

    def _through(
        self, helper: _Func, call: ast.Call, render: _Renderer, depth: int, cls: Optional[str]
    ) -> Iterator[_Found]:
        """Follow a call into ``helper`` (a function returning an error, or an error's ``__init__``)."""
        bound = _bind(helper.params, call)
        env = {}
        for p in helper.params:
            arg = bound.get(p)
            if arg is not None and (
                _is_text(arg) or isinstance(arg, ast.Call) or (isinstance(arg, ast.Name) and arg.id in render.env)
            ):
                env[p] = _alternatives(render.texts(arg))
            elif arg is not None and isinstance(arg, ast.Constant) and arg.value is not None:
                env[p] = str(arg.value)
            else:
                env[p] = f"<{p}>"
        if cls is not None:  # an __init__: the message is what it hands to super().__init__
            for node in ast.walk(helper.node):
                if isinstance(node, ast.Call) and _callee(node) == "__init__" and node.args:
                    for text in _Renderer(self.src, helper, env).texts(node.args[0]):
                        yield (
                            cls,
                            text,
                            render.func.module if render.func else helper.module,
                            (render.func.qualname if render.func else helper.qualname),
                        )
            return
        for node in _own_nodes(helper.node):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
                for cls2, text, _, _ in self.expand(node.value, helper, env, depth + 1):
                    yield (
                        cls2,
                        text,
                        render.func.module if render.func else helper.module,
                        (render.func.qualname if render.func else helper.qualname),
                    )

    def passes_text(self, call: ast.Call, helper: _Func) -> bool:
        bound = _bind(helper.params, call)
        return any(_is_text(a) for a in bound.values())

    def collect(self) -> list[Message]:
        src = self.src
        returned = set()
        for f in src.funcs:
            if id(f.node) in src.builders:
                returned |= {
                    id(n.value)
                    for n in _own_nodes(f.node)
                    if isinstance(n, ast.Return) and isinstance(n.value, ast.Call)
                }
            if f.cls in src.classes and f.node.name == "__init__":
                returned |= {id(n) for n in ast.walk(f.node) if isinstance(n, ast.Call)}
        seen: set[tuple] = set()

        def add(cls: str, text: str, module: str, where: str, line: int = 0) -> None:
            key = (module, where, cls, text)
            if key not in seen:
                seen.add(key)
                self.messages.append(Message(module, where, cls, " ".join(text.split()), line))

        for f in src.funcs:
            for node in _own_nodes(f.node):
                if not isinstance(node, ast.Call) or id(node) in returned:
                    continue
                cls = src.error_class(node)
                if cls is not None or _callee(node) in MESSAGE_FUNCTIONS:
                    for c, text, module, where in self.expand(node, f, {}):
                        add(c, text, module, where, node.lineno)
                    continue
                for helper in src.builder_of(node, f.module)[:1]:
                    if self.passes_text(node, helper):
                        self.called.add(id(helper.node))
                        for c, text, module, where in self.expand(node, f, {}):
                            add(c, text, module, where, node.lineno)
                    else:
                        self.bare.add(id(helper.node))  # listed once, from the helper, below
        for f in src.funcs:
            if id(f.node) in src.builders and (id(f.node) in self.bare or id(f.node) not in self.called):
                env = {p: f"<{p}>" for p in f.params}
                for node in _own_nodes(f.node):
                    if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
                        for cls, text, _, _ in self.expand(node.value, f, env):
                            add(cls, text, f.module, f.qualname, node.lineno)
        for (module, where), _why in REACHES_USER.items():
            for f in src.funcs:
                if f.module == module and f.qualname == where:
                    for node in _own_nodes(f.node):
                        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                            arg = _message_arg(node.exc)
                            if arg is not None and _is_text(arg):
                                for text in _Renderer(src, f, {}).texts(arg):
                                    add(_callee(node.exc) or "", text, module, where, node.lineno)
        return self.messages


def _own_nodes(func: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function, not those of the functions and classes defined inside it."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def messages(root: Path = PACKAGE) -> list[Message]:
    """Every user-facing message, in module and source order."""
    found = _Catalogue(_Source(root)).collect()
    return sorted(found, key=lambda m: (m.module, m.where, m.cls, m.text))


def area(module: str) -> str:
    for title, prefixes in AREAS:
        if any(module.startswith(p) for p in prefixes):
            return title
    return AREAS[-1][0]


def _cell(text: str) -> str:
    """Text as a table cell shows it: Markdown's own characters escaped, ``<name>`` not read as HTML."""
    for c in "\\*_[]|":
        text = text.replace(c, "\\" + c)
    return text.replace("`", "'").replace("<", "&lt;").replace(">", "&gt;")


def render(found: Optional[list[Message]] = None) -> str:
    found = messages() if found is None else found
    out = [
        "# Error messages",
        "",
        "Every error message the product gives, generated from its source",
        "(`python -m mysqlcdc_harness.error_catalogue`; the test suite fails when this page and the code",
        "disagree). [Troubleshooting](troubleshooting.md) explains the errors met most often; this page",
        "lists them all. Search it for the start of the message you got: `<name>` marks what the message",
        "fills in (a table, a value, a file), and `A / B` marks alternatives.",
        "",
        f"{len(found)} messages.",
        "",
    ]
    for title, _ in AREAS:
        rows = [m for m in found if area(m.module) == title]
        if not rows:
            continue
        out += [f"## {title}", "", "| message | fix | error | raised in |", "|---|---|---|---|"]
        for m in rows:
            out.append(
                f"| {_cell(m.problem)} | {_cell(m.fix)} | `{m.cls}` | `{m.module.removesuffix('.py')}` `{m.where}` |"
            )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mysqlcdc_harness.error_catalogue")
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/errors.md is not current")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(
                f"{TARGET} is not what the code says. Fix: python -m mysqlcdc_harness.error_catalogue", file=sys.stderr
            )
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
