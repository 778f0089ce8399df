"""request_percentage on real processes, as Kafka's request quota: it charges the gateway's
handler time (not the wait on storage) and it covers every client request, not only produce
and fetch."""

from __future__ import annotations

import time

import grpc
import pytest

from riverlog.client import AdminClient, Producer
from riverlog.cluster import LocalCluster
from riverlog.common.quota.entity import QuotaEntity
from riverlog.common.rpc.channel import CLIENT_ID_KEY
from riverlog.v1 import data_pb2, gateway_pb2, gateway_pb2_grpc

pytestmark = pytest.mark.integration

_LONG_POLL_MS = 300


def _quota(cluster: LocalCluster, client_id: str, percentage: float) -> None:
    with AdminClient({"bootstrap.servers": cluster.gateway_addresses[0]}) as admin:
        admin.alter_client_quotas(
            [(QuotaEntity(None, client_id), {"request_percentage": percentage})]
        )


def test_waiting_on_storage_is_not_charged(quota_cluster: LocalCluster) -> None:
    """Each fetch waits its whole max_wait on the leader (min_bytes is never met) and comes
    back with records. 5% of a thread allows ~0.5 s of handler time in the window: charged at
    wall time, the 300 ms waits would be throttled by the third fetch."""
    topic = "request-time-wait"
    quota_cluster.create_topic(topic, partitions=1)
    with Producer({"bootstrap.servers": quota_cluster.gateway_addresses[0]}) as producer:
        for _ in range(50):
            producer.send(topic, b"w" * 100)
        producer.flush(30)
    _quota(quota_cluster, "patient", 5.0)
    request = data_pb2.FetchRequest(
        max_wait_ms=_LONG_POLL_MS,
        min_bytes=10 << 20,
        max_bytes=1 << 20,
        partitions=[data_pb2.FetchPartition(topic=topic, partition=0, fetch_offset=0)],
    )
    with grpc.insecure_channel(quota_cluster.gateway_addresses[0]) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        throttles, sizes = [], []
        for _ in range(8):
            response = stub.Fetch(request, metadata=((CLIENT_ID_KEY, "patient"),), timeout=10)
            throttles.append(response.throttle_time_ms)
            sizes.append(sum(len(p.records) for p in response.partitions))
    assert all(size > 0 for size in sizes), sizes  # each fetch had records to charge
    assert throttles == [0] * 8


def test_every_request_is_charged_and_the_throttle_time_answered(
    quota_cluster: LocalCluster,
) -> None:
    """A client with a tiny request quota calling GetMetadata (no byte quota involved) is
    answered with a throttle time, and its next request is held that long; a client without
    a quota calling the same is never throttled."""
    topic = "request-time-every"
    quota_cluster.create_topic(topic, partitions=1)
    _quota(quota_cluster, "chatty", 0.001)  # 10 µs of handler time per second
    with grpc.insecure_channel(quota_cluster.gateway_addresses[1]) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        chatty = ((CLIENT_ID_KEY, "chatty"),)
        quiet = ((CLIENT_ID_KEY, "quiet-metadata"),)
        metadata_request = gateway_pb2.GetMetadataRequest(topics=[topic])
        throttle = 0
        for _ in range(500):
            response = stub.GetMetadata(metadata_request, metadata=chatty, timeout=10)
            assert [t.name for t in response.topics] == [topic]  # answered in full
            throttle = response.throttle_time_ms
            if throttle > 0:
                break
        assert throttle > 0, "500 metadata requests never crossed a 0.001% request quota"
        # now held: the next request waits out the rest of the hold before it is handled
        answered = time.monotonic()
        try:
            stub.GetMetadata(metadata_request, metadata=chatty, timeout=5.0)
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # a lower bound (load only makes it longer): the hold began before the answer left
        assert time.monotonic() - answered >= 0.5 * throttle / 1000, throttle
        for _ in range(20):
            answer = stub.GetMetadata(metadata_request, metadata=quiet, timeout=10)
            assert answer.throttle_time_ms == 0
