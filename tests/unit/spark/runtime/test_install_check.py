"""pyspark and pyspark-client at different versions are refused before any Spark job."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.spark.runtime.install_check import check_pyspark_install, installed


def test_a_mixture_of_two_releases_is_refused_with_the_pip_line_that_fixes_it():
    with pytest.raises(
        ConfigError, match=r"pyspark 4.3.0 and pyspark-client 4.2.0 .*Fix: .*pip install 'pyspark==4.2.0'"
    ):
        check_pyspark_install("4.3.0", "4.2.0")
    check_pyspark_install("4.2.0", "4.2.0")
    check_pyspark_install("4.2.0", "")  # no client installed


def test_this_environment_is_one_release():
    check_pyspark_install()
    assert installed("pyspark") and installed("no-such-distribution-xyz") is None
