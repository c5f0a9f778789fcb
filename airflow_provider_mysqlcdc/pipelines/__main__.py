"""Check pipeline files in a platform repository's CI, and write their DAG files.

    python -m airflow_provider_mysqlcdc.pipelines validate pipelines/ [--dags dags/] [--check-source]
    python -m airflow_provider_mysqlcdc.pipelines dag-files pipelines/ dags/

``validate`` prints one line per problem, ``<file>: <key>: <message>`` (the message ends with
its fix), and exits 1 when there is one, 0 otherwise; a summary goes to stderr. It checks each
file as the DAG factory does (including the route/transform refusal), the files against each
other (names, state locations), with ``--dags`` that each pipeline file has its DAG file, and
with ``--check-source`` the source server and table list of each file, as the pipeline's
*validate* task does (the connection must resolve here: ``AIRFLOW_CONN_<ID>`` or the metadata
database of the Airflow configured in this environment).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import sys
from pathlib import Path
from typing import Iterator, Sequence, TextIO

from .dagfiles import check_dag_files, write_dag_files
from .loader import LoadedPipeline, load_pipelines, refuse_unapplied_rules, unmatched_routes, with_lines
from .spec import Problem

SOURCE_KEY = "source"


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 onto 2 for a while (loggers keep their own handle on stdout)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def check_source(pipeline: LoadedPipeline) -> tuple[list[Problem], str]:
    """The pipeline's validate task, run here: (problems, a summary when it passed)."""
    from ..operators.validate import MySqlCdcValidateOperator

    settings = pipeline.spec.settings()
    conn_id = settings["mysql_cdc_conn_id"]
    operator = MySqlCdcValidateOperator(
        task_id="validate",
        mysql_cdc_conn_id=conn_id,
        tables=settings["tables"],
        exclude=settings["exclude"],
        chunk_key_columns=settings["chunk_key_columns"],
    )
    # Its execute without Airflow's task-runner guard (which warns outside a task) and without
    # the fail-fast wrapper (which logs the message as ERROR lines): the problems are printed below.
    execute = inspect.unwrap(MySqlCdcValidateOperator.execute)
    try:
        with _stdout_to_stderr():  # its log lines: this command's stdout is one line per problem
            result = execute(operator, {})
    except Exception as e:  # noqa: BLE001 - every failure is a problem of this file's source
        if type(e).__name__ == "AirflowNotFoundException":
            lines = [
                f"found no connection {conn_id!r} here ({e}). Fix: create it (Admin > Connections, type MySQL "
                f"CDC) in the Airflow this command runs with, or give it as AIRFLOW_CONN_{conn_id.upper()}."
            ]
        else:
            lines = [line.strip().removeprefix("- ") for line in str(e).splitlines() if line.strip()]
            lines = lines or [type(e).__name__]
        return [Problem(pipeline.file, SOURCE_KEY, line) for line in lines], ""
    rules = check_rules_on_source(pipeline)
    if rules:
        return rules, ""
    tables = result.get("tables") or []
    warned = "".join(f"; warning: {w}" for w in result.get("warnings") or ())
    return [], f"{result.get('version')}, {len(tables)} table{'s' if len(tables) != 1 else ''}{warned}"


def check_rules_on_source(pipeline: LoadedPipeline) -> list[Problem]:
    """The file's route and transform compiled against the source's tables, as the plan task will:
    an identity the projection drops, a column that does not exist, shards that disagree."""
    spec = pipeline.spec
    if not (spec.route or spec.transform):
        return []
    import contextlib

    from ..cdc.coerce import as_list, as_mapping
    from ..cdc.errors import ConfigError
    from ..cdc.source.discovery import discover_tables
    from ..cdc.source.table_patterns import TablePattern, qualify, qualify_all
    from ..cdc.transform.table_views import Rules, resolve_views
    from ..hooks.mysql_cdc import MySqlCdcHook

    settings = spec.settings()
    hook = MySqlCdcHook(settings["mysql_cdc_conn_id"])
    try:
        source = hook.get_source_config()
        include = qualify_all(as_list(settings["tables"], "tables"), hook.default_database())
        exclude = qualify_all(as_list(settings["exclude"], "exclude"), hook.default_database())
        with contextlib.closing(source.connect()) as conn:
            schemas = discover_tables(
                conn,
                include,
                exclude,
                as_mapping(settings["chunk_key_columns"], "chunk_key_columns"),
                str(settings.get("zero_dates") or "null"),
            )
        for i, rule in enumerate(spec.route):
            pattern = TablePattern(qualify(rule.source_table, hook.default_database()))
            if not any(pattern.matches(t.table_id) for t in schemas):
                found = ", ".join(sorted(str(t.table_id) for t in schemas)) or "none"
                return [
                    Problem(
                        pipeline.file,
                        f"route[{i}].source_table",
                        f"found {rule.source_table!r}, which matches none of the source's captured tables ({found}), "
                        "so this route would never apply. Fix: correct the pattern (a regular expression over "
                        "db.table, the whole name), or capture its tables in source.tables.",
                    )
                ]
        resolve_views(Rules.from_values(spec.route, spec.transform), schemas, sink_type=settings["sink_type"])
    except ConfigError as e:
        key = "route" if str(e).startswith("route") else "transform"
        return [Problem(pipeline.file, key, str(e))]
    return []


def validate(paths: Sequence[str], dags: str | None, source: bool, out: TextIO, err: TextIO) -> int:
    result = load_pipelines(paths)
    problems = list(result.problems)
    for pipeline in result.pipelines:
        problems += with_lines(
            refuse_unapplied_rules(pipeline.file, pipeline.spec) + unmatched_routes(pipeline.file, pipeline.spec),
            pipeline.path,
            pipeline.file,
        )
    if dags is not None:
        from .loader import pipeline_files

        files, _ = pipeline_files(paths)
        problems += check_dag_files(files, dags)
    if source:
        # Like the connection form's Test button (the API server): connections from the metadata
        # database too, not only from AIRFLOW_CONN_* and secrets backends (a task's view).
        os.environ.setdefault("_AIRFLOW_PROCESS_CONTEXT", "server")
        for pipeline in result.pipelines:
            found, summary = check_source(pipeline)
            problems += with_lines(found, pipeline.path, pipeline.file)
            if summary:
                print(f"{pipeline.file}: source: ok ({summary})", file=err)
    order = {f: i for i, f in enumerate(result.files)}
    problems.sort(key=lambda p: order.get(p.file, len(order)))  # stable: each file's lines together
    for problem in problems:
        print(problem, file=out)
    bad = {p.file for p in problems}
    n = len(result.files)
    print(
        f"{n} pipeline file{'s' if n != 1 else ''} checked: {n - len(bad & set(result.files))} ok, "
        f"{len(problems)} problem{'s' if len(problems) != 1 else ''}",
        file=err,
    )
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = argparse.ArgumentParser(
        prog="python -m airflow_provider_mysqlcdc.pipelines",
        description="Pipeline files (YAML) of mysqlcdc: check them, write their DAG files.",
        epilog="Exit codes: 0 every file passed (validate) or every DAG file was written (dag-files); 1 a problem "
        "was found, each printed on stdout as <file>:<line>: <key>: <message>; 2 the command line was wrong.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    v = commands.add_parser("validate", help="check pipeline files: one line per problem, exit 1 if any")
    v.add_argument("paths", nargs="+", help="pipeline files, or folders of them (*.yaml, *.yml)")
    v.add_argument("--dags", metavar="DIR", help="also check that each pipeline file has its DAG file in DIR")
    v.add_argument(
        "--check-source",
        action="store_true",
        help="also connect to each source and run the pipeline's validate task (server, tables)",
    )
    d = commands.add_parser("dag-files", help="write the DAG file of each pipeline file (one per file)")
    d.add_argument("pipelines", help="the folder of pipeline files")
    d.add_argument("dags", help="the DAGs folder")
    args = parser.parse_args(argv)
    if args.command == "validate":
        return validate(args.paths, args.dags, args.check_source, out, err)
    pipelines = Path(args.pipelines)
    if not pipelines.is_dir():
        print(f"{pipelines}: (file): found no such folder. Fix: give the folder of the pipeline files.", file=out)
        return 1
    for line in write_dag_files(pipelines, Path(args.dags)):
        print(line, file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
