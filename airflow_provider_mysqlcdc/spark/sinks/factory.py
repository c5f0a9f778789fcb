"""Build the configured sink from the sink registry (``cdc/sinks.py``).

Imports lazily: a sink's module (and its dependencies: deltalake, psycopg) loads only when that
sink is built.
"""

from __future__ import annotations

import importlib
import inspect

from ...cdc.errors import ConfigError
from ...cdc.pipeline import SinkConfig
from ...cdc.sinks import SINK_TYPES, SINKS, SinkKind
from .base import Sink


def sink_class(kind: SinkKind) -> type[Sink]:
    """The class a registry entry names (its module is imported here, and only here)."""
    module = importlib.import_module(f"{__package__}.{kind.module}")
    cls: type[Sink] = getattr(module, kind.class_name)
    return cls


def build_sink(config: SinkConfig) -> Sink:
    opts = dict(config.options)
    kind = SINKS.get(config.type)
    if kind is None:
        raise ConfigError(f"sink.type: unknown {config.type!r}. Fix: use {_choices()}.")
    cls = sink_class(kind)
    try:
        return cls(**opts)
    except TypeError as e:
        raise ConfigError(
            f"sink {config.type!r}: bad options {sorted(opts)} ({e}). "
            f"Fix: use only the options the {config.type} sink accepts: "
            f"{', '.join(_accepted(cls)) or 'none'}."
        ) from None


def _choices() -> str:
    return f"{', '.join(SINK_TYPES[:-1])} or {SINK_TYPES[-1]}"


def _accepted(cls: type[Sink]) -> list[str]:
    """The option names a sink's constructor takes (what the error tells the user to use)."""
    params = inspect.signature(cls.__init__).parameters.values()
    return [p.name for p in params if p.name != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
