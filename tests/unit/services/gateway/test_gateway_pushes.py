"""FetchStream's pushed answers: the pure parts (`pushes.py`: when a push follows an answer,
the credit it spends, a later request replacing a partition's pushes) and the request a
partition's pushes fetch with (`rpc/fetch_stream.py`)."""

from __future__ import annotations

import asyncio

import pytest

from riverlog.common.clock import SYSTEM_CLOCK
from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder
from riverlog.common.records.header import set_base_offset
from riverlog.common.types import TopicPartition
from riverlog.services.gateway.context import Deadline, RequestContext
from riverlog.services.gateway.fetch import FetchPartResult
from riverlog.services.gateway.pushes import PushCredit, PushTable, next_push
from riverlog.services.gateway.rpc.fetch_stream import FetchPushes
from riverlog.v1 import data_pb2

pytestmark = pytest.mark.timeout(30)

TP = TopicPartition("t", 0)


def batch(base: int, count: int) -> bytes:
    builder = BatchBuilder()
    for i in range(count):
        builder.append(1000 + i, None, b"v%d" % i)
    data = bytearray(builder.build())
    set_base_offset(data, 0, base)
    return bytes(data)


def test_a_push_follows_an_answer_that_reached_the_high_watermark() -> None:
    assert next_push(ErrorCode.NONE, batch(10, 3), 10, 13, -1, False) == 13
    assert next_push(ErrorCode.NONE, b"", 13, 13, -1, False) == 13  # a long poll ran out


def test_no_push_while_records_are_left_to_read_or_after_an_error() -> None:
    assert next_push(ErrorCode.NONE, batch(10, 3), 10, 20, -1, False) is None
    assert next_push(ErrorCode.NOT_LEADER_OR_FOLLOWER, b"", 13, 13, -1, False) is None
    assert next_push(ErrorCode.NONE, b"", 13, -1, -1, False) is None  # held: no watermark


def test_read_committed_pushes_follow_the_last_stable_offset() -> None:
    assert next_push(ErrorCode.NONE, batch(10, 3), 10, 20, 13, True) == 13
    assert next_push(ErrorCode.NONE, batch(10, 3), 10, 20, 15, True) is None
    assert next_push(ErrorCode.NONE, batch(10, 3), 10, 13, 15, False) == 13


def test_credit_counts_answers_and_bytes() -> None:
    credit = PushCredit(3, 100)
    assert credit.left() == 3
    assert credit.spend(0) == 2  # an empty answer spends an answer too
    assert credit.spend(40) == 1
    assert credit.spend(10) == 0
    assert credit.spend(0) == 0  # never below zero
    by_bytes = PushCredit(10, 100)
    assert by_bytes.spend(60) == 9
    assert by_bytes.spend(40) == 0  # the bytes are spent: no more pushes
    assert by_bytes.left() == 0


def test_a_new_request_replaces_the_pushes_of_the_partitions_it_names() -> None:
    async def scenario() -> None:
        table = PushTable()
        first = table.claim([TP])
        assert table.current(TP, first[TP])
        task = asyncio.create_task(asyncio.sleep(3600))
        table.start(TP, task)
        assert table.running() == 1
        other = TopicPartition("t", 1)
        table.claim([other])  # another partition: TP's pushes go on
        assert table.current(TP, first[TP]) and not task.cancelled()
        second = table.claim([TP])
        assert not table.current(TP, first[TP])
        assert table.current(TP, second[TP])
        with pytest.raises(asyncio.CancelledError):
            await task
        assert table.running() == 0
        third = asyncio.create_task(asyncio.sleep(3600))
        table.start(TP, third)
        await table.close()
        assert third.cancelled() and table.running() == 0

    asyncio.run(scenario())


async def test_pushes_reuse_their_request_with_the_client_s_max_bytes() -> None:
    """A partition's pushes fetch with one request built once (not a copy per push), each from
    its own offset and with the client's max bytes, whatever the quota check lowered it to
    in place for the push before."""
    seen: list[tuple[data_pb2.FetchRequest, int, int]] = []
    sent: list[bytes] = []

    async def fetch_results(
        ctx: RequestContext, request: data_pb2.FetchRequest
    ) -> tuple[list[FetchPartResult], int]:
        [part] = request.partitions
        seen.append((request, request.max_bytes, part.fetch_offset))
        request.max_bytes = 7  # as `before_fetch` caps it under a quota
        offset = part.fetch_offset + 1  # one record came: the push goes on from past it
        return [FetchPartResult(TP, high_watermark=offset, records=batch(offset - 1, 1))], 0

    def context() -> RequestContext:
        return RequestContext("Test", Deadline.after(5.0, SYSTEM_CLOCK), client_id="unit")

    all_sent = asyncio.Event()

    def send(wire: bytes) -> None:
        sent.append(wire)
        if len(sent) == 4:  # the credit's four answers
            all_sent.set()

    pushes = FetchPushes(context, fetch_results, send)
    request = data_pb2.FetchRequest(
        max_bytes=1_000_000,
        push_credit=4,
        partitions=[data_pb2.FetchPartition(topic="t", partition=0, fetch_offset=10)],
    )
    claimed = pushes.claim(request)
    started = pushes.answer(request, claimed, [FetchPartResult(TP, high_watermark=10)], 0)
    assert started == {TP: (4, 10)}
    await asyncio.wait_for(all_sent.wait(), 10)
    await pushes.table.close()
    assert [(max_bytes, offset) for _, max_bytes, offset in seen] == [
        (1_000_000, 10),
        (1_000_000, 11),
        (1_000_000, 12),
        (1_000_000, 13),
    ]
    assert len({id(r) for r, _, _ in seen}) == 1
    assert len(sent) == 4
