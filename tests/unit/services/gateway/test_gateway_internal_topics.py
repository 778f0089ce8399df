"""Regression (found by the fuzzer, tests/integration/fuzz): a client could append records to
`__consumer_offsets` through the gateway (Produce, ProduceStream, ProduceRecords) and delete its
records (DeleteRecords), so any client could forge or erase other groups' committed offsets.
Kafka refuses both for internal topics (INVALID_TOPIC_EXCEPTION: "Cannot append to internal
topic"); the coordinators write it straight to the storage nodes, never through the gateway. Now
the gateway refuses them before routing: nothing reaches a storage node."""

import pytest
from gateway_fakes import FAST, Harness, make_image

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records import BatchBuilder, Record
from riverlog.common.types import TopicPartition
from riverlog.services.gateway.offsets import DeleteRecordsPart
from riverlog.services.gateway.produce import ProduceOptions, ProducePart
from riverlog.services.gateway.records import PlainRecords

OFFSETS = "__consumer_offsets"


@pytest.fixture
def harness() -> Harness:
    image = make_image(1, {OFFSETS: [1, 2], "t": [1]}, internal=frozenset({OFFSETS}))
    return Harness(image, FAST)


def _batch() -> bytes:
    builder = BatchBuilder()
    builder.append(0, b'{"g":"forged"}', b"offset 0")
    return builder.build()


async def test_produce_to_an_internal_topic_is_refused(harness: Harness) -> None:
    parts = [
        ProducePart(TopicPartition(OFFSETS, 0), _batch()),
        ProducePart(TopicPartition("__transaction_state", 0), _batch()),
        ProducePart(TopicPartition("t", 0), _batch()),
    ]
    results = await harness.producer.produce(harness.ctx(), ProduceOptions(), parts)
    assert [r.error_code for r in results] == [ErrorCode.INVALID_TOPIC_EXCEPTION] * 2 + [0]
    assert results[0].error_message == f"Cannot append to internal topic {OFFSETS}"
    sent = [item.tp.topic for _, _, items, _ in harness.storage.calls for item in items]
    assert sent == ["t"]


async def test_plain_records_to_an_internal_topic_are_refused(harness: Harness) -> None:
    plain = PlainRecords(harness.cache, harness.producer, harness.fetcher)
    with pytest.raises(RiverlogError) as info:
        await plain.produce(
            harness.ctx(), OFFSETS, 0, [Record(-1, 0, b"k", b"v", [])], ProduceOptions(), ""
        )
    assert info.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert not harness.storage.calls


async def test_delete_records_of_an_internal_topic_is_refused(harness: Harness) -> None:
    results = await harness.offsets.delete_records(
        harness.ctx(), 1000, [DeleteRecordsPart(TopicPartition(OFFSETS, 1), -1)]
    )
    assert [r.error_code for r in results] == [ErrorCode.INVALID_TOPIC_EXCEPTION]
    assert "Cannot delete records of internal topic" in results[0].error_message
    assert not harness.storage.calls
