"""Check that a MySQL/MariaDB server is set up for CDC, before anything is read or written.

The rules are pure functions over (version, global variables, grants, UTC offset) so each
one is unit-tested without a server; ``check_server`` only gathers those inputs. Every
failure is a ``ServerCheckError`` naming the setting, the value found, the value needed and
the fix, and ``validate_server`` reports all of them at once: an operator fixing a server
should not have to rerun the DAG once per mistake.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping, Sequence

from ..errors import ConfigError, ServerCheckError
from ..offsets import BinlogOffset
from .config import SourceConfig
from .server import current_offset, server_version
from .version import ServerVersion

# Global variables the checks read; missing ones (older servers) are simply absent.
VARIABLES = (
    "log_bin",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "binlog_row_value_options",
    "binlog_checksum",
    "gtid_mode",
    "gtid_strict_mode",
    "server_id",
    "time_zone",
    "system_time_zone",
    "binlog_expire_logs_seconds",
    "expire_logs_days",
    "version_comment",
)

SELECT = "SELECT"
REPLICATION_SLAVE = "REPLICATION SLAVE"
REPLICATION_CLIENT = "REPLICATION CLIENT"
BINLOG_MONITOR = "BINLOG MONITOR"

# Privilege names the server may print for the ones we need (MariaDB 10.5 renamed some).
_PRIVILEGE_ALIASES = {
    "REPLICATION REPLICA": REPLICATION_SLAVE,
    "REPLICA": REPLICATION_SLAVE,
}


class ServerValidationError(ConfigError):
    """Every reason the server is not ready for CDC, in one exception."""

    def __init__(self, where: str, errors: Sequence[ServerCheckError]) -> None:
        self.errors = list(errors)
        lines = "\n".join(f"  - {e}" for e in self.errors)
        n = len(self.errors)
        super().__init__(f"{where} is not set up for CDC ({n} problem{'s' if n != 1 else ''}):\n{lines}")


@dataclass(frozen=True)
class ServerInfo:
    """What validation learned, for the plan step and the task log."""

    version: ServerVersion
    variables: Mapping[str, str]
    offset: BinlogOffset

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version.to_dict(), "variables": dict(self.variables), "offset": self.offset.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ServerInfo":
        return cls(ServerVersion.from_dict(d["version"]), dict(d["variables"]), BinlogOffset.from_dict(d["offset"]))


# --- rules: pure functions ------------------------------------------------------------------


def check_version(version: ServerVersion) -> list[ServerCheckError]:
    reason = version.unsupported_reason()
    if reason is None:
        return []
    needed = "MariaDB >= 10.5" if version.is_mariadb else "MySQL >= 5.7"
    return [ServerCheckError("version", version.raw, needed, f"{reason}; upgrade the server.")]


def _var(variables: Mapping[str, Any], name: str) -> str | None:
    v = variables.get(name)
    return None if v is None else str(v).strip()


def _restart_fix(name: str, value: str, extra: str = "") -> str:
    return (
        f"SET GLOBAL {name} = '{value}' and set {name}={value} under [mysqld] in my.cnf so it "
        f"survives a restart{extra}."
    )


_NEW_SESSIONS = (
    "; the global value applies to sessions opened afterwards, so reconnect (or restart) "
    "the applications that write to the captured tables"
)


def check_variables(version: ServerVersion, variables: Mapping[str, Any]) -> list[ServerCheckError]:
    """The binlog settings row-based CDC depends on."""
    errors: list[ServerCheckError] = []
    log_bin = (_var(variables, "log_bin") or "OFF").upper()
    if log_bin not in ("ON", "1"):
        errors.append(
            ServerCheckError(
                "log_bin",
                log_bin,
                "ON",
                "enable binary logging: log-bin=mysql-bin and a unique server_id under [mysqld] in my.cnf, then "
                "restart the server (log_bin cannot be changed at runtime).",
            )
        )
    fmt = (_var(variables, "binlog_format") or "").upper()
    if fmt != "ROW":
        errors.append(
            ServerCheckError(
                "binlog_format",
                fmt or None,
                "ROW",
                _restart_fix("binlog_format", "ROW", _NEW_SESSIONS)
                + " STATEMENT and MIXED binlogs do not carry the changed rows.",
            )
        )
    image = (_var(variables, "binlog_row_image") or "").upper()
    if image != "FULL":
        errors.append(
            ServerCheckError(
                "binlog_row_image",
                image or None,
                "FULL",
                _restart_fix("binlog_row_image", "FULL", _NEW_SESSIONS)
                + " MINIMAL and NOBLOB leave columns out of the row images the snapshot correction needs.",
            )
        )
    errors += _check_row_metadata(version, variables)
    value_options = _var(variables, "binlog_row_value_options")
    if value_options:  # MySQL 8: PARTIAL_JSON logs JSON updates as diffs, not full images
        errors.append(
            ServerCheckError(
                "binlog_row_value_options",
                value_options,
                "'' (empty)",
                "SET GLOBAL binlog_row_value_options = '' and set binlog_row_value_options='' under [mysqld] "
                "in my.cnf; partial JSON updates are not full row images.",
            )
        )
    checksum = (_var(variables, "binlog_checksum") or "CRC32").upper()
    if checksum not in ("NONE", "CRC32"):
        errors.append(
            ServerCheckError("binlog_checksum", checksum, "NONE or CRC32", _restart_fix("binlog_checksum", "CRC32"))
        )
    return errors


def _check_row_metadata(version: ServerVersion, variables: Mapping[str, Any]) -> list[ServerCheckError]:
    """Column names in the binlog: required wherever the server can write them.

    Without them the binlog reader (python-mysql-replication 1.x) asks INFORMATION_SCHEMA
    for the table's *current* columns, which mislabels every event written before an
    ALTER TABLE. MariaDB < 10.5 cannot write them at all (rejected by the version check);
    MySQL 5.7 cannot either and is accepted with that caveat.
    """
    if not version.has_binlog_row_metadata:
        return []
    metadata = (_var(variables, "binlog_row_metadata") or "").upper()
    if metadata == "FULL":
        return []
    return [
        ServerCheckError(
            "binlog_row_metadata",
            metadata or None,
            "FULL",
            _restart_fix("binlog_row_metadata", "FULL")
            + " With MINIMAL the binlog carries no column names, so row events cannot be mapped to columns "
            "reliably once a table's schema changes.",
        )
    ]


def check_server_id(variables: Mapping[str, Any], source: SourceConfig) -> list[ServerCheckError]:
    """Our binlog readers register as replicas; one with the server's own id is refused."""
    sid = _var(variables, "server_id")
    if sid is None or not sid.isdigit():
        return []
    rng = source.server_id_range
    if rng.first <= int(sid) <= rng.last:
        return [
            ServerCheckError(
                "server_id_range",
                str(rng),
                f"a range without the server's own server_id {sid}",
                f"set server_id_range to ids no server or replica uses, e.g. '{int(sid) + 5400}-{int(sid) + 5499}'.",
            )
        ]
    return []


# --- privileges -----------------------------------------------------------------------------

_GRANT_RE = re.compile(
    r"^\s*GRANT\s+(?P<privs>.+?)\s+ON\s+(?:(?:FUNCTION|PROCEDURE|PACKAGE\s+BODY|PACKAGE)\s+)?"
    r"(?P<obj>(?:`(?:[^`]|``)*`|[^\s.`]+)(?:\.(?:`(?:[^`]|``)*`|[^\s`]+))?)\s+TO\s",
    re.IGNORECASE | re.DOTALL,
)


def _split_privileges(text: str) -> list[str]:
    """``SELECT (a, b), INSERT`` -> ['SELECT', 'INSERT']: commas inside column lists don't split."""
    out: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        if depth == 0 and ch not in "()":
            cur.append(ch)
    out.append("".join(cur))
    return [re.sub(r"\s+", " ", p).strip().upper() for p in out if p.strip()]


def _unquote(ident: str) -> str:
    ident = ident.strip()
    if len(ident) >= 2 and ident[0] == ident[-1] and ident[0] in "`'\"":
        return ident[1:-1].replace(ident[0] * 2, ident[0])
    return ident


def parse_grants(grants: Iterable[str]) -> dict[str, set[str]]:
    """``SHOW GRANTS`` lines -> {object: privileges}; objects are '*.*', 'db.*' or 'db.table'.

    Role grants (``GRANT `r` TO u``), proxy grants and ``SET DEFAULT ROLE`` lines carry no
    privileges and are skipped; the caller expands active roles separately.
    """
    out: dict[str, set[str]] = {}
    for line in grants:
        m = _GRANT_RE.match(line)
        if not m:
            continue
        obj_text = m.group("obj")
        if obj_text.startswith("''") or "@" in obj_text:  # GRANT PROXY ON ''@'%'
            continue
        db, _, table = obj_text.partition(".")
        obj = f"{_unquote(db)}.{_unquote(table) if table else '*'}"
        privs = {_PRIVILEGE_ALIASES.get(p, p) for p in _split_privileges(m.group("privs"))}
        out.setdefault(obj, set()).update(privs)
    return out


def _required_privileges(version: ServerVersion) -> list[str]:
    client = BINLOG_MONITOR if version.has_binlog_monitor_privilege else REPLICATION_CLIENT
    return [SELECT, REPLICATION_SLAVE, client]


def _has(privs: set[str], needed: str) -> bool:
    if needed in privs or "ALL PRIVILEGES" in privs or "ALL" in privs:
        return True
    if needed == BINLOG_MONITOR and REPLICATION_CLIENT in privs:  # the old name, an alias on 10.5+
        return True
    # SUPER allowed SHOW MASTER STATUS / SHOW BINARY LOGS before MariaDB 10.5 split it up.
    return needed == REPLICATION_CLIENT and "SUPER" in privs


def _like(pattern: str, name: str) -> bool:
    """MySQL grant database names are LIKE patterns (``db\\_%``): % and _ are wildcards."""
    rx: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            rx.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        rx.append("." if ch == "_" else ".*" if ch == "%" else re.escape(ch))
        i += 1
    return re.fullmatch("".join(rx), name, re.IGNORECASE) is not None


def check_privileges(
    version: ServerVersion, grants: Iterable[str], user: str = "", databases: Sequence[str] = ()
) -> list[ServerCheckError]:
    """SELECT (global, or on every captured database) and the two replication privileges (global only)."""
    by_object = parse_grants(grants)
    global_privs = by_object.get("*.*", set())
    missing: list[str] = []
    for needed in _required_privileges(version):
        if _has(global_privs, needed):
            continue
        if needed == SELECT and _select_on_databases(version, by_object, databases):
            continue
        missing.append(needed)
    if not missing:
        return []
    who = f"'{user}'" if user else "the CDC user"
    return [
        ServerCheckError(
            "privileges",
            f"missing {', '.join(missing)} (global grants: {', '.join(sorted(global_privs)) or 'none'})",
            ", ".join(_required_privileges(version)) + " on *.* (SELECT may be per captured database)",
            f"GRANT {', '.join(missing)} ON *.* TO {who}; replication privileges exist only globally, SELECT "
            "may instead be granted on each captured database.",
        )
    ]


def select_granted(by_object: Mapping[str, set[str]], database: str, table: str) -> bool:
    """Whether parsed grants let the user SELECT from ``database.table`` (global, database
    pattern or table grant): a table without it is invisible in information_schema."""
    for obj, privs in by_object.items():
        if not _has(privs, SELECT):
            continue
        db, _, tbl = obj.partition(".")
        if db == "*" or (_like(db, database) and tbl in ("*", table)):
            return True
    return False


def _select_on_databases(version: ServerVersion, by_object: Mapping[str, set[str]], databases: Sequence[str]) -> bool:
    """Database-level SELECT is enough when it covers every captured database.

    Without a list of databases, any database-level SELECT is taken as intended for the
    captured tables: the planner's queries fail loudly if it is not.
    """
    db_grants = [
        (obj[:-2], privs)
        for obj, privs in by_object.items()
        if obj.endswith(".*") and obj != "*.*" and _has(privs, SELECT)
    ]
    if not databases:
        return bool(db_grants)
    return all(any(_like(pattern, db) for pattern, _ in db_grants) for db in databases)


# --- time zone ------------------------------------------------------------------------------

_OFFSET_RE = re.compile(r"^([+-])(\d{1,2}):(\d{2})$")


def zone_utc_offset(zone: str, at: datetime) -> timedelta:
    """UTC offset of a configured zone ('UTC', 'Asia/Tokyo', '+09:00') at instant ``at``."""
    z = zone.strip()
    m = _OFFSET_RE.match(z)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        return sign * timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
    if z.upper() in ("UTC", "Z", "GMT"):
        return timedelta(0)
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        offset = at.astimezone(ZoneInfo(z)).utcoffset()
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {zone!r}") from None
    return offset or timedelta(0)


def _fmt_offset(seconds: int) -> str:
    sign = "-" if seconds < 0 else "+"
    s = abs(seconds)
    return f"UTC{sign}{s // 3600:02d}:{s % 3600 // 60:02d}"


def check_time_zone(
    server_offset_seconds: int | None, server_zone: str, configured: str, now: datetime | None = None
) -> list[ServerCheckError]:
    """The configured ``server_time_zone`` must have the server's UTC offset now.

    Offsets, not names: 'SYSTEM', 'UTC', '+00:00' and 'Etc/UTC' are one zone. Offsets are
    compared at the same instant, so a zone that is right except across a DST switch is
    still caught when the check runs on the wrong side of it.
    """
    now = now or datetime.now(timezone.utc)
    try:
        wanted = int(zone_utc_offset(configured, now).total_seconds())
    except ValueError:
        return [
            ServerCheckError(
                "server_time_zone",
                configured,
                "an IANA zone name (e.g. 'Europe/Berlin'), 'UTC' or '+HH:MM'",
                "set server_time_zone in the source configuration to the server's time zone.",
            )
        ]
    if server_offset_seconds is None:
        return [
            ServerCheckError(
                "time_zone",
                server_zone,
                f"a zone the server can resolve ({_fmt_offset(wanted)})",
                "check @@global.time_zone; load the time zone tables (mariadb-tzinfo-to-sql) if it names a zone.",
            )
        ]
    if server_offset_seconds == wanted:
        return []
    return [
        ServerCheckError(
            "server_time_zone",
            f"{configured} ({_fmt_offset(wanted)})",
            f"the server's time zone {server_zone} ({_fmt_offset(server_offset_seconds)})",
            f"set server_time_zone in the source configuration to the server's zone (one with UTC offset "
            f"{_fmt_offset(server_offset_seconds)}), or change the server's default_time_zone if it is the "
            "server that is wrong.",
        )
    ]


def evaluate(
    version: ServerVersion,
    variables: Mapping[str, Any],
    grants: Iterable[str],
    server_offset_seconds: int | None,
    source: SourceConfig,
    databases: Sequence[str] = (),
    now: datetime | None = None,
) -> list[ServerCheckError]:
    """Every rule at once: the whole decision, without a server."""
    zone = f"{variables.get('time_zone', '?')!r} (system_time_zone {variables.get('system_time_zone', '?')!r})"
    return [
        *check_version(version),
        *check_variables(version, variables),
        *check_privileges(version, grants, source.user, databases),
        *check_server_id(variables, source),
        *check_time_zone(server_offset_seconds, zone, source.server_time_zone, now),
    ]


# --- reading the server ---------------------------------------------------------------------


def read_variables(conn: Any) -> dict[str, str]:
    names = ", ".join(f"'{n}'" for n in VARIABLES)
    with conn.cursor() as cur:
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
        return {str(k).lower(): str(v) for k, v in _pairs(cur.fetchall())}


def _pairs(rows: Iterable[Any]) -> Iterable[tuple[Any, Any]]:
    for r in rows:
        yield tuple(r.values()) if isinstance(r, dict) else tuple(r)


def _column(conn: Any, sql: str) -> list[Any]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return [next(iter(r.values())) if isinstance(r, dict) else r[0] for r in cur.fetchall()]


def read_grants(conn: Any, version: ServerVersion) -> list[str]:
    """The current user's grants, including those of its active roles.

    MariaDB's ``SHOW GRANTS`` already lists the active role's grants. MySQL 8 lists only
    the role names, so the active roles (``CURRENT_ROLE()``) are expanded with ``USING``:
    granted-but-inactive roles give no privileges, and counting them would let the check
    pass and the binlog reader fail later with a worse message.
    """
    grants = [str(g) for g in _column(conn, "SHOW GRANTS")]
    if version.has_roles_using:
        roles = str(_column(conn, "SELECT CURRENT_ROLE()")[0] or "NONE")
        if roles.upper() != "NONE":
            with contextlib.suppress(Exception):
                grants = [str(g) for g in _column(conn, f"SHOW GRANTS FOR CURRENT_USER() USING {roles}")]
    return grants


def read_server_utc_offset(conn: Any) -> int | None:
    """The server's default zone's UTC offset now, in seconds, whatever this session's zone is.

    Engine sessions run in UTC (``SourceConfig.connect()``), so ``NOW()`` here would say
    nothing about the server; converting through ``@@global.time_zone`` does, and works for
    'SYSTEM' too. None when the server cannot resolve its own zone name.
    """
    value = _column(
        conn, "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), CONVERT_TZ(UTC_TIMESTAMP(), '+00:00', @@global.time_zone))"
    )[0]
    return None if value is None else int(value)


def check_server(conn: Any, source: SourceConfig, databases: Sequence[str] = ()) -> list[ServerCheckError]:
    """Every problem with the server behind ``conn``, as configured by ``source``; [] when ready."""
    version = server_version(conn)
    return evaluate(
        version, read_variables(conn), read_grants(conn, version), read_server_utc_offset(conn), source, databases
    )


def validate_server(source: SourceConfig, databases: Sequence[str] = ()) -> ServerInfo:
    """Connect, run every check, and raise one ``ServerValidationError`` listing all failures.

    The checks' queries are small, so the connection gives up on a server that says nothing for
    a few connect timeouts: without a read timeout a port where another service waits for the
    client to speak first (PostgreSQL's, an HTTP server's) would hold the task forever.
    """
    conn = source.connect(read_timeout=3 * max(int(source.connect_timeout or 10), 1))
    try:
        version = server_version(conn)
        variables = read_variables(conn)
        errors = evaluate(
            version, variables, read_grants(conn, version), read_server_utc_offset(conn), source, databases
        )
        if errors:
            raise ServerValidationError(f"{version} at {source.host}:{source.port}", errors)
        return ServerInfo(version, variables, current_offset(conn, version))
    finally:
        conn.close()
