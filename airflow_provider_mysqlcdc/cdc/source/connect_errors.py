"""Why a connection to the source failed, told apart so the fix names the right thing.

A wrong password, a host name that does not resolve, a port nobody listens on, a TLS
mismatch and a host the server refuses all surface from PyMySQL as an OperationalError with
a code and the driver's text. A user needs to know which of them it is: "check host and
port" is the wrong advice for a certificate problem.

Refused connections and timeouts are ``SourceUnreachableError`` (a restarting server looks
exactly like that, and the stream retries it); the rest are configuration errors.
"""

from __future__ import annotations

from ..errors import ConfigError, SourceUnreachableError

_TLS_WORDS = ("ssl", "tls", "certificate", "wrong version number", "handshake", "secure transport")
_DNS_WORDS = (
    "name or service not known",
    "nodename nor servname",
    "errno -2]",
    "getaddrinfo failed",
    "no address associated",
)
# A resolver that cannot answer right now (EAI_AGAIN): transient, retried like a refused connection.
_DNS_AGAIN_WORDS = ("temporary failure in name resolution", "errno -3]")


def explain_connect_failure(
    host: str, port: int, user: str, code: int | None, text: str, password_source: str
) -> ConfigError:
    where = f"{host}:{port}"
    low = text.lower()
    if code == 1045:
        return ConfigError(
            f"cannot log in to {where} as {user!r}: access denied (wrong user or password). Fix: "
            f"check the user and password (the password comes from {password_source}); MariaDB "
            "answers a login without TLS the same way when it has require_secure_transport=ON: then "
            "set the connection's TLS fields."
        )
    if code == 1130 or "is not allowed to connect" in low:
        return ConfigError(
            f"{where} refuses logins of {user!r} from this machine: {text}. Fix: create the user for "
            f"this host on the server (e.g. CREATE USER '{user}'@'%' ... and its grants), or connect "
            "from a host it allows."
        )
    if code in (2026, 3159) or any(w in low for w in _TLS_WORDS):
        return ConfigError(
            f"TLS with {where} failed: {text}. Fix: if the server has no TLS, remove the "
            "connection's TLS fields; if it has, set the CA that signed its certificate (ssl_ca; "
            "without it the system's CAs are asked), and use ssl_mode verify-ca only if the "
            "certificate does not name this host; a server with require_secure_transport=ON needs "
            "TLS configured."
        )
    if any(w in low for w in _DNS_WORDS):
        return ConfigError(
            f"the host name {host!r} does not resolve ({text}). Fix: check the connection's Host "
            "(a DNS name this worker and every Spark node can resolve, or an IP address)."
        )
    if any(w in low for w in _DNS_AGAIN_WORDS):
        return SourceUnreachableError(
            f"the host name {host!r} cannot be resolved right now ({text}). Fix: check "
            "this machine's DNS resolver; the connection's Host if it persists."
        )
    if "refused" in low:
        return SourceUnreachableError(
            f"nothing accepts connections at {where} ({text}). Fix: check the port, and "
            "that the server is running and listens on that address."
        )
    if "timed out" in low or "timeout" in low:
        return SourceUnreachableError(
            f"no answer from {where} ({text}). Fix: check the host and the port (another "
            "service's port may accept the connection and then say nothing), and that no "
            "firewall drops the traffic from this machine."
        )
    return SourceUnreachableError(
        f"cannot connect to MySQL at {where}: {text}. Fix: check host and port, and that "
        "the server is running and reachable."
    )
