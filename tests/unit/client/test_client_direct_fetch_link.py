"""The reading side of the consumer's direct fetch (`consumer/direct.py`) on a socket pair: a
grant answer and fetch answers in the direct port's framing, arriving in pieces of every size
(one byte at a time included), come out as whole `FetchAnswer`s whose records are ranges of one
bytearray, decodable in place; a refused grant and a close in the middle of an answer fail the
connection's fetches retriably; DELEGATION_TOKEN_EXPIRED in an answer drops the grant."""

from __future__ import annotations

import random
import select
import socket
from collections.abc import Iterator

import pytest

from riverlog.client.consumer.chunk import ConsumerRecord
from riverlog.client.consumer.direct import (
    _GRANT_ANSWER,
    AnswerBuffers,
    DirectCall,
    DirectLinks,
    _Link,
)
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records import BatchBuilder
from riverlog.common.records.reader import decode_rows
from riverlog.common.zerocopy import encode_frame
from riverlog.v1 import data_pb2

pytestmark = pytest.mark.timeout(30)


class Keeper:
    def __init__(self) -> None:
        self.spent = 0
        self.expired_serials: list[int] = []

    def spend(self, node_id: int, serial: int, nbytes: int) -> None:
        self.spent += nbytes

    def expired(self, node_id: int, serial: int) -> None:
        self.expired_serials.append(serial)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    client, server = socket.socketpair()
    client.setblocking(False)
    try:
        yield client, server
    finally:
        client.close()
        server.close()


def _batch(first: int, count: int) -> bytes:
    builder = BatchBuilder()
    for i in range(count):
        builder.append(1_700_000_000_000, None, b"value-%d" % (first + i))
    return builder.build()


def _fetch_answer(parts: list[tuple[int, bytes]]) -> bytes:
    """A direct port's fetch answer: the header, then each partition's raw bytes."""
    head = data_pb2.FetchResponse(
        partitions=[
            data_pb2.FetchPartitionResponse(
                topic="t",
                partition=p,
                high_watermark=100,
                error_code=code,
                zero_copy_records_size=len(raw),
            )
            for p, (code, raw) in enumerate(parts)
        ]
    )
    return encode_frame(head.SerializeToString()) + b"".join(raw for _, raw in parts)


def _grant_answer(code: int = 0) -> bytes:
    return encode_frame(data_pb2.DataGrantResponse(error_code=code).SerializeToString())


def _feed(server: socket.socket, link: _Link, keeper: Keeper, data: bytes, piece: int) -> list:
    done: list[DirectCall] = []
    rng = random.Random(piece)
    pos = 0
    while pos < len(data):
        size = piece if piece > 0 else rng.randint(1, 5000)
        server.sendall(data[pos : pos + size])
        pos += size
        link.read(keeper, done.append)  # type: ignore[arg-type]
    return done


@pytest.mark.parametrize("piece", [1, 7, 4096, 1 << 20, 0])
def test_answers_in_pieces_come_out_whole(
    pair: tuple[socket.socket, socket.socket], piece: int
) -> None:
    client, server = pair
    link = _Link(1, client, AnswerBuffers())
    keeper = Keeper()
    first = DirectCall(1, 5, float("inf"), False)
    second = DirectCall(1, 5, float("inf"), True)
    link.pending.extend([_GRANT_ANSWER, first, second])
    link.waiting = 1
    a, b = _batch(0, 3), _batch(3, 2)
    data = _grant_answer() + _fetch_answer([(0, a), (0, b)]) + _fetch_answer([(0, b"")])
    done = _feed(server, link, keeper, data, piece)
    assert done == [first, second] and not link.pending and link.waiting == 0
    answer = first.result()
    assert isinstance(answer.data, bytearray) and bytes(answer.data) == a + b
    data0, start, end = answer.records(0)
    rows = decode_rows(data0, 0, ConsumerRecord, "t", 0, start=start, end=end)
    assert [r.value for r in rows] == [b"value-0", b"value-1", b"value-2"]
    data1, start, end = answer.records(1)
    rows = decode_rows(data1, 0, ConsumerRecord, "t", 1, start=start, end=end)
    assert [r.value for r in rows] == [b"value-3", b"value-4"]
    assert second.result().records(0)[1:] == (0, 0)
    assert keeper.spent >= len(a) + len(b)


def test_a_refused_grant_raises(pair: tuple[socket.socket, socket.socket]) -> None:
    client, server = pair
    link = _Link(1, client, AnswerBuffers())
    link.pending.extend([_GRANT_ANSWER, DirectCall(1, 5, float("inf"), False)])
    with pytest.raises(RiverlogError) as raised:
        _feed(server, link, Keeper(), _grant_answer(ErrorCode.SASL_AUTHENTICATION_FAILED), 0)
    assert raised.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_a_close_in_the_middle_fails_the_fetches_retriably(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    client, server = pair
    link = _Link(1, client, AnswerBuffers())
    calls = [DirectCall(1, 5, float("inf"), False) for _ in range(2)]
    link.pending.extend(calls)
    data = _fetch_answer([(0, _batch(0, 3))])
    server.sendall(data[: len(data) // 2])
    server.shutdown(socket.SHUT_WR)
    with pytest.raises(ConnectionResetError):
        for _ in range(10):
            link.read(Keeper(), lambda call: None)  # type: ignore[arg-type]
    failed: list[DirectCall] = []
    link.fail(RiverlogError("gone", ErrorCode.NETWORK_EXCEPTION), failed.append)
    assert failed == calls
    for call in calls:
        with pytest.raises(RiverlogError) as raised:
            call.result()
        assert raised.value.retriable


def test_an_expired_grant_is_dropped(pair: tuple[socket.socket, socket.socket]) -> None:
    client, server = pair
    link = _Link(1, client, AnswerBuffers())
    keeper = Keeper()
    call = DirectCall(1, 9, float("inf"), False)
    link.pending.append(call)
    done = _feed(
        server, link, keeper, _fetch_answer([(ErrorCode.DELEGATION_TOKEN_EXPIRED, b"")]), 0
    )
    assert done == [call] and keeper.expired_serials == [9]
    assert call.result().partitions[0].error_code == ErrorCode.DELEGATION_TOKEN_EXPIRED


def test_answer_buffers_are_reused_only_once_nothing_refers_to_them() -> None:
    buffers = AnswerBuffers()
    size = 2 * AnswerBuffers.SMALLEST
    first = buffers.take(size)
    second = buffers.take(size)
    assert second is not first  # `first` is still held
    view = memoryview(second)
    del second
    third = buffers.take(size)
    assert third is not first and third is not view.obj  # both still referred to
    first_id = id(first)
    del first
    assert id(buffers.take(size)) == first_id  # free again: reused
    assert len(buffers.take(size - 1)) == size  # a larger buffer may serve
    assert len(buffers.take(10)) == 10  # small answers: a buffer of their own
    assert buffers.take(size * 3) is not third


def test_a_wake_after_close_writes_to_no_reused_descriptor() -> None:
    """`wake` runs on gRPC threads and may race `close`: it must never write to an fd number
    the process reused meanwhile (here: the sockets opened right after the close)."""

    class ClosingKeeper(Keeper):
        def close(self) -> None:
            pass

    links = DirectLinks(ClosingKeeper(), 1.0, 1.0)  # type: ignore[arg-type]
    links.close()
    reused = [s for _ in range(3) for s in socket.socketpair()]  # take the freed numbers
    try:
        links._selecting = True  # as if a wait() were in progress
        links.wake()
        assert select.select(reused, [], [], 0)[0] == []
    finally:
        for s in reused:
            s.close()


def _big_batch(first: int, size: int) -> bytes:
    builder = BatchBuilder()
    builder.append(1_700_000_000_000, None, b"%08d" % first + b"x" * size)
    return builder.build()


def test_an_answer_read_into_a_larger_reused_buffer_stops_at_its_end(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept buffer larger than the next answer (a topic whose first answer carried a tiny
    batch more than the following ones) is filled with that answer only: reading into the
    whole buffer took the next answer's first bytes too, and the connection lost its framing
    (a bogus length failed it, or a wait for bytes that never came held it until the fetch's
    deadline)."""
    monkeypatch.setattr(AnswerBuffers, "SMALLEST", 4096)  # answers that fit the socket pair's
    client, server = pair  # buffers: both are there before the first read
    link = _Link(1, client, AnswerBuffers())
    keeper = Keeper()
    large = _big_batch(0, 12_000)
    first = DirectCall(1, 5, float("inf"), False)
    link.pending.append(first)
    assert _feed(server, link, keeper, _fetch_answer([(0, large)]), 0) == [first]
    first_buffer = first.result().data
    assert bytes(first_buffer) == large
    first_id = id(first_buffer)
    del first_buffer
    first.response = None  # its records decoded: the buffer is free for the next answers
    smaller, last = _big_batch(1, 10_000), _big_batch(2, 100)
    calls = [DirectCall(1, 5, float("inf"), False) for _ in range(2)]
    link.pending.extend(calls)
    server.sendall(_fetch_answer([(0, smaller)]) + _fetch_answer([(0, last)]))  # both at once
    done: list[DirectCall] = []
    link.read(keeper, done.append)  # type: ignore[arg-type]
    assert done == calls and not link.pending
    second, third = (call.result() for call in calls)
    assert id(second.data) == first_id and len(second.data) > len(smaller)  # reused, larger
    data, start, end = second.records(0)
    assert (start, end) == (0, len(smaller)) and bytes(data[start:end]) == smaller
    data, start, end = third.records(0)
    assert bytes(data[start:end]) == last
