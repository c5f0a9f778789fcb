"""Object-storage credentials from an Airflow connection, read the Amazon provider's way.

A connection of type ``aws`` (the Amazon provider need not be installed: only its field
conventions are used): login = access key id, password = secret access key; extra
``aws_session_token``, ``region_name``, and ``endpoint_url`` for an S3-compatible server
(MinIO, Ceph, a local test server) -- also accepted as ``service_config.s3.endpoint_url`` or,
as older connections have it, the connection's host. The credentials are read when a task runs
and stay in memory and in the environments of the processes the task starts.
"""

from __future__ import annotations

import json
from typing import Any

from ..cdc.errors import ConfigError
from ..cdc.store.object_store import StorageCredentials


def _extra(conn: Any) -> dict[str, Any]:
    raw = getattr(conn, "extra", None)
    if not raw:
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        raise ConfigError(
            f"connection {conn.conn_id!r}: its extra is not JSON. Fix: give it as a JSON object, "
            'e.g. {"endpoint_url": "https://s3.example.com", "region_name": "eu-west-1"}.'
        ) from None
    return value if isinstance(value, dict) else {}


def storage_credentials(aws_conn_id: str | None) -> StorageCredentials | None:
    """The credentials of ``aws_conn_id``, or None when no connection is named (the processes
    then use whatever their environment or instance role provides)."""
    if not aws_conn_id:
        return None
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(aws_conn_id)
    except Exception as e:  # the SDK raises its own "not found" type, which differs across releases
        raise ConfigError(
            f"the object storage connection {aws_conn_id!r} does not exist ({type(e).__name__}). "
            "Fix: create it (Admin > Connections, type aws: login = access key id, password = "
            "secret access key, extra endpoint_url/region_name) or clear aws_conn_id."
        ) from None
    extra = _extra(conn)
    service = (
        ((extra.get("service_config") or {}).get("s3") or {}) if isinstance(extra.get("service_config"), dict) else {}
    )
    key_id = conn.login or extra.get("aws_access_key_id")
    secret = conn.password or extra.get("aws_secret_access_key")
    if bool(key_id) != bool(secret):
        raise ConfigError(
            f"the object storage connection {aws_conn_id!r} has "
            f"{'an access key id but no secret key' if key_id else 'a secret key but no access key id'}. "
            "Fix: set both (login = access key id, password = secret access key), or neither to "
            "use the workers' own credentials (instance role)."
        )
    endpoint = service.get("endpoint_url") or extra.get("endpoint_url") or None
    if not endpoint and conn.host:
        endpoint = conn.host if "://" in conn.host else f"https://{conn.host}"
        if conn.port:
            endpoint = f"{endpoint.rstrip('/')}:{conn.port}"
    return StorageCredentials(
        access_key_id=key_id or None,
        secret_access_key=secret or None,
        session_token=extra.get("aws_session_token") or None,
        region=extra.get("region_name") or None,
        endpoint_url=endpoint,
    )
