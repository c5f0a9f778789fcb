"""GTID gaps (cdc/binlog/gtid_watch.py): a forward jump per source stops; re-reads and the first sight do not."""

from __future__ import annotations

import numpy as np
import pytest

from airflow_provider_mysqlcdc.cdc.binlog.gtid_watch import GtidGapError, GtidWatch, watch_or_none


def test_consecutive_numbers_per_domain_pass_and_a_jump_stops_naming_where_and_the_fix():
    w = GtidWatch()
    for seq in (5, 6, 7):
        w.seen(0, seq, "mysql-bin.000002", 100 * seq)
    w.seen(1, 40, "mysql-bin.000002", 800)  # another domain starts where it is
    w.seen(0, 8, "mysql-bin.000002", 900)
    w.seen(0, 3, "mysql-bin.000002", 950)  # read again (or out of order): not a gap
    with pytest.raises(GtidGapError) as e:
        w.seen(0, 11, "mysql-bin.000002", 1000)
    msg = str(e.value)
    assert "mysql-bin.000002:1000" in msg and "seq 8 to 11" in msg and "0-*-9..10" in msg
    assert "the stream cannot stay exact" in msg and "Fix:" in msg and "allow_gtid_gaps" in msg
    assert e.value.offset.position == 1000
    # the jump was not taken as seen: reading from there again stops again
    with pytest.raises(GtidGapError):
        w.seen(0, 11, "mysql-bin.000002", 1000)


def test_mysql_uuids_are_sources_of_their_own():
    w = GtidWatch()
    a, b = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4e11fa47-71ca-11e1-9e33-c80aa9429562"
    w.seen(a, 1, "binlog.000001", 10, "mysql")
    w.seen(b, 100, "binlog.000001", 20, "mysql")
    w.seen(a, 2, "binlog.000001", 30, "mysql")
    with pytest.raises(GtidGapError, match=rf"\({a}:3\)"):
        w.seen(a, 4, "binlog.000001", 40, "mysql")


def test_a_stretch_checked_with_numpy_agrees_with_one_by_one():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 30))
        domains = rng.integers(0, 3, n).astype(np.uint32)
        steps = rng.choice([0, 1, 1, 1, 1, 2], n)  # 0: a repeat, 2: a gap
        seqs = np.zeros(n, np.uint64)
        counters = {0: 10, 1: 20, 2: 30}
        for i, d in enumerate(domains.tolist()):
            counters[d] += int(steps[i])
            seqs[i] = counters[d]
        pos = np.arange(n, dtype=np.int64) * 10 + 4
        one, many = GtidWatch(), GtidWatch()
        one.seen(0, 10, "f.000001", 1), many.seen(0, 10, "f.000001", 1)
        want = got = None
        try:
            for d, s, p in zip(domains.tolist(), seqs.tolist(), pos.tolist()):
                one.seen(d, s, "f.000001", p)
        except GtidGapError as e:
            want = (e.source, e.last, e.seq, e.offset.position)
        try:
            many.seen_many(domains, seqs, pos, "f.000001")
        except GtidGapError as e:
            got = (e.source, e.last, e.seq, e.offset.position)
        assert got == want
        if want is None:
            assert one.last == many.last


def test_allowing_gaps_means_no_watch():
    assert watch_or_none(True) is None and isinstance(watch_or_none(False), GtidWatch)


def test_the_stream_option_is_a_boolean_and_reaches_the_source_settings():
    from airflow_provider_mysqlcdc.cdc.errors import ConfigError
    from airflow_provider_mysqlcdc.cdc.pipeline import StreamOptions

    assert StreamOptions().allow_gtid_gaps is False
    assert StreamOptions.from_mapping({"allow_gtid_gaps": True}).allow_gtid_gaps is True
    with pytest.raises(ConfigError, match="allow_gtid_gaps: found 'yes', need true or false. Fix:"):
        StreamOptions.from_mapping({"allow_gtid_gaps": "yes"})
