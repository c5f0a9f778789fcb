"""Read pipeline files: one file, or every ``*.yaml`` / ``*.yml`` of a folder, into checked specs,
or into problems that name the file, the key, the value found and the fix.

Across files: two files may not give the same pipeline name (nor DAG ids that collide) nor the
same state location; such a problem names both files, and both files fail (which one was meant
is for a person to say). No Airflow import here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from .spec import WHOLE_FILE, PipelineFileError, PipelineSpec, Problem, parse_spec, watchdog_dag_id
from .spec_checks import show

SUFFIXES = (".yaml", ".yml")


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML as a pipeline file means it: date-times stay text (the settings' schemas want text),
    and a key written twice is an error instead of the last one silently winning."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line)
            except TypeError:  # an unhashable key: the constructor names it
                continue
            if first != key_node.start_mark.line:
                raise yaml.constructor.ConstructorError(
                    None, None, f"found the key {key!r} twice (first at line {first + 1})", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_yaml(path: Path, file: str) -> tuple[Any, list[Problem]]:
    """The file's data, or a problem naming the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, [Problem(file, WHOLE_FILE, "found no such file. Fix: check the path.")]
    except (OSError, UnicodeDecodeError) as e:
        return None, [
            Problem(file, WHOLE_FILE, f"cannot be read ({e}). Fix: save it as UTF-8 text readable by this user.")
        ]
    try:
        return yaml.load(text, Loader=_Loader), []  # noqa: S506 - a safe loader
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = ", ".join(p for p in (e.context, e.problem) if p)
        fix = (
            "keep one of them"
            if "twice" in what
            else "correct the YAML there (indent with spaces, the same amount for keys of one section; quote text "
            "that holds ': ' or starts with a special character such as * & ! % @ `)"
        )
        return None, [Problem(file, WHOLE_FILE, f"not valid YAML: {what}{where}. Fix: {fix}.")]
    except yaml.YAMLError as e:
        return None, [Problem(file, WHOLE_FILE, f"not valid YAML: {e}. Fix: correct the YAML.")]


_KEY_PART = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def _line_of(root: Any, key: str) -> int | None:
    """The line of ``key`` (``pipeline.chunk_size``, ``route[0].sink_table``) in a composed YAML
    tree: of the deepest part that is written (a missing key points at its section)."""
    node, line = root, None
    for index, name in _KEY_PART.findall(key):
        if name and isinstance(node, yaml.MappingNode):
            found = next((kv for kv in node.value if isinstance(kv[0], yaml.ScalarNode) and kv[0].value == name), None)
            if found is None:
                break
            line, node = found[0].start_mark.line + 1, found[1]
        elif index and isinstance(node, yaml.SequenceNode) and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line + 1
        else:
            break
    return line


def with_lines(problems: list[Problem], path: str | os.PathLike[str], file: str) -> list[Problem]:
    """``file``'s problems with the line of their key in the file at ``path`` (others unchanged)."""
    if not any(p.file == file and p.key != WHOLE_FILE and p.line is None for p in problems):
        return problems
    try:
        root = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - a safe loader
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return problems
    return [
        replace(p, line=_line_of(root, p.key)) if p.file == file and p.key != WHOLE_FILE and p.line is None else p
        for p in problems
    ]


def read_file(path: str | os.PathLike[str], file: str | None = None) -> tuple[PipelineSpec | None, list[Problem]]:
    """One file's spec, or its problems. ``file`` is how problems name it (default: the path)."""
    path = Path(path)
    file = file if file is not None else str(path)
    data, problems = read_yaml(path, file)
    if problems:
        return None, problems
    if data is None:
        return None, [
            Problem(
                file,
                WHOLE_FILE,
                "found an empty file, need the sections source and pipeline (and "
                "sink). Fix: start from an example (examples/platform_repo/"
                "pipelines/).",
            )
        ]
    spec, problems = parse_spec(data, file)
    return spec, with_lines(problems, path, file)


@dataclass(frozen=True)
class LoadedPipeline:
    """A pipeline file that passed every check: ``file`` names it in messages."""

    file: str
    path: Path
    spec: PipelineSpec


@dataclass
class LoadResult:
    pipelines: list[LoadedPipeline] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def pipeline_files(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[tuple[Path, str]], list[Problem]]:
    """The pipeline files of ``paths`` (files as given, folders: their ``*.yaml``/``*.yml``, not
    recursing), each with the name messages give it."""
    found: list[tuple[Path, str]] = []
    problems: list[Problem] = []
    for arg in paths:
        path = Path(arg)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
            if not files:
                problems.append(
                    Problem(
                        str(arg),
                        WHOLE_FILE,
                        "found no pipeline file (*.yaml, *.yml) in this folder. Fix: check the path.",
                    )
                )
            found += [(p, os.path.join(str(arg), p.name)) for p in files]
        elif path.exists():
            found.append((path, str(arg)))
        else:
            problems.append(Problem(str(arg), WHOLE_FILE, "found no such file or folder. Fix: check the path."))
    unique: dict[Path, tuple[Path, str]] = {}
    for path, file in found:
        unique.setdefault(path.resolve(), (path, file))
    return list(unique.values()), problems


def load_pipelines(paths: Iterable[str | os.PathLike[str]]) -> LoadResult:
    """Every file of ``paths`` checked on its own, then against each other."""
    result = LoadResult()
    files, result.problems = pipeline_files(paths)
    for path, file in files:
        result.files.append(file)
        spec, problems = read_file(path, file)
        result.problems += problems
        if spec is not None:
            result.pipelines.append(LoadedPipeline(file, path, spec))
    clashes = clash_problems([(p.file, _identity(p.spec)) for p in result.pipelines])
    for pipeline in result.pipelines:
        clashes = with_lines(clashes, pipeline.path, pipeline.file)
    if clashes:
        result.problems += clashes
        failed = {c.file for c in clashes}
        result.pipelines = [p for p in result.pipelines if p.file not in failed]
    return result


def load_file(path: str | os.PathLike[str], file: str | None = None, *, siblings: bool = False) -> PipelineSpec:
    """One file's spec; ``PipelineFileError`` naming every problem otherwise. ``siblings``: also
    check it against the other pipeline files of its folder (names, state locations)."""
    path = Path(path)
    file = file if file is not None else str(path)
    spec, problems = read_file(path, file)
    if spec is not None and siblings:
        others = [
            (os.path.join(os.path.dirname(file), p.name), _peek_identity(p))
            for p in sorted(path.parent.iterdir())
            if p.suffix.lower() in SUFFIXES and p.is_file() and p.resolve() != path.resolve()
        ]
        problems = with_lines(
            [c for c in clash_problems([(file, _identity(spec)), *others]) if c.file == file], path, file
        )
    if problems:
        raise PipelineFileError(problems)
    assert spec is not None
    return spec


# --------------------------------------------------------------------------------------------
# Across files: names and state locations


@dataclass(frozen=True)
class _Identity:
    name: str | None
    state_location: str | None

    def dag_ids(self) -> set[str]:
        return {self.name, watchdog_dag_id(self.name)} if self.name else set()


def _identity(spec: PipelineSpec) -> _Identity:
    return _Identity(spec.pipeline.name, spec.pipeline.state_location)


def _peek_identity(path: Path) -> _Identity:
    """Another file's name and state location, read without checking the rest (its own checks
    are its own DAG file's)."""
    data, problems = read_yaml(path, str(path))
    pipeline = data.get("pipeline") if isinstance(data, Mapping) else None
    if problems or not isinstance(pipeline, Mapping):
        return _Identity(None, None)
    name, state = pipeline.get("name"), pipeline.get("state_location")
    return _Identity(name if isinstance(name, str) else None, state if isinstance(state, str) else None)


def _same_location(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def clash_problems(identities: list[tuple[str, _Identity]]) -> list[Problem]:
    """Two files with one name (or colliding DAG ids) or one state location: a problem for each,
    naming the other."""
    problems: list[Problem] = []
    for i, (file, me) in enumerate(identities):
        for j, (other, them) in enumerate(identities):
            if i == j:
                continue
            if me.name and me.name == them.name:
                problems.append(
                    Problem(
                        file,
                        "pipeline.name",
                        f"found {show(me.name)}, the name of {other} too: "
                        "one name is one pair of DAGs. Fix: give each pipeline file its own "
                        "pipeline.name.",
                    )
                )
            elif me.dag_ids() & them.dag_ids():
                ids = ", ".join(sorted(me.dag_ids() & them.dag_ids()))
                problems.append(
                    Problem(
                        file,
                        "pipeline.name",
                        f"found {show(me.name)}: its DAG ids collide with "
                        f"those of {other} ({ids}; a watchdog is <name>_stream_watchdog). Fix: "
                        "rename one of the pipelines.",
                    )
                )
            if me.state_location and them.state_location and _same_location(me.state_location, them.state_location):
                problems.append(
                    Problem(
                        file,
                        "pipeline.state_location",
                        f"found {show(me.state_location)}, the "
                        f"state location of {other} too: the two pipelines would overwrite each "
                        "other's plan and stream checkpoint. Fix: give each pipeline its own "
                        "state_location.",
                    )
                )
    return problems


# --------------------------------------------------------------------------------------------
# Route and transform: what the engine applies them with


def refuse_unapplied_rules(file: str, spec: PipelineSpec) -> list[Problem]:
    """``route`` and ``transform`` are applied by the merge-based sinks with their direct stream
    write (``cdc/transform/table_views.py``), a transform's ``partition_keys`` by the sinks that
    partition (Iceberg); a file that pairs them with another sink would load its tables
    without them, so the factory builds no DAG for it and ``validate`` reports it. (The tables'
    columns are checked by the plan step, which sees them.)"""
    from ..cdc.sinks import PARTITION_SINKS, VIEW_SINKS

    if not (spec.route or spec.transform):
        return []
    settings = spec.settings()
    sink_type = settings.get("sink_type")
    options = settings.get("sink_options") or {}
    sections = " and ".join(k for k, n in (("route", spec.route), ("transform", spec.transform)) if n)
    are = "are" if " and " in sections else "is"
    if sink_type not in VIEW_SINKS:
        return [
            Problem(
                file,
                "sink.type",
                f"found {show(sink_type)}: {sections} {are} applied by the "
                f"{', '.join(VIEW_SINKS)} sinks only. Fix: use one of those sinks, or "
                f"remove the {sections} section{'s' if are == 'are' else ''}.",
            )
        ]
    partitioned = [i for i, t in enumerate(spec.transform) if t.partition_keys]
    if partitioned and sink_type not in PARTITION_SINKS:
        i = partitioned[0]
        return [
            Problem(
                file,
                f"transform[{i}].partition_keys",
                f"found {show(list(spec.transform[i].partition_keys or ()))} with sink type {sink_type}: "
                f"partition_keys are applied by the {', '.join(PARTITION_SINKS)} sink only (a {sink_type} "
                f"sink would write its tables unpartitioned). Fix: remove partition_keys, or set sink.type "
                f"to {' or '.join(PARTITION_SINKS)}.",
            )
        ]
    if isinstance(options, dict) and (options.get("direct_write") is False or options.get("format") == "parquet"):
        key = "direct_write" if options.get("direct_write") is False else "format"
        return [
            Problem(
                file,
                f"sink.options.{key}",
                f"found {show(options[key])}: {sections} {are} applied with the "
                "sink's direct stream write only (JSON lines for a changelog). "
                f"Fix: remove {key} (the default has it).",
            )
        ]
    return []


def unmatched_routes(file: str, spec: PipelineSpec) -> list[Problem]:
    """Routes whose ``source_table`` matches none of the tables the file lists, where that can be
    told without the server: every entry of ``source.tables`` names one table with its database (a
    regex entry may match tables the server has or creates later, so then nothing is said here;
    ``validate --check-source`` checks the routes against the server's tables)."""
    from ..cdc.errors import ConfigError
    from ..cdc.model import TableId
    from ..cdc.source.table_patterns import TablePattern, is_regex

    entries = [str(t) for t in (spec.settings().get("tables") or [])]
    if not spec.route or not entries or any(is_regex(e) or "." not in e.strip(".") for e in entries):
        return []
    listed = [TableId.parse(e) for e in entries]
    out = []
    for i, rule in enumerate(spec.route):
        try:
            pattern = TablePattern(rule.source_table)
        except ConfigError:
            continue  # its own check names it
        if not any(pattern.matches(t) for t in listed):
            out.append(
                Problem(
                    file,
                    f"route[{i}].source_table",
                    f"found {show(rule.source_table)}, which matches none of the tables source.tables lists "
                    f"({', '.join(map(str, listed))}), so this route would never apply. Fix: correct the pattern "
                    "(a regular expression over db.table, the whole name), or list its tables in source.tables.",
                )
            )
    return out
