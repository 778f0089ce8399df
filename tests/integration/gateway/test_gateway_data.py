"""The Gateway API against real processes (the session cluster: etcd, metadata, three storage
nodes, one gateway): batches and plain records round trip, keyed records land on Kafka's
murmur2 partition, streams answer every request, offsets and metadata are right."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import pytest
from gateway_client import (
    GatewayClient,
    decode,
    encode,
    fetch_all,
    fetch_request,
    plain,
    produce_request,
)

from riverlog.common.errors import ErrorCode
from riverlog.common.partitioner import partition_for_key
from riverlog.common.records import CompressionType
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2

pytestmark = pytest.mark.integration


@pytest.fixture
def client(gateway_address: str):
    c = GatewayClient(gateway_address)
    yield c
    c.close()


def test_batches_round_trip_across_leaders(client: GatewayClient, new_topic) -> None:
    topic = new_topic(partitions=3)
    sent = {p: [f"p{p}-{i}".encode() for i in range(5)] for p in range(3)}
    codecs = [CompressionType.NONE, CompressionType.ZSTD, CompressionType.LZ4]
    for round_ in range(2):
        batches = {p: encode(sent[p], codecs[p]) for p in range(3)}
        response = client.Produce(produce_request(topic, batches))
        assert [(r.partition, r.error_code) for r in response.partitions] == [
            (0, 0),
            (1, 0),
            (2, 0),
        ]
        assert all(r.base_offset == 5 * round_ for r in response.partitions)
        assert all(r.last_offset == 5 * round_ + 4 for r in response.partitions)
    for p in range(3):
        records = fetch_all(client, topic, p, 10)
        assert [r.value for r in records] == sent[p] * 2
        assert [r.offset for r in records] == list(range(10))


def test_fetch_long_poll_returns_when_data_arrives(client: GatewayClient, new_topic) -> None:
    topic = new_topic(partitions=1)
    result: dict[str, data_pb2.FetchResponse] = {}
    poller = threading.Thread(
        target=lambda: result.setdefault(
            "r", client.Fetch(fetch_request(topic, {0: 0}, max_wait_ms=20_000))
        )
    )
    poller.start()
    client.Produce(produce_request(topic, {0: encode([b"late"])}))
    poller.join(timeout=30)
    assert not poller.is_alive()
    [part] = result["r"].partitions
    assert [r.value for r in decode(part.records)] == [b"late"]


def test_produce_and_fetch_streams(client: GatewayClient, new_topic) -> None:
    topic = new_topic(partitions=2)
    # The stream keeps a partition's order while its route is stable. Right after creation a
    # leader may not have applied the new image yet: a request it refuses is re-sent after a
    # backoff while later ones go through (reordered, as Kafka's are on retries with more than
    # one request in flight). So the leaders serve first.
    warm_up = client.Produce(produce_request(topic, {p: encode([b"warm-up"]) for p in (0, 1)}))
    assert [r.error_code for r in warm_up.partitions] == [0, 0]
    requests = [
        produce_request(topic, {i % 2: encode([f"m{i}".encode()])}, correlation_id=1000 + i)
        for i in range(40)
    ]
    responses = list(client.stream("ProduceStream", requests))
    assert sorted(r.correlation_id for r in responses) == [1000 + i for i in range(40)]
    assert all(r.partitions[0].error_code == 0 for r in responses)
    for p in (0, 1):
        offsets = sorted(
            r.partitions[0].base_offset for r in responses if r.partitions[0].partition == p
        )
        assert offsets == list(range(1, 21))
    # within a partition, the stream kept the order the requests were sent in
    records = fetch_all(client, topic, 0, 21)
    assert [r.value for r in records[1:]] == [f"m{i}".encode() for i in range(0, 40, 2)]
    fetches = [fetch_request(topic, {p: 0}, correlation_id=p) for p in (0, 1)]
    fetched = {r.correlation_id: r for r in client.stream("FetchStream", fetches)}
    assert len(decode(fetched[1].partitions[0].records)) == 21


def test_plain_records_round_trip(client: GatewayClient, new_topic) -> None:
    topic = new_topic(partitions=1)
    records = [
        plain(b"k1", b"v1", [("h1", b"x"), ("h1", b"y")]),
        plain(None, b"no key"),
        plain(b"k3", None),  # a tombstone
        plain(b"", b""),
    ]
    for codec in ("", "gzip", "snappy", "lz4", "zstd"):
        response = client.ProduceRecords(
            gateway_pb2.ProduceRecordsRequest(
                topic=topic, partition=0, records=records, compression_type=codec
            )
        )
        assert [r.error_code for r in response.results] == [0] * 4
    offsets = [r.offset for r in response.results]
    assert offsets == [16, 17, 18, 19]
    fetched = client.FetchRecords(
        gateway_pb2.FetchRecordsRequest(topic=topic, partition=0, offset=17, max_wait_ms=100)
    )
    assert fetched.error_code == 0
    assert [r.offset for r in fetched.records] == list(range(17, 20))
    assert fetched.next_offset == 20 and fetched.high_watermark == 20
    first = client.FetchRecords(
        gateway_pb2.FetchRecordsRequest(topic=topic, partition=0, offset=0, max_records=4)
    )
    got = [
        (r.has_key, r.key, r.has_value, r.value, [(h.key, h.value) for h in r.headers])
        for r in first.records
    ]
    assert got == [
        (True, b"k1", True, b"v1", [("h1", b"x"), ("h1", b"y")]),
        (False, b"", True, b"no key", []),
        (True, b"k3", False, b"", []),
        (True, b"", True, b"", []),
    ]
    assert first.next_offset == 4
    assert all(r.timestamp_ms > 0 for r in first.records)


def test_keyed_plain_records_land_on_the_murmur2_partition(
    client: GatewayClient, new_topic
) -> None:
    topic = new_topic(partitions=4)
    keys = [f"user-{i}".encode() for i in range(30)]
    response = client.ProduceRecords(
        gateway_pb2.ProduceRecordsRequest(topic=topic, records=[plain(k, k) for k in keys])
    )
    assert [r.partition for r in response.results] == [partition_for_key(k, 4) for k in keys]
    for p in range(4):
        fetched = client.FetchRecords(
            gateway_pb2.FetchRecordsRequest(topic=topic, partition=p, offset=0)
        )
        assert [r.key for r in fetched.records] == [k for k in keys if partition_for_key(k, 4) == p]


def test_offsets_and_delete_records(client: GatewayClient, new_topic) -> None:
    topic = new_topic(partitions=2)
    client.Produce(produce_request(topic, {0: encode([b"a", b"b", b"c"]), 1: encode([b"x"])}))
    response = client.ListOffsets(
        data_pb2.ListOffsetsRequest(
            partitions=[
                data_pb2.ListOffsetsPartition(
                    topic=topic, partition=0, spec=common_pb2.OFFSET_SPEC_LATEST
                ),
                data_pb2.ListOffsetsPartition(
                    topic=topic, partition=1, spec=common_pb2.OFFSET_SPEC_EARLIEST
                ),
            ]
        )
    )
    assert [(r.error_code, r.offset) for r in response.partitions] == [(0, 3), (0, 0)]
    deleted = client.DeleteRecords(
        data_pb2.DeleteRecordsRequest(
            partitions=[data_pb2.DeleteRecordsPartition(topic=topic, partition=0, offset=2)]
        )
    )
    assert [(r.error_code, r.low_watermark) for r in deleted.partitions] == [(0, 2)]
    earliest = client.ListOffsets(
        data_pb2.ListOffsetsRequest(
            partitions=[
                data_pb2.ListOffsetsPartition(
                    topic=topic, partition=0, spec=common_pb2.OFFSET_SPEC_EARLIEST
                )
            ]
        )
    )
    assert earliest.partitions[0].offset == 2


def test_get_metadata(client: GatewayClient, new_topic, cluster) -> None:
    topic = new_topic(partitions=2, replication_factor=2)
    response = client.GetMetadata(
        gateway_pb2.GetMetadataRequest(topics=[topic, "no-such-topic", "bad name"])
    )
    [meta] = response.topics
    assert meta.name == topic and [p.partition for p in meta.partitions] == [0, 1]
    assert all(p.leader in p.isr and len(p.replicas) == 2 for p in meta.partitions)
    assert [(e.name, e.error_code) for e in response.errors] == [
        ("no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ]
    kinds = {(n.kind, n.node_id) for n in response.nodes}
    assert {(common_pb2.NODE_KIND_STORAGE, i) for i in (1, 2, 3)} <= kinds
    assert (common_pb2.NODE_KIND_GATEWAY, 1) in kinds
    assert response.metadata_version > 0 and response.cluster_id
    everything = client.GetMetadata(gateway_pb2.GetMetadataRequest())
    assert topic in {t.name for t in everything.topics}


def test_admin_passthrough(client: GatewayClient, topic_name: str) -> None:
    from riverlog.v1 import admin_pb2

    created = client.CreateTopics(
        admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreatableTopic(name=topic_name, num_partitions=2, replication_factor=1),
                admin_pb2.CreatableTopic(name="", num_partitions=1, replication_factor=1),
            ]
        )
    )
    assert [(t.name, t.error_code) for t in created.topics] == [
        (topic_name, 0),
        ("", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ]
    # the gateway waited until it routes the new topic: producing at once works
    response = client.Produce(produce_request(topic_name, {1: encode([b"now"])}))
    assert response.partitions[0].error_code == 0
    grown = client.CreatePartitions(
        admin_pb2.CreatePartitionsRequest(
            topics=[admin_pb2.CreatePartitionsRequest.Topic(name=topic_name, count=3)]
        )
    )
    assert grown.topics[0].error_code == 0
    assert (
        client.Produce(produce_request(topic_name, {2: encode([b"p2"])})).partitions[0].error_code
        == 0
    )
    assert topic_name in client.ListTopics(admin_pb2.ListTopicsRequest()).names
    cluster = client.DescribeCluster(admin_pb2.DescribeClusterRequest())
    assert cluster.cluster_id and cluster.metadata_instances
    deleted = client.DeleteTopics(admin_pb2.DeleteTopicsRequest(names=[topic_name]))
    assert deleted.topics[0].error_code == 0
    gone = client.Produce(produce_request(topic_name, {0: encode([b"x"])}))
    assert gone.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_acks_zero(client: GatewayClient, new_topic) -> None:
    topic = new_topic(partitions=1)
    response = client.Produce(
        produce_request(topic, {0: encode([b"fire"])}, acks=common_pb2.ACKS_NONE)
    )
    assert [(r.partition, r.error_code, r.base_offset) for r in response.partitions] == [(0, 0, -1)]
    requests = [
        produce_request(topic, {0: encode([b"f"])}, acks=common_pb2.ACKS_NONE, correlation_id=1),
        produce_request(topic, {0: encode([b"g"])}, correlation_id=2),
    ]
    responses = list(client.stream("ProduceStream", requests))
    assert [r.correlation_id for r in responses] == [2]  # acks=0 gets no answer on a stream
    assert [r.value for r in fetch_all(client, topic, 0, 3)] == [b"fire", b"f", b"g"]


def _connected_ports(pid: int) -> set[int]:
    """Remote ports of the established TCP connections process `pid` holds (its sockets'
    inodes, found in the network namespace's table)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, state, inode = fields[2], fields[3], fields[9]
        if state == "01" and inode in inodes:  # 01: ESTABLISHED
            ports.add(int(remote.split(":")[1], 16))
    return ports


def test_fetches_reach_leaders_over_their_zero_copy_channels(
    client: GatewayClient, new_topic, cluster
) -> None:
    # Decision 0018: with tracing off the gateway fetches from leaders over their zero-copy
    # ports (pooled raw connections), not gRPC; the answers are the same.
    topic = new_topic(partitions=3)
    values = [b"fast-%d" % i for i in range(3)]
    response = client.Produce(produce_request(topic, {p: encode([values[p]]) for p in range(3)}))
    assert [r.error_code for r in response.partitions] == [0, 0, 0]
    assert [[r.value for r in fetch_all(client, topic, p, 1)] for p in range(3)] == [
        [v] for v in values
    ]
    leaders = {
        r.leader
        for r in client.GetMetadata(gateway_pb2.GetMetadataRequest(topics=[topic]))
        .topics[0]
        .partitions
    }
    zero_copy_ports = {cluster.storage(n).info["zero_copy_port"] for n in leaders}
    assert zero_copy_ports <= _connected_ports(cluster.gateway(1).pid)


@pytest.mark.parametrize("min_bytes", [1, 400])
def test_one_fetch_over_every_leader_gets_each_trickled_record_once_in_order(
    client: GatewayClient, new_topic, min_bytes: int
) -> None:
    # A plain gRPC client's Fetch over partitions on all three storage nodes while single
    # records trickle to every partition: the gateway answers once min_bytes is met across
    # the leaders (400: several records, from one leader or several, asked again for what is
    # missing), the others' partitions empty at the client's position (their long polls are
    # parked, and the next fetch, asking the same offsets, joins them), so reading on from the
    # positions must neither skip nor repeat.
    partitions = 6
    topic = new_topic(partitions=partitions)
    metadata = client.GetMetadata(gateway_pb2.GetMetadataRequest(topics=[topic]))
    assert len({p.leader for p in metadata.topics[0].partitions}) > 1  # several leaders
    per_partition = 8
    sent = {p: [f"p{p}-{i}".encode() for i in range(per_partition)] for p in range(partitions)}
    failures: list[str] = []

    def trickle() -> None:
        for i in range(per_partition):
            for p in range(partitions):
                response = client.Produce(produce_request(topic, {p: encode([sent[p][i]])}))
                if response.partitions[0].error_code != 0:
                    failures.append(response.partitions[0].error_message)
                time.sleep(0.02)  # pacing (not a wait for a condition): a trickle, not a burst

    producer = threading.Thread(target=trickle)
    producer.start()
    positions = dict.fromkeys(range(partitions), 0)
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 90
    try:
        while any(len(got[p]) < per_partition for p in got) and time.monotonic() < deadline:
            request = fetch_request(topic, positions, max_wait_ms=2_000, min_bytes=min_bytes)
            response = client.Fetch(request)
            assert sorted(r.partition for r in response.partitions) == list(range(partitions))
            for part in response.partitions:
                assert part.error_code == 0, part.error_message
                records = decode(part.records, positions[part.partition])
                if not records:
                    continue  # this leader had nothing, or was not waited for
                offsets = [r.offset for r in records]
                start = positions[part.partition]
                assert offsets == list(range(start, start + len(records))), offsets
                got[part.partition].extend(r.value for r in records)
                positions[part.partition] = offsets[-1] + 1
    finally:
        producer.join(timeout=60)
    assert not failures
    assert got == sent
