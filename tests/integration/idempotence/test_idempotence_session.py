"""Idempotence on the session cluster, and on the shared TLS cluster with every channel encrypted
(the `client_cluster` fixture, conftest.py), through the Gateway API with hand-built batches: a
retried batch (the same bytes sent again) is stored once and the retry gets the original
offsets; a gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER and an older epoch with
INVALID_PRODUCER_EPOCH; the SDK's default producer is idempotent (both SDK flavours: the `sdk`
fixture, sdk_flavours.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from idempotence_client import Client, batch
from sdk_flavours import Sdk
from shared_clusters import ClientCluster

from riverlog.client import TopicPartition
from riverlog.common.errors import ErrorCode

pytestmark = pytest.mark.integration


@pytest.fixture
def client(client_cluster: ClientCluster) -> Iterator[Client]:
    c = Client(client_cluster.cluster.gateway_address, client_cluster.credentials)
    try:
        yield c
    finally:
        c.close()


def test_init_producer_id_hands_out_new_ids_and_bumps_epochs(client: Client) -> None:
    first = client.init_producer_id()
    second = client.init_producer_id()
    assert first.error_code == 0 and first.producer_id >= 0 and first.producer_epoch == 0
    assert second.producer_id != first.producer_id
    bumped = client.init_producer_id(producer_id=first.producer_id, producer_epoch=0)
    assert (bumped.producer_id, bumped.producer_epoch) == (first.producer_id, 1)


def test_a_retried_batch_is_stored_once_with_the_original_offsets(
    client: Client, client_cluster: ClientCluster
) -> None:
    topic = client_cluster.new_topic(partitions=1)
    pid = client.init_producer_id().producer_id
    client.produce(topic, 0, batch(pid, 0, 0, count=2, tag=b"warm-up"))
    data = batch(pid, 0, 2, count=3)
    first = client.produce(topic, 0, data)
    retry = client.produce(topic, 0, data)
    assert first.error_code == 0 and retry.error_code == 0
    assert (
        (retry.base_offset, retry.last_offset)
        == (first.base_offset, first.last_offset)
        == (
            2,
            4,
        )
    )
    assert client.end_offset(topic, 0) == 5


def test_a_gap_and_an_old_epoch_are_refused(client: Client, client_cluster: ClientCluster) -> None:
    topic = client_cluster.new_topic(partitions=1)
    pid = client.init_producer_id().producer_id
    assert client.produce(topic, 0, batch(pid, 1, 0)).error_code == 0
    gap = client.produce(topic, 0, batch(pid, 1, 7))
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    old = client.produce(topic, 0, batch(pid, 0, 3))
    assert old.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert client.end_offset(topic, 0) == 3


def test_the_default_sdk_producer_is_idempotent(sdk: Sdk, client_cluster: ClientCluster) -> None:
    topic = client_cluster.new_topic(partitions=2)
    with sdk.Producer(client_cluster.config) as producer:
        assert producer.config.enable_idempotence and producer.config.acks == -1
        futures = [producer.send(topic, b"v%03d" % i, partition=i % 2) for i in range(100)]
        producer.flush(timeout=60)
        ids = producer.producer_id_and_epoch
        assert ids is not None and ids.producer_id >= 0
        assert all(f.result(0).offset >= 0 for f in futures)
    with sdk.Consumer({**client_cluster.config, "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        got = []
        for _ in range(100):
            for records in c.poll(timeout_ms=500).values():
                got.extend(records)
            if len(got) >= 100:
                break
    assert sorted(r.value for r in got) == [b"v%03d" % i for i in range(100)]
