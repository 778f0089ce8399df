"""Regression (found by the fuzzer, tests/integration/fuzz): a fetch waiting in its long poll
on the zero-copy channel kept its connection (descriptor, task, parked fetch) for as long as
the request asked to wait, up to 2^31-1 ms, after the client had closed the socket. The node
now cancels the fetch and closes when the client closes its side, and a pipelined request
behind a long poll is still answered in turn."""

import asyncio
import socket

from storage_replica_testkit import Node
from test_zero_copy_channel import fill, request

from riverlog.common.zerocopy import FRAME_HEADER, encode_frame
from riverlog.services.storage.rpc.zerocopy import ZeroCopyServer
from riverlog.v1 import data_pb2

LONG_POLL = request(parts=[("t", 0, 0)], min_bytes=1, max_wait_ms=2**31 - 1)


async def _until(condition, what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {what} after 5 s")


def _read_answer(sock: socket.socket) -> data_pb2.FetchResponse:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            assert chunk, "the server closed"
            out += chunk
        return out

    (length,) = FRAME_HEADER.unpack(exactly(FRAME_HEADER.size))
    answer = data_pb2.FetchResponse.FromString(exactly(length))
    exactly(sum(p.zero_copy_records_size for p in answer.partitions))
    return answer


async def test_a_client_gone_mid_long_poll_frees_its_connection(
    node: Node, server: ZeroCopyServer
) -> None:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    try:
        sock.sendall(encode_frame(LONG_POLL.SerializeToString()))
        await _until(lambda: len(node.purgatory) == 1, "parked fetch")
        assert len(server._connections) == 1
    finally:
        sock.close()
    await _until(lambda: not server._connections, "closed connection")
    await _until(lambda: len(node.purgatory) == 0, "fetch leaving the purgatory")


async def test_a_request_pipelined_behind_a_long_poll_is_answered(
    node: Node, server: ZeroCopyServer
) -> None:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    try:
        waiting = request(parts=[("t", 0, 0)], min_bytes=1, max_wait_ms=30_000)
        waiting.correlation_id = 1
        second = request(parts=[("t", 1, 0)])
        second.correlation_id = 2
        sock.sendall(
            encode_frame(waiting.SerializeToString()) + encode_frame(second.SerializeToString())
        )
        await _until(lambda: len(node.purgatory) == 1, "parked fetch")
        await fill(node)
        first_answer = await asyncio.to_thread(_read_answer, sock)
        second_answer = await asyncio.to_thread(_read_answer, sock)
    finally:
        sock.close()
    assert [first_answer.correlation_id, second_answer.correlation_id] == [1, 2]
    assert first_answer.partitions[0].zero_copy_records_size > 0
