"""The producer's direct sockets (decision 0047) against a plain TCP peer on 127.0.0.1: the
sender's Wakeup wakes on set() from another thread and serves ready sockets in wait(); a frame
sent as pieces arrives whole, also when the socket takes it in parts (a small send buffer, a
peer that reads late); answers split across reads or packed into one are cut into frames, a
grant answer told from a produce answer; the peer closing fails the connection once."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from riverlog.client.producer.direct_io import DirectConnection, Wakeup
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.zerocopy import FRAME_HEADER
from riverlog.v1 import data_pb2, errors_pb2

pytestmark = pytest.mark.timeout(30)


class Peer:
    """A listening socket on 127.0.0.1; `accept()` the client's connection."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conn: socket.socket | None = None

    def accept(self) -> socket.socket:
        self.conn, _ = self.listener.accept()
        self.conn.settimeout(10)
        return self.conn

    def read_exactly(self, size: int) -> bytes:
        assert self.conn is not None
        out = bytearray()
        while len(out) < size:
            chunk = self.conn.recv(size - len(out))
            assert chunk, "the client closed"
            out += chunk
        return bytes(out)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.listener.close()


@pytest.fixture
def peer() -> Iterator[Peer]:
    p = Peer()
    yield p
    p.close()


def frame(payload: bytes) -> bytes:
    return FRAME_HEADER.pack(len(payload)) + payload


Connected = tuple[DirectConnection, list[tuple[bytes, bool]], list[RiverlogError]]


def connect(peer: Peer, wakeup: Wakeup) -> Connected:
    answers: list[tuple[bytes, bool]] = []
    closed: list[RiverlogError] = []
    conn = DirectConnection(
        "127.0.0.1",
        peer.port,
        wakeup,
        lambda payload, is_grant: answers.append((bytes(payload), is_grant)),
        closed.append,
    )
    peer.accept()
    OPENED.append(conn)
    return conn, answers, closed


OPENED: list[DirectConnection] = []


@pytest.fixture(autouse=True)
def close_connections() -> Iterator[None]:
    yield
    while OPENED:
        OPENED.pop().fail(RiverlogError("test over", ErrorCode.NETWORK_EXCEPTION))


def serve_until(wakeup: Wakeup, done: Callable[[], bool], turns: int = 200) -> None:
    for _ in range(turns):
        if done():
            return
        wakeup.clear()
        wakeup.wait(0.05)
    raise AssertionError("not done in time")


def test_wakeup_set_from_another_thread_ends_a_wait() -> None:
    wakeup = Wakeup()
    try:
        wakeup.clear()
        threading.Timer(0.05, wakeup.set).start()
        assert wakeup.wait(10) is True
        wakeup.clear()
        assert wakeup.wait(0) is False  # the byte set() wrote was drained: no spurious wake-up
    finally:
        wakeup.close()
    wakeup.set()  # after close: ignored, as the sender may be gone


def test_pieces_arrive_as_one_frame_even_when_sent_in_parts(peer: Peer) -> None:
    wakeup = Wakeup()
    try:
        conn, _, closed = connect(peer, wakeup)
        conn._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        big = bytes(range(256)) * 8192  # 2 MiB: more than the socket takes at once
        pieces: list[bytes | memoryview] = [b"head", memoryview(big), b"", b"tail"]
        conn.send(pieces)
        conn.send([b"second"])  # queued behind the first
        expected = b"head" + big + b"tail" + b"second"
        received = bytearray()

        def read_some() -> bool:
            assert peer.conn is not None
            peer.conn.settimeout(0.01)
            try:
                received.extend(peer.conn.recv(1 << 20))
            except TimeoutError:
                pass
            return len(received) >= len(expected)

        serve_until(wakeup, read_some, turns=2000)
        assert bytes(received) == expected
        assert not closed
    finally:
        wakeup.close()


def test_answers_are_cut_into_frames_and_grant_answers_told_apart(peer: Peer) -> None:
    wakeup = Wakeup()
    try:
        conn, answers, _ = connect(peer, wakeup)
        produce = data_pb2.ProduceResponse(correlation_id=7).SerializeToString()
        produce_full = data_pb2.ProduceResponse(
            correlation_id=8,
            partitions=[data_pb2.ProducePartitionResponse(topic="t", base_offset=3)],
        ).SerializeToString()
        refused = data_pb2.DataGrantResponse(
            error_code=errors_pb2.DELEGATION_TOKEN_EXPIRED
        ).SerializeToString()
        stream = frame(b"") + frame(produce) + frame(refused) + frame(produce_full)
        assert peer.conn is not None
        peer.conn.sendall(stream[:3])  # a header split across reads
        wakeup.wait(0.5)  # reads the partial header
        peer.conn.sendall(stream[3:])
        serve_until(wakeup, lambda: len(answers) == 4)
        assert answers == [(b"", True), (produce, False), (refused, True), (produce_full, False)]
        assert not conn.closed
    finally:
        wakeup.close()


def test_an_answer_larger_than_the_buffer_is_read_whole(peer: Peer) -> None:
    wakeup = Wakeup()
    try:
        _, answers, _ = connect(peer, wakeup)
        big = data_pb2.ProduceResponse(
            correlation_id=1,
            partitions=[data_pb2.ProducePartitionResponse(topic="t", error_message="x" * 600_000)],
        ).SerializeToString()
        assert peer.conn is not None
        peer.conn.sendall(frame(big) * 2)
        serve_until(wakeup, lambda: len(answers) == 2)
        assert answers == [(big, False), (big, False)]
    finally:
        wakeup.close()


def test_the_peer_closing_fails_the_connection_once(peer: Peer) -> None:
    wakeup = Wakeup()
    try:
        conn, _, closed = connect(peer, wakeup)
        assert peer.conn is not None
        peer.conn.close()
        peer.conn = None
        serve_until(wakeup, lambda: bool(closed))
        assert conn.closed
        assert [e.code for e in closed] == [ErrorCode.NETWORK_EXCEPTION]
        conn.send([b"after"])  # dropped, not raised
        conn.fail(RiverlogError("again", ErrorCode.NETWORK_EXCEPTION))
        assert len(closed) == 1
    finally:
        wakeup.close()


def test_a_refused_connection_fails_with_network_exception() -> None:
    """The connect does not block: refused at once (raised), or once the selector sees it."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    wakeup = Wakeup()
    closed: list[RiverlogError] = []
    try:
        try:
            conn = DirectConnection("127.0.0.1", port, wakeup, lambda *_: None, closed.append)
        except RiverlogError as e:
            closed.append(e)
        else:
            conn.send([b"queued while connecting"])
            serve_until(wakeup, lambda: bool(closed))
            assert conn.closed and conn.unreachable
        assert [e.code for e in closed] == [ErrorCode.NETWORK_EXCEPTION]
    finally:
        wakeup.close()


def test_a_wait_while_set_still_serves_ready_sockets() -> None:
    # Under load the flag is set at every turn: answers must not wait for a turn without it.
    left, right = socket.socketpair()
    served: list[int] = []
    wakeup = Wakeup()
    try:
        wakeup.register(left, 1, served.append)  # selectors.EVENT_READ
        right.send(b"answer")
        wakeup.set()
        assert wakeup.wait(10) is True
        assert served == [1]
        wakeup.unregister(left)
    finally:
        wakeup.close()
        left.close()
        right.close()
