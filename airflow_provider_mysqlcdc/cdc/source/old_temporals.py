"""Temporal columns still in the storage format from before MySQL 5.6.

TIME, DATETIME and TIMESTAMP columns created by MySQL 5.5 (or by MariaDB with
``mysql56_temporal_format=OFF``) keep their old on-disk format after an in-place upgrade. The
binlog carries their values in that format too, and MariaDB logs its own old fractional
variants under the same type codes with other widths, so the fast binlog decoder cannot tell
them apart safely and refuses such a table; its rows then go through the much slower
library decoder. That decoder reads old whole-second DATETIME and TIMESTAMP values right, but
not MariaDB's old fractional ones (``DATETIME(3)`` created with ``mysql56_temporal_format=OFF``:
it died on "year 679817618 is out of range") nor a negative old TIME (it read '-01:02:03' as
'1677:10:13', silently). So a table with an old fractional or TIME column is refused wherever
tables are discovered (validate, plan), and one with only old whole-second DATETIME/TIMESTAMP
columns is named in a warning, each with the rebuild that converts the columns.

The server says which columns are old: MariaDB prints ``/* mariadb-5.3 */`` after the type
in information_schema.COLUMNS.COLUMN_TYPE, MySQL 5.6/5.7 ``/* 5.5 binary format */`` while the
session has ``show_old_temporals=ON`` (:func:`show_old_temporals` turns it on). MySQL 8.0
converted every such column on upgrade.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import ConfigError
from ..model import TableSchema

_MARKERS = ("/* mariadb-5.3 */", "/* 5.5 binary format */")
_TEMPORAL = frozenset({"time", "datetime", "timestamp"})


def old_temporal_columns(schema: TableSchema, decodable: bool | None = None) -> list[str]:
    """The names of ``schema``'s columns stored in the pre-5.6 temporal format; with
    ``decodable`` True only those the library decoder reads right (whole-second DATETIME and
    TIMESTAMP), False only the others."""
    return [
        c.name
        for c in schema.columns
        if c.data_type in _TEMPORAL
        and any(m in c.column_type.lower() for m in _MARKERS)
        and (decodable is None or _decodable(c) == decodable)
    ]


def _decodable(column: Any) -> bool:
    return column.data_type != "time" and not column.datetime_precision


def _rebuild(schema: TableSchema) -> str:
    t = schema.table_id
    return (
        f"ALTER TABLE `{t.database}`.`{t.table}` FORCE (on MariaDB with mysql56_temporal_format=ON, the "
        "default; it copies the table)"
    )


def refuse_undecodable_old_temporals(schema: TableSchema) -> None:
    """ConfigError for a table whose binlog rows no decoder here reads right (see above)."""
    cols = old_temporal_columns(schema, decodable=False)
    if cols:
        raise ConfigError(
            f"table {schema.table_id} has {len(cols)} TIME or fractional-second column(s) in the pre-MySQL-5.6 "
            f"temporal storage format ({', '.join(f'`{c}`' for c in cols)}): their binlog values cannot be "
            "decoded safely, so the stream could not stay exact. Fix: rebuild the table in the current format "
            f"before the load: {_rebuild(schema)}; or leave the table out with exclude."
        )


def old_temporal_problems(schemas: Sequence[TableSchema]) -> list[str]:
    """One warning per table with old-format whole-second DATETIME/TIMESTAMP columns, naming
    them and the fix (tables with the other old columns never get here: discovery refuses them)."""
    out = []
    for s in schemas:
        cols = old_temporal_columns(s, decodable=True)
        if cols:
            out.append(
                f"table {s.table_id} has {len(cols)} column(s) in the pre-MySQL-5.6 temporal storage format "
                f"({', '.join(f'`{c}`' for c in cols)}): the stream decodes this table's binlog rows with the "
                "library decoder, which is much slower than the fast decoder the other tables get. Fix: rebuild "
                f"the table in the current format before the load: {_rebuild(s)}."
            )
    return out


def show_old_temporals(conn: Any) -> None:
    """Let MySQL 5.6/5.7 mark old-format columns in COLUMN_TYPE for this session. Servers
    without the variable (MariaDB, MySQL 8.0 and later) mark them anyway or have none."""
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION show_old_temporals = ON")
    except Exception:  # noqa: BLE001 - unknown variable: nothing to turn on
        pass
