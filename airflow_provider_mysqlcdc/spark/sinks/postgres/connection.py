"""A PostgreSQL connection without its password in sight: ``PgConnection`` keeps the libpq conninfo
(what repr and logs show) apart from the password (from ``password=``, ``password_file=`` or
``$PGPASSWORD``), which travels to executors only inside the pickled task closure.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo


def fetch_one(cur: psycopg.Cursor[Any]) -> tuple[Any, ...]:
    """The row of a query that always returns one (a SELECT of expressions, a row just upserted)."""
    row = cur.fetchone()
    assert row is not None
    return row


@dataclass(frozen=True)
class PgConnection:
    """A libpq conninfo without the password, plus the password kept out of repr and logs."""

    conninfo: str
    password: str | None = field(default=None, repr=False)

    @classmethod
    def resolve(
        cls,
        dsn: str | Mapping[str, Any],
        password: str | None = None,
        password_file: str | os.PathLike | None = None,
        password_env: str = "PGPASSWORD",
    ) -> "PgConnection":
        """Split any password out of ``dsn``; else take it from the file or the environment."""
        params = (
            dict(conninfo_to_dict(dsn)) if isinstance(dsn, str) else {k: v for k, v in dsn.items() if v is not None}
        )
        in_dsn = params.pop("password", None)
        pw = password or (None if in_dsn is None else str(in_dsn))
        if pw is None and password_file:
            pw = Path(password_file).read_text().rstrip("\r\n")
        if pw is None:
            pw = os.environ.get(password_env) or None
        return cls(make_conninfo(**{k: str(v) for k, v in params.items()}), pw)

    def connect(self, autocommit: bool = False) -> psycopg.Connection:
        # Arrow writes UTF-8 whatever the database encoding is; the server converts from there.
        kw: dict[str, Any] = {"autocommit": autocommit, "application_name": "mysqlcdc", "client_encoding": "UTF8"}
        if self.password is not None:
            kw["password"] = self.password
        return psycopg.connect(self.conninfo, **kw)
