"""The HTTP server behind `/metrics`: prometheus-client's WSGI app on a threading server, plain
HTTP or HTTPS (decision 0035, addendum).

prometheus-client's own `start_http_server(certfile=...)` wraps the listening socket, so the TLS
handshake runs inside `accept()` on the one serving thread: a client that connects and says
nothing (a TCP probe left open) would stop every scrape behind it. Here the accepted socket is
wrapped without a handshake and the handshake runs in the connection's own thread, under a
timeout; a failed one (a plain-HTTP request, a certificate the CA did not sign) closes that
connection and is logged at debug level, not as a traceback.

The socket timeout bounds each read, not the connection: a client trickling a byte every few
seconds would keep its thread forever. So each connection also has a deadline
(`CONNECTION_DEADLINE_S`, handshake, request and answer together) past which its socket is shut
down, and at most `MAX_CONNECTIONS` are served at once: one more is closed as soon as it is
accepted.
"""

from __future__ import annotations

import logging
import socket
import ssl
import sys
import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, make_wsgi_app

from .settings import MetricsTls

log = logging.getLogger(__name__)

CONNECTION_TIMEOUT_S = 10.0  # each read or write
CONNECTION_DEADLINE_S = 30.0  # the whole connection
MAX_CONNECTIONS = 32  # served at once


def ssl_context(tls: MetricsTls) -> ssl.SSLContext:
    """The server side of `/metrics` over HTTPS: the process's certificate, TLS 1.2 or newer,
    and with `client_auth_required` a client certificate verified against the cluster CA.
    OSError/ssl.SSLError when a file cannot be read or does not match."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(tls.files.certificate, tls.files.key)
    if tls.client_auth_required:
        context.load_verify_locations(tls.files.ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No access log: Prometheus scrapes every few seconds."""


def _cut_off(sock: socket.socket) -> None:
    """Shut the TCP connection down under whatever the connection's thread is blocked in (a
    handshake, a read): it sees the end of the stream and gives up. The plain socket's shutdown,
    not the SSLSocket's, which would drop its TLS state under the other thread."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


class MetricsServer(ThreadingMixIn, WSGIServer):
    """One thread per connection (daemon threads: a scrape never holds up the exit), at most
    `max_connections` at once, each cut off `deadline_s` after it was accepted."""

    daemon_threads = True
    context: ssl.SSLContext | None = None
    deadline_s = CONNECTION_DEADLINE_S
    max_connections = MAX_CONNECTIONS
    _slots: threading.BoundedSemaphore | None = None

    def process_request(self, request: Any, client_address: Any) -> None:
        if self._slots is None:  # only the serving thread comes here
            self._slots = threading.BoundedSemaphore(self.max_connections)
        if not self._slots.acquire(blocking=False):
            log.debug(
                "/metrics connection from %s closed: %d served",
                client_address,
                self.max_connections,
            )
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started (the caller closes the socket)
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        deadline = threading.Timer(self.deadline_s, _cut_off, (request,))
        deadline.daemon = True
        deadline.start()
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            deadline.cancel()
            deadline.join()  # no cut-off of a descriptor closed and reused by then
            self.shutdown_request(request)
            assert self._slots is not None
            self._slots.release()

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        sock.settimeout(CONNECTION_TIMEOUT_S)
        if self.context is not None:
            sock = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            request.do_handshake()  # in this connection's thread, bounded by its timeout
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # ssl.SSLError too: a failed handshake, a client gone
            log.debug("/metrics connection from %s failed: %s", client_address, exc)
            return
        super().handle_error(request, client_address)


def _family(host: str, port: int) -> socket.AddressFamily:
    info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    return info[0][0]


def serve(host: str, port: int, tls: MetricsTls | None) -> MetricsServer:
    """Serve the default registry on `host:port` (0: a free port) from a daemon thread, over
    HTTPS when `tls` is given. OSError when the address cannot be bound or a TLS file read."""
    context = ssl_context(tls) if tls is not None else None

    class Server(MetricsServer):
        address_family = _family(host, port)

    server = make_server(host, port, make_wsgi_app(REGISTRY), Server, handler_class=_QuietHandler)
    server.context = context
    server.deadline_s = CONNECTION_DEADLINE_S
    server.max_connections = MAX_CONNECTIONS
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server
