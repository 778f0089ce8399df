"""The zero-copy fetch channel: a TCP server on `--zero-copy-port` that answers FetchRequests
with the stored batches sent by `os.sendfile`, from the segment files to the socket, without
passing them through Python buffers or a protobuf message. A transport beside the gRPC
servicer, so it lives with the adapters in `rpc/`.

Framing (see `riverlog.common.zerocopy`, which holds the client): the client sends
[u32 length][FetchRequest]; the server answers [u32 length][FetchResponse whose partitions
carry `zero_copy_records_size` instead of `records`] and then the raw bytes of each partition,
in response order. Semantics are the gRPC Fetch's (same FetchHandler: budgets, long poll,
per-partition errors). A whole-request error (e.g. a negative max_bytes) is answered with that
error on every partition, since the response has no top-level error field. A frame that cannot
be parsed, or is larger than `zero.copy.max.request.bytes`, closes the connection. A fetch
waiting in its long poll is cancelled when the client closes its side of the connection, so a
client that gave up does not leave its connection (a descriptor, a task, a parked fetch) behind
for as long as it had asked to wait.

The same server, given a `GrantLedger`, is a storage node's direct port (decision 0047): clients
outside the cluster send a grant frame first, and every frame is screened against it
(`direct.py`); the internal zero-copy port takes no grant frames.

Sockets are non-blocking and driven by the event loop: `os.sendfile` is called on the raw socket
descriptor with explicit file offsets (so it never moves a file position the log writer uses),
and waits for writability when the socket buffer is full. Where sendfile is refused (a file
system without it) the bytes are read with `pread` and sent instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from typing import TypeVar

from riverlog.common.errors import RiverlogError
from riverlog.common.metrics.rpc import RequestTimer
from riverlog.common.produce_request_parse import ParsedProduceRequest, parse_produce_request
from riverlog.common.types import TopicPartition
from riverlog.common.zerocopy import (
    FRAME_HEADER,
    KIND_FETCH,
    KIND_GRANT,
    KIND_PRODUCE,
    MAX_REQUEST_FRAME,
    encode_frame,
    split_request_header,
)
from riverlog.v1 import data_pb2

from ..config import ConnectionLimits
from ..grants import GrantLedger
from ..log import FetchSlice
from ..replica.fetch import FetchHandler, close_results
from ..replica.requests import FetchPartitionResult, StoredRecords
from .connection_limits import ConnectionGuard, Watched
from .convert import fetch_params_from_proto, fetch_response_to_proto
from .direct import (
    MAX_GRANT_FRAME,
    DirectSession,
    Refusals,
    in_order,
    refused_only,
    with_refusals,
)
from .timers import RequestTimers

log = logging.getLogger(__name__)

StartProduce = Callable[[ParsedProduceRequest], Awaitable[data_pb2.ProduceResponse]]
"""Appends a produce request's batches when called (so frames append in arrival order) and
returns what waits for its acknowledgement (acks=all: the ISR). The request is read by hand
(`parse_produce_request`): its records are views of the received frame, which the channel
hands over (the leader assigns offsets in it instead of in a copy)."""

_PRODUCE_IN_FLIGHT = 64
"""Produce requests of one connection waiting for their acknowledgements; the next frame is not
read while this many wait (backpressure on a client that pipelines without bound)."""

_SENDFILE_CHUNK = 1 << 30
_NO_SENDFILE_ERRNOS = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP})
_PREAD_CHUNK = 1 << 20
_T = TypeVar("_T")


class ZeroCopyServer:
    """Lifecycle: `await start()` binds and accepts; `await stop()` closes the listener and
    every connection. Runs entirely on the event loop that started it."""

    def __init__(
        self,
        host: str,
        port: int,
        fetch: FetchHandler,
        max_request_bytes: int = 1 << 20,
        produce: StartProduce | None = None,
        grants: GrantLedger | None = None,
        limits: ConnectionLimits | None = None,
    ) -> None:
        """`produce`: takes produce frames (the gRPC Produce's own logic); without it a
        produce frame closes the connection. Produce frames are pipelined: each is appended as
        it is read, and its answer (tagged with the request's correlation id) is written when
        its acknowledgement is complete, possibly after later ones. `max_request_bytes` bounds
        fetch frames; produce frames may be up to the framing's 16 MiB (the leader validates
        their sizes). `grants`: the direct port (decision 0047): a connection's first frame must
        be a grant, and its frames are screened against it (`direct.py`); `limits` (the
        direct port's, with `grants`): connection caps, the grant deadline, the idle timeout
        and the produce frame cap (`connection_limits.py`)."""
        self.host = host
        self._requested_port = port
        self._fetch = fetch
        self._produce = produce
        self._max_request_bytes = max_request_bytes
        self.grants = grants
        self.label = "direct" if grants is not None else "zero-copy"
        self.guard = ConnectionGuard(limits) if grants is not None and limits else None
        self._max_produce_bytes = limits.max_request_bytes if limits else MAX_REQUEST_FRAME
        self._listener: socket.socket | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._sendfile_ok = True
        self._timers = RequestTimers()
        self.port = 0
        self.accepted = 0
        """Connections accepted since start (riverlog_zero_copy_connections): how often
        clients such as gateways had to open one rather than reuse one."""

    @property
    def closed(self) -> dict[str, int]:
        """Connections the direct port's limits closed, by reason (none without limits)."""
        return self.guard.closed if self.guard is not None else {}

    async def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self._requested_port))
        listener.listen(128)
        listener.setblocking(False)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._accept_task = asyncio.create_task(self._accept_loop(), name="zero-copy-accept")
        if self.guard is not None:
            self.guard.start()
        log.info("%s channel on %s:%d", self.label, self.host, self.port)

    async def stop(self) -> None:
        if self.guard is not None:
            await self.guard.stop()
        if self._accept_task is not None:
            self._accept_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accept_task
            self._accept_task = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._listener is not None
        while True:
            try:
                conn, peer = await loop.sock_accept(self._listener)
            except OSError as exc:
                log.warning("zero-copy accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            self.accepted += 1
            acks = _Acknowledgements(_PRODUCE_IN_FLIGHT)
            watched = None
            if self.guard is not None:
                watched = self.guard.admit(conn, _peer_ip(peer), acks.pending)
                if watched is None:
                    continue  # over a cap: closed
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = asyncio.create_task(
                self._serve(conn, peer, acks, watched), name=f"{self.label}-{peer}"
            )
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

    async def _serve(
        self,
        conn: socket.socket,
        peer: object,
        acks: _Acknowledgements,
        watched: Watched | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        writing = asyncio.Lock()  # one frame at a time on the socket: answers may interleave
        inline = 0  # answers given without a task since the last forced loop turn
        session = DirectSession(self.grants) if self.grants is not None else None
        try:
            while True:
                header = await _recv_exactly(loop, conn, FRAME_HEADER.size)
                if header is None:
                    return  # the client closed between requests
                kind, length = split_request_header(FRAME_HEADER.unpack(header)[0])
                if watched is not None:
                    watched.active()
                if session is not None:
                    if kind == KIND_GRANT:
                        await acks.drain()  # the answers owed before the grant's, first
                        if not await self._take_grant(loop, conn, writing, session, length):
                            return
                        if watched is not None:
                            watched.granted = session.grant is not None
                        continue
                    if session.grant is None:
                        log.info("direct %s: the first frame is not a grant; closing", peer)
                        return
                if kind == KIND_PRODUCE and self._produce is not None:
                    if length > self._max_produce_bytes:  # refused before any allocation
                        log.warning("direct %s: a produce frame of %d bytes; closing", peer, length)
                        return
                elif kind != KIND_FETCH:
                    log.warning("zero-copy %s: unknown request kind %d; closing", peer, kind)
                    return
                elif length > self._max_request_bytes:
                    log.warning("zero-copy %s: request of %d bytes; closing", peer, length)
                    return
                payload = await _recv_exactly(loop, conn, length, body=True)
                if payload is None:
                    return
                if kind == KIND_PRODUCE:
                    assert self._produce is not None
                    try:
                        produce = parse_produce_request(payload)  # no copy of the records
                    except ValueError as exc:
                        log.warning("zero-copy %s: undecodable request (%s); closing", peer, exc)
                        return
                    await acks.slot()
                    answer = self._start_produce(session, produce, length)  # appended now
                    if _ready(answer) and not writing.locked():
                        # acks=1: answered inline, without a task and a loop turn more
                        acks.release()
                        await self._acknowledge(loop, conn, writing, answer)
                        inline += 1
                        if inline == _PRODUCE_IN_FLIGHT:
                            # asyncio's sock_recv/sock_sendall do not yield when the socket is
                            # ready (uvloop's header read does): without this, a pipelining
                            # client could hold the loop from every other connection
                            inline = 0
                            await asyncio.sleep(0)
                    else:
                        acks.add(self._acknowledge(loop, conn, writing, answer))
                    continue
                message = data_pb2.FetchRequest()
                try:
                    message.ParseFromString(bytes(payload))
                except Exception as exc:  # protobuf's DecodeError has no stable import path
                    log.warning("zero-copy %s: undecodable request (%s); closing", peer, exc)
                    return
                if watched is None:
                    await self._answer(loop, conn, writing, message, session, length)
                    continue
                watched.busy += 1  # a parked fetch is not idleness
                try:
                    await self._answer(loop, conn, writing, message, session, length)
                finally:
                    watched.busy -= 1
                    watched.active()
        except (ConnectionError, BrokenPipeError) as exc:
            log.debug("zero-copy %s: connection ended: %s", peer, exc)
        except OSError as exc:
            log.info("zero-copy %s: socket error: %s", peer, exc)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("zero-copy %s: unexpected error; closing the connection", peer)
        finally:
            await acks.cancel()
            conn.close()
            if watched is not None and self.guard is not None:
                self.guard.release(watched)

    @staticmethod
    async def _take_grant(
        loop: asyncio.AbstractEventLoop,
        conn: socket.socket,
        writing: asyncio.Lock,
        session: DirectSession,
        length: int,
    ) -> bool:
        """Read and check a grant frame and answer it; False: the connection must close."""
        if length > MAX_GRANT_FRAME:
            log.warning("direct: a grant frame of %d bytes; closing", length)
            return False
        payload = await _recv_exactly(loop, conn, length, body=True)
        if payload is None:
            return False
        answer = session.take_grant(payload)
        async with writing:
            await loop.sock_sendall(conn, answer)
        # A refused grant on a connection holding none: answered, then closed (a client cannot
        # keep sending grant frames on a connection that never had a grant).
        return session.grant is not None

    def _start_produce(
        self, session: DirectSession | None, produce: ParsedProduceRequest, size: int
    ) -> Awaitable[data_pb2.ProduceResponse]:
        """Append `produce` (what its grant allows of it, on the direct port) now; what waits
        for its answer."""
        assert self._produce is not None
        if session is None:
            return self._produce(produce)
        order = [TopicPartition(p.topic, p.partition) for p in produce.partitions]
        refused = session.screen_produce(produce, size)
        if refused and not produce.partitions:
            return refused_only(produce.correlation_id, refused)
        return with_refusals(self._produce(produce), refused, order)

    @staticmethod
    async def _acknowledge(
        loop: asyncio.AbstractEventLoop,
        conn: socket.socket,
        writing: asyncio.Lock,
        answer: Awaitable[data_pb2.ProduceResponse],
    ) -> None:
        try:
            response = await answer
        except Exception:
            # The request's fate is unknown to the client: end the connection, which fails
            # every request it has waiting there (it may retry them; idempotence dedupes).
            log.exception("zero-copy: a produce request failed; closing the connection")
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            return
        frame = encode_frame(response.SerializeToString())
        async with writing:
            await loop.sock_sendall(conn, frame)

    async def _answer(
        self,
        loop: asyncio.AbstractEventLoop,
        conn: socket.socket,
        writing: asyncio.Lock,
        request: data_pb2.FetchRequest,
        session: DirectSession | None = None,
        size: int = 0,
    ) -> None:
        start = RequestTimer.start()
        refused: Refusals = []
        if session is not None:
            order = [TopicPartition(p.topic, p.partition) for p in request.partitions]
            refused = session.screen_fetch(request, size)
        params = fetch_params_from_proto(request)
        ready: list[FetchPartitionResult] | None = None
        try:
            if refused and not params.partitions:
                ready = []
            else:
                ready = self._fetch.fetch_now(params)
            if ready is None:  # a long poll: it ends early if the client goes away
                ready = await _unless_peer_closes(loop, conn, self._fetch.fetch_later(params))
            results = ready
        except RiverlogError as exc:
            results = [FetchPartitionResult(p.tp) for p in params.partitions]
            for result in results:
                result.fail(exc)
        finally:
            if session is not None:  # charged what it read, before sending: no refund after
                session.settle_fetch(ready or [])
        if refused:
            results = in_order(order, results, refused)
        try:
            response = fetch_response_to_proto(results, request.correlation_id, zero_copy=True)
            frame = encode_frame(response.SerializeToString())
            async with writing:
                if any(r.records is not None and r.records.size for r in results):
                    await _send_before_records(loop, conn, frame)
                else:
                    await loop.sock_sendall(conn, frame)
                for result in results:
                    if result.records is not None and result.records.size:
                        await self._send_records(loop, conn, result.records)
        finally:
            close_results(results)
            self._timers.fetch(params.replica_id).done(start)

    async def _send_records(
        self, loop: asyncio.AbstractEventLoop, conn: socket.socket, records: StoredRecords
    ) -> None:
        if not isinstance(records, FetchSlice):
            await loop.sock_sendall(conn, records.to_bytes())
            return
        for part in records.ranges:
            if self._sendfile_ok:
                try:
                    await _sendfile(loop, conn, part.fd, part.position, part.size)
                    continue
                except OSError as exc:
                    if exc.errno not in _NO_SENDFILE_ERRNOS:
                        raise
                    log.warning("sendfile refused (%s); falling back to pread + send", exc)
                    self._sendfile_ok = False
            await _send_preads(loop, conn, part.fd, part.position, part.size)


class _Acknowledgements:
    """The produce answers one connection still owes, at most `limit` at a time."""

    def __init__(self, limit: int) -> None:
        self._slots = asyncio.Semaphore(limit)
        self._tasks: set[asyncio.Task[None]] = set()

    def pending(self) -> bool:
        """Whether answers are still owed."""
        return bool(self._tasks)

    async def slot(self) -> None:
        await self._slots.acquire()

    def release(self) -> None:
        """Gives back a slot taken for an answer that was delivered without a task."""
        self._slots.release()

    def add(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None:
            log.debug("zero-copy: a produce answer was not delivered: %s", task.exception())

    async def drain(self) -> None:
        """Wait until every answer owed now is written (or failed)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def cancel(self) -> None:
        """At the connection's end: its answers can no longer be delivered."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _unless_peer_closes(
    loop: asyncio.AbstractEventLoop, conn: socket.socket, work: Awaitable[_T]
) -> _T:
    """`work`'s result, or ConnectionAbortedError (with `work` cancelled) when the peer closes
    its side first. Bytes of a next, pipelined request end the watch: they stay unread for the
    next frame, and that request's turn comes after this answer.

    `work` runs in the caller's task, and a close seen by the reader callback cancels that
    task: no task, future or `asyncio.wait` of its own per long poll, which had cost the
    leader ~6 % of its busy time at RF 3, where every follower round parks (issue 10). The
    callback is registered only while `work` is awaited, so the cancellation lands inside it
    (or, when `work` finished in the same loop step, at its last await: the answer could not
    be delivered anyway)."""
    task = asyncio.current_task()
    assert task is not None
    fd = conn.fileno()
    closed = False

    def readable() -> None:
        nonlocal closed
        try:
            data = conn.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        loop.remove_reader(fd)
        if not data and not closed:
            closed = True
            task.cancel()

    loop.add_reader(fd, readable)
    try:
        return await work
    except asyncio.CancelledError:
        if closed and task.uncancel() == 0:
            raise ConnectionAbortedError("the client closed while its fetch waited") from None
        raise
    finally:
        loop.remove_reader(fd)


async def _recv_exactly(
    loop: asyncio.AbstractEventLoop, conn: socket.socket, size: int, *, body: bool = False
) -> bytearray | None:
    """`size` bytes, or None when the peer closed before the first byte; a close in the
    middle raises ConnectionResetError.

    `body`: a frame's body, which is usually in the socket buffer already, with its header:
    read the (non-blocking) socket before asking the loop, since uvloop's `sock_recv_into`
    first registers the descriptor and waits a loop turn for readability (about 8 syscalls).
    A header always goes through the loop, so a connection that pipelines yields to the
    others (and to its own answers) once per frame."""
    buf = bytearray(size)
    view = memoryview(buf)
    pos = 0
    while pos < size:
        n = _recv_now(conn, view[pos:]) if body else None
        if n is None:
            n = await loop.sock_recv_into(conn, view[pos:])
        if n == 0:
            if pos == 0:
                return None
            raise ConnectionResetError("the client closed in the middle of a frame")
        pos += n
    return buf


def _peer_ip(peer: object) -> str:
    """The address part of an accepted socket's peer."""
    return str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)


def _ready(answer: Awaitable[object]) -> bool:
    """Whether `answer` is a future already resolved with a result (awaiting it won't wait)."""
    return isinstance(answer, asyncio.Future) and answer.done() and not answer.cancelled()


def _recv_now(conn: socket.socket, view: memoryview) -> int | None:
    """What the non-blocking socket has now, into `view`; None when it has nothing yet."""
    try:
        return conn.recv_into(view)
    except (BlockingIOError, InterruptedError):
        return None


async def _send_before_records(
    loop: asyncio.AbstractEventLoop, conn: socket.socket, frame: bytes
) -> None:
    """A response header that records follow, sent with MSG_MORE: the kernel holds it for the
    records (whose last `sendfile` pushes) instead of sending it in a packet of its own, so
    the client wakes once for the answer, not for the header and again for the records. What
    does not go at once is sent as usual (no MSG_MORE: nothing is held)."""
    try:
        sent = conn.send(frame, socket.MSG_MORE)
    except (BlockingIOError, InterruptedError):
        sent = 0
    if sent < len(frame):
        await loop.sock_sendall(conn, memoryview(frame)[sent:])


async def _wait_writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    future: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not future.done():
            future.set_result(None)

    loop.add_writer(fd, ready)
    try:
        await future
    finally:
        loop.remove_writer(fd)


async def _sendfile(
    loop: asyncio.AbstractEventLoop, conn: socket.socket, in_fd: int, offset: int, count: int
) -> None:
    """Send `count` bytes at `offset` of `in_fd` with os.sendfile on the non-blocking socket."""
    out_fd = conn.fileno()
    while count > 0:
        try:
            sent = os.sendfile(out_fd, in_fd, offset, min(count, _SENDFILE_CHUNK))
        except BlockingIOError:
            await _wait_writable(loop, out_fd)
            continue
        if sent == 0:
            # The file is shorter than the slice said: the framing promised bytes we do not
            # have, so the connection cannot continue.
            raise ConnectionAbortedError(f"file ended {count} bytes before the slice's end")
        offset += sent
        count -= sent


async def _send_preads(
    loop: asyncio.AbstractEventLoop, conn: socket.socket, in_fd: int, offset: int, count: int
) -> None:
    while count > 0:
        chunk = os.pread(in_fd, min(count, _PREAD_CHUNK), offset)
        if not chunk:
            raise ConnectionAbortedError(f"file ended {count} bytes before the slice's end")
        await loop.sock_sendall(conn, chunk)
        offset += len(chunk)
        count -= len(chunk)
