"""List the pipelines a watchdog of many pipelines watches: one mapped sensor each."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.sdk import BaseOperator

from ..cdc.coerce import as_list
from ..cdc.errors import ConfigError
from ..cdc.state import StateStore
from ..cdc.store.object_store import use_credentials
from ..cdc.store.state_finder import CONFIG_NAME, DEFAULT_DEPTH, find_state_locations, unique_locations
from ..fail_fast import config_errors_fail_at_once
from ..hooks.object_storage import storage_credentials
from ..hooks.stream import LAUNCH_REL


class MySqlCdcFindPipelinesOperator(BaseOperator):
    """Returns ``[{"state_location": ...}, ...]`` for ``expand_kwargs`` of a stream sensor: the
    state locations given, then those found under ``search_roots`` (every folder holding a
    ``pipeline.json``, at most ``depth`` levels down), each once.

    Only pipelines whose stream was started are returned (a pipeline still loading, or never
    triggered, has nothing to watch yet); the others are logged. A given state location that
    holds no pipeline, or a search root that does not exist, fails the task naming it: either
    would leave a pipeline unwatched without anyone noticing.

    :param state_locations: pipelines' state locations. (templated)
    :param search_roots: folders (local or ``s3://``) to search for state locations. (templated)
    :param aws_conn_id: the ``aws`` connection for state locations on object storage. (templated)
    :param depth: how many folder levels below a search root to look.
    """

    template_fields: Sequence[str] = ("state_locations", "search_roots", "aws_conn_id")
    ui_color = "#e3f7e3"

    def __init__(
        self,
        *,
        state_locations: Sequence[str] | str | None = None,
        search_roots: Sequence[str] | str | None = None,
        aws_conn_id: str | None = None,
        depth: int = DEFAULT_DEPTH,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.state_locations = state_locations
        self.search_roots = search_roots
        self.aws_conn_id = aws_conn_id
        self.depth = depth

    @config_errors_fail_at_once
    def execute(self, context: Any) -> list[dict[str, str]]:
        given = as_list(self.state_locations, "state_locations")
        roots = as_list(self.search_roots, "search_roots")
        if not given and not roots:
            raise ConfigError(
                "no pipelines to watch: state_locations and search_roots are both empty. Fix: list "
                "the pipelines' state locations, or folders that hold them (search_roots)."
            )
        use_credentials(storage_credentials(self.aws_conn_id or None))
        missing = [loc for loc in given if not StateStore(loc).exists(CONFIG_NAME)]
        if missing:
            raise ConfigError(
                f"state_locations: {', '.join(missing)} hold(s) no pipeline (no pipeline.json). Fix: "
                "give the state location a pipeline's plan task wrote, or trigger that pipeline first."
            )
        locations = unique_locations(given, find_state_locations(roots, self.depth))
        watched = []
        for loc in locations:
            state = StateStore(loc)
            if state.exists(LAUNCH_REL) or state.stream_started():
                watched.append({"state_location": loc})
                self.log.info("watching %s", loc)
            else:
                self.log.info("not watching %s yet: its stream has not been started", loc)
        self.log.info("%d pipeline(s) found, %d with a stream to watch", len(locations), len(watched))
        return watched
