"""The schema history kept in the stream's checkpoint directory (see ``cdc/schema/history.py``).

Beside Spark's own files, like the initial offset: a new checkpoint (reset, or another
startup offset) starts a new history from the schemas the stream is started with; a restart
with the same checkpoint continues the one it has, so rows before and after each DDL keep
being read and written with the version in force at their offset.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from ....cdc.model import TableSchema
from ....cdc.schema.history import HISTORY_FILE, SchemaHistory
from ....cdc.state import StateStore

log = logging.getLogger(__name__)


class HistoryStore:
    """Reads and rewrites one checkpoint's schema history."""

    def __init__(self, checkpoint: str, after_save: Callable[[], Any] | None = None) -> None:
        self.store = StateStore(checkpoint)
        self.after_save = after_save  # a mirrored checkpoint uploads it (checkpoint_mirror.py)

    def load(self, initial: Sequence[TableSchema], pending: bool = False) -> SchemaHistory:
        """The checkpoint's history, with tables it does not know yet starting at ``initial``
        (``pending``: today's schemas for a start in the past, see ``SchemaHistory.starting_with``)."""
        if self.store.exists(HISTORY_FILE):
            history = SchemaHistory.from_dict(self.store.read_json(HISTORY_FILE))
            history.add_initial(initial)
            changed = [t for t in history.tables if len(history.versions[t]) > 1]
            if changed:
                log.info(
                    "schema history: %d table(s) changed since their snapshot: %s",
                    len(changed),
                    ", ".join(map(str, changed[:10])),
                )
            return history
        return SchemaHistory.starting_with(initial, pending=pending)

    def save(self, history: SchemaHistory) -> None:
        self.store.write_json(HISTORY_FILE, history.to_dict())
        if self.after_save is not None:
            self.after_save()
