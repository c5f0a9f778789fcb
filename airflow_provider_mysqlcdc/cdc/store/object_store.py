"""Object-storage credentials: where they come from at run time and how each process gets them.

Credentials never travel in ``pipeline.json`` (it is a file in the state location, readable by
whoever reads the lake) nor on a command line. They are resolved from an Airflow connection
when a task runs (see ``hooks/object_storage.py``) and handed on in two ways:

* **environment variables** (``AWS_ACCESS_KEY_ID`` ...) of the processes this package owns: the
  task process itself and the Spark jobs it starts with a private environment. fsspec/s3fs,
  pyarrow's S3 filesystem and delta-rs all read these, so every ``StateStore`` and every sink
  call in those processes works without the credentials being threaded through each one;
* **sink storage options** held in memory only, for code that runs in the Python workers of a
  Spark Connect server this task did not start (their environment is the server's).

The names are the AWS SDKs' (and delta-rs' ``storage_options`` keys, which accept the same).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping, cast
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..sinks import needs_root

ACCESS_KEY_ENV = "AWS_ACCESS_KEY_ID"
SECRET_KEY_ENV = "AWS_SECRET_ACCESS_KEY"
SESSION_TOKEN_ENV = "AWS_SESSION_TOKEN"
ENDPOINT_ENV = "AWS_ENDPOINT_URL"
REGION_ENV = "AWS_REGION"
DEFAULT_REGION_ENV = "AWS_DEFAULT_REGION"
ALLOW_HTTP_ENV = "AWS_ALLOW_HTTP"  # delta-rs refuses a plain-http endpoint without it

SECRET_NAMES = (SECRET_KEY_ENV, SESSION_TOKEN_ENV)
ALL_NAMES = (
    ACCESS_KEY_ENV,
    SECRET_KEY_ENV,
    SESSION_TOKEN_ENV,
    ENDPOINT_ENV,
    REGION_ENV,
    DEFAULT_REGION_ENV,
    ALLOW_HTTP_ENV,
)

# Keys of ``storage_options`` that are secrets: they would be written to pipeline.json.
_SECRET_OPTION_WORDS = (
    "secret",
    "password",
    "token",
    "access_key_id",
    "account_key",
    "sas_key",
    "client_secret",
    "credential",
)


@dataclass(frozen=True)
class StorageCredentials:
    """S3-style credentials plus where the service is (an endpoint for S3-compatible servers)."""

    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    region: str | None = None
    endpoint_url: str | None = None

    def env(self) -> dict[str, str]:
        """The environment variables that give a process these credentials."""
        out: dict[str, str] = {}
        if self.access_key_id:
            out[ACCESS_KEY_ENV] = self.access_key_id
        if self.secret_access_key:
            out[SECRET_KEY_ENV] = self.secret_access_key
        if self.session_token:
            out[SESSION_TOKEN_ENV] = self.session_token
        if self.region:
            out[REGION_ENV] = out[DEFAULT_REGION_ENV] = self.region
        if self.endpoint_url:
            out[ENDPOINT_ENV] = self.endpoint_url
            if urlsplit(self.endpoint_url).scheme == "http":
                out[ALLOW_HTTP_ENV] = "true"
        return out

    def storage_options(self) -> dict[str, str]:
        """The same as delta-rs ``storage_options`` (its keys are the variables' names)."""
        return self.env()

    def secrets(self) -> list[str]:
        """The values that must never be written anywhere (tests look for them)."""
        return [v for v in (self.secret_access_key, self.session_token) if v]


def use_credentials(creds: StorageCredentials | None) -> None:
    """Give this process ``creds`` (replacing any earlier ones this package set). Filesystem
    instances that fsspec cached with the old credentials are dropped."""
    if creds is None:
        return
    for name in ALL_NAMES:
        os.environ.pop(name, None)
    os.environ.update(creds.env())
    try:
        import fsspec

        cls = fsspec.get_filesystem_class("s3")
        cls.clear_instance_cache()
    except (ImportError, ValueError, AttributeError):
        pass


def credentials_from_env(env: Mapping[str, str] | None = None) -> StorageCredentials | None:
    """What this process has (None when no credential variable is set)."""
    env = os.environ if env is None else env
    if not any(env.get(n) for n in (ACCESS_KEY_ENV, SECRET_KEY_ENV, ENDPOINT_ENV)):
        return None
    return StorageCredentials(
        env.get(ACCESS_KEY_ENV),
        env.get(SECRET_KEY_ENV),
        env.get(SESSION_TOKEN_ENV),
        env.get(REGION_ENV) or env.get(DEFAULT_REGION_ENV),
        env.get(ENDPOINT_ENV),
    )


def with_storage_options(
    options: Mapping[str, object], creds: StorageCredentials | None, sink_type: str
) -> dict[str, object]:
    """Sink options with ``creds`` added to its ``storage_options`` (in memory only: never
    write the result to the state location). Only a sink that writes files under a root takes
    them: ``creds`` then are for the state location alone, and a PostgreSQL sink's options stay as
    they are (it has no ``storage_options`` and refuses unknown options)."""
    out = dict(options)
    if creds is None or not needs_root(sink_type):
        return out
    merged = {**dict(cast("Mapping[str, object]", out.get("storage_options") or {})), **creds.storage_options()}
    out["storage_options"] = merged
    return out


def refuse_secret_options(storage_options: Mapping[str, object] | None, where: str) -> None:
    """A secret in ``storage_options`` would be written to pipeline.json: stop before that."""
    secret = sorted(k for k in (storage_options or {}) if any(w in str(k).lower() for w in _SECRET_OPTION_WORDS))
    if secret:
        raise ConfigError(
            f"{where} holds credentials ({', '.join(secret)}): they would be written to pipeline.json in the state "
            "location. Fix: remove them there, put them in an Airflow connection (type aws: login = access key "
            "id, password = secret key, extra endpoint_url/region_name) and set aws_conn_id to its id."
        )


def is_object_store(url: str) -> bool:
    """True for a URL with a scheme other than a local file (``s3://``, ``gs://``, ``abfss://``)."""
    scheme = urlsplit(url).scheme.lower()
    return bool(scheme) and scheme not in ("file", "local") and len(scheme) > 1
