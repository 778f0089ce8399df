"""A gate between the storage nodes and the S3 server of the tiered-storage fault tests: an
HTTP reverse proxy on a free loopback port (a thread of the test process) that passes every
request to the server, except that while it is closed it holds the uploads of segment objects
(PUTs of anything outside a partition's `metadata/`): a store that is slow to take a segment,
so a test can act while a leader is mid-copy, without sleeps. Metadata records, reads and
deletes go through, so a new leader can take over meanwhile.

A held request is sent on when the gate opens, even when its client gave up meanwhile: the
store had the whole request and only its answer is late, and it commits it all the same (S3
does: a PUT whose body arrived is not undone by the client's timeout or cancellation). The
server behind it can be replaced (`upstream_port`), e.g. by a restarted one; a server that is
down answers 502, as an unreachable endpoint fails a client.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from riverlog.cluster.readiness import free_port

HOST = "127.0.0.1"
HOLD_LIMIT_S = 120.0  # a held request is sent on after this long at the latest
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}


class S3Gate:
    """Lifecycle: construct (serving at once) → `close()`/`open()` as the test needs →
    `stop()`. `held` is how many uploads are waiting now."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.held = 0
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        gate = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return None

            def do_GET(self) -> None:
                gate._forward(self)

            do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

        self._server = ThreadingHTTPServer((HOST, self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def close(self) -> None:
        """Hold segment uploads from now on."""
        self._open.clear()

    def open(self) -> None:
        """Send the held uploads on (but those whose client left) and hold no more."""
        self._open.set()

    def stop(self) -> None:
        self._open.set()
        self._server.shutdown()
        self._server.server_close()

    def _forward(self, handler: BaseHTTPRequestHandler) -> None:
        body = _read_body(handler)
        if (
            handler.command == "PUT"
            and "/metadata/" not in handler.path
            and not self._open.is_set()
        ):
            with self._lock:
                self.held += 1
            try:
                self._open.wait(HOLD_LIMIT_S)
            finally:
                with self._lock:
                    self.held -= 1
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_BY_HOP}
        try:
            upstream = http.client.HTTPConnection(HOST, self.upstream_port, timeout=30)
            upstream.request(handler.command, handler.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
            status, reason = response.status, response.reason
            reply_headers = response.getheaders()
            upstream.close()
        except OSError:
            status, reason, reply_headers, data = 502, "Bad Gateway", [], b""
        head = handler.command == "HEAD"  # its Content-Length is the object's: kept
        handler.send_response(status, reason)
        for key, value in reply_headers:
            if key.lower() not in _HOP_BY_HOP and (head or key.lower() != "content-length"):
                handler.send_header(key, value)
        if not head:
            handler.send_header("Content-Length", str(len(data)))
        try:
            handler.end_headers()
            if not head:
                handler.wfile.write(data)
        except OSError:  # the client left (timed out, cancelled): the store committed anyway
            handler.close_connection = True


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    length = handler.headers.get("Content-Length")
    if length is not None:
        return handler.rfile.read(int(length))
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = bytearray()
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += handler.rfile.read(size)
            handler.rfile.readline()
    return b""
