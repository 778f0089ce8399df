"""Idempotence across processes, on a cluster of this module's own (one storage node, two
gateways): producer ids are unique across gateways; a producer's state survives a kill -9 and a
clean restart of the leader (a retry of its last batch is still answered with the original
offsets, a gap still refused, and a clean stop leaves a snapshot); and the SDK's default
producer, sending through a kill -9 and restart of the storage node, leaves every record
exactly once, in send order per partition (both SDK flavours: the `sdk` fixture,
sdk_flavours.py)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from idempotence_client import Client, batch
from sdk_flavours import Sdk

from riverlog.client import TopicPartition
from riverlog.cluster import LocalCluster
from riverlog.common.errors import ErrorCode, error_for
from riverlog.v1 import data_pb2

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("idempotence"), storage_nodes=1, metadata_nodes=1, gateways=2
    ) as local:
        yield local


def produce_when_back(
    client: Client, topic: str, records: bytes
) -> data_pb2.ProducePartitionResponse:
    """Produce, retrying retriable errors while the leader comes back (bounded)."""
    answer = None
    for _ in range(300):
        try:
            answer = client.produce(topic, 0, records)
        except Exception:  # the gateway cannot reach the leader yet
            time.sleep(0.2)
            continue
        if answer.error_code == 0 or not error_for(answer.error_code).retriable:
            return answer
        time.sleep(0.2)
    raise AssertionError(f"the leader did not come back: {answer}")


def test_ids_are_unique_across_two_gateways(cluster: LocalCluster) -> None:
    clients = [Client(address) for address in cluster.gateway_addresses]
    try:
        ids = [c.init_producer_id().producer_id for _ in range(30) for c in clients]
    finally:
        for c in clients:
            c.close()
    assert len(ids) == len(set(ids)) == 60
    assert min(ids) >= 0


@pytest.mark.timeout(300)
@pytest.mark.parametrize("stop", ["kill -9", "clean"])
def test_producer_state_survives_a_leader_restart(cluster: LocalCluster, stop: str) -> None:
    topic = f"idempotence-restart-{stop.replace(' ', '').replace('-', '')}"
    cluster.create_topic(topic, 1, 1)
    client = Client(cluster.gateway_address)
    try:
        pid = client.init_producer_id().producer_id
        answers = [produce_when_back(client, topic, batch(pid, 0, seq, count=2)) for seq in (0, 2)]
        last = batch(pid, 0, 4, count=2)
        original = produce_when_back(client, topic, last)
        assert [a.base_offset for a in [*answers, original]] == [0, 2, 4]
        node = cluster.storage(1)
        if stop == "kill -9":
            node.kill(signal.SIGKILL)
        else:
            node.stop()
            snapshots = list(
                Path(cluster.data_dir, "data", "storage-1").glob(f"{topic}-0/*.snapshot")
            )
            assert [p.name for p in snapshots] == [f"{6:020d}.snapshot"]
        node.restart(timeout=120)
        retry = produce_when_back(client, topic, last)
        assert retry.error_code == 0
        assert (retry.base_offset, retry.last_offset) == (
            original.base_offset,
            original.last_offset,
        )
        assert client.end_offset(topic, 0) == 6  # nothing written twice
        gap = produce_when_back(client, topic, batch(pid, 0, 9))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce_when_back(client, topic, batch(pid, 0, 6)).base_offset == 6
    finally:
        client.close()


@pytest.mark.timeout(300)
def test_sdk_records_exactly_once_through_a_storage_restart(
    sdk: Sdk, cluster: LocalCluster
) -> None:
    topic, partitions, total = f"idempotence-sdk-restart-{sdk.name}", 3, 1500
    cluster.create_topic(topic, partitions, 1)
    sent: list[tuple[int, Any]] = []
    config = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "retry.backoff.ms": 50,
        "delivery.timeout.ms": 200_000,
        "request.timeout.ms": 10_000,
        "linger.ms": 2,
    }
    with sdk.Producer(config) as producer:

        def send(start: int, stop: int) -> None:
            for i in range(start, stop):
                sent.append((i, producer.send(topic, b"%06d" % i, partition=i % partitions)))

        send(0, total // 3)
        cluster.storage(1).kill(signal.SIGKILL)  # some requests are on the wire
        send(total // 3, 2 * total // 3)
        cluster.storage(1).restart(timeout=120)
        send(2 * total // 3, total)
        producer.flush(timeout=220)
        metas = {i: f.result(0) for i, f in sent}
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    got = []
    with sdk.Consumer(
        bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest"
    ) as c:
        c.assign(tps)
        for _ in range(400):
            for records in c.poll(timeout_ms=500).values():
                got.extend(records)
            if len(got) >= total:
                break
        end = c.end_offsets(tps)
    assert sum(end.values()) == total  # nothing stored twice
    values = [r.value for r in got]
    assert sorted(values) == [b"%06d" % i for i in range(total)]
    for p in range(partitions):  # in send order within each partition
        mine = [int(r.value) for r in got if r.partition == p]
        assert mine == sorted(mine)
    where = {r.value: (r.partition, r.offset) for r in got}
    for i, meta in metas.items():
        assert where[b"%06d" % i] == (meta.partition, meta.offset)
