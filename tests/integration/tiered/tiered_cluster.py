"""Helpers of the tiered-storage integration tests: a storage cluster (real etcd, metadata and
storage processes through the storage tests' harness) whose nodes tier to a given store, a
topic with remote.storage.enable and small segments, and what the store holds, read back with
the same store classes the nodes use."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "storage"))

from storage_harness import (
    StorageHarness,
    fetch_request,
    make_batch,
    produce_request,
    start_cluster,
    wait_until,
)

from riverlog.cluster import unique_topic_name
from riverlog.common.errors import ErrorCode, raise_for
from riverlog.common.records.header import iter_batches
from riverlog.common.types import TopicPartition
from riverlog.services.storage.remote.metadata_manager import (
    RemoteLogMetadataManager,
)
from riverlog.services.storage.remote.storage import RemoteStorageManager
from riverlog.v1 import admin_pb2, common_pb2, data_pb2

__all__ = ["StorageHarness", "make_batch", "produce_request", "wait_until"]

METADATA_SNAPSHOT_INTERVAL = 20
FAST = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "200",
    "remote.log.manager.task.retry.backoff.ms": "100",
    "remote.log.manager.task.retry.backoff.max.ms": "1000",
    "log.retention.check.interval.ms": "200",
    "remote.log.metadata.snapshot.interval.records": str(METADATA_SNAPSHOT_INTERVAL),
}
TOPIC_CONFIGS = {
    "remote.storage.enable": "true",
    "segment.bytes": "4096",
    "local.retention.bytes": "0",
}


def tiered_harness(
    root: Path, store_configs: dict[str, str], storage_nodes: int = 1
) -> StorageHarness:
    return StorageHarness(start_cluster(root, storage_nodes, **{**FAST, **store_configs}))


def create_tiered_topic(
    harness: StorageHarness, prefix: str, replicas: int = 1, **configs: str
) -> tuple[str, int]:
    """A one-partition topic with TOPIC_CONFIGS (and `configs`, dotted names spelled with
    underscores); returns its name and its leader."""
    name = unique_topic_name(prefix)
    extra = {k.replace("_", "."): v for k, v in configs.items()}
    creatable = admin_pb2.CreatableTopic(
        name=name,
        num_partitions=1,
        replication_factor=replicas,
        configs={**TOPIC_CONFIGS, **extra},
    )
    with harness.metadata() as stub:
        reply = stub.CreateTopics(admin_pb2.CreateTopicsRequest(topics=[creatable]), timeout=30)
        for result in reply.topics:
            raise_for(result.error_code, result.error_message)
    return name, harness.wait_for_leaders(name, 1).partitions[0].leader


def partition_state(harness: StorageHarness, topic: str) -> common_pb2.PartitionState:
    described = harness.describe_topic(topic)
    assert described is not None, f"{topic} is not described"
    return described.partitions[0]


def reassign(harness: StorageHarness, topic: str, replicas: list[int]) -> None:
    """Move partition 0 onto `replicas` (AlterPartitionReassignments, KIP-455) and wait until
    no reassignment is in progress and they are its replicas, all in sync, one leading."""
    with harness.metadata() as stub:
        target = admin_pb2.ReassignablePartition(topic=topic, partition=0, replicas=replicas)
        reply = stub.AlterPartitionReassignments(
            admin_pb2.AlterPartitionReassignmentsRequest(partitions=[target]), timeout=30
        )
    raise_for(reply.error_code, reply.error_message)
    for result in reply.partitions:
        raise_for(result.error_code, result.error_message)

    def done() -> bool:
        p = partition_state(harness, topic)
        return (
            list(p.replicas) == replicas
            and sorted(p.isr) == sorted(replicas)
            and not p.adding_replicas
            and not p.removing_replicas
            and p.leader in replicas
        )

    wait_until(done, 90, f"{topic} on {replicas}")


def elect_preferred(harness: StorageHarness, topic: str) -> common_pb2.PartitionState:
    """A preferred leader election of partition 0 (the first replica leads, the old leader
    alive); its state once that replica leads."""
    preferred = partition_state(harness, topic).replicas[0]
    with harness.metadata() as stub:
        reply = stub.ElectLeaders(
            admin_pb2.ElectLeadersRequest(
                election_type=admin_pb2.ELECTION_TYPE_PREFERRED,
                partitions=[common_pb2.TopicPartition(topic=topic, partition=0)],
            ),
            timeout=30,
        )
    raise_for(reply.error_code, reply.error_message)
    [result] = reply.partitions
    if result.error_code != ErrorCode.ELECTION_NOT_NEEDED:
        raise_for(result.error_code, result.error_message)
    return wait_until(
        lambda: (p := partition_state(harness, topic)).leader == preferred and p,
        30,
        f"node {preferred} to lead {topic}",
    )


def produce(
    harness: StorageHarness, topic: str, batches: list[bytes], node: int = 1, acks: int = 0
) -> None:
    """Produce each batch to `node` (acks: the proto's, ACKS_LEADER by default)."""
    with harness.storage(node) as stub:
        first = harness.produce_when_ready(stub, topic, 0, batches[0])
        assert first.error_code == ErrorCode.NONE, first.error_message
        for batch in batches[1:]:
            request = produce_request(topic, 0, batch, acks=acks)
            [result] = stub.Produce(request, timeout=10).partitions
            assert result.error_code == ErrorCode.NONE, result.error_message


def local_segments(harness: StorageHarness, topic: str, node: int = 1) -> list[Path]:
    return sorted((harness.log_dir(node) / f"{topic}-0").glob("*.log"))


def remote_state(store: RemoteStorageManager, topic: str):  # type: ignore[no-untyped-def]
    return asyncio.run(RemoteLogMetadataManager(store).load(TopicPartition(topic, 0)))


def remote_bytes(store: RemoteStorageManager, topic: str) -> tuple[bytes, int]:
    """The finished remote segments' bytes in offset order, and the offset after them."""
    state = remote_state(store, topic)
    segments = state.readable_segments()

    async def read() -> bytes:
        parts = [await store.fetch_log_segment(s.segment_id, 0) for s in segments]
        return b"".join(parts)

    return asyncio.run(read()), state.copied_next_offset() or 0


def fetch_from(
    harness: StorageHarness,
    topic: str,
    offset: int,
    fetch: Callable[[data_pb2.FetchRequest], data_pb2.FetchResponse] | None = None,
    node: int = 1,
) -> bytes:
    """Every byte from `offset` to the high watermark, over gRPC Fetch (or `fetch`)."""
    out = bytearray()
    with harness.storage(node) as stub:
        for _ in range(10_000):
            request = fetch_request((topic, 0, offset), max_bytes=1 << 20)
            reply = fetch(request) if fetch is not None else stub.Fetch(request, timeout=10)
            [p] = reply.partitions
            assert p.error_code == ErrorCode.NONE, p.error_message
            if not p.records:
                return bytes(out)
            out += p.records
            offset = iter_batches(p.records)[-1].next_offset
    raise AssertionError("fetch did not reach the high watermark")


def fetch_once(
    harness: StorageHarness, topic: str, offset: int, node: int = 1
) -> data_pb2.FetchPartitionResponse:
    """One consumer fetch of partition 0 from `offset`: its result as it came."""
    with harness.storage(node) as stub:
        reply = stub.Fetch(fetch_request((topic, 0, offset)), timeout=10)
    return reply.partitions[0]


def fetch_error(harness: StorageHarness, topic: str, offset: int, node: int = 1) -> int:
    return int(fetch_once(harness, topic, offset, node).error_code)


def assert_same_batches(stored: bytes, sent: list[bytes], first: int = 0) -> None:
    """`stored` holds `sent` in order with contiguous offsets from `first`: the same bytes but
    for the base offset and the leader epoch the leader wrote into each header."""
    headers = iter_batches(stored)
    assert len(headers) == len(sent)
    pos, offset = 0, first
    for header, batch in zip(headers, sent, strict=True):
        assert header.base_offset == offset
        assert stored[pos + 17 : pos + header.size] == batch[17:]
        pos += header.size
        offset = header.next_offset
