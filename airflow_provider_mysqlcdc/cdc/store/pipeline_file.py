"""The pipeline's settings in its state location: one ``pipeline.json`` (no passwords), written by
the plan step and read by the snapshot and stream steps, the sensor and the jobs. Where state lives is
the store's job, so reading, writing and following a moved source connection live here."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import ConfigError
from ..pipeline import PipelineConfig, load_pipeline_config
from ..state import StateStore

CONFIG_NAME = "pipeline.json"


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
