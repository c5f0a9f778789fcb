"""Build the configured sink. Imports lazily: a sink's dependencies load only when used."""

from __future__ import annotations

from ...cdc.errors import ConfigError
from ...cdc.pipeline import SinkConfig
from .base import Sink


def build_sink(config: SinkConfig) -> Sink:
    opts = dict(config.options)
    try:
        if config.type == "delta":
            from .delta import DeltaSink

            return DeltaSink(**opts)
        if config.type == "postgres":
            from .postgres import PostgresSink

            return PostgresSink(**opts)
        if config.type == "changelog":
            from .changelog import ChangelogSink

            return ChangelogSink(**opts)
        if config.type == "console":
            from .console import ConsoleSink

            return ConsoleSink(**opts)
    except TypeError as e:
        raise ConfigError(f"sink {config.type!r}: bad options {sorted(opts)}: {e}") from None
    raise ConfigError(f"sink.type: unknown {config.type!r}")
