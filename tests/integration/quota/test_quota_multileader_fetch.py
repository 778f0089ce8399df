"""A plain gRPC Fetch over partitions of both storage nodes, under a consumer_byte_rate quota
(decision 0018, addendum of session 5): the leader's long poll the gateway stopped waiting for
is joined by the same client's next fetch of the same offsets, and its records are charged
then; a client that seeks elsewhere instead never gets that stale answer, and its bytes, read
but never returned, are never charged."""

from __future__ import annotations

import time

import grpc
import pytest

from riverlog.client import AdminClient
from riverlog.cluster import LocalCluster
from riverlog.common.quota.entity import QuotaEntity
from riverlog.common.records.builder import BatchBuilder
from riverlog.common.records.reader import iter_batches_records
from riverlog.common.rpc.channel import CLIENT_ID_KEY
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2_grpc

pytestmark = pytest.mark.integration

RATE = 2000.0  # bytes/s: 22 KB per 11-second window
BIG = 40_000
CHARGED_BIG_MS = 5_000
"""A throttle time this long means the BIG record was charged: 40 KB against 22 KB per window
gives Kafka's (rate - bound) / bound x window, about 9 s. A few small answers in a row give at
most a report interval or so (100 ms: the gateway's paced allowance, spent, holds the client
until the quota service's next answer)."""


def _batch(value: bytes) -> bytes:
    builder = BatchBuilder()
    builder.append(1_700_000_000_000, None, value)
    return builder.build()


def _produce(stub: gateway_pb2_grpc.GatewayStub, topic: str, partition: int, value: bytes) -> None:
    request = data_pb2.ProduceRequest(
        acks=common_pb2.ACKS_ALL,
        timeout_ms=10_000,
        partitions=[
            data_pb2.ProducePartition(topic=topic, partition=partition, records=_batch(value))
        ],
    )
    [result] = stub.Produce(request, metadata=((CLIENT_ID_KEY, "ml-producer"),)).partitions
    assert result.error_code == 0, result.error_message


def _fetch(
    stub: gateway_pb2_grpc.GatewayStub,
    client_id: str,
    topic: str,
    offsets: dict[int, int],
    max_wait_ms: int = 10_000,
) -> tuple[data_pb2.FetchResponse, dict[int, list[tuple[int, bytes]]]]:
    request = data_pb2.FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=[
            data_pb2.FetchPartition(topic=topic, partition=p, fetch_offset=o)
            for p, o in offsets.items()
        ],
    )
    response = stub.Fetch(request, metadata=((CLIENT_ID_KEY, client_id),), timeout=30)
    got: dict[int, list[tuple[int, bytes]]] = {}
    for part in response.partitions:
        assert part.error_code == 0, part.error_message
        got[part.partition] = [
            (r.offset, r.value) for r in iter_batches_records(part.records, offsets[part.partition])
        ]
    return response, got


def _two_leaders(cluster: LocalCluster, topic: str) -> tuple[int, int]:
    """Create `topic` and pick a partition on each storage node."""
    metadata = cluster.create_topic(topic, partitions=4)
    by_leader: dict[int, int] = {}
    for state in metadata.partitions:
        by_leader.setdefault(state.leader, state.partition)
    assert len(by_leader) == 2, by_leader  # both storage nodes lead one
    a, b = sorted(by_leader.values())
    return a, b


def _await_quota(cluster: LocalCluster, stub: gateway_pb2_grpc.GatewayStub) -> None:
    """Until the gateway caps a probe client's fetch (its quota was set with the others'):
    the quotas are in force on this gateway."""
    topic = "ml-fetch-probe"
    cluster.create_topic(topic, partitions=1)
    for _ in range(10):
        _produce(stub, topic, 0, b"p" * 1000)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        _, got = _fetch(stub, "ml-probe", topic, {0: 0}, max_wait_ms=0)
        if 0 < len(got[0]) < 10:
            return
        time.sleep(0.05)  # a poll interval while the quota config travels (bounded)
    raise AssertionError("the consumer_byte_rate quotas never reached the gateway")


def test_a_parked_poll_is_charged_when_joined_and_never_when_a_seek_leaves_it(
    quota_cluster: LocalCluster,
) -> None:
    clients = ("ml-seeker", "ml-joiner", "ml-probe")
    admin = AdminClient({"bootstrap.servers": quota_cluster.gateway_addresses[0]})
    channel = grpc.insecure_channel(quota_cluster.gateway_addresses[0])
    stub = gateway_pb2_grpc.GatewayStub(channel)
    try:
        admin.alter_client_quotas(
            [(QuotaEntity(None, c), {"consumer_byte_rate": RATE}) for c in clients]
        )
        _await_quota(quota_cluster, stub)

        # The seeker: its first fetch is answered by partition a; b's long poll is parked.
        topic = "ml-fetch-seek"
        a, b = _two_leaders(quota_cluster, topic)
        _produce(stub, topic, a, b"a0")
        response, got = _fetch(stub, "ml-seeker", topic, {a: 0, b: 0})
        assert (got[a], got[b]) == ([(0, b"a0")], [])
        assert response.throttle_time_ms == 0
        # b gets a BIG record (the parked poll reads it) and a small one after it; the seeker
        # seeks b past the BIG one: it gets offset 1, never the parked answer from 0
        _produce(stub, topic, b, b"B" * BIG)
        _produce(stub, topic, b, b"b1")
        response, got = _fetch(stub, "ml-seeker", topic, {a: 1, b: 1})
        assert got[b] == [(1, b"b1")] and got[a] == []
        # the BIG record was read by the parked poll but never returned: not charged, so the
        # seeker is never held back as the joiner below is
        throttles = [response.throttle_time_ms]
        for _ in range(3):
            _produce(stub, topic, a, b"a")
            response, _ = _fetch(stub, "ml-seeker", topic, {a: 1, b: 2}, max_wait_ms=0)
            throttles.append(response.throttle_time_ms)
        assert max(throttles) < CHARGED_BIG_MS, throttles

        # The joiner: the same start, but its next fetch asks b at the same offset again and
        # joins the parked poll: the BIG record comes back once, at offset 0, and is charged
        # (the answer crosses the bound: a throttle time, and Kafka's empty answer).
        topic = "ml-fetch-join"
        a, b = _two_leaders(quota_cluster, topic)
        _produce(stub, topic, a, b"a0")
        _, got = _fetch(stub, "ml-joiner", topic, {a: 0, b: 0})
        assert (got[a], got[b]) == ([(0, b"a0")], [])
        _produce(stub, topic, b, b"B" * BIG)
        response, got = _fetch(stub, "ml-joiner", topic, {a: 1, b: 0})
        assert got[b] in ([(0, b"B" * BIG)], [])  # [] when emptied by the quota
        assert response.throttle_time_ms >= CHARGED_BIG_MS
    finally:
        admin.alter_client_quotas(
            [(QuotaEntity(None, c), {"consumer_byte_rate": None}) for c in clients]
        )
        admin.close()
        channel.close()
