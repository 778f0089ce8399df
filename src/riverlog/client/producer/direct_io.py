"""The producer sender's sockets to partition leaders' direct ports (decision 0047), driven on
the sender thread itself.

`Wakeup` replaces the sender's `threading.Event` when the direct path is on: the same
set/clear/wait, but `wait` is a `select` over a socket pair (what `set` writes to, from any
thread) and every direct connection. So a leader's answer wakes the thread that settles it,
and a request goes on the wire from the thread that built it: one thread wake-up per answer,
where a reader thread per connection would add a hand-off (the SDK's streams counted them,
decision 0019).

`DirectConnection` is one non-blocking socket in the zero-copy channel's framing, connected in
the background (the connect never blocks the sender, which routes under the accumulator's lock;
frames queue until it is done, and a failed connect closes the connection): frames go out
as their pieces with `socket.sendmsg` (a batch's header and records as they are, no join); what
the socket does not take at once waits for writability. Answers are read into one buffer and cut
into frames: `[u32 length][ProduceResponse]`, tagged with its request's correlation id, or
`[u32 length][DataGrantResponse]` for a grant frame (told apart by their first byte: a produce
answer always carries its correlation id, so it is never empty and starts with one of
ProduceResponse's tags; a grant answer is empty, NONE, or starts with error_code's tag).
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import selectors
import socket
from collections.abc import Callable
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.zerocopy import FRAME_HEADER, MAX_RESPONSE_HEADER_BYTES

log = logging.getLogger(__name__)

_IOV_MAX: Final = 1024  # Linux's limit on the pieces of one sendmsg
_READ_CHUNK: Final = 256 * 1024
_PRODUCE_ANSWER_TAGS: Final = frozenset({0x0A, 0x10, 0x18})  # ProduceResponse fields 1, 2, 3

Handler = Callable[[int], None]
"""Called on the sender thread with the selector's event mask of a ready socket."""


class Wakeup:
    """A `threading.Event` for the sender's loop whose `wait` also serves the direct sockets.
    `set` from any thread; `clear`, `wait`, `register`, `modify`, `unregister` and `close` on
    the sender thread only."""

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._reader, selectors.EVENT_READ, None)
        self._flag = False

    def set(self) -> None:
        if not self._flag:
            self._flag = True
            try:
                self._writer.send(b"\0")
            except OSError:  # the pair is full (already readable) or closed (sender gone)
                pass

    def is_set(self) -> bool:
        return self._flag

    def clear(self) -> None:
        # Whatever was set before this is looked at by the caller next; a set() after it
        # writes again. Bytes left in the pair are drained by `wait`.
        self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        """Until `set` or `timeout`, serving ready sockets meanwhile (their handlers run here);
        `timeout` 0 polls the sockets once. Set already: the sockets are still polled once
        (timeout 0), so leaders' answers do not wait turns while the sender is kept busy."""
        if self._flag:
            timeout = 0
        for key, mask in self._selector.select(timeout):
            handler = key.data
            if handler is None:
                self._drain()
            else:
                handler(mask)
        return self._flag

    def _drain(self) -> None:
        try:
            while self._reader.recv(4096):
                pass
        except OSError:
            pass

    def register(self, sock: socket.socket, events: int, handler: Handler) -> None:
        self._selector.register(sock, events, handler)

    def modify(self, sock: socket.socket, events: int, handler: Handler) -> None:
        self._selector.modify(sock, events, handler)

    def unregister(self, sock: socket.socket) -> None:
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError):
            pass

    def close(self) -> None:
        self._selector.close()
        self._reader.close()
        self._writer.close()


class DirectConnection:
    """One connection to a storage node's direct port. `on_answer(payload, is_grant)` gets each
    answer frame's payload (a memoryview valid during the call); `on_closed(error)` once, when
    the connection failed or was closed (by either side). Sender thread only."""

    def __init__(
        self,
        host: str,
        port: int,
        wakeup: Wakeup,
        on_answer: Callable[[memoryview, bool], None],
        on_closed: Callable[[RiverlogError], None],
    ) -> None:
        self.address = f"{host}:{port}"
        # Non-blocking from the start (the sender routes inside the accumulator's drain, under
        # its lock): the connect completes in the background, frames queue meanwhile, and the
        # selector reports writability once it is done (or failed: `on_closed`). A host name
        # is resolved here (the metadata carries addresses; a name must resolve quickly).
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            raise RiverlogError(
                f"cannot connect to {self.address}: {exc}", ErrorCode.NETWORK_EXCEPTION
            ) from None
        sock.setblocking(False)
        code = sock.connect_ex(address)
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            raise RiverlogError(
                f"cannot connect to {self.address}: {os.strerror(code)}",
                ErrorCode.NETWORK_EXCEPTION,
            )
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._wakeup = wakeup
        self._on_answer = on_answer
        self._on_closed = on_closed
        self._out: collections.deque[bytes | memoryview] = collections.deque()
        self._buffer = bytearray(_READ_CHUNK)
        self._start = 0  # unparsed bytes are _buffer[_start:_end]
        self._end = 0
        self.closed = False
        self.connecting = code != 0
        """The connect is still in progress (frames sent meanwhile are queued)."""
        self.unreachable = False
        """Closed because the connect failed or was given up (`give_up`)."""
        wakeup.register(
            sock, selectors.EVENT_WRITE if self.connecting else selectors.EVENT_READ, self._ready
        )

    def send(self, pieces: list[bytes | memoryview]) -> None:
        """Queue a frame's pieces and write what the socket takes now."""
        if self.closed:
            return
        self._out.extend(pieces)
        if len(self._out) == len(pieces) and not self.connecting:  # nothing waited: write now
            self._flush()

    def _flush(self) -> None:
        out = self._out
        try:
            while out:
                chunk = [out[i] for i in range(min(len(out), _IOV_MAX))]
                sent = self._sock.sendmsg(chunk)
                for piece in chunk:
                    size = len(piece)
                    if sent >= size:
                        sent -= size
                        out.popleft()
                        continue
                    if sent:
                        out[0] = memoryview(piece)[sent:]
                    break
                else:
                    continue
                break  # the socket took part of the chunk: wait for writability
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            self.fail(RiverlogError(f"{self.address}: {exc}", ErrorCode.NETWORK_EXCEPTION))
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if out else 0)
        self._wakeup.modify(self._sock, events, self._ready)

    def _ready(self, mask: int) -> None:
        try:
            if self.connecting:
                if mask & selectors.EVENT_WRITE:
                    self._connected()
                return
            if mask & selectors.EVENT_WRITE and not self.closed:
                self._flush()
            if mask & selectors.EVENT_READ and not self.closed:
                self._read()
        except Exception as e:  # an undecodable answer, a bug: never the sender thread's end
            log.warning("%s: closing the direct connection: %r", self.address, e)
            self.fail(RiverlogError(f"{self.address}: {e!r}", ErrorCode.CORRUPT_MESSAGE))

    def _connected(self) -> None:
        """The connect ended (writable): failed, or the queued frames go out now."""
        code = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self.unreachable = True
            self.fail(
                RiverlogError(
                    f"cannot connect to {self.address}: {os.strerror(code)}",
                    ErrorCode.NETWORK_EXCEPTION,
                )
            )
            return
        self.connecting = False
        self._flush()  # registers for reading (and writing while frames wait)

    def _read(self) -> None:
        try:
            while not self.closed:
                if self._end == len(self._buffer):
                    self._make_room()
                n = self._sock.recv_into(memoryview(self._buffer)[self._end :])
                if n == 0:
                    self.fail(
                        RiverlogError(
                            f"{self.address} closed the connection", ErrorCode.NETWORK_EXCEPTION
                        )
                    )
                    return
                self._end += n
                self._answers()
                if self._end < len(self._buffer):
                    return  # the socket had less than the room: nothing more now
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.fail(RiverlogError(f"{self.address}: {exc}", ErrorCode.NETWORK_EXCEPTION))

    def _make_room(self) -> None:
        """Move the unparsed bytes to the front, growing the buffer for a frame larger than
        it."""
        pending = self._end - self._start
        if self._start:
            self._buffer[:pending] = self._buffer[self._start : self._end]
            self._start, self._end = 0, pending
        if self._end == len(self._buffer):
            self._buffer.extend(bytes(len(self._buffer)))

    def _answers(self) -> None:
        buffer = self._buffer
        view = memoryview(buffer)
        while self._end - self._start >= FRAME_HEADER.size and not self.closed:
            (length,) = FRAME_HEADER.unpack_from(buffer, self._start)
            if length > MAX_RESPONSE_HEADER_BYTES:
                self.fail(
                    RiverlogError(
                        f"{self.address}: an answer of {length} bytes", ErrorCode.CORRUPT_MESSAGE
                    )
                )
                return
            begin = self._start + FRAME_HEADER.size
            if self._end - begin < length:
                return  # `_read` makes room once the buffer is full
            self._start = begin + length
            payload = view[begin : begin + length]
            self._on_answer(payload, not length or payload[0] not in _PRODUCE_ANSWER_TAGS)
        if self._start == self._end:
            self._start = self._end = 0

    def give_up(self) -> None:
        """A connect still in progress took too long: closed as unreachable."""
        self.unreachable = True
        self.fail(
            RiverlogError(
                f"cannot connect to {self.address}: timed out", ErrorCode.NETWORK_EXCEPTION
            )
        )

    def fail(self, error: RiverlogError) -> None:
        """Close the connection; `on_closed(error)` fails what waits on it."""
        if self.closed:
            return
        self.closed = True
        self._out.clear()
        self._wakeup.unregister(self._sock)
        self._sock.close()
        self._on_closed(error)
