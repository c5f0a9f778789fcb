"""Numbers of the MySQL/MariaDB binlog format: event types, column types, flags.

Kept in one place so the reader, the table-map parser and the tests name the same codes.
Values come from the servers' headers (``binlog_event.h``, MariaDB ``log_event.h``,
``mysql_com.h``); they are part of the wire format and never change.
"""

from __future__ import annotations

# --- event header ---------------------------------------------------------------------------

EVENT_HEADER_LEN = 19  # timestamp 4, type 1, server_id 4, event_size 4, log_pos 4, flags 2
CHECKSUM_LEN = 4  # CRC32, little endian, over the whole event before it
MAX_PACKET_LEN = 0xFFFFFF  # a protocol packet holds at most 16 MB - 1 bytes of payload

LOG_EVENT_ARTIFICIAL_F = 0x20  # made up by the server for this dump (fake ROTATE ...)
LOG_EVENT_IGNORABLE_F = 0x80  # a replica that does not know the type may skip it

# binlog_checksum algorithms (the byte before the checksum of a FORMAT_DESCRIPTION event)
CHECKSUM_OFF = 0
CHECKSUM_CRC32 = 1
CHECKSUM_UNDEF = 255

# COM_BINLOG_DUMP flags
BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02  # MariaDB

COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15

# --- event types ----------------------------------------------------------------------------

UNKNOWN_EVENT = 0
START_EVENT_V3 = 1
QUERY_EVENT = 2
STOP_EVENT = 3
ROTATE_EVENT = 4
INTVAR_EVENT = 5
RAND_EVENT = 13
USER_VAR_EVENT = 14
FORMAT_DESCRIPTION_EVENT = 15
XID_EVENT = 16
BEGIN_LOAD_QUERY_EVENT = 17
EXECUTE_LOAD_QUERY_EVENT = 18
TABLE_MAP_EVENT = 19
PRE_GA_WRITE_ROWS_EVENT = 20
PRE_GA_UPDATE_ROWS_EVENT = 21
PRE_GA_DELETE_ROWS_EVENT = 22
WRITE_ROWS_EVENT_V1 = 23
UPDATE_ROWS_EVENT_V1 = 24
DELETE_ROWS_EVENT_V1 = 25
INCIDENT_EVENT = 26
HEARTBEAT_LOG_EVENT = 27
IGNORABLE_LOG_EVENT = 28
ROWS_QUERY_LOG_EVENT = 29
WRITE_ROWS_EVENT_V2 = 30
UPDATE_ROWS_EVENT_V2 = 31
DELETE_ROWS_EVENT_V2 = 32
GTID_LOG_EVENT = 33
ANONYMOUS_GTID_LOG_EVENT = 34
PREVIOUS_GTIDS_LOG_EVENT = 35
TRANSACTION_CONTEXT_EVENT = 36
VIEW_CHANGE_EVENT = 37
XA_PREPARE_LOG_EVENT = 38
PARTIAL_UPDATE_ROWS_EVENT = 39
TRANSACTION_PAYLOAD_EVENT = 40
HEARTBEAT_LOG_EVENT_V2 = 41
GTID_TAGGED_LOG_EVENT = 42

# MariaDB
ANNOTATE_ROWS_EVENT = 160
BINLOG_CHECKPOINT_EVENT = 161
MARIADB_GTID_EVENT = 162
MARIADB_GTID_LIST_EVENT = 163
START_ENCRYPTION_EVENT = 164
QUERY_COMPRESSED_EVENT = 165
WRITE_ROWS_COMPRESSED_EVENT_V1 = 166
UPDATE_ROWS_COMPRESSED_EVENT_V1 = 167
DELETE_ROWS_COMPRESSED_EVENT_V1 = 168
WRITE_ROWS_COMPRESSED_EVENT = 169
UPDATE_ROWS_COMPRESSED_EVENT = 170
DELETE_ROWS_COMPRESSED_EVENT = 171

# rows event type -> (kind, version): v1 has no extra-data block after the flags
ROWS_EVENTS: dict[int, tuple[str, int]] = {
    WRITE_ROWS_EVENT_V1: ("insert", 1),
    UPDATE_ROWS_EVENT_V1: ("update", 1),
    DELETE_ROWS_EVENT_V1: ("delete", 1),
    WRITE_ROWS_EVENT_V2: ("insert", 2),
    UPDATE_ROWS_EVENT_V2: ("update", 2),
    DELETE_ROWS_EVENT_V2: ("delete", 2),
}

# MariaDB's zlib-compressed variants (log_bin_compress=ON) -> the plain type they wrap
COMPRESSED_ROWS_EVENTS: dict[int, int] = {
    WRITE_ROWS_COMPRESSED_EVENT_V1: WRITE_ROWS_EVENT_V1,
    UPDATE_ROWS_COMPRESSED_EVENT_V1: UPDATE_ROWS_EVENT_V1,
    DELETE_ROWS_COMPRESSED_EVENT_V1: DELETE_ROWS_EVENT_V1,
    WRITE_ROWS_COMPRESSED_EVENT: WRITE_ROWS_EVENT_V2,
    UPDATE_ROWS_COMPRESSED_EVENT: UPDATE_ROWS_EVENT_V2,
    DELETE_ROWS_COMPRESSED_EVENT: DELETE_ROWS_EVENT_V2,
}

# Events we know and deliberately pass over: statement-based helpers (a ROW binlog only
# has them around DDL or from replicated statement-based masters), bookkeeping.
SKIPPED_EVENTS = frozenset(
    {
        STOP_EVENT,
        INTVAR_EVENT,
        RAND_EVENT,
        USER_VAR_EVENT,
        BEGIN_LOAD_QUERY_EVENT,
        EXECUTE_LOAD_QUERY_EVENT,
        IGNORABLE_LOG_EVENT,
        ROWS_QUERY_LOG_EVENT,
        ANONYMOUS_GTID_LOG_EVENT,
        PREVIOUS_GTIDS_LOG_EVENT,
        TRANSACTION_CONTEXT_EVENT,
        VIEW_CHANGE_EVENT,
        ANNOTATE_ROWS_EVENT,
        BINLOG_CHECKPOINT_EVENT,
        MARIADB_GTID_LIST_EVENT,
        START_ENCRYPTION_EVENT,
    }
)

# --- column types (enum_field_types) ----------------------------------------------------

T_DECIMAL = 0
T_TINY = 1
T_SHORT = 2
T_LONG = 3
T_FLOAT = 4
T_DOUBLE = 5
T_NULL = 6
T_TIMESTAMP = 7
T_LONGLONG = 8
T_INT24 = 9
T_DATE = 10
T_TIME = 11
T_DATETIME = 12
T_YEAR = 13
T_NEWDATE = 14
T_VARCHAR = 15
T_BIT = 16
T_TIMESTAMP2 = 17
T_DATETIME2 = 18
T_TIME2 = 19
T_TYPED_ARRAY = 20
T_VECTOR = 242
T_JSON = 245
T_NEWDECIMAL = 246
T_ENUM = 247
T_SET = 248
T_TINY_BLOB = 249
T_MEDIUM_BLOB = 250
T_LONG_BLOB = 251
T_BLOB = 252
T_VAR_STRING = 253
T_STRING = 254
T_GEOMETRY = 255

# bytes of table-map metadata per column type (types not listed have none)
META_LEN: dict[int, int] = {
    T_FLOAT: 1,
    T_DOUBLE: 1,
    T_VARCHAR: 2,
    T_VAR_STRING: 2,
    T_STRING: 2,
    T_BIT: 2,
    T_NEWDECIMAL: 2,
    T_BLOB: 1,
    T_TINY_BLOB: 1,
    T_MEDIUM_BLOB: 1,
    T_LONG_BLOB: 1,
    T_GEOMETRY: 1,
    T_JSON: 1,
    T_TIMESTAMP2: 1,
    T_DATETIME2: 1,
    T_TIME2: 1,
    T_ENUM: 2,
    T_SET: 2,
    T_VECTOR: 1,
    T_TYPED_ARRAY: 1,
}

# --- table-map optional metadata (binlog_row_metadata) -----------------------------------

OM_SIGNEDNESS = 1
OM_DEFAULT_CHARSET = 2
OM_COLUMN_CHARSET = 3
OM_COLUMN_NAME = 4
OM_SET_STR_VALUE = 5
OM_ENUM_STR_VALUE = 6
OM_GEOMETRY_TYPE = 7
OM_SIMPLE_PRIMARY_KEY = 8
OM_PRIMARY_KEY_WITH_PREFIX = 9
OM_ENUM_AND_SET_DEFAULT_CHARSET = 10
OM_ENUM_AND_SET_COLUMN_CHARSET = 11
OM_COLUMN_VISIBILITY = 12

BINARY_COLLATION_ID = 63
