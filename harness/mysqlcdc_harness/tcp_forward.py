"""A TCP forwarder: a second address for a server (an endpoint that can go away by itself).

The failover tests plan a pipeline through it, as through a primary's endpoint, then close it
(the old endpoint is gone) while the server stays: only a client that follows the connection to
the server's own address keeps working.
"""

from __future__ import annotations

import contextlib
import socket
import threading


def _cut(socks: list[socket.socket]) -> None:
    """End connections as a dead peer would: ``shutdown`` first. A bare ``close`` from another
    thread does not wake a ``recv`` blocked on the socket, so the client would never see the
    connection end and would wait on it for good."""
    for s in socks:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            s.close()


class TcpForward:
    """Listens on 127.0.0.1:<port> and forwards every connection to ``target``."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                with self._lock:
                    target = self.target
                upstream = socket.create_connection(target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                moved = self.target != target  # retargeted while this one was connecting
                if not moved:
                    self._open += [client, upstream]
            if moved:
                _cut([client, upstream])
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def retarget(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        """The endpoint now leads to another server (a managed database's endpoint after a failover):
        open connections are cut, new ones reach ``target``."""
        with self._lock:
            self.target = (target_host, target_port)
            cut, self._open = self._open, []
        _cut(cut)

    def close(self) -> None:
        """Stop listening and cut every forwarded connection: nothing answers at ``port`` now."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            cut, self._open = self._open, []
        _cut(cut)

    def __enter__(self) -> "TcpForward":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
