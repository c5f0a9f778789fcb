"""The pipeline's settings as the operators share them: one ``pipeline.json`` in the state
location, written by the plan step and read by the snapshot and stream steps and the jobs."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from typing import Any, Mapping, Sequence

from ..cdc.errors import ConfigError
from ..cdc.pipeline import PipelineConfig, load_pipeline_config
from ..cdc.state import StateStore

CONFIG_NAME = "pipeline.json"


def as_list(value: Sequence[str] | str | None, what: str) -> list[str]:
    """Accept a list, a JSON list, or comma/newline separated text (the UI's trigger form)."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                raise ConfigError(
                    f'{what}: {text!r} is not a JSON list. Fix: ["db.table", ...] or names separated by commas.'
                ) from None
        else:
            value = [p.strip() for p in text.replace("\n", ",").split(",")]
    return [str(v).strip() for v in value if str(v).strip()]


def epoch_seconds(value: Any, what: str) -> float | None:
    """Epoch seconds from a number or an ISO 8601 date-time (the form's date-time picker);
    a date-time without a zone is UTC."""
    if value in (None, ""):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    import pendulum

    try:
        parsed = pendulum.parse(text, tz="UTC")
        if not isinstance(parsed, pendulum.DateTime):  # a duration or the like: no point in time
            raise ValueError(text)
        return float(parsed.timestamp())
    except Exception:
        raise ConfigError(
            f"{what}: {text!r} is neither epoch seconds nor an ISO 8601 date-time. "
            "Fix: e.g. 2026-11-25T08:00:00Z or 1795593600."
        ) from None


def reread_reason(entries: Sequence[str], batch_id: str, tables: Sequence[str]) -> str | None:
    """Why ``reread_batches`` asks for this batch again (its id, one of its tables, ``*``), or None."""
    for entry in entries:
        if entry in ("*", batch_id):
            return f"reread_batches names {entry!r}"
    for entry in entries:
        if entry in tables:
            return f"reread_batches names its table {entry}"
    return None


def check_reread_entries(entries: Sequence[str], batch_ids: Sequence[str], tables: Sequence[str]) -> None:
    """Each entry names a batch of the plan, a captured table, or ``*``: anything else is a typo
    that would silently reload nothing."""
    unknown = [e for e in entries if e != "*" and e not in batch_ids and e not in tables]
    if unknown:
        raise ConfigError(
            f"reread_batches: {unknown} is not a batch of the plan nor a captured table (captured: "
            f"{sorted(tables)}; batches {batch_ids[0]}..{batch_ids[-1]} if any). Fix: name a captured table as "
            "db.table, a batch id, or *; to capture a new table, add it to the table list."
        )


def whole_number(value: Any, what: str, example: int) -> int:
    """An integer setting from a template or the trigger form, where it may arrive as text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    with contextlib.suppress(ValueError):
        return int(str(value).strip())
    try:  # 8096.0: a number the form or a template made a float
        number = float(value) if isinstance(value, float) else float(str(value).strip())
        if not number.is_integer():
            raise ValueError(value)
        return int(number)
    except (ValueError, OverflowError):
        raise ConfigError(
            f"{what}: found {value!r}, need a whole number. Fix: give digits only, e.g. {example}."
        ) from None


def truthy(value: Any) -> bool:
    """A flag from a template or the trigger form, where it may arrive as text."""
    return value is True or str(value).strip().lower() in ("1", "true", "yes", "on")


def as_mapping(value: Mapping[str, Any] | str | None, what: str) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError(
                f"{what}: {value!r} is not a JSON object. Fix: write it as JSON, e.g. "
                '{"key": "value"}, or leave it empty.'
            ) from None
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{what}: found a {type(value).__name__}, need a JSON object. Fix: write it as "
            '{"key": "value"}, or leave it empty.'
        )
    return dict(value)


def config_url(state: StateStore) -> str:
    return state.url(CONFIG_NAME)


def write_config(state: StateStore, config: PipelineConfig) -> str:
    state.write_json(CONFIG_NAME, config.to_dict())
    return config_url(state)


def read_config(state: StateStore, password: str = "") -> PipelineConfig:
    if not state.exists(CONFIG_NAME):
        raise ConfigError(
            f"no {CONFIG_NAME} in the state location {state.location}. Fix: run the plan task "
            "first (it writes the pipeline's settings there), with the same state_location."
        )
    return load_pipeline_config(config_url(state), password=password)


def follow_connection(state: StateStore, source: Any, conn_id: str, log: Any) -> PipelineConfig:
    """The pipeline's stored settings with the source's address as the connection ``conn_id``
    gives it now (``source``: its ``SourceConfig``, password included); a changed address is
    logged and written back to the state, so a relaunch, a batch read again and the stream on a
    cluster all dial the server the connection names (how a user follows a failover to a new
    endpoint). The password never goes into the state."""
    config = read_config(state, password=source.password)
    followed, changes = config.source.following(source)
    if not changes:
        return config
    log.warning(
        "the source connection %r changed since the pipeline was planned (%s): following it",
        conn_id,
        "; ".join(changes),
    )
    config = dataclasses.replace(config, source=followed)
    write_config(state, config)
    return config
