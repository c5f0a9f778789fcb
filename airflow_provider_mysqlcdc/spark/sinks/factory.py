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
        raise ConfigError(
            f"sink {config.type!r}: bad options {sorted(opts)} ({e}). "
            f"Fix: use only the options the {config.type} sink accepts: "
            f"{', '.join(_accepted(config.type)) or 'none'}."
        ) from None
    raise ConfigError(f"sink.type: unknown {config.type!r}. Fix: use delta, postgres, changelog or console.")


def _accepted(sink_type: str) -> list[str]:
    """The option names a sink's constructor takes (what the error tells the user to use)."""
    import inspect

    from . import changelog, console, delta, postgres

    classes: dict[str, type[Sink]] = {
        "delta": delta.DeltaSink,
        "postgres": postgres.PostgresSink,
        "changelog": changelog.ChangelogSink,
        "console": console.ConsoleSink,
    }
    cls = classes.get(sink_type)
    if cls is None:
        return []
    params = inspect.signature(cls.__init__).parameters.values()
    return [p.name for p in params if p.name != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
