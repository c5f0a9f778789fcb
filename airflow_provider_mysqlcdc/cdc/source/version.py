"""Which server we talk to: MySQL or MariaDB, and which version.

The two flavors differ in exactly the places CDC cares about (how to read the binlog
position, GTID syntax, privilege names, row metadata), so the engine asks this class
instead of sprinkling version comparisons around.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping

Flavor = Literal["mysql", "mariadb"]

# pymysql's ``server_info`` (and MariaDB's handshake) prefix "5.5.5-" so that old MySQL
# clients accept a MariaDB 10+ server; the real version follows it.
_MARIADB_HANDSHAKE_PREFIX = "5.5.5-"
_VERSION_RE = re.compile(r"^\s*(?P<major>\d+)\.(?P<minor>\d+)(?:\.(?P<patch>\d+))?")

MIN_MYSQL = (5, 7)
MIN_MARIADB = (10, 2)
# binlog_row_metadata (column names in the binlog's table map events) arrived in 10.5.
MARIADB_ROW_METADATA = (10, 5)
# MySQL 8.0.14 added binlog_row_metadata; 5.7 has no way to put column names in the binlog.
MYSQL_ROW_METADATA = (8, 0, 14)


@dataclass(frozen=True)
class ServerVersion:
    """A parsed ``SELECT VERSION()`` string."""

    flavor: Flavor
    major: int
    minor: int
    patch: int
    raw: str

    @classmethod
    def parse(cls, text: str) -> "ServerVersion":
        """Parse ``VERSION()`` output or pymysql's ``server_info`` (with the 5.5.5- prefix)."""
        raw = text.strip()
        body = raw[len(_MARIADB_HANDSHAKE_PREFIX) :] if raw.startswith(_MARIADB_HANDSHAKE_PREFIX) else raw
        flavor: Flavor = "mariadb" if "mariadb" in raw.lower() else "mysql"
        m = _VERSION_RE.match(body)
        if not m:
            raise ValueError(f"not a MySQL/MariaDB version string: {text!r}")
        return cls(flavor, int(m.group("major")), int(m.group("minor")), int(m.group("patch") or 0), raw)

    @property
    def as_tuple(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def at_least(self, *version: int) -> bool:
        """``version.at_least(8, 2)``: compares only as many parts as given."""
        return self.as_tuple[: len(version)] >= tuple(version)

    @property
    def is_mariadb(self) -> bool:
        return self.flavor == "mariadb"

    @property
    def is_mysql(self) -> bool:
        return self.flavor == "mysql"

    @property
    def supports_show_binary_log_status(self) -> bool:
        """MySQL 8.2 added ``SHOW BINARY LOG STATUS``; 8.4 removed ``SHOW MASTER STATUS``."""
        return self.is_mysql and self.at_least(8, 2)

    @property
    def binlog_status_sql(self) -> str:
        return "SHOW BINARY LOG STATUS" if self.supports_show_binary_log_status else "SHOW MASTER STATUS"

    @property
    def gtid_flavor(self) -> Flavor:
        return self.flavor

    @property
    def has_binlog_row_metadata(self) -> bool:
        """Whether the server can write column names into the binlog (binlog_row_metadata)."""
        if self.is_mariadb:
            return self.at_least(*MARIADB_ROW_METADATA)
        return self.at_least(*MYSQL_ROW_METADATA)

    @property
    def has_binlog_monitor_privilege(self) -> bool:
        """MariaDB 10.5 split REPLICATION CLIENT into BINLOG MONITOR (the old name is an alias)."""
        return self.is_mariadb and self.at_least(10, 5)

    @property
    def has_roles_using(self) -> bool:
        """MySQL 8.0 roles: ``SHOW GRANTS ... USING`` expands the active roles' privileges."""
        return self.is_mysql and self.at_least(8, 0)

    def unsupported_reason(self) -> str | None:
        """Why this server cannot be captured, or None if it can.

        MariaDB 10.2-10.4 is rejected although it has ROW binlogs: without
        ``binlog_row_metadata`` its row events carry no column names, and the binlog
        reader would have to guess them from the *current* schema, which is wrong for
        every event written before an ALTER TABLE. MySQL 5.7 has the same gap but is a
        supported target (see design.md section 1); its names come from the schema.
        """
        if self.is_mariadb:
            if not self.at_least(*MIN_MARIADB):
                return f"MariaDB {self.short} is too old: MariaDB 10.5 or later is required"
            if not self.at_least(*MARIADB_ROW_METADATA):
                return (
                    f"MariaDB {self.short} has no binlog_row_metadata (added in 10.5), so binlog row "
                    "events carry no column names: MariaDB 10.5 or later is required"
                )
            return None
        if not self.at_least(*MIN_MYSQL):
            return f"MySQL {self.short} is too old: MySQL 5.7 or later is required"
        return None

    @property
    def is_supported(self) -> bool:
        return self.unsupported_reason() is None

    @property
    def short(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    def to_dict(self) -> dict[str, Any]:
        return {"flavor": self.flavor, "major": self.major, "minor": self.minor, "patch": self.patch, "raw": self.raw}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ServerVersion":
        return cls(d["flavor"], int(d["major"]), int(d["minor"]), int(d["patch"]), str(d["raw"]))

    def __str__(self) -> str:
        return f"{'MariaDB' if self.is_mariadb else 'MySQL'} {self.short}"
