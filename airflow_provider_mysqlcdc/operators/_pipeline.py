"""The pipeline's settings as the operators share them: one ``pipeline.json`` in the state
location, written by the plan step and read by the snapshot and stream steps and the jobs."""

from __future__ import annotations

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
                raise ConfigError(f"{what}: {text!r} is not a JSON list. Fix: [\"db.table\", ...] "
                                  "or names separated by commas.") from None
        else:
            value = [p.strip() for p in text.replace("\n", ",").split(",")]
    return [str(v).strip() for v in value if str(v).strip()]


def qualify_tables(tables: Sequence[str] | str, default_database: str | None) -> list[str]:
    """``orders`` -> ``shop.orders`` when the connection's schema is ``shop``."""
    out = []
    for t in as_list(tables, "tables"):
        if "." not in t.replace("\\.", ""):
            if not default_database:
                raise ConfigError(f"table {t!r} has no database. Fix: write 'database.{t}', or set the "
                                  "connection's schema (Default database).")
            t = f"{default_database}.{t}"
        out.append(t)
    return out


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
            raise ConfigError(f"{what}: {value!r} is not a JSON object.") from None
    if not isinstance(value, Mapping):
        raise ConfigError(f"{what}: need a JSON object, found {type(value).__name__}.")
    return dict(value)


def config_url(state: StateStore) -> str:
    return state.url(CONFIG_NAME)


def write_config(state: StateStore, config: PipelineConfig) -> str:
    state.write_json(CONFIG_NAME, config.to_dict())
    return config_url(state)


def read_config(state: StateStore, password: str = "") -> PipelineConfig:
    if not state.exists(CONFIG_NAME):
        raise ConfigError(f"no {CONFIG_NAME} in the state location {state.location}. Fix: run the plan task "
                          "first (it writes the pipeline's settings there), with the same state_location.")
    return load_pipeline_config(config_url(state), password=password)
