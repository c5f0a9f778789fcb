"""A failover to a new endpoint is followed by editing the source's Airflow connection: each
launch (the stream, its relaunch by the watchdog, a batch read again) takes the address from the
connection and writes it to the pipeline's state, which was planned with the old one."""

from __future__ import annotations

import json
import logging

from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig
from airflow_provider_mysqlcdc.cdc.source.config import ServerIdRange, SourceConfig
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.cdc.store.pipeline_file import follow_connection, read_config, write_config

PLANNED = SourceConfig(
    host="db-primary.internal",
    port=3306,
    user="cdc",
    password="s3cret-old",
    server_id_range=ServerIdRange(6000, 6019),
    server_time_zone="Europe/Berlin",
    zero_dates="text",
)


def test_only_the_address_follows_the_connection():
    now = SourceConfig(
        host="db-replica.internal",
        port=3307,
        user="cdc2",
        password="s3cret-new",
        ssl={"ca": "/etc/ca.pem"},
        server_id_range=ServerIdRange(7000, 7019),
        server_time_zone="UTC",
    )
    followed, changes = PLANNED.following(now)
    assert (followed.host, followed.port, followed.user, followed.ssl) == ("db-replica.internal", 3307, "cdc2", now.ssl)
    # as planned: the values already read were read in that zone and zero-date rule
    assert (followed.server_time_zone, followed.zero_dates, followed.server_id_range) == (
        "Europe/Berlin",
        "text",
        ServerIdRange(6000, 6019),
    )
    assert changes == [
        "host 'db-primary.internal' -> 'db-replica.internal'",
        "port 3306 -> 3307",
        "user 'cdc' -> 'cdc2'",
        "TLS settings changed",
    ]
    assert not any("s3cret" in c for c in changes)


def test_the_same_address_changes_nothing():
    same = SourceConfig(host=PLANNED.host, port=PLANNED.port, user=PLANNED.user, password="other")
    followed, changes = PLANNED.following(same)
    assert changes == [] and followed is PLANNED


def test_a_launch_writes_the_connections_address_to_the_state_without_the_password(tmp_path, caplog):
    state = StateStore(str(tmp_path / "state"))
    write_config(state, PipelineConfig(name="p", source=PLANNED, include=("shop\\..*",), state_location=state.location))
    now = SourceConfig(host="db-replica.internal", port=3306, user="cdc", password="s3cret-new")
    with caplog.at_level(logging.WARNING):
        config = follow_connection(state, now, "mysql_cdc_default", logging.getLogger("t"))
    assert (config.source.host, config.source.password) == ("db-replica.internal", "s3cret-new")
    stored = read_config(state)
    assert stored.source.host == "db-replica.internal" and stored.source.server_time_zone == "Europe/Berlin"
    text = json.dumps(state.read_json("pipeline.json"))
    assert "s3cret" not in text
    assert "'db-primary.internal' -> 'db-replica.internal'" in caplog.text and "s3cret" not in caplog.text
    caplog.clear()
    follow_connection(state, now, "mysql_cdc_default", logging.getLogger("t"))
    assert "changed" not in caplog.text, "an address already followed is not reported again"
