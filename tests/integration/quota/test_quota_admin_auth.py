"""Users, credentials and quota configs through the real gateway and metadata service: bad
values get clear errors and change nothing, a wrong password is UNAUTHENTICATED, a quota set at
runtime throttles within 2 s, and a throttled fetch is answered empty with a throttle time."""

from __future__ import annotations

import time

import grpc
import pytest

from riverlog.client import AdminClient, Consumer, Producer
from riverlog.cluster import LocalCluster
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.entity import DEFAULT, QuotaEntity
from riverlog.common.records.builder import BatchBuilder
from riverlog.common.records.reader import next_fetch_offset
from riverlog.common.rpc.channel import CLIENT_ID_KEY
from riverlog.common.types import TopicPartition
from riverlog.v1 import admin_pb2, common_pb2, data_pb2, gateway_pb2, gateway_pb2_grpc

pytestmark = pytest.mark.integration


def _admin(cluster: LocalCluster, **conf: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.gateway_addresses[0], **conf})


def _stub(address: str) -> tuple[grpc.Channel, gateway_pb2_grpc.GatewayStub]:
    channel = grpc.insecure_channel(address)
    return channel, gateway_pb2_grpc.GatewayStub(channel)


def test_bad_quota_values_get_clear_errors_and_change_nothing(quota_cluster: LocalCluster) -> None:
    with _admin(quota_cluster) as admin:
        admin.upsert_user("carol", "pw-carol")
        cases = [
            (QuotaEntity("carol", None), {"producer_byte_rate": -5.0}, "must be a whole number"),
            (QuotaEntity("carol", None), {"request_percentage": 0.0}, "a percentage above 0"),
            (QuotaEntity("carol", None), {"producer_byte_rate": 1.5}, "whole number"),
            (QuotaEntity("carol", None), {"bytes_per_second": 10.0}, "unknown quota key"),
            (QuotaEntity("nobody", None), {"producer_byte_rate": 10.0}, "unknown user 'nobody'"),
        ]
        for entity, values, expected in cases:
            with pytest.raises(RiverlogError) as info:
                admin.alter_client_quotas([(entity, dict(values))])
            assert expected in info.value.message
            assert info.value.code in (ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST)
        assert admin.describe_client_quotas(user="carol") == {}
        # the default user and ANONYMOUS need no stored user
        admin.alter_client_quotas([(QuotaEntity(DEFAULT, "batch"), {"consumer_byte_rate": 5e6})])
        found = admin.describe_client_quotas(client_id="batch")
        assert found == {QuotaEntity(DEFAULT, "batch"): {"consumer_byte_rate": 5e6}}
        admin.alter_client_quotas([(QuotaEntity(DEFAULT, "batch"), {"consumer_byte_rate": None})])
        assert admin.describe_client_quotas(client_id="batch") == {}


def test_wrong_password_is_unauthenticated(quota_cluster: LocalCluster) -> None:
    with _admin(quota_cluster) as admin:
        admin.upsert_user("dave", "right-password")
        assert "dave" in admin.list_users()
    with _admin(quota_cluster, **{"sasl.username": "dave", "sasl.password": "wrong"}) as admin:
        with pytest.raises(RiverlogError) as info:
            admin.list_topics()
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "authentication failed for user 'dave'" in info.value.message
    channel, stub = _stub(quota_cluster.gateway_addresses[1])
    with channel:
        metadata = (("riverlog-user", "dave"), ("riverlog-password", "wrong"))
        with pytest.raises(grpc.RpcError) as rpc:
            stub.ListTopics(admin_pb2.ListTopicsRequest(), metadata=metadata, timeout=10)
        assert rpc.value.code() == grpc.StatusCode.UNAUTHENTICATED
    good = {"sasl.username": "dave", "sasl.password": "right-password"}
    with _admin(quota_cluster, **good) as admin:
        admin.list_topics()


def _batch(size: int) -> bytes:
    builder = BatchBuilder()
    builder.append(1_700_000_000_000, None, b"v" * size)
    return builder.build()


def test_a_quota_set_at_runtime_throttles_within_two_seconds(quota_cluster: LocalCluster) -> None:
    topic = "quota-runtime"
    quota_cluster.create_topic(topic, partitions=1)
    channel, stub = _stub(quota_cluster.gateway_addresses[1])
    metadata = ((CLIENT_ID_KEY, "runtime-client"),)
    request = data_pb2.ProduceRequest(
        acks=common_pb2.ACKS_LEADER,
        timeout_ms=10_000,
        partitions=[data_pb2.ProducePartition(topic=topic, partition=0, records=_batch(10_000))],
    )
    with channel, _admin(quota_cluster) as admin:
        for _ in range(5):
            assert stub.Produce(request, metadata=metadata, timeout=10).throttle_time_ms == 0
        entity = QuotaEntity(None, "runtime-client")
        admin.alter_client_quotas([(entity, {"producer_byte_rate": 20_000.0})])
        changed = time.monotonic()
        throttled_after = None
        while time.monotonic() - changed < 10:
            response = stub.Produce(request, metadata=metadata, timeout=10)
            assert response.partitions[0].error_code == 0
            if response.throttle_time_ms > 0:
                throttled_after = time.monotonic() - changed
                break
        admin.alter_client_quotas([(entity, {"producer_byte_rate": None})])
    assert throttled_after is not None and throttled_after < 2.0


def _await_fetch_cap(
    stub: gateway_pb2_grpc.GatewayStub, topic: str, metadata: tuple[tuple[str, str], ...]
) -> data_pb2.FetchResponse:
    """Fetch from the start until the gateway caps the answer (which it returns): the quota
    is then in force. Until then no quota applies to the client, so those fetches charge
    nothing."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        request = data_pb2.FetchRequest(
            max_bytes=1 << 20,
            partitions=[data_pb2.FetchPartition(topic=topic, partition=0, fetch_offset=0)],
        )
        response = stub.Fetch(request, metadata=metadata, timeout=10)
        if sum(len(p.records) for p in response.partitions) <= 16_384 + 2048:
            return response
        time.sleep(0.05)
    raise AssertionError("the consumer_byte_rate quota never reached the gateway")


def test_a_throttled_fetch_is_answered_empty_with_a_throttle_time(
    quota_cluster: LocalCluster,
) -> None:
    topic = "quota-fetch"
    quota_cluster.create_topic(topic, partitions=1)
    with Producer({"bootstrap.servers": quota_cluster.gateway_addresses[0]}) as producer:
        for _ in range(200):
            producer.send(topic, b"r" * 1000)
        producer.flush(30)
    with _admin(quota_cluster) as admin:
        admin.alter_client_quotas(
            [(QuotaEntity(None, "slow-reader"), {"consumer_byte_rate": 2000.0})]
        )
    channel, stub = _stub(quota_cluster.gateway_addresses[0])
    metadata = ((CLIENT_ID_KEY, "slow-reader"),)
    offset, empties, fetched = 0, [], 0
    with channel:
        # the watch brings the quota within a second; the first capped answer counts
        first = _await_fetch_cap(stub, topic, metadata)
        for p in first.partitions:
            fetched += len(p.records)
            if p.records:
                offset = next_fetch_offset(p.records, offset)
        for _ in range(30):
            request = data_pb2.FetchRequest(
                max_wait_ms=100,
                max_bytes=1 << 20,
                partitions=[data_pb2.FetchPartition(topic=topic, partition=0, fetch_offset=offset)],
            )
            response = stub.Fetch(request, metadata=metadata, timeout=10)
            records = sum(len(p.records) for p in response.partitions)
            if response.throttle_time_ms > 0 and records == 0:
                empties.append(response.throttle_time_ms)
                if len(empties) >= 2:
                    break
                continue
            fetched += records
            assert records <= 16_384 + 2048  # capped (a first batch larger still comes whole)
            for p in response.partitions:
                if p.records:
                    offset = next_fetch_offset(p.records, offset)
    assert fetched > 0
    assert len(empties) >= 2 and all(t > 0 for t in empties)


def test_plain_record_clients_are_throttled_too(quota_cluster: LocalCluster) -> None:
    topic = "quota-plain"
    quota_cluster.create_topic(topic, partitions=1)
    with _admin(quota_cluster) as admin:
        admin.alter_client_quotas(
            [
                (
                    QuotaEntity(None, "plain-client"),
                    {"producer_byte_rate": 5000.0, "consumer_byte_rate": 5000.0},
                )
            ]
        )
    channel, stub = _stub(quota_cluster.gateway_addresses[1])
    metadata = ((CLIENT_ID_KEY, "plain-client"),)
    record = common_pb2.Record(value=b"p" * 20_000, has_value=True)
    with channel:
        produce_throttle = 0
        for _ in range(30):  # the change reaches this gateway within a second
            produced = stub.ProduceRecords(
                gateway_pb2.ProduceRecordsRequest(
                    topic=topic, records=[record], acks=common_pb2.ACKS_LEADER
                ),
                metadata=metadata,
                timeout=30,
            )
            assert produced.results[0].error_code == 0
            if produced.throttle_time_ms > 0:
                produce_throttle = produced.throttle_time_ms
                break
            time.sleep(0.05)
        assert produce_throttle > 0
        throttled = None
        for _ in range(10):
            response = stub.FetchRecords(
                gateway_pb2.FetchRecordsRequest(topic=topic, partition=0, offset=0),
                metadata=metadata,
                timeout=30,
            )
            if response.throttle_time_ms > 0 and not response.records:
                throttled = response
                break
    assert throttled is not None and throttled.next_offset == 0


@pytest.mark.slow
def test_a_consumer_under_a_fetch_quota_keeps_receiving(quota_cluster: LocalCluster) -> None:
    topic = "quota-consume"
    quota_cluster.create_topic(topic, partitions=1)
    with Producer({"bootstrap.servers": quota_cluster.gateway_addresses[0]}) as producer:
        for _ in range(3000):
            producer.send(topic, b"c" * 1000)
        producer.flush(30)
    with _admin(quota_cluster) as admin:
        entity = QuotaEntity(None, "steady-reader")
        admin.alter_client_quotas([(entity, {"consumer_byte_rate": 100_000.0})])
    time.sleep(1)  # the change reaches every gateway within a second
    conf = {
        "bootstrap.servers": quota_cluster.gateway_addresses[1],
        "client.id": "steady-reader",
        "auto.offset.reset": "earliest",
    }
    consumer = Consumer(conf)
    timeline: list[tuple[float, int]] = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        received, start = 0, time.monotonic()
        while time.monotonic() - start < 20:
            received += sum(len(r) for r in consumer.poll(timeout_ms=200).values())
            timeline.append((time.monotonic() - start, received))
        metrics = consumer.metrics()
    finally:
        consumer.close()
    late = received - max(n for t, n in timeline if t <= 13)
    print(f"consumer: {received} kB in 20 s, {late} kB in the last 7 s (quota 100 kB/s)")
    print(f"fetch throttle max {metrics['fetch-throttle-time-max']} ms; timeline {timeline[-40:]}")
    # never starved: once Kafka's start-up burst has left the window (11 s), it receives at
    # about its quota
    assert 0.5 * 700 <= late <= 1.5 * 700
    assert received < 3000 and metrics["fetch-throttle-time-max"] > 0
