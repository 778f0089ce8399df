"""Followers keep the producer state too: on a cluster of this module's own (three storage nodes,
replication factor 3, acks=all), a producer's batches are acknowledged, the leader is killed with
kill -9, and a retry of the last batch sent to the new leader is still answered with the offsets
of the first write and stored nowhere twice; then the old leader comes back (rebuilding its state
from snapshot and log as a follower) and the next leader after another kill -9 answers the same."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from idempotence_client import TIMEOUT_S, Client, batch

from riverlog.cluster import LocalCluster
from riverlog.common.errors import error_for
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "idempotence-failover"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("idempotence-failover"),
        storage_nodes=3,
        metadata_nodes=1,
        gateways=1,
        extra_config={
            "storage": {"replica.lag.time.max.ms": "3000", "replica.fetch.wait.max.ms": "200"},
            "metadata": {
                "broker.session.timeout.ms": "3000",
                "broker.heartbeat.interval.ms": "500",
            },
        },
    ) as local:
        yield local


def partition_state(client: Client) -> common_pb2.PartitionState:
    response = client.stub.GetMetadata(
        gateway_pb2.GetMetadataRequest(topics=[TOPIC]), timeout=TIMEOUT_S
    )
    return response.topics[0].partitions[0]


def wait_for(what: str, check, attempts: int = 300):  # type: ignore[no-untyped-def]
    for _ in range(attempts):
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def produce_until_answered(client: Client, records: bytes) -> data_pb2.ProducePartitionResponse:
    def attempt() -> data_pb2.ProducePartitionResponse | None:
        try:
            answer = client.produce(TOPIC, 0, records)
        except Exception:
            return None
        if answer.error_code != 0 and error_for(answer.error_code).retriable:
            return None
        return answer

    result: data_pb2.ProducePartitionResponse = wait_for("an answer", attempt)
    return result


@pytest.mark.timeout(300)
def test_a_new_leader_detects_the_retry(cluster: LocalCluster) -> None:
    cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
    client = Client(cluster.gateway_address)
    try:
        wait_for("a full ISR", lambda: len(partition_state(client).isr) == 3)
        pid = client.init_producer_id().producer_id
        for seq in (0, 3):
            assert produce_until_answered(client, batch(pid, 0, seq)).error_code == 0
        last = batch(pid, 0, 6)
        original = produce_until_answered(client, last)
        assert (original.error_code, original.base_offset) == (0, 6)

        first_leader = partition_state(client).leader
        cluster.storage(first_leader).kill(signal.SIGKILL)
        retry = produce_until_answered(client, last)
        assert retry.error_code == 0
        assert (retry.base_offset, retry.last_offset) == (6, 8)
        second_leader = partition_state(client).leader
        assert second_leader != first_leader
        assert client.end_offset(TOPIC, 0) == 9

        cluster.storage(first_leader).restart(timeout=120)
        wait_for(
            "the old leader back in the ISR", lambda: first_leader in partition_state(client).isr
        )
        cluster.storage(second_leader).kill(signal.SIGKILL)
        again = produce_until_answered(client, last)
        assert again.error_code == 0
        assert (again.base_offset, again.last_offset) == (6, 8)
        assert partition_state(client).leader not in (second_leader, -1)
        assert client.end_offset(TOPIC, 0) == 9
        assert produce_until_answered(client, batch(pid, 0, 9)).base_offset == 9
    finally:
        client.close()
