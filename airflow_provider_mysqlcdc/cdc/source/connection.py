"""The pymysql connection class every engine connection uses.

Why a subclass: PyMySQL (1.2) builds a TLS context for every connection, even when TLS is
only *preferred* (no ``ssl`` option set), and building one loads the system's CA
certificates: 10-20 ms of CPU each time. It also decides what a configured TLS verifies
(``_tls_context``): by default the certificate and the host name, even without a CA file. The stream opens several short connections per
micro-batch on the driver and one or two per range on executors, so this was 3-5% of the
executors' Python CPU and part of every micro-batch's latency. A context depends only on
the TLS settings and is safe to share between connections and threads, so one is built per
process and settings, and rebuilt after ``TLS_CONTEXT_TTL_S`` so rotated CA or client
certificate files are picked up by long-running streams.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pymysql.connections
import pymysql.err

from ..errors import BinlogPurgedError, SourceUnreachableError

TLS_CONTEXT_TTL_S = 600.0

_contexts: dict[tuple[tuple[str, str], ...], tuple[float, Any]] = {}
_lock = threading.Lock()


def _key(sslp: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), repr(v)) for k, v in sslp.items()))


TLS_MODES = ("verify-full", "verify-ca", "trust")


def tls_mode(sslp: dict[str, Any]) -> str:
    """The verification a TLS setting asks for: ``verify-full`` unless said otherwise."""
    mode = sslp.get("mode") or ("verify-ca" if sslp.get("check_hostname", True) is False else "verify-full")
    if mode not in TLS_MODES:
        from ..errors import ConfigError

        raise ConfigError(
            f"ssl_mode: found {mode!r}, need one of {', '.join(TLS_MODES)}. Fix: verify-full (the "
            "default: certificate and host name), verify-ca, or trust (encrypted, not verified)."
        )
    return mode


def _tls_context(sslp: dict[str, Any]) -> Any:
    """The server's certificate is verified whenever TLS is configured, against the given CA
    or else the system's (PyMySQL verifies nothing without a CA file): a man in the middle
    must not be able to read the database. Only ``mode: trust`` turns that off."""
    import ssl

    mode = tls_mode(sslp)
    ctx = ssl.create_default_context(cafile=sslp.get("ca"), capath=sslp.get("capath"))
    if mode == "trust":
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.check_hostname = mode == "verify-full"
        ctx.verify_mode = ssl.CERT_REQUIRED
    if sslp.get("cert"):
        ctx.load_cert_chain(sslp["cert"], keyfile=sslp.get("key"), password=sslp.get("password"))
    if sslp.get("cipher"):
        ctx.set_ciphers(sslp["cipher"])
    return ctx


class Connection(pymysql.connections.Connection):
    """``pymysql.connections.Connection`` with TLS contexts built once per process and settings."""

    def _create_ssl_ctx(self, sslp: Any) -> Any:
        if not isinstance(sslp, dict):  # an SSLContext given by the caller: used as it is
            return super()._create_ssl_ctx(sslp)
        key = _key(sslp)
        now = time.monotonic()
        with _lock:
            hit = _contexts.get(key)
            if hit is not None and now - hit[0] < TLS_CONTEXT_TTL_S:
                return hit[1]
        ctx = _tls_context(sslp)
        with _lock:
            _contexts[key] = (now, ctx)
        return ctx


def connect(**kwargs: Any) -> Connection:
    """A pymysql connection (same arguments as ``pymysql.connect``)."""
    return Connection(**kwargs)


_RETRY_MYSQL_CODES = {1053, 2003, 2006, 2013, 2055, 1927}  # shutdown, can't connect, gone, lost


def is_connection_loss(e: BaseException) -> bool:
    """A lost or refused connection (server restart), worth retrying; never a purged binlog."""
    if isinstance(e, BinlogPurgedError):
        return False
    if isinstance(e, SourceUnreachableError):
        return True
    if isinstance(e, (pymysql.err.OperationalError, pymysql.err.InterfaceError)):
        code = e.args[0] if e.args else None
        return code in _RETRY_MYSQL_CODES or isinstance(e, pymysql.err.InterfaceError)
    return isinstance(e, (ConnectionError, EOFError, BrokenPipeError, TimeoutError))
