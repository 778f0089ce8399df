"""max.partition.fetch.bytes when not set (decision 0046): 4 MiB per partition while the
assigned partitions can each have two such fetches within fetch.max.bytes, else Kafka's 1 MiB;
set, it is used as it is. Checked on the function and on the requests the consumer sends."""

from __future__ import annotations

from collections import deque
from typing import cast

import pytest
from client_fakes import FakeGateway, FakeServer

from riverlog.client import Consumer, RiverlogError, TopicPartition
from riverlog.client._connection import GatewayConnection
from riverlog.client.config import (
    AUTO_PARTITION_FETCH_BYTES,
    KAFKA_PARTITION_FETCH_BYTES,
    ConsumerConfig,
    partition_fetch_bytes,
)
from riverlog.client.consumer.chunk import Chunk
from riverlog.client.consumer.fetcher import MAX_CHUNKS, Fetcher
from riverlog.client.consumer.subscription import SubscriptionState
from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder
from riverlog.v1 import data_pb2

MIB = 1_048_576
DEFAULT_FETCH_MAX = 52_428_800


def test_constants_are_kafkas_and_four_mib() -> None:
    assert (KAFKA_PARTITION_FETCH_BYTES, AUTO_PARTITION_FETCH_BYTES) == (MIB, 4 * MIB)
    assert ConsumerConfig.from_kafka({"bootstrap.servers": "a:1"}).max_partition_fetch_bytes == 0


@pytest.mark.parametrize(
    ("partitions", "expected"),
    [(0, 4 * MIB), (1, 4 * MIB), (6, 4 * MIB), (7, MIB), (1000, MIB)],
)
def test_not_set_depends_on_the_partitions(partitions: int, expected: int) -> None:
    assert partition_fetch_bytes(0, DEFAULT_FETCH_MAX, partitions) == expected


def test_not_set_follows_fetch_max_bytes() -> None:
    assert partition_fetch_bytes(0, 8 * MIB, 1) == 4 * MIB  # 1 x 4 MiB x 2 fits exactly
    assert partition_fetch_bytes(0, 8 * MIB - 1, 1) == MIB
    assert partition_fetch_bytes(0, 100 * MIB, 12) == 4 * MIB
    assert partition_fetch_bytes(0, 100 * MIB, 13) == MIB


def test_set_is_used_as_it_is() -> None:
    for configured in (1, 4096, MIB, 4 * MIB, 64 * MIB):
        for partitions in (None, 0, 1, 7, 1000):
            assert partition_fetch_bytes(configured, DEFAULT_FETCH_MAX, partitions) == configured


def test_without_partitions_it_is_kafkas() -> None:
    """Spark's source passes None: Kafka's 1 MiB unless set."""
    assert partition_fetch_bytes(0, DEFAULT_FETCH_MAX, None) == MIB


def test_memory_bound_of_one_partition() -> None:
    """Fetches in flight for one partition: MAX_CHUNKS x 4 MiB = 16 MiB, within fetch.max.bytes."""
    subs = SubscriptionState("earliest")
    subs.assign([TopicPartition("t", 0)])
    fetcher = Fetcher(
        ConsumerConfig.from_kafka({"bootstrap.servers": "a:1"}),
        cast(GatewayConnection, None),
        subs,
    )
    full = fetcher.partition_fetch_bytes()
    assert full * fetcher._depth(full) == MAX_CHUNKS * 4 * MIB == 16 * MIB


def _sizes(gateway: FakeGateway) -> set[int]:
    return {size for request in gateway.fetch_sizes for size in request}


def _poll_until_fetched(c: Consumer, gateway: FakeGateway, count: int = 1) -> None:
    for _ in range(200):
        c.poll(timeout_ms=20)
        if len(gateway.fetch_sizes) >= count:
            return
    raise AssertionError("no fetch was sent")


@pytest.mark.parametrize(
    ("partitions", "config", "expected"),
    [
        (1, {}, 4 * MIB),
        (6, {}, 4 * MIB),
        (7, {}, MIB),
        (1, {"max.partition.fetch.bytes": MIB}, MIB),  # Kafka's behaviour, asked for
        (7, {"max.partition.fetch.bytes": 4096}, 4096),
        (1, {"fetch.max.bytes": 4 * MIB}, MIB),
    ],
)
def test_requests_ask_the_effective_size(
    fake: FakeServer,
    gateway: FakeGateway,
    partitions: int,
    config: dict[str, object],
    expected: int,
) -> None:
    gateway.create("t", partitions)
    conf = {"bootstrap.servers": fake.address, "fetch.max.wait.ms": 10}
    with Consumer({**conf, **config}) as c:
        c.assign([TopicPartition("t", p) for p in range(partitions)])
        c.seek_to_beginning()
        _poll_until_fetched(c, gateway)
    assert _sizes(gateway) == {expected}


def _sizes_of(gateway: FakeGateway, topic: str) -> set[int]:
    """The partition_max_bytes asked for `topic`'s partitions (fetches in flight across a new
    assignment can still arrive, so each phase reads its own topic)."""
    with gateway.lock:  # both lists grow together under it
        pairs = list(zip(gateway.fetch_requests, gateway.fetch_sizes, strict=True))
    return {
        size
        for names, sizes in pairs
        for (t, _), size in zip(names, sizes, strict=True)
        if t == topic
    }


def test_a_new_assignment_changes_the_size_of_later_fetches(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("one", 1)
    gateway.create("eight", 8)
    gateway.create("again", 1)
    conf = {"bootstrap.servers": fake.address, "fetch.max.wait.ms": 10}
    with Consumer(conf) as c:
        for topic, count in (("one", 1), ("eight", 8), ("again", 1)):
            c.assign([TopicPartition(topic, p) for p in range(count)])
            c.seek_to_beginning()
            for _ in range(200):
                c.poll(timeout_ms=20)
                if _sizes_of(gateway, topic):
                    break
    assert _sizes_of(gateway, "one") == {4 * MIB}
    assert _sizes_of(gateway, "eight") == {MIB}
    assert _sizes_of(gateway, "again") == {4 * MIB}


def test_message_too_large_names_the_size_the_fetch_asked() -> None:
    tp = TopicPartition("t", 0)
    subs = SubscriptionState("earliest")
    subs.assign([tp])
    state = subs.partitions[tp]
    state.seek(0)
    fetcher = Fetcher(
        ConsumerConfig.from_kafka({"bootstrap.servers": "a:1"}),
        cast(GatewayConnection, None),
        subs,
    )
    chunk = Chunk(tp, state.epoch, 0, 4 * MIB, 4 * MIB)
    fetcher._chains[tp] = deque([chunk])
    builder = BatchBuilder()
    builder.append(1000, None, b"x" * 200)
    partial = builder.build()[:100]  # a batch cut short: larger than the fetch could hold
    answer = data_pb2.FetchPartitionResponse(
        topic="t", partition=0, high_watermark=1, records=partial
    )
    with pytest.raises(RiverlogError) as raised:
        fetcher._handle(data_pb2.FetchResponse(partitions=[answer]), {tp: chunk})
    assert raised.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert f"max.partition.fetch.bytes ({4 * MIB})" in str(raised.value)
