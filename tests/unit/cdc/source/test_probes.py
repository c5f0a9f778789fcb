"""Settings checked before any Spark job: storage written and read back, start offsets."""

from __future__ import annotations

import os

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.source.probes import check_startup_offset, probe_writable


def test_a_writable_location_passes_and_keeps_nothing(tmp_path):
    target = tmp_path / "a" / "b" / "state"
    probe_writable(str(target), "state_location")
    assert not (tmp_path / "a").exists(), "the directories the probe made are removed again"
    existing = tmp_path / "lake"
    existing.mkdir()
    probe_writable(str(existing), "sink root")
    assert existing.exists() and list(existing.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes everywhere")
def test_an_unwritable_location_fails_with_a_fix(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    with pytest.raises(ConfigError, match="is not writable.*Fix:"):
        probe_writable(str(ro / "state"), "state_location")


def test_an_unwritable_location_fails_with_a_fix_as_root_too(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(ConfigError, match=r"state_location '.*file/state' is not writable.*Fix:"):
        probe_writable(str(blocker / "state"), "state_location")
    with pytest.raises(ConfigError, match="cannot be opened.*Fix:"):
        probe_writable("nosuchscheme://bucket/x", "state_location")


@pytest.mark.parametrize(
    "spec, message",
    [
        (None, "needs startup_offset"),
        ({}, "needs startup_offset"),
        ({"file": "mysql-bin.000003", "pos": 4}, "unknown key"),
        ({"file": "mysql-bin", "position": 4}, "need a binlog file name"),
        ({"file": "mysql-bin.000003", "position": "4"}, "need an integer >= 4"),
        ({"file": "mysql-bin.000003", "position": 1}, "need an integer >= 4"),
        ({"gtid": ""}, "need a GTID set"),
        ({"file": "mysql-bin.000001", "position": 4}, "is not on the server"),
    ],
)
def test_bad_startup_offsets_name_the_fix(spec, message):
    with pytest.raises(ConfigError, match=message) as e:
        check_startup_offset(spec, ["mysql-bin.000002", "mysql-bin.000003"])
    assert "Fix:" in str(e.value)


def test_good_startup_offsets_pass():
    check_startup_offset({"file": "mysql-bin.000003", "position": 4}, ["mysql-bin.000003"])
    check_startup_offset({"file": "mysql-bin.000003"}, None)
    check_startup_offset({"gtid": "0-1-100"}, ["mysql-bin.000003"])


def test_a_malformed_pipeline_file_names_the_file_and_the_fix(tmp_path):
    from airflow_provider_mysqlcdc.cdc.pipeline import load_pipeline_config

    for text, message in (
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "found a JSON list"),
        ('{"name": "x"}', "lacks the key 'source'"),
        (
            '{"name": "x", "source": {}, "include": ["a.b"], "state_location": "/s", "stream": {"bogus": 1}}',
            "unknown key 'bogus'",
        ),
    ):
        f = tmp_path / "pipeline.json"
        f.write_text(text)
        with pytest.raises(ConfigError, match=message) as e:
            load_pipeline_config(str(f), password="x")
        assert "Fix:" in str(e.value) and (str(f) in str(e.value) or "bogus" in str(e.value))
