"""Object-storage credentials (engine side and the aws connection) and the mirrored checkpoint.

The checkpoint mirror runs against fsspec's in-memory file system: the same calls as on S3."""

from __future__ import annotations

import json
import os
import time

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.store.object_store import (
    StorageCredentials,
    credentials_from_env,
    is_object_store,
    refuse_secret_options,
    use_credentials,
    with_storage_options,
)


def test_credentials_become_the_aws_variables_and_allow_http_only_for_an_http_endpoint():
    c = StorageCredentials("AKIA1", "sekret", "tok", "eu-west-1", "http://127.0.0.1:9000")
    env = c.env()
    assert env == {
        "AWS_ACCESS_KEY_ID": "AKIA1",
        "AWS_SECRET_ACCESS_KEY": "sekret",
        "AWS_SESSION_TOKEN": "tok",
        "AWS_REGION": "eu-west-1",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ALLOW_HTTP": "true",
    }
    assert "AWS_ALLOW_HTTP" not in StorageCredentials("a", "b", endpoint_url="https://s3.example.com").env()
    assert "sekret" not in repr(c) and "tok" not in repr(c)
    assert c.secrets() == ["sekret", "tok"]


def test_use_credentials_replaces_what_an_earlier_task_set(monkeypatch):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(k, raising=False)
    use_credentials(StorageCredentials("one", "s1", "old-token"))
    use_credentials(StorageCredentials("two", "s2"))
    assert os.environ["AWS_ACCESS_KEY_ID"] == "two" and "AWS_SESSION_TOKEN" not in os.environ
    assert credentials_from_env() == StorageCredentials("two", "s2")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    assert credentials_from_env({}) is None


def test_sink_options_get_the_credentials_in_memory_beside_the_users_storage_options():
    opts = {"root": "s3://b/t", "storage_options": {"AWS_REGION": "eu-west-1"}}
    merged = with_storage_options(opts, StorageCredentials("k", "s"), "delta")
    assert merged["storage_options"] == {
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
    }
    assert opts["storage_options"] == {"AWS_REGION": "eu-west-1"}, "the given options are not changed"
    assert with_storage_options(opts, None, "delta") == opts


@pytest.mark.parametrize("sink_type", ["postgres", "console"])
def test_a_sink_that_writes_no_files_gets_no_storage_options(sink_type):
    """The credentials of an S3 state location are not the PostgreSQL sink's: it refuses unknown
    options, so every snapshot batch on Spark Connect failed with 'bad options [... storage_options]'."""
    from airflow_provider_mysqlcdc.spark.sinks.factory import build_sink

    opts = {"dsn": {"host": "127.0.0.1", "dbname": "d", "user": "u"}, "schema": "s", "password": "pw"}
    out = with_storage_options(opts, StorageCredentials("k", "s"), sink_type)
    assert out == opts
    if sink_type == "postgres":
        from airflow_provider_mysqlcdc.cdc.pipeline import SinkConfig

        build_sink(SinkConfig(sink_type, out)).close()  # accepted: it connects to nothing until it writes


@pytest.mark.parametrize(
    "key", ["AWS_SECRET_ACCESS_KEY", "aws_session_token", "AWS_ACCESS_KEY_ID", "azure_storage_account_key", "password"]
)
def test_a_secret_in_storage_options_is_refused_with_the_fix(key):
    with pytest.raises(ConfigError) as e:
        refuse_secret_options({key: "x", "AWS_REGION": "eu-west-1"}, "sink_options.storage_options")
    assert key in str(e.value) and "aws_conn_id" in str(e.value) and "AWS_REGION" not in str(e.value)
    refuse_secret_options({"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://x"}, "s")
    refuse_secret_options(None, "s")


def test_object_store_urls():
    assert is_object_store("s3://b/x") and is_object_store("abfss://c@a.dfs.core.windows.net/x")
    assert not is_object_store("/tmp/x") and not is_object_store("file:///tmp/x")
    assert not is_object_store("C:/data")


# --- the aws connection --------------------------------------------------------------------------


def _conn(monkeypatch, conn_id: str, **body) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "aws", **body}))


def test_an_aws_connection_the_amazon_providers_way(monkeypatch):
    from airflow_provider_mysqlcdc.hooks.object_storage import storage_credentials

    _conn(
        monkeypatch,
        "lake",
        login="AKIA",
        password="sek",
        extra={"region_name": "eu-central-1", "endpoint_url": "http://minio:9000", "aws_session_token": "t"},
    )
    assert storage_credentials("lake") == StorageCredentials("AKIA", "sek", "t", "eu-central-1", "http://minio:9000")
    _conn(
        monkeypatch,
        "lake2",
        extra={
            "aws_access_key_id": "A2",
            "aws_secret_access_key": "S2",
            "service_config": {"s3": {"endpoint_url": "https://s3.local"}},
        },
    )
    assert storage_credentials("lake2") == StorageCredentials("A2", "S2", endpoint_url="https://s3.local")
    _conn(monkeypatch, "role", extra={"region_name": "us-east-2"})  # no keys: the instance role
    assert storage_credentials("role") == StorageCredentials(region="us-east-2")
    assert storage_credentials(None) is None and storage_credentials("") is None


def test_a_half_given_key_pair_or_a_missing_connection_names_the_fix(monkeypatch):
    from airflow_provider_mysqlcdc.hooks.object_storage import storage_credentials

    _conn(monkeypatch, "half", login="AKIA")
    with pytest.raises(ConfigError, match="an access key id but no secret key"):
        storage_credentials("half")
    with pytest.raises(ConfigError, match="'nope' does not exist.*create it"):
        storage_credentials("nope")


# --- the mirrored checkpoint ---------------------------------------------------------------------


def _write(path, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def test_the_mirror_uploads_changes_oldest_first_skips_temp_files_and_follows_purges(tmp_path):
    import fsspec

    from airflow_provider_mysqlcdc.spark.stream.offsets.checkpoint_mirror import CheckpointMirror

    url = f"memory://cp-{time.monotonic_ns()}/stream/checkpoint"
    m = CheckpointMirror(url, str(tmp_path / "work"))
    assert m.restore() == 0
    fs = fsspec.filesystem("memory")
    root = m.root
    _write(tmp_path / "work" / "metadata", '{"id": "q"}')
    _write(tmp_path / "work" / "offsets" / "0", 'v1\n{}\n{"end": 1}')
    _write(tmp_path / "work" / "offsets" / ".1.abc.tmp", "half written")
    _write(tmp_path / "work" / "offsets" / ".0.crc", "checksum")
    _write(tmp_path / "work" / "history.json.tmp-1234", "being renamed")
    assert m.sync() == 2
    assert sorted(p.removeprefix(root).lstrip("/") for p in fs.find(root)) == ["metadata", "offsets/0"]
    assert m.sync() == 0, "nothing changed, nothing uploaded"
    _write(tmp_path / "work" / "commits" / "0", "v1\n{}")
    _write(tmp_path / "work" / "metadata", '{"id": "q", "more": 1}')
    assert m.sync() == 2
    assert fs.cat_file(f"{root}/metadata") == b'{"id": "q", "more": 1}'
    os.remove(tmp_path / "work" / "offsets" / "0")  # Spark purged an old batch's log
    m.sync()
    assert not fs.exists(f"{root}/offsets/0")

    # another host (or this one after a crash) starts from the durable copy, whatever it has locally
    other = CheckpointMirror(url, str(tmp_path / "elsewhere"))
    _write(tmp_path / "elsewhere" / "offsets" / "9", "stale")
    assert other.restore() == 2
    got = sorted(
        os.path.relpath(os.path.join(d, f), tmp_path / "elsewhere")
        for d, _, fs_ in os.walk(tmp_path / "elsewhere")
        for f in fs_
    )
    assert got == ["commits/0", "metadata"]
    assert other.sync() == 0, "a restored copy is in step"
