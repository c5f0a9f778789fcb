"""TLS to the source verifies the server by default (issue 19, safe defaults).

A private MariaDB with a certificate from a CA made here with ``openssl``, naming only the host
``db.example`` (not 127.0.0.1, where the tests connect): so "certificate valid but for another
host" and "certificate not from a trusted CA" can both be shown against one server.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from mysqlcdc_harness.mariadb import MariaDB

pytestmark = [pytest.mark.integration]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def tls_server():
    base = Path(tempfile.mkdtemp(prefix="mysqlcdc-tls-"))
    certs = base / "certs"
    certs.mkdir()
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=mysqlcdc test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        cwd=certs,
    )
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=db.example",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        cwd=certs,
    )
    (certs / "san.ext").write_text("subjectAltName=DNS:db.example\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        "-out",
        "server.pem",
        cwd=certs,
    )
    server = MariaDB(
        base_dir=base / "db",
        server_id=7,
        extra_args=(
            f"--ssl-ca={certs / 'ca.pem'}",
            f"--ssl-cert={certs / 'server.pem'}",
            f"--ssl-key={certs / 'server.key'}",
        ),
    )
    server.start()
    try:
        yield server, certs / "ca.pem"
    finally:
        server.stop()


def _cipher(source) -> str:
    conn = source.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            return cur.fetchone()[1]
    finally:
        conn.close()


def test_the_certificate_and_the_host_name_are_verified_unless_asked_otherwise(tls_server):
    server, ca = tls_server
    # verify-full (the default): the CA is right, but the certificate names db.example, not 127.0.0.1
    with pytest.raises(ConfigError, match="TLS with 127.0.0.1.*Fix:") as e:
        server.source_config(ssl={"ca": str(ca)}).connect()
    assert "hostname" in str(e.value).lower() or "ip address mismatch" in str(e.value).lower()
    # verify-ca: the certificate is checked against the CA, the name is not
    assert _cipher(server.source_config(ssl={"ca": str(ca), "mode": "verify-ca"}))
    assert _cipher(server.source_config(ssl={"ca": str(ca), "check_hostname": False}))


def test_tls_without_a_ca_file_checks_the_systems_cas_instead_of_nothing(tls_server):
    server, _ca = tls_server
    # PyMySQL alone would encrypt without checking anything here: a man in the middle could read it all
    with pytest.raises(ConfigError, match="TLS with .*certificate verify failed"):
        server.source_config(ssl={"mode": "verify-ca"}).connect()
    with pytest.raises(ConfigError, match="TLS with"):
        server.source_config(ssl={"mode": "verify-full"}).connect()
    # the explicit opt-out: encrypted, unverified
    assert _cipher(server.source_config(ssl={"mode": "trust"}))


def test_the_connection_fields_reach_the_mode_and_trust_is_warned_about(tls_server, monkeypatch, caplog, capsys):
    import json

    from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook
    from mysqlcdc_harness.mariadb import ROOT_PASSWORD

    server, ca = tls_server

    def hook(extra: dict) -> MySqlCdcHook:
        monkeypatch.setenv(
            "AIRFLOW_CONN_TLS_SRC",
            json.dumps(
                {
                    "conn_type": "mysql_cdc",
                    "host": "127.0.0.1",
                    "port": server.port,
                    "login": "root",
                    "password": ROOT_PASSWORD,
                    "extra": extra,
                }
            ),
        )
        return MySqlCdcHook("tls_src")

    assert hook({}).get_source_config().ssl is None
    src = hook({"ssl_ca": str(ca), "ssl_mode": "verify-ca"}).get_source_config()
    assert src.ssl == {"ca": str(ca), "mode": "verify-ca"} and _cipher(src)
    assert src.jdbc_tls_params() == f"sslMode=verify-ca&serverSslCert={ca}"
    with pytest.raises(ConfigError):
        hook({"ssl_ca": str(ca)}).get_source_config().connect()
    capsys.readouterr()
    with caplog.at_level("WARNING"):
        src = hook({"ssl_mode": "trust"}).get_source_config()
    assert _cipher(src) and src.jdbc_tls_params() == "sslMode=trust"
    said = caplog.text + "".join(capsys.readouterr())  # Airflow's structlog may print it instead
    assert "does not verify its certificate (ssl_mode trust)" in said
    with pytest.raises(ConfigError, match="ssl_mode: found 'yes'.*Fix: verify-full"):
        hook({"ssl_mode": "yes"}).get_source_config()
