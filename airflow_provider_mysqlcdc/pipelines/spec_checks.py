"""How a pipeline file's values are checked, one setting at a time: each setting's JSON Schema (from
the settings registry, ``cdc/settings.py``) and the engine's own checks, turned into the pydantic
field types of the file's sections (``checked``), with messages that say what was found and the
fix (``show``, ``check_json``). ``spec.py`` builds the sections and the file from these.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Annotated, Any, Callable, Iterable, Mapping, Union

import jsonschema
from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

from ..cdc.errors import ConfigError
from ..cdc.settings import TABLE_ENTRY_PATTERN, Setting
from ..cdc.source.table_patterns import qualify
from ..cdc.store.object_store import refuse_secret_options

# A file must say these: the template's defaults (shop.orders, /tmp/mysqlcdc/pipeline) are a
# demo's, and two pipelines sharing a state location would overwrite each other's plan.
REQUIRED = ("tables", "state_location")


def show(value: Any) -> str:
    """A value as the file would spell it, short."""
    if value is None:
        return "an empty value (null)"
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def invalid(message: str, sub: str = "") -> PydanticCustomError:
    """A problem of one value; ``sub`` continues the key path (``[2]``, ``.root``)."""
    return PydanticCustomError("mysqlcdc", "{m}", {"m": message, "sub": sub})


_TYPE_WORDS = {
    "string": "a text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "a mapping (key: value)",
    "null": "nothing",
}
DAG_ID_PATTERN = r"^[A-Za-z0-9_.-]+$"
_PATTERN_WORDS = {
    TABLE_ENTRY_PATTERN: (
        "an entry without blanks at its start or end",
        "remove the blanks around the entry, and any empty entry",
    ),
    DAG_ID_PATTERN: ("letters, digits, '_', '.' and '-' only (it is the DAG id)", "use only those, e.g. shop_orders"),
}
_NO_DEFAULT = object()


def _path_text(path: Iterable[Any]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _schema_message(error: jsonschema.ValidationError, default: Any) -> str:
    """The message of the first schema violation: found, need, fix (with the default when there is one)."""
    bad, kw, arg = error.instance, error.validator, error.validator_value
    if kw == "type":
        kinds: list[str] = arg if isinstance(arg, list) else [arg]
        need = " or ".join(_TYPE_WORDS.get(k, k) for k in kinds if k != "null")
        fix = f"give {need}"
    elif kw == "enum":
        need = f"one of {', '.join(map(str, arg))}"
        fix = "use one of those"
    elif kw in ("exclusiveMinimum", "minimum"):
        least = arg + 1 if kw == "exclusiveMinimum" else arg
        need, fix = f"at least {least:,}", f"give a whole number of at least {least:,}"
    elif kw == "maximum":
        need, fix = f"at most {arg:,}", f"give a whole number of at most {arg:,}"
    elif kw == "minItems":
        need = f"at least {arg} entr{'y' if arg == 1 else 'ies'}"
        fix = "add an entry, e.g. [shop.orders]" if arg == 1 else f"list at least {arg}"
    elif kw == "minLength":
        need, fix = "a text that is not empty", "write the value"
    elif kw == "uniqueItems":
        need, fix = "each entry once", "remove the repeated entry"
    elif kw == "pattern":
        need, fix = _PATTERN_WORDS.get(arg, (f"a text matching {arg}", "correct the text"))
    elif kw == "format" and arg == "date-time":
        need, fix = "a date-time", 'write it in quotes, e.g. "2026-11-25T08:00:00Z" (UTC when it has no zone)'
    else:
        need, fix = error.message, "correct the value"
    if default is not _NO_DEFAULT and not error.path:
        fix += f", or remove the key for the default ({show(default)})"
    found = show(bad)
    if bad is None and kw in ("type", "enum"):
        found = "an empty value (YAML reads an empty value or a bare null as no value"
        found += ': write "null" in quotes to mean the text null)' if "null" in _enum_of(error) else ")"
    return f"found {found}, need {need}. Fix: {fix}."


def _enum_of(error: jsonschema.ValidationError) -> list[Any]:
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    return list(schema.get("enum") or [])


@functools.lru_cache(maxsize=None)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)  # as Airflow's Param does
    return cls(schema, format_checker=jsonschema.FormatChecker())


def check_json(schema: Mapping[str, Any], value: Any, default: Any = _NO_DEFAULT) -> None:
    """Raise the first violation of ``schema`` (the trigger form's check of a setting)."""
    validator = _validator(json.dumps(schema, sort_keys=True))
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        raise invalid(_schema_message(error, default), _path_text(error.path))


def _engine_message(e: ConfigError, name: str) -> tuple[str, str]:
    """An engine message ``<name>[.<sub>]: <text>`` as (sub, text), the prefix folded into the key."""
    m = re.match(rf"{re.escape(name)}((?:\.\w+)*): (.*)", str(e), re.S)
    return (m.group(1), m.group(2)) if m else ("", str(e))


def _table_entries(values: list[str] | None) -> None:
    for i, entry in enumerate(values or ()):
        table_entry(entry, f"[{i}]")


def table_entry(entry: str, sub: str = "") -> None:
    """The engine's reading of a table entry (quotes, regex); the database is the connection's,
    unknown here, so a bare name is fine."""
    try:
        qualify(entry, "db")
    except ConfigError as e:
        raise invalid(f"found {show(entry)}: {e}", sub) from None


def _stream_options(value: Mapping[str, Any] | None) -> None:
    from ..cdc.pipeline import StreamOptions

    try:
        StreamOptions.from_mapping(value)
    except (ConfigError, TypeError) as e:
        sub, text = _engine_message(e, "stream_options") if isinstance(e, ConfigError) else ("", str(e))
        raise invalid(text if "found" in text else f"found {show(value)}: {text}", sub) from None


def _no_secrets(options: Mapping[str, Any]) -> None:
    """A pipeline file is reviewed and committed: no password, key or token in it (the engine's
    list of credential words, ``cdc/store/object_store.py``)."""
    for where, mapping in (
        ("", options),
        (".storage_options", options.get("storage_options")),
        (".dsn", options.get("dsn")),
    ):
        if not isinstance(mapping, Mapping):
            continue
        try:
            refuse_secret_options(mapping, "options")
        except ConfigError as e:
            m = re.search(r"holds credentials \(([^)]*)\)", str(e))
            keys = m.group(1) if m else "credentials"
            raise invalid(
                f"found {keys}: a pipeline file never holds credentials (it is committed and "
                "reviewed, and its values reach pipeline.json). Fix: remove them; a PostgreSQL sink's "
                "password is its connection's (sink.conn_id), object storage keys an aws "
                "connection's (pipeline.aws_conn_id)",
                where,
            ) from None
    dsn = options.get("dsn")
    if isinstance(dsn, str) and re.search(r"(^|\s)password\s*=", dsn):
        raise invalid(
            "found a password in the dsn: a pipeline file never holds credentials. Fix: remove it "
            "and set sink.conn_id to a Postgres connection that has the password",
            ".dsn",
        )


_ENGINE_CHECKS: dict[str, Callable[[Any], None]] = {
    "tables": _table_entries,
    "exclude": _table_entries,
    "stream_options": _stream_options,
    "sink_options": _no_secrets,
}


def setting_check(s: Setting, value: Any) -> Any:
    check_json(s.schema, value, _NO_DEFAULT if s.name in REQUIRED else s.default)
    if value is not None and s.name in _ENGINE_CHECKS:
        _ENGINE_CHECKS[s.name](value)
    return value


_PY_TYPES: dict[str | None, Any] = {  # looked up with None too: a schema without a type
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict[str, Any],
    "null": type(None),
}


def setting_annotation(schema: Mapping[str, Any]) -> Any:
    """The Python type of a JSON schema ``type`` (the value is checked by the schema first)."""
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    item = _PY_TYPES.get((schema.get("items") or {}).get("type"), Any)
    types = [_list_of(item) if k == "array" else _PY_TYPES.get(k, Any) for k in kinds]
    return Union[tuple(types)] if len(types) > 1 else types[0]


def _list_of(item: Any) -> Any:
    """``list[item]`` of a type known only at run time."""
    return list[item]


def annotated_type(annotation: Any, metadata: Any) -> Any:
    """``Annotated[annotation, metadata]`` of a type known only at run time."""
    return Annotated[annotation, metadata]


def checked(
    schema: Mapping[str, Any], default: Any = _NO_DEFAULT, then: Callable[[Any], None] | None = None
) -> BeforeValidator:
    """A field checked by a JSON schema (then by ``then``), with the same messages as a setting."""

    def check(value: Any) -> Any:
        check_json(schema, value, default)
        if then is not None and value is not None:
            then(value)
        return value

    return BeforeValidator(check)
