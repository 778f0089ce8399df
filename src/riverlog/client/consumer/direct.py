"""The consumer's direct fetch path (decision 0047): fetch frames sent straight to each
partition leader's direct port under a grant from the gateway, read on the consumer's own
thread, as Kafka's consumer does its network reads inside poll().

The gateway's FetchStream cost the gateway ~1.35 µs a 1 KiB record and grpcio's threads in the
client more (issue 10); here the leader sends its stored batches with sendfile and the client
reads each answer with plain `recv_into`: the FetchResponse header (partitions carrying
`zero_copy_records_size`, `riverlog.common.zerocopy`), then every partition's bytes into one
bytearray, which the chunks keep as ranges and the C record loop decodes in place
(`_fetch_answer.FetchAnswer`): no copy of a record byte between the kernel and the records.

A node gets a few connections (`DirectLinks`). Frames on one connection are answered in order,
so fetches are pipelined on one only behind fetches that cannot wait (below the partition's
known end, with fetch.min.bytes 1): a fetch that may long-poll (max_wait_ms) goes on a
connection of its own, so it never holds up the fetches of other partitions. A connection's
first frame is the grant; a renewed grant is sent before the next fetch on every connection
that still carries the old one (the node answers each grant frame, in order, and the reader
checks that answer). Reads are non-blocking: `pump` reads whatever has arrived, `wait`
selects on the sockets (and on a wake-up socket pair the gRPC threads write to when a gateway fetch
ends meanwhile). A connection that fails, or whose oldest fetch waited past its deadline, is
closed and its fetches fail retriably (NETWORK_EXCEPTION, REQUEST_TIMED_OUT), as a gateway
stream's would; a refused connection sends that node's fetches to the gateway for
metadata.max.age.ms (`GrantKeeper.unreachable`).
"""

from __future__ import annotations

import contextlib
import select
import selectors
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Final

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.grants import FRAME_CHARGE_BYTES
from riverlog.common.zerocopy import (
    FRAME_HEADER,
    KIND_FETCH,
    KIND_GRANT,
    MAX_RESPONSE_HEADER_BYTES,
    encode_frame,
    records_total,
)
from riverlog.v1 import data_pb2

from .._fetch_answer import FetchAnswer
from .._grants import PENDING, DataGrant, GrantKeeper

__all__ = ["DirectCall", "DirectLinks"]

MAX_LINKS: Final = 8
"""Connections per node at most; past it a fetch queues on the least busy one."""

CONNECT_TIMEOUT_S: Final = 2.0
"""A new connection's connect waits at most this (or request.timeout.ms, if shorter) inside
poll(); past it the node is taken as unreachable and its fetches go through the gateway for
metadata.max.age.ms. A reachable port answers in a round trip; 2 s outlasts one lost SYN
(retransmitted after 1 s)."""

_LENGTH, _HEAD, _RAW = 0, 1, 2
_EXPIRED: Final = int(ErrorCode.DELEGATION_TOKEN_EXPIRED)


class DirectCall:
    """One fetch frame's outcome, taken by the fetcher as a gateway future (`result`)."""

    __slots__ = ("deadline", "error", "may_wait", "node_id", "response", "serial")

    def __init__(self, node_id: int, serial: int, deadline: float, may_wait: bool) -> None:
        self.node_id = node_id
        self.serial = serial  # the grant it was sent under
        self.deadline = deadline
        self.may_wait = may_wait
        self.response: FetchAnswer | None = None
        self.error: RiverlogError | None = None

    def result(self, timeout: float | None = None) -> FetchAnswer:
        if self.error is not None:
            raise self.error
        assert self.response is not None
        return self.response

    def cancel(self) -> bool:
        return False  # its answer, if it comes, is read and dropped as stale


_GRANT_ANSWER: Final = None  # a pending grant frame's place in a link's queue


class AnswerBuffers:
    """The bytearrays answers' records are read into, reused once nothing refers to them any
    more (every chunk of the answer decoded): a new 4 MiB bytearray is zeroed, and its pages
    faulted in, before the socket's bytes are copied over, some 7 % of the consumer's time at
    1 KiB records. A buffer may be larger than its answer (the answer's ranges say where its
    records are). Small answers get a buffer of their own."""

    SMALLEST: Final = 256 * 1024
    KEPT: Final = 6

    def __init__(self) -> None:
        self._kept: list[bytearray] = []

    def take(self, size: int) -> bytearray:
        if size < self.SMALLEST:
            return bytearray(size)
        kept = self._kept
        for buf in kept:
            if _unused(buf) and size <= len(buf) <= 2 * size:
                return buf
        buf = bytearray(size)
        if len(kept) >= self.KEPT:
            unused = [b for b in kept if _unused(b)]
            if not unused:
                return buf
            kept.remove(min(unused, key=len))
        kept.append(buf)
        return buf


def _refs(buf: bytearray) -> int:
    return sys.getrefcount(buf)


def _unused(buf: bytearray) -> bool:
    """Whether only the caller's loop over the kept buffers refers to `buf` (the list, the
    loop's variable, and this call's arguments)."""
    return sys.getrefcount(buf) <= _UNUSED


def _baseline() -> int:
    kept = [bytearray(1)]
    for buf in kept:
        return _refs(buf)
    raise AssertionError("unreachable")


_UNUSED: Final = _baseline()


class _Link:
    """One connection to a node's direct port; its frames' answers come in order."""

    def __init__(self, node_id: int, sock: socket.socket, buffers: AnswerBuffers) -> None:
        self.node_id = node_id
        self.sock = sock
        self._buffers = buffers
        self.serial = 0  # the grant it carries (0: none yet)
        self.pending: deque[DirectCall | None] = deque()
        self.waiting = 0  # fetches in `pending` that may long-poll
        self._phase = _LENGTH
        self._length = bytearray(FRAME_HEADER.size)
        self._buf = self._length
        self._view = memoryview(self._buf)
        self._want = len(self._buf)
        self._pos = 0
        self._head: Any = None
        self._ranges: list[tuple[int, int]] = []

    def send(self, frames: list[bytes], deadline: float) -> None:
        data = b"".join(frames) if len(frames) > 1 else frames[0]
        sock = self.sock
        sent = 0
        while sent < len(data):
            try:
                sent += sock.send(data[sent:] if sent else data)
                continue
            except BlockingIOError:
                pass
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([], [sock], [], remaining)[1]:
                raise TimeoutError("the direct port took no request")

    def read(self, keeper: GrantKeeper, done: Callable[[DirectCall], None]) -> None:
        """Read what has arrived; each finished answer goes to `done`. Raises OSError (the
        connection failed) or RiverlogError (a bad answer)."""
        sock = self.sock
        while True:
            pos = self._pos
            want = self._want
            if pos < want:
                try:
                    n = sock.recv_into(self._view[pos:])
                except BlockingIOError:
                    return
                if n == 0:
                    raise ConnectionResetError("the node closed the connection")
                self._pos = pos = pos + n
                if pos < want:
                    continue  # a short read: try once more (EAGAIN ends it)
            self._advance(keeper, done)

    def _expect(self, phase: int, buf: bytearray, size: int | None = None) -> None:
        """Read `size` bytes (all of `buf` by default) into `buf` next."""
        self._phase = phase
        self._buf = buf
        self._want = len(buf) if size is None else size
        # exactly the bytes expected: a reused buffer may be longer than this answer, and a
        # read into its tail would take the start of the next pipelined answer
        self._view = memoryview(buf)[: self._want]
        self._pos = 0

    def _advance(self, keeper: GrantKeeper, done: Callable[[DirectCall], None]) -> None:
        if self._phase == _LENGTH:
            if not self.pending:
                raise RiverlogError("an answer nobody asked for", ErrorCode.CORRUPT_MESSAGE)
            (length,) = FRAME_HEADER.unpack(self._length)
            if length > MAX_RESPONSE_HEADER_BYTES:
                raise RiverlogError(f"answer header of {length} bytes", ErrorCode.CORRUPT_MESSAGE)
            self._expect(_HEAD, bytearray(length))
            return
        if self._phase == _HEAD:
            call = self.pending[0]
            if call is _GRANT_ANSWER:
                self.pending.popleft()
                answer = data_pb2.DataGrantResponse.FromString(bytes(self._buf))
                self._expect(_LENGTH, self._length)
                if answer.error_code:
                    raise RiverlogError(
                        f"grant refused by node {self.node_id}: {answer.error_message}",
                        ErrorCode(answer.error_code),
                    )
                return
            head = data_pb2.FetchResponse.FromString(bytes(self._buf))
            total = records_total(head)
            pos = 0
            ranges = self._ranges = []
            for partition in head.partitions:
                size = partition.zero_copy_records_size
                ranges.append((pos, pos + size))
                pos += size
            self._head = head
            # what the node charges: the records, and FRAME_CHARGE_BYTES (and the request's
            # length: about the answer header's) per frame
            keeper.spend(self.node_id, call.serial, total + len(self._buf) + FRAME_CHARGE_BYTES)
            if total:
                self._expect(_RAW, self._buffers.take(total), total)
                return
            self._finish(keeper, done, b"")
            return
        self._finish(keeper, done, self._buf)

    def _finish(
        self, keeper: GrantKeeper, done: Callable[[DirectCall], None], raw: bytes | bytearray
    ) -> None:
        call = self.pending.popleft()
        assert call is not None
        if call.may_wait:
            self.waiting -= 1
        head = self._head
        self._head = None
        self._expect(_LENGTH, self._length)
        for partition in head.partitions:
            if partition.error_code == _EXPIRED:
                keeper.expired(self.node_id, call.serial)  # renewed before the next fetch
                break
        call.response = FetchAnswer(head, raw, self._ranges)
        done(call)

    def fail(self, error: RiverlogError, done: Callable[[DirectCall], None]) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        pending, self.pending = self.pending, deque()
        self.waiting = 0
        for call in pending:
            if call is not None:
                call.error = RiverlogError(error.message, error.code)
                done(call)


class DirectLinks:
    """The direct connections of one consumer, by node. Used by the consumer's thread only,
    except `wake` (any thread)."""

    def __init__(self, keeper: GrantKeeper, timeout_s: float, connect_timeout_s: float) -> None:
        self.keeper = keeper
        self._timeout_s = timeout_s
        self._connect_timeout_s = min(connect_timeout_s, CONNECT_TIMEOUT_S)
        self._links: dict[int, list[_Link]] = {}
        self._selector = selectors.DefaultSelector()
        # A socket pair, not a pipe's fd numbers: `wake` on a gRPC thread racing `close` then
        # writes to a closed socket object (an error), never to a reused fd number.
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._selecting = False
        self._buffers = AnswerBuffers()
        self.sent = 0
        """Fetch frames sent since the start (the direct path was taken)."""
        self.grant_pending = False
        """Whether the last `submit` went to the gateway only because the node's grant is
        not there yet (that gateway fetch then takes no pushes: the next one goes direct)."""

    @property
    def pending(self) -> bool:
        return any(link.pending for links in self._links.values() for link in links)

    def submit(
        self,
        node_id: int,
        request: data_pb2.FetchRequest,
        topics: Iterable[str],
        may_wait: bool,
        done: Callable[[DirectCall], None],
    ) -> DirectCall | None:
        """Send `request` to `node_id`'s direct port; None: not possible now (no grant, no
        connection), send it through the gateway."""
        now = time.monotonic()
        grant = self.keeper.lookup(node_id, topics, now)
        # a grant on its way, or its throttle time not passed: the gateway this time only
        self.grant_pending = grant is PENDING or (
            isinstance(grant, DataGrant) and now < grant.usable_at
        )
        if not isinstance(grant, DataGrant) or self.grant_pending:
            return None
        link = self._link(grant)
        if link is None:
            return None
        frames = []
        if link.serial != grant.serial:
            frames.append(encode_frame(grant.token, KIND_GRANT))
        frames.append(encode_frame(request.SerializeToString(), KIND_FETCH))
        deadline = time.monotonic() + self._timeout_s
        call = DirectCall(node_id, grant.serial, deadline, may_wait)
        try:
            link.send(frames, deadline)
        except (OSError, TimeoutError) as exc:
            self._fail(link, _network(link, exc), done)
            return None
        if len(frames) > 1:
            link.pending.append(_GRANT_ANSWER)
            link.serial = grant.serial
        link.pending.append(call)
        if may_wait:
            link.waiting += 1
        self.sent += 1
        return call

    def _link(self, grant: DataGrant) -> _Link | None:
        """A connection that can take the fetch now: one with nothing queued that may wait
        (the least busy), else a new one, else the least busy of all."""
        links = self._links.setdefault(grant.node_id, [])
        best: _Link | None = None
        for link in links:
            if not link.waiting and (best is None or len(link.pending) < len(best.pending)):
                best = link
        if best is not None:
            return best  # (a fetch that may wait can follow ones that cannot)
        if len(links) >= MAX_LINKS:
            return min(links, key=lambda link: len(link.pending))
        try:
            sock = socket.create_connection(
                (grant.host, grant.port), timeout=self._connect_timeout_s
            )
        except OSError:
            self.keeper.unreachable(grant.node_id)
            return None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        link = _Link(grant.node_id, sock, self._buffers)
        links.append(link)
        self._selector.register(sock, selectors.EVENT_READ, link)
        return link

    def pump(self, done: Callable[[DirectCall], None]) -> None:
        """Read every answer that has arrived (each to `done`); fail connections past their
        deadline."""
        now = time.monotonic()
        for links in list(self._links.values()):
            for link in list(links):
                if link.pending:
                    self._read(link, done)
                    head = next((c for c in link.pending if c is not None), None)
                    if head is not None and head.deadline < now:
                        error = RiverlogError(
                            f"no answer from node {link.node_id}'s direct port",
                            ErrorCode.REQUEST_TIMED_OUT,
                        )
                        self._fail(link, error, done)

    def _read(self, link: _Link, done: Callable[[DirectCall], None]) -> None:
        try:
            link.read(self.keeper, done)
        except OSError as exc:
            self._fail(link, _network(link, exc), done)
        except RiverlogError as exc:
            if exc.code == ErrorCode.DELEGATION_TOKEN_EXPIRED:
                # (on the grant frame: fresh and refused, clock skew → the gateway)
                self.keeper.expired(link.node_id, link.serial, grant_frame=True)
                exc = RiverlogError(exc.message, ErrorCode.NETWORK_EXCEPTION)
            elif exc.code != ErrorCode.CORRUPT_MESSAGE:  # the grant refused: the gateway
                self.keeper.unreachable(link.node_id)
            self._fail(link, exc, done)
        except Exception as exc:  # protobuf's DecodeError has no stable import path
            error = RiverlogError(f"undecodable direct answer: {exc}", ErrorCode.CORRUPT_MESSAGE)
            self._fail(link, error, done)

    def _fail(self, link: _Link, error: RiverlogError, done: Callable[[DirectCall], None]) -> None:
        links = self._links.get(link.node_id, [])
        if link in links:
            links.remove(link)
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(link.sock)
        link.fail(error, done)

    def wait(self, timeout_s: float, done: Callable[[DirectCall], None], ready: Any) -> None:
        """Wait up to `timeout_s` until an answer is read on some connection, or `ready` (the
        fetcher's queue of finished gateway futures, filled by gRPC threads) is not empty."""
        end = time.monotonic() + timeout_s
        finished = 0

        def count(call: DirectCall) -> None:
            nonlocal finished
            finished += 1
            done(call)

        while not finished:
            self._selecting = True
            try:
                if ready:
                    return
                now = time.monotonic()
                deadline = min(
                    (c.deadline for links in self._links.values() for link in links
                     for c in link.pending if c is not None),
                    default=end,
                )  # fmt: skip
                timeout = min(end, deadline) - now
                if timeout < 0:
                    break
                events = self._selector.select(timeout)
            finally:
                self._selecting = False
            for key, _ in events:
                if key.data is None:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                else:
                    self._read(key.data, count)  # an idle one: its close is seen here
            if time.monotonic() >= end:
                break
        self.pump(done)

    def wake(self) -> None:
        """A gateway fetch ended (a gRPC thread): end a `wait` in progress."""
        if self._selecting:
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")

    def close(self) -> None:
        closed = RiverlogError("the consumer closed", ErrorCode.NETWORK_EXCEPTION)
        for links in list(self._links.values()):
            for link in list(links):
                self._fail(link, closed, lambda call: None)
        self._links.clear()
        self.keeper.close()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


def _network(link: _Link, exc: BaseException) -> RiverlogError:
    return RiverlogError(
        f"direct connection to node {link.node_id} failed: {exc}", ErrorCode.NETWORK_EXCEPTION
    )
