"""Connection failures told apart: auth, host not allowed, TLS, DNS, refused, timeout."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError, SourceUnreachableError
from airflow_provider_mysqlcdc.cdc.source.connect_errors import explain_connect_failure


@pytest.mark.parametrize(
    "code, text, kind, says",
    [
        (1045, "Access denied for user 'cdc'@'10.0.0.7' (using password: YES)", ConfigError, "access denied"),
        (1130, "Host '10.0.0.7' is not allowed to connect to this MariaDB server", ConfigError, "refuses logins"),
        (2026, "SSL is required but the server doesn't support it", ConfigError, "TLS with db:3306 failed"),
        (
            2003,
            "Can't connect ... ([SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed)",
            ConfigError,
            "TLS with db:3306 failed",
        ),
        (
            3159,
            "Connections using insecure transport are prohibited while --require_secure_transport=ON.",
            ConfigError,
            "require_secure_transport",
        ),
        (
            2003,
            "Can't connect to MySQL server on 'db' ([Errno -2] Name or service not known)",
            ConfigError,
            "does not resolve",
        ),
        (
            2003,
            "Can't connect to MySQL server on 'db' ([Errno -3] Temporary failure in name resolution)",
            SourceUnreachableError,
            "cannot be resolved right now",
        ),
        (
            2003,
            "Can't connect to MySQL server on 'db' ([Errno 111] Connection refused)",
            SourceUnreachableError,
            "nothing accepts connections",
        ),
        (2003, "Can't connect to MySQL server on 'db' (timed out)", SourceUnreachableError, "no answer"),
        (2013, "Lost connection to MySQL server during query", SourceUnreachableError, "cannot connect"),
    ],
)
def test_each_failure_names_its_own_fix(code, text, kind, says):
    e = explain_connect_failure("db", 3306, "cdc", code, text, "$MYSQLCDC_PASSWORD")
    assert type(e) is kind and says in str(e) and "Fix:" in str(e), str(e)
