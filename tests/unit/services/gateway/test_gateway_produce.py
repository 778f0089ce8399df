"""Produce of pre-encoded batches: bytes forwarded untouched, split by leader, results in
request order, bad input refused per partition or as a whole, and never forwarded."""

import asyncio

import pytest
from gateway_fakes import Harness

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records import BatchBuilder
from riverlog.common.types import Acks, TopicPartition
from riverlog.services.gateway.produce import (
    ProduceOptions,
    ProducePart,
    ProducePartResult,
    StreamOrder,
    unsequenced,
)


def batch(value: bytes = b"v", count: int = 1) -> bytes:
    builder = BatchBuilder()
    for i in range(count):
        builder.append(1_700_000_000_000 + i, None, value)
    return builder.build()


async def test_batches_reach_their_leaders_byte_for_byte(harness: Harness) -> None:
    a, b, c = batch(b"a"), batch(b"b", 3), batch(b"c") + batch(b"d")
    parts = [
        ProducePart(TopicPartition("t", 1), a),
        ProducePart(TopicPartition("t", 0), b, current_leader_epoch=4),
        ProducePart(TopicPartition("u", 0), c),
    ]
    results = await harness.producer.produce(harness.ctx(), ProduceOptions(Acks.ALL, 1500), parts)
    assert [(r.tp, r.error_code, r.base_offset) for r in results] == [
        (TopicPartition("t", 1), 0, 200),
        (TopicPartition("t", 0), 0, 100),
        (TopicPartition("u", 0), 0, 300),
    ]
    sent = {node: (batch_, options) for _, node, batch_, options in harness.storage.calls}
    assert sent[2][0][0].records is a  # the very same bytes object: nothing re-encoded
    assert sent[1][0][0].records == b and sent[1][0][0].current_leader_epoch == 4
    assert sent[3][0][0].records == c
    assert sent[1][1].acks == Acks.ALL and sent[1][1].timeout_ms == 1500


async def test_zero_timeout_means_the_request_timeout(harness: Harness) -> None:
    await harness.producer.produce(
        harness.ctx(), ProduceOptions(), [ProducePart(TopicPartition("t", 0), batch())]
    )
    options = harness.storage.calls[0][3]
    assert 0 < options.timeout_ms <= harness.config.request_timeout_ms


@pytest.mark.parametrize(
    ("tp", "records", "code", "words"),
    [
        (TopicPartition("", 0), batch(), ErrorCode.INVALID_TOPIC_EXCEPTION, "empty"),
        (TopicPartition("bad name!", 0), batch(), ErrorCode.INVALID_TOPIC_EXCEPTION, "invalid"),
        (TopicPartition("x" * 300, 0), batch(), ErrorCode.INVALID_TOPIC_EXCEPTION, "249"),
        (TopicPartition("t", -1), batch(), ErrorCode.INVALID_REQUEST, "negative"),
        (TopicPartition("t", 0), b"", ErrorCode.INVALID_REQUEST, "no record batch"),
        (TopicPartition("t", 0), b"garbage" * 20, ErrorCode.CORRUPT_MESSAGE, "magic"),
        (TopicPartition("t", 0), b"\x00" * 100, ErrorCode.CORRUPT_MESSAGE, "framing"),
        (TopicPartition("t", 0), batch()[:-3], ErrorCode.CORRUPT_MESSAGE, "torn"),
        (TopicPartition("t", 0), batch()[:30], ErrorCode.CORRUPT_MESSAGE, "truncated"),
        (TopicPartition("nope", 0), batch(), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown"),
    ],
)
async def test_bad_items_are_refused_alone(
    harness: Harness, tp: TopicPartition, records: bytes, code: ErrorCode, words: str
) -> None:
    good = ProducePart(TopicPartition("u", 0), batch())
    results = await harness.producer.produce(
        harness.ctx(), ProduceOptions(), [ProducePart(tp, records), good]
    )
    assert results[0].error_code == code
    assert words in results[0].error_message
    assert results[1].error_code == ErrorCode.NONE
    forwarded = [item.tp for _, _, items, _ in harness.storage.calls for item in items]
    assert forwarded == [good.tp]


async def test_duplicate_partitions_are_refused(harness: Harness) -> None:
    tp = TopicPartition("t", 0)
    results = await harness.producer.produce(
        harness.ctx(), ProduceOptions(), [ProducePart(tp, batch()), ProducePart(tp, batch())]
    )
    assert [r.error_code for r in results] == [0, ErrorCode.INVALID_REQUEST]


@pytest.mark.parametrize(
    ("options", "code"),
    [
        (ProduceOptions(acks=7), ErrorCode.INVALID_REQUIRED_ACKS),
        (ProduceOptions(acks=None), ErrorCode.INVALID_REQUIRED_ACKS),  # wire -1: acks_from_proto
        (ProduceOptions(timeout_ms=-5), ErrorCode.INVALID_REQUEST),
    ],
)
async def test_bad_requests_raise_and_send_nothing(
    harness: Harness, options: ProduceOptions, code: ErrorCode
) -> None:
    parts = [ProducePart(TopicPartition("t", 0), batch())]
    with pytest.raises(RiverlogError) as info:
        await harness.producer.produce(harness.ctx(), options, parts)
    assert info.value.code == code
    assert info.value.grpc_status.name == "INVALID_ARGUMENT"
    failed = await harness.producer.produce_or_fail(harness.ctx(), options, parts)
    assert [r.error_code for r in failed] == [code]
    assert harness.storage.calls == []


async def test_empty_request_gives_empty_response(harness: Harness) -> None:
    assert await harness.producer.produce(harness.ctx(), ProduceOptions(), []) == []


async def test_leader_errors_pass_through(harness: Harness) -> None:
    harness.storage.answer = lambda node_id, item: ProducePartResult(
        item.tp, ErrorCode.NOT_ENOUGH_REPLICAS, "isr too small"
    )
    [result] = await harness.producer.produce(
        harness.ctx(), ProduceOptions(), [ProducePart(TopicPartition("t", 0), batch())]
    )
    assert (result.error_code, result.error_message) == (
        ErrorCode.NOT_ENOUGH_REPLICAS,
        "isr too small",
    )


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_stream_resends_a_partition_only_while_no_later_request_names_it(
    harness: Harness, idempotent: bool
) -> None:
    """Two requests of one ProduceStream for t/0, each in its task: the leader refuses the
    first (not the leader yet) and takes the second. Without a producer id nothing orders
    them at the leader, so the first is not re-sent behind the second (its records would
    follow the second's, which Kafka allows only through the client's own retries): its error
    goes back to the client. Batches with a producer id are re-sent as before (the leader
    keeps them in order by their sequence numbers)."""
    tp = TopicPartition("t", 0)

    def sequenced(value: bytes, sequence: int) -> bytes:
        builder = BatchBuilder(producer_id=7, producer_epoch=0, base_sequence=sequence)
        builder.append(1_700_000_000_000, None, value)
        return builder.build()

    first, second = (
        (sequenced(b"1", 0), sequenced(b"2", 1)) if idempotent else (batch(b"1"), batch(b"2"))
    )
    refused = [first]

    def answer(node_id: int, part: ProducePart) -> ProducePartResult | None:
        if refused and part.records is refused[0]:
            refused.clear()
            return ProducePartResult(part.tp, ErrorCode.NOT_LEADER_OR_FOLLOWER, "not yet")
        return None

    harness.storage.answer = answer
    order = StreamOrder()
    produce = harness.producer.produce_or_fail
    one = asyncio.ensure_future(
        produce(harness.ctx(), ProduceOptions(), [ProducePart(tp, first)], order)
    )
    two = asyncio.ensure_future(
        produce(harness.ctx(), ProduceOptions(), [ProducePart(tp, second)], order)
    )
    [r1], [r2] = await asyncio.wait_for(asyncio.gather(one, two), 5)
    sent = [items[0].records for method, _, items, _ in harness.storage.calls]
    assert r2.error_code == ErrorCode.NONE
    if idempotent:
        assert sent == [first, second, first]
        assert r1.error_code == ErrorCode.NONE
    else:
        assert sent == [first, second]
        assert r1.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert order._newest == {}  # nothing held once both are answered


def test_unsequenced_reads_the_producer_id() -> None:
    tp = TopicPartition("t", 0)
    assert unsequenced(ProducePart(tp, batch()))
    with_id = BatchBuilder(producer_id=0, producer_epoch=0, base_sequence=0)
    with_id.append(1, None, b"v")
    assert not unsequenced(ProducePart(tp, with_id.build()))
    assert not unsequenced(ProducePart(tp, b"short"))
