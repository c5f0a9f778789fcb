"""Settings as they arrive from a DAG's template, the trigger form or a pipeline file: text where a
list, a number, a flag or a JSON object is meant. One coercion per kind, shared by the operators, the
sensor and the pipeline files, each failing with a ``ConfigError`` that says what to write instead.
It imports no Airflow, so it lives with the settings it coerces (``settings.py``), not in an operator."""

from __future__ import annotations

import contextlib
import json
from typing import Any, Mapping, Sequence

from .errors import ConfigError


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
