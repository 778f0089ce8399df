"""Bad input through the real gateway: a clear per-item code or INVALID_ARGUMENT with a message,
nothing forwarded that the gateway knows is wrong, and the gateway keeps serving afterwards."""

from __future__ import annotations

import grpc
import pytest
from gateway_client import GatewayClient, encode, fetch_request, plain, produce_request, status_of

from riverlog.common.errors import ErrorCode
from riverlog.v1 import admin_pb2, data_pb2, gateway_pb2

pytestmark = pytest.mark.integration


@pytest.fixture
def client(gateway_address: str):
    c = GatewayClient(gateway_address, timeout=15)
    yield c
    c.close()


def test_bad_produce_items_get_their_own_codes(client: GatewayClient, new_topic) -> None:
    topic = new_topic(partitions=1)
    good = encode([b"ok"])
    request = data_pb2.ProduceRequest(
        partitions=[
            data_pb2.ProducePartition(topic="", partition=0, records=good),
            data_pb2.ProducePartition(topic="x/../y", partition=0, records=good),
            data_pb2.ProducePartition(topic="\x00\xff" * 300, partition=0, records=good),
            data_pb2.ProducePartition(topic=topic, partition=-1, records=good),
            data_pb2.ProducePartition(topic=topic, partition=7, records=good),
            data_pb2.ProducePartition(topic="never-created-topic", partition=0, records=good),
            data_pb2.ProducePartition(topic=topic, partition=0, records=b"\x00" * 100),
            data_pb2.ProducePartition(topic=topic, partition=0, records=good),
        ]
    )
    response = client.Produce(request)
    codes = [r.error_code for r in response.partitions]
    assert codes == [
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.INVALID_REQUEST,  # the same partition twice
    ]
    assert all(r.error_message for r in response.partitions)
    # the corrupt payload never reached the leader: the log is still empty
    offsets = client.ListOffsets(
        data_pb2.ListOffsetsRequest(
            partitions=[data_pb2.ListOffsetsPartition(topic=topic, partition=0, spec=1)]
        )
    )
    assert offsets.partitions[0].offset == 0


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        (produce_request("t", {0: encode([b"x"])}, acks=9), "acks"),
        (data_pb2.ProduceRequest(timeout_ms=-1), "timeout_ms"),
    ],
)
def test_bad_produce_requests_are_invalid_argument(client: GatewayClient, request_, words) -> None:
    code, details = status_of(lambda: client.Produce(request_))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert words in details


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"max_bytes": 0}, "max_bytes"),
        ({"max_bytes": -5}, "max_bytes"),
        ({"max_wait_ms": -1}, "max_wait_ms"),
        ({"min_bytes": -1}, "min_bytes"),
        ({"isolation_level": 7}, "isolation"),
        ({"replica_id": 3}, "replica_id"),
    ],
)
def test_bad_fetch_requests_are_invalid_argument(client: GatewayClient, change, words) -> None:
    request = fetch_request("t", {0: 0})
    for key, value in change.items():
        setattr(request, key, value)
    code, details = status_of(lambda: client.Fetch(request))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert words in details


def test_bad_fetch_items(client: GatewayClient, new_topic) -> None:
    topic = new_topic(partitions=1)
    request = fetch_request(topic, {0: -4})
    request.partitions.add(topic="", partition=0, fetch_offset=0, partition_max_bytes=10)
    response = client.Fetch(request)
    assert [r.error_code for r in response.partitions] == [
        ErrorCode.INVALID_OFFSET,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
    ]


def test_bad_plain_records(client: GatewayClient, new_topic) -> None:
    topic = new_topic(partitions=2)
    for request in (
        gateway_pb2.ProduceRecordsRequest(topic="", records=[plain(b"k", b"v")]),
        gateway_pb2.ProduceRecordsRequest(topic=topic, partition=-3, records=[plain(b"k", b"v")]),
        gateway_pb2.ProduceRecordsRequest(
            topic=topic, records=[plain(b"k", b"v")], compression_type="brotli"
        ),
        gateway_pb2.ProduceRecordsRequest(topic=topic, records=[plain(b"k", b"v")], acks=12),
    ):
        code, details = status_of(lambda request=request: client.ProduceRecords(request))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details
    unknown = client.ProduceRecords(
        gateway_pb2.ProduceRecordsRequest(
            topic="no-such-topic-here", records=[plain(b"k", b"v")] * 3
        )
    )
    assert [r.error_code for r in unknown.results] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 3
    beyond = client.FetchRecords(
        gateway_pb2.FetchRecordsRequest(topic=topic, partition=9, offset=0)
    )
    assert beyond.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    negative = client.FetchRecords(
        gateway_pb2.FetchRecordsRequest(topic=topic, partition=0, offset=-1)
    )
    assert negative.error_code == ErrorCode.INVALID_OFFSET
    code, _ = status_of(
        lambda: client.FetchRecords(
            gateway_pb2.FetchRecordsRequest(topic=topic, partition=0, max_bytes=-1)
        )
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    # a huge max_bytes is capped, not refused
    huge = client.FetchRecords(
        gateway_pb2.FetchRecordsRequest(topic=topic, partition=0, max_bytes=2**31 - 1)
    )
    assert huge.error_code == 0


def test_bad_admin_items_are_not_forwarded(client: GatewayClient) -> None:
    response = client.CreateTopics(
        admin_pb2.CreateTopicsRequest(
            topics=[admin_pb2.CreatableTopic(name="bad name!", num_partitions=1)]
        )
    )
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("bad name!", ErrorCode.INVALID_TOPIC_EXCEPTION)
    ]
    deleted = client.DeleteTopics(admin_pb2.DeleteTopicsRequest(names=[""]))
    assert deleted.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_stream_survives_a_bad_request(client: GatewayClient, new_topic) -> None:
    topic = new_topic(partitions=1)
    requests = [
        produce_request(topic, {0: encode([b"a"])}, correlation_id=1),
        produce_request(topic, {0: encode([b"b"])}, acks=42, correlation_id=2),
        produce_request(topic, {0: b"junk"}, correlation_id=3),
        produce_request(topic, {0: encode([b"c"])}, correlation_id=4),
    ]
    responses = {r.correlation_id: r for r in client.stream("ProduceStream", requests)}
    assert responses[1].partitions[0].error_code == 0
    assert responses[2].partitions[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert responses[3].partitions[0].error_code == ErrorCode.CORRUPT_MESSAGE
    assert responses[4].partitions[0].error_code == 0
    # and the gateway still serves
    assert client.GetMetadata(gateway_pb2.GetMetadataRequest(topics=[topic])).topics
