"""A local S3 API server for the tests: moto's standalone server (``moto[server]``).

Why moto: it serves the S3 REST API over plain HTTP on localhost, honours ``If-None-Match: *``
on PUT (delta-rs' exclusive commit of a Delta version), installs from PyPI, and needs no
Docker, JVM or network. ``aws_env`` gives the test process the credentials for its own reads
only while a block runs, so what the pipeline's processes get comes from the Airflow
connection (or the options) under test, never from the test's environment.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

BUCKET = "lake"
KEY_ID = "AKIAMYSQLCDCTEST"
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def s3_server(log_dir: Path) -> Iterator[dict[str, Any]]:
    """moto's server on a free port with one bucket; yields endpoint, key id, secret, region."""
    port = _free_port()
    log = log_dir / "moto.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"moto server did not start: {log.read_text(errors='replace')[-2000:]}")
                time.sleep(0.2)
        info = {
            "endpoint": f"http://127.0.0.1:{port}",
            "key_id": KEY_ID,
            "secret": f"s3cr3t-{uuid.uuid4().hex}",
            "region": REGION,
            "bucket": BUCKET,
        }
        with aws_env(info):
            import boto3

            boto3.client("s3").create_bucket(Bucket=BUCKET)
        yield info
    finally:
        proc.kill()
        proc.wait(10)


def credentials(info: dict[str, Any]):
    from airflow_provider_mysqlcdc.cdc.store.object_store import StorageCredentials

    return StorageCredentials(info["key_id"], info["secret"], None, info["region"], info["endpoint"])


@contextlib.contextmanager
def aws_env(info: dict[str, Any]) -> Iterator[None]:
    """The server's credentials in this process's environment while the block runs."""
    from airflow_provider_mysqlcdc.cdc.store.object_store import ALL_NAMES, use_credentials

    saved = {k: os.environ.get(k) for k in ALL_NAMES}
    use_credentials(credentials(info))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def s3_delta_rows(info: dict[str, Any], uri: str, identity) -> dict:
    from deltalake import DeltaTable

    rows = DeltaTable(uri, storage_options=credentials(info).storage_options()).to_pyarrow_table().to_pylist()
    return {tuple(r[c] for c in identity): r for r in rows}
