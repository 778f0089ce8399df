"""Real storage nodes: produce through gRPC (unary and stream), read back through gRPC and the
zero-copy socket with identical bytes, long poll, offsets requests, and topic deletion and
re-creation as seen by the node's log directory."""

from __future__ import annotations

import concurrent.futures
import time

from storage_harness import (
    StorageHarness,
    fetch_all,
    fetch_request,
    make_batch,
    produce_request,
    wait_until,
)

from riverlog.common.errors import ErrorCode
from riverlog.common.records import iter_batches_records
from riverlog.common.records.header import iter_batches
from riverlog.v1 import common_pb2, data_pb2, storage_pb2


def leader_of(topic: common_pb2.TopicMetadata, partition: int) -> int:
    return next(p.leader for p in topic.partitions if p.partition == partition)


def test_round_trip_grpc_and_zero_copy_identical(harness: StorageHarness) -> None:
    topic = harness.create_topic("round-trip", partitions=4)
    sent: dict[int, list[bytes]] = {}
    for p in topic.partitions:
        node = p.leader
        with harness.storage(node) as stub:
            batches = [make_batch(count=10, tag=i, value_size=200) for i in range(30)]
            first = harness.produce_when_ready(stub, topic.name, p.partition, batches[0])
            assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
            for i, batch in enumerate(batches[1:], start=1):
                reply = stub.Produce(produce_request(topic.name, p.partition, batch), timeout=10)
                assert (reply.partitions[0].error_code, reply.partitions[0].base_offset) == (
                    ErrorCode.NONE,
                    10 * i,
                )
            sent[p.partition] = batches
    for p in topic.partitions:
        with harness.storage(p.leader) as stub:
            via_grpc = fetch_all(lambda r: stub.Fetch(r, timeout=10), topic.name, p.partition, 7000)
        with harness.zero_copy(p.leader) as client:
            via_socket = fetch_all(client.fetch, topic.name, p.partition, 7000)
        assert via_grpc == via_socket
        headers = iter_batches(via_grpc)
        assert [h.base_offset for h in headers] == [10 * i for i in range(30)]
        # Stored as produced, except the base offset and leader epoch the leader rewrote.
        pos = 0
        for header, batch in zip(headers, sent[p.partition], strict=True):
            assert via_grpc[pos + 17 : pos + header.size] == batch[17:]
            pos += header.size
        records = list(iter_batches_records(via_grpc))
        assert records[25].offset == 25 and records[25].value.startswith(b"2:5|")


def test_one_fetch_many_partitions_both_transports(harness: StorageHarness) -> None:
    topic = harness.create_topic("multi", partitions=2)
    node = leader_of(topic, 0)
    mine = [p.partition for p in topic.partitions if p.leader == node]
    with harness.storage(node) as stub:
        for partition in mine:
            harness.produce_when_ready(stub, topic.name, partition, make_batch(3, tag=partition))
        request = fetch_request(*((topic.name, p, 0) for p in mine), correlation_id=9)
        via_grpc = stub.Fetch(request, timeout=10)
    with harness.zero_copy(node) as client:
        via_socket = client.fetch(request)
    assert via_grpc == via_socket
    assert via_grpc.correlation_id == 9
    assert all(p.records and p.high_watermark == 3 for p in via_grpc.partitions)


def test_produce_stream(harness: StorageHarness) -> None:
    topic = harness.create_topic("stream")
    node = leader_of(topic, 0)
    with harness.storage(node) as stub:
        harness.produce_when_ready(stub, topic.name, 0, make_batch(1))
        requests = [
            produce_request(topic.name, 0, make_batch(2, tag=i), correlation_id=100 + i)
            for i in range(50)
        ]
        replies = list(stub.ProduceStream(iter(requests), timeout=30))
    got = sorted((r.correlation_id, r.partitions[0].base_offset) for r in replies)
    assert got == [(100 + i, 1 + 2 * i) for i in range(50)]


def test_long_poll_returns_when_data_arrives(harness: StorageHarness) -> None:
    topic = harness.create_topic("long-poll")
    node = leader_of(topic, 0)
    with harness.storage(node) as stub:
        harness.produce_when_ready(stub, topic.name, 0, make_batch(1))
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            request = fetch_request((topic.name, 0, 1), min_bytes=1, max_wait_ms=25_000)
            via_grpc = pool.submit(stub.Fetch, request, timeout=60)
            with harness.zero_copy(node) as client:
                via_socket = pool.submit(client.fetch, request)
                time.sleep(0.3)  # both are now waiting (nothing to assert on timing)
                assert not via_grpc.done() and not via_socket.done()
                stub.Produce(produce_request(topic.name, 0, make_batch(4, tag=7)), timeout=10)
                grpc_reply = via_grpc.result(timeout=20)
                socket_reply = via_socket.result(timeout=20)
    for reply in (grpc_reply, socket_reply):
        [p] = reply.partitions
        assert p.error_code == ErrorCode.NONE and p.high_watermark == 5
        assert iter_batches(p.records)[0].base_offset == 1


def test_offsets_requests_and_log_dirs(harness: StorageHarness) -> None:
    topic = harness.create_topic("offsets")
    node = leader_of(topic, 0)
    with harness.storage(node) as stub:
        harness.produce_when_ready(stub, topic.name, 0, make_batch(5, ts=1000))
        stub.Produce(produce_request(topic.name, 0, make_batch(5, ts=2000)), timeout=10)
        spec = common_pb2
        listed = stub.ListOffsets(
            data_pb2.ListOffsetsRequest(
                partitions=[
                    data_pb2.ListOffsetsPartition(topic=topic.name, spec=spec.OFFSET_SPEC_LATEST),
                    data_pb2.ListOffsetsPartition(topic=topic.name, spec=spec.OFFSET_SPEC_EARLIEST),
                    data_pb2.ListOffsetsPartition(topic=topic.name, timestamp_ms=1500),
                    data_pb2.ListOffsetsPartition(
                        topic=topic.name, spec=spec.OFFSET_SPEC_MAX_TIMESTAMP
                    ),
                ]
            ),
            timeout=10,
        )
        assert [(p.error_code, p.offset) for p in listed.partitions] == [
            (ErrorCode.NONE, 10), (ErrorCode.NONE, 0), (ErrorCode.NONE, 5), (ErrorCode.NONE, 9),
        ]  # fmt: skip
        deleted = stub.DeleteRecords(
            data_pb2.DeleteRecordsRequest(
                partitions=[data_pb2.DeleteRecordsPartition(topic=topic.name, offset=5)]
            ),
            timeout=10,
        )
        assert deleted.partitions[0].low_watermark == 5
        dirs = stub.DescribeLogDirs(storage_pb2.DescribeLogDirsRequest(), timeout=10)
    assert dirs.node_id == node
    [log_dir] = dirs.log_dirs
    [info] = [p for p in log_dir.partitions if p.topic == topic.name]
    assert (info.log_start_offset, info.log_end_offset, info.high_watermark) == (5, 10, 10)
    assert info.size_bytes > 0 and log_dir.total_bytes >= info.size_bytes


def test_deleted_topic_removes_the_log_and_recreation_starts_empty(
    harness: StorageHarness,
) -> None:
    topic = harness.create_topic("recreate")
    node = leader_of(topic, 0)
    directory = harness.log_dir(node) / f"{topic.name}-0"
    with harness.storage(node) as stub:
        harness.produce_when_ready(stub, topic.name, 0, make_batch(5))
    assert directory.is_dir()
    harness.delete_topic(topic.name)
    wait_until(lambda: not directory.exists(), 30, "the log directory to go")
    again = harness.create_topic("recreate", name=topic.name)
    assert again.topic_id != topic.topic_id
    node = leader_of(again, 0)
    with harness.storage(node) as stub:
        result = harness.produce_when_ready(stub, topic.name, 0, make_batch(2))
    assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)
