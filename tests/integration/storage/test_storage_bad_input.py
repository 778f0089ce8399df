"""Bad input against a real storage node: each answered with a clear code, nothing appended,
nothing lost, and the node keeps serving (checked after every case)."""

from __future__ import annotations

import socket
import struct

import grpc
import pytest
from storage_harness import (
    StorageHarness,
    fetch_all,
    fetch_request,
    make_batch,
    produce_request,
)

from riverlog.common.errors import ErrorCode
from riverlog.common.rpc.status import from_rpc_error
from riverlog.common.zerocopy import encode_frame
from riverlog.v1 import common_pb2, data_pb2


@pytest.fixture(scope="module")
def target(harness: StorageHarness) -> tuple[str, int, bytes]:
    """A one-partition topic with three good batches; returns (topic, leader, their bytes)."""
    topic = harness.create_topic("bad-input", configs={"max.message.bytes": "100000"})
    leader = topic.partitions[0].leader
    with harness.storage(leader) as stub:
        harness.produce_when_ready(stub, topic.name, 0, make_batch(3, tag=0))
        for tag in (1, 2):
            stub.Produce(produce_request(topic.name, 0, make_batch(3, tag=tag)), timeout=10)
        stored = fetch_all(lambda r: stub.Fetch(r, timeout=10), topic.name, 0)
    return topic.name, leader, stored


def assert_intact(harness: StorageHarness, target: tuple[str, int, bytes]) -> None:
    name, leader, stored = target
    with harness.storage(leader) as stub:
        assert fetch_all(lambda r: stub.Fetch(r, timeout=10), name, 0) == stored
    assert harness.cluster.storage(leader).alive


def flipped_crc(batch: bytes) -> bytes:
    data = bytearray(batch)
    data[20] ^= 0x01  # the CRC's last byte
    return bytes(data)


BAD_RECORDS = {
    "empty": (b"", ErrorCode.INVALID_REQUEST),
    "garbage-string": (b"DROP TABLE topics; -- not a batch", ErrorCode.CORRUPT_MESSAGE),
    "random-bytes": (bytes(range(256)) * 4, ErrorCode.CORRUPT_MESSAGE),
    "wrong-crc": (flipped_crc(make_batch(3)), ErrorCode.CORRUPT_MESSAGE),
    "corrupt-body": (make_batch(3)[:-3] + b"xyz", ErrorCode.CORRUPT_MESSAGE),
    "truncated": (make_batch(3)[:70], ErrorCode.CORRUPT_MESSAGE),
    "negative-length": (struct.pack(">qi", 0, -50) + bytes(49), ErrorCode.CORRUPT_MESSAGE),
    "oversize": (make_batch(1, value_size=200_000), ErrorCode.MESSAGE_TOO_LARGE),
    "good-then-bad": (make_batch(2) + flipped_crc(make_batch(2)), ErrorCode.CORRUPT_MESSAGE),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_bad_records(harness: StorageHarness, target, case: str) -> None:
    records, code = BAD_RECORDS[case]
    name, leader, _ = target
    with harness.storage(leader) as stub:
        reply = stub.Produce(produce_request(name, 0, records), timeout=10)
    [p] = reply.partitions
    assert p.error_code == code, p.error_message
    assert p.error_message and p.base_offset == -1
    assert_intact(harness, target)


def test_routing_errors(harness: StorageHarness, target) -> None:
    name, leader, _ = target
    other = next(p.node_id for p in harness.cluster.by_role("storage") if p.node_id != leader)
    weird = ["", "no-such-topic", "\u00e9\u00e8 \x00 ../../etc/passwd", "x" * 300]
    with harness.storage(leader) as stub:
        reply = stub.Produce(
            data_pb2.ProduceRequest(
                partitions=[
                    data_pb2.ProducePartition(topic=name, partition=7, records=make_batch()),
                    data_pb2.ProducePartition(topic=name, partition=-1, records=make_batch()),
                    *(data_pb2.ProducePartition(topic=t, records=make_batch()) for t in weird),
                ]
            ),
            timeout=10,
        )
        assert {p.error_code for p in reply.partitions} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        fetched = stub.Fetch(fetch_request(*((t, 0, 0) for t in weird)), timeout=10)
        assert {p.error_code for p in fetched.partitions} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    with harness.storage(other) as stub:
        reply = stub.Produce(produce_request(name, 0, make_batch()), timeout=10)
        assert reply.partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert_intact(harness, target)


def test_epochs(harness: StorageHarness, target) -> None:
    name, leader, _ = target
    epoch = harness.describe_topic(name).partitions[0].leader_epoch
    cases = [(epoch + 1, ErrorCode.UNKNOWN_LEADER_EPOCH), (epoch, ErrorCode.NONE)]
    if epoch > 0:  # -1 means "not checked", so an older epoch exists only past 0
        cases.append((epoch - 1, ErrorCode.FENCED_LEADER_EPOCH))
    with harness.storage(leader) as stub:
        for requested, code in cases:
            reply = stub.Fetch(
                data_pb2.FetchRequest(
                    partitions=[data_pb2.FetchPartition(topic=name, current_leader_epoch=requested)]
                ),
                timeout=10,
            )
            assert reply.partitions[0].error_code == code
            produced = stub.Produce(
                data_pb2.ProduceRequest(
                    partitions=[
                        data_pb2.ProducePartition(
                            topic=name, records=b"junk", current_leader_epoch=requested
                        )
                    ]
                ),
                timeout=10,
            )
            # The epoch is checked before the payload: a bad payload at the right epoch
            # is CORRUPT_MESSAGE, at a wrong one the epoch error.
            expected = code if code != ErrorCode.NONE else ErrorCode.CORRUPT_MESSAGE
            assert produced.partitions[0].error_code == expected
    assert_intact(harness, target)


def test_fetch_errors(harness: StorageHarness, target) -> None:
    name, leader, _ = target
    with harness.storage(leader) as stub:
        reply = stub.Fetch(fetch_request((name, 0, 10), (name, 0, -5), (name, 0, 9)), timeout=10)
        assert [p.error_code for p in reply.partitions] == [
            ErrorCode.OFFSET_OUT_OF_RANGE,
            ErrorCode.OFFSET_OUT_OF_RANGE,
            ErrorCode.NONE,
        ]
        for bad in ({"max_bytes": -1}, {"min_bytes": -1}, {"max_wait_ms": -1}):
            with pytest.raises(grpc.RpcError) as exc:
                stub.Fetch(fetch_request((name, 0, 0), **bad), timeout=10)
            assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert from_rpc_error(exc.value).code == ErrorCode.INVALID_REQUEST
        reply = stub.Produce(produce_request(name, 0, make_batch(), acks=99), timeout=10)
        assert reply.partitions[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
        deleted = stub.DeleteRecords(
            data_pb2.DeleteRecordsRequest(
                partitions=[data_pb2.DeleteRecordsPartition(topic=name, offset=50)]
            ),
            timeout=10,
        )
        assert deleted.partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        listed = stub.ListOffsets(
            data_pb2.ListOffsetsRequest(
                partitions=[data_pb2.ListOffsetsPartition(topic=name, timestamp_ms=-9)]
            ),
            timeout=10,
        )
        assert listed.partitions[0].error_code == ErrorCode.INVALID_REQUEST
    with harness.zero_copy(leader) as client:
        reply = client.fetch(fetch_request((name, 0, 10), ("nope", 0, 0)))
        assert [p.error_code for p in reply.partitions] == [
            ErrorCode.OFFSET_OUT_OF_RANGE,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ]
    assert_intact(harness, target)


@pytest.mark.parametrize(
    "payload",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        encode_frame(b"\x0a\xff\xff\xff\xff\x0f garbage"),
        b"\x00\x00",
    ],
    ids=["http", "garbage-protobuf", "half-header"],
)
def test_garbage_on_the_zero_copy_socket(harness: StorageHarness, target, payload: bytes) -> None:
    _, leader, _ = target
    assert _answer_to_raw_bytes(harness.zero_copy_port(leader), payload) == b""
    assert_intact(harness, target)


def _answer_to_raw_bytes(port: int, payload: bytes) -> bytes:
    """What the server sends back before closing; a reset (it closed with our bytes unread)
    counts as closing without an answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(5)
            return s.recv(1024)
        except OSError as exc:
            if isinstance(exc, TimeoutError):
                raise
            return b""


def test_no_stream_crash_on_bad_items(harness: StorageHarness, target) -> None:
    name, leader, _ = target
    requests = [
        produce_request(name, 0, b"junk", correlation_id=1),
        produce_request("nope", 0, make_batch(), correlation_id=2),
        produce_request(name, 0, b"", correlation_id=3, acks=common_pb2.ACKS_ALL),
    ]
    with harness.storage(leader) as stub:
        replies = {
            r.correlation_id: r.partitions[0].error_code
            for r in stub.ProduceStream(iter(requests), timeout=30)
        }
    assert replies == {
        1: ErrorCode.CORRUPT_MESSAGE,
        2: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        3: ErrorCode.INVALID_REQUEST,
    }
    assert_intact(harness, target)
