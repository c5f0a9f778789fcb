"""docs/errors.md is the catalogue of every error message, generated from the source
(``harness/mysqlcdc_harness/error_catalogue.py``): it must be current, it must find the raise sites
there are, and every message must tell the user what to do (``Fix:``), short of the few listed here."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from mysqlcdc_harness import error_catalogue as ec

# The catalogue listed 439 messages when it was built. A change that removes messages lowers this,
# with the reason in its commit; a generator that silently stops finding them fails here.
MIN_MESSAGES = 420

# Messages without a ``Fix:`` of their own, and why: (module, function, start of the message).
NO_FIX = {
    ("cdc/transform/table_views.py", "_partitioning", "transform of <source_id>: partition_keys<e>"): "a "
    "partition_keys entry's own message (cdc/transform/partitioning.py, listed there) behind the rule's name; "
    "it has the Fix",
    ("pipelines/spec.py", "_partition_keys", "<message>"): "the same entry's message, at its key path in the file",
    ("cdc/transform/partitioning.py", "parse_partition_keys", "[<i>]: <e>"): "the same entry's message, behind "
    "its index in the list",
    ("cdc/source/discovery.py", "table_list_error", "<problems>"): "a single table-list problem, raised as it is: "
    "its own message (listed from where it is made) has the Fix",
    ("cdc/source/validation.py", "validate_server", "<version> at"): "a heading over the server checks that failed; "
    "each listed line is a ServerCheckError with its own Fix",
    ("sensors/stream.py", "MySqlCdcStreamSensor._check_server", "<version> at"): "the same heading, for the stream's "
    "source",
    ("sensors/stream.py", "MySqlCdcStreamSensor._check_server", "<error> A stream"): "starts with a server check's "
    "message, which carries the Fix; what follows says what to do after it",
    ("fail_fast.py", "fail_fast", "<error>"): "ends the task with a ConfigError's own text",
    ("operators/validate.py", "MySqlCdcValidateOperator._validate", "<problems>"): "the validate task's problems, "
    "one a line, each with its Fix",
    ("operators/snapshot.py", "MySqlCdcSnapshotOperator._wait_for_stream", "batch <batch_id>: the stream did not"): (
        "carries the stream's TableChangedError, which has the Fix"
    ),
    ("sensors/stream.py", "MySqlCdcStreamSensor._refuse_relaunch_when_not_exact", "the stream stopped and"): (
        "carries the stream's own error, which has the Fix"
    ),
    ("sensors/stream.py", "MySqlCdcStreamSensor._relaunch", "the relaunched stream stopped"): "carries the stream's "
    "own error, which has the Fix",
    ("spark/runtime/stream_launcher.py", "wait_for_first_commit.fresh_commit", "the binlog stream's query failed"): (
        "carries the stream's own error, which has the Fix"
    ),
    ("spark/sinks/routed.py", "RoutedSink._view_for", "<table_id> changed (DDL)"): "carries the TransformError of "
    "the rule that no longer compiles, which has the Fix",
    ("pipelines/__main__.py", "check_rules_on_source", "<e>"): "a route/transform check's own message (with its Fix)",
    ("pipelines/__main__.py", "check_source", "<line>"): "a line of the source check's report, each with its Fix",
    ("pipelines/factory.py", "pipeline_dags", "<value>"): "the pipeline files' problems, each listed with its Fix",
    ("pipelines/loader.py", "load_file", "<value>"): "the pipeline files' problems, each listed with its Fix",
    ("pipelines/spec.py", "problems_from", "<message>"): "the message of a file check (invalid(...)), each listed",
    ("pipelines/spec.py", "_sink_table", "found <text>: <e>"): "the table-name check's ConfigError, which has the Fix",
    ("pipelines/spec.py", "_startup_settings", "found <value>: <text>"): "the run setting's own check, which has "
    "the Fix",
    ("pipelines/spec_checks.py", "_stream_options", "<text>"): "StreamOptions' own check, which has the Fix",
    ("pipelines/spec_checks.py", "table_entry", "found <entry>: <e>"): "the table-pattern check's ConfigError, "
    "which has the Fix",
}
# A skip is not a failure: the message says why the task did nothing, and the task ends skipped.
NO_FIX_CLASSES = {"AirflowSkipException": "a skip, not a failure"}


@pytest.fixture(scope="module")
def messages() -> list[ec.Message]:
    return ec.messages()


def _allowed(m: ec.Message) -> bool:
    return m.cls in NO_FIX_CLASSES or any(
        m.module == module and m.where == where and m.text.startswith(start) for module, where, start in NO_FIX
    )


def test_the_error_page_is_what_the_code_says(messages):
    current = ec.TARGET.read_text(encoding="utf-8")
    assert current == ec.render(messages), "docs/errors.md is stale. Fix: python -m mysqlcdc_harness.error_catalogue"


def test_the_catalogue_finds_the_raise_sites(messages):
    assert len(messages) >= MIN_MESSAGES
    classes = {m.cls for m in messages}
    assert {"ConfigError", "PipelineFileError", "TransformError", "ServerCheckError", "AirflowSkipException"} <= classes
    assert {ec.area(m.module) for m in messages} >= {"Sinks", "Pipeline files", "Binlog and the stream", "Snapshot"}


def test_every_literal_raise_of_a_user_facing_class_is_in_the_catalogue(messages):
    """Found a second way, by text: ``raise ConfigError("literal...`` -- its literal start is listed."""
    names = ec._Source().classes
    raise_site = re.compile(r'raise (\w+)\(\s*f?"([^"{\\]{24,})')
    texts = [" ".join(m.text.split()) for m in messages]
    missing = []
    for path in sorted(ec.PACKAGE.rglob("*.py")):
        for cls, start in raise_site.findall(path.read_text(encoding="utf-8")):
            if cls in names and not any(" ".join(start.split()) in t for t in texts):
                missing.append(f"{path.relative_to(ec.PACKAGE)}: {cls}({start!r}")
    assert not missing, "\n".join(missing)


def test_every_message_says_what_to_do(messages):
    lacking = [f"{m.module}:{m.line} {m.where} [{m.cls}] {m.text[:120]}" for m in messages if not m.fix]
    lacking = [line for line, m in zip(lacking, [m for m in messages if not m.fix]) if not _allowed(m)]
    assert not lacking, "a message without 'Fix:' (add one, or list it in NO_FIX with the reason):\n" + "\n".join(
        lacking
    )


def test_the_allowlist_names_only_messages_there_are(messages):
    stale = [
        key
        for key in NO_FIX
        if not any(m.module == key[0] and m.where == key[1] and m.text.startswith(key[2]) for m in messages)
    ]
    assert not stale, f"NO_FIX lists messages the catalogue does not have (remove them): {stale}"
    assert len(NO_FIX) <= 25, "the allowlist is for messages that carry another error's text, not for a missing Fix"


def test_the_named_functions_and_classes_exist():
    src = ec._Source()
    funcs = {(f.module, f.qualname) for f in src.funcs}
    assert set(ec.REACHES_USER) <= funcs, "REACHES_USER names a function that is gone"
    assert set(ec.ROOTS) | set(ec.INTERNAL) <= set(src.bases), "ROOTS/INTERNAL name a class that is gone"


def test_the_generator_follows_helpers_and_fills_placeholders(tmp_path: Path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "errors.py").write_text(
        textwrap.dedent(
            """
            REPORT = "Fix: report it."

            class CdcError(Exception):
                pass

            class ConfigError(CdcError):
                pass

            class ServerCheckError(ConfigError):
                def __init__(self, setting, found, fix):
                    super().__init__(f"{setting}: found {found!r}. Fix: {fix}")

            def _explain(table, fix):
                return ConfigError(f"table {table} is odd. Fix: {fix}")

            def _words(n):
                return f"{n} rows are missing"

            def check(schema, value):
                if value:
                    raise ConfigError(f"{schema.table_id} has no key. Fix: add one to {schema.table_id}")
                if schema:
                    raise _explain(schema.table_id, "drop it")
                if value is None:
                    raise CdcError(f"{value} is bad. {REPORT}")
                if value == 0:
                    raise CdcError(_words(value))
                problems = [ServerCheckError("binlog_format", value, "SET GLOBAL binlog_format = ROW")]
                raise ValueError("internal: " + str(problems))
            """
        ),
        encoding="utf-8",
    )
    got = {(m.cls, m.text) for m in ec.messages(pkg)}
    assert got == {
        ("ConfigError", "<table_id> has no key. Fix: add one to <table_id>"),
        ("ConfigError", "table <table> is odd. Fix: drop it"),
        ("CdcError", "<value> is bad. Fix: report it."),
        ("CdcError", "<value> rows are missing"),  # the caller's name for what it passes
        ("ServerCheckError", "binlog_format: found <found>. Fix: SET GLOBAL binlog_format = ROW"),
    }
    tree = ec.parse_source((pkg / "errors.py").read_text(encoding="utf-8"))
    assert sum(isinstance(n, ast.Raise) for n in ast.walk(tree)) == 5  # the ValueError is left out


def test_a_cell_shows_placeholders_and_markdown_characters_as_text():
    assert ec._cell("<a_b> | `x` *y*") == "&lt;a\\_b&gt; \\| 'x' \\*y\\*"
