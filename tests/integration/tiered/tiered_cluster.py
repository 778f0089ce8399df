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
from riverlog.v1 import admin_pb2, data_pb2

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
    return StorageHarness(start_cluster(root, storage_nodes, **FAST, **store_configs))


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


def fetch_error(harness: StorageHarness, topic: str, offset: int, node: int = 1) -> int:
    with harness.storage(node) as stub:
        reply = stub.Fetch(fetch_request((topic, 0, offset)), timeout=10)
    return int(reply.partitions[0].error_code)


def assert_same_batches(stored: bytes, sent: list[bytes]) -> None:
    """`stored` holds `sent` in order with contiguous offsets: the same bytes but for the base
    offset and the leader epoch the leader wrote into each header."""
    headers = iter_batches(stored)
    assert len(headers) == len(sent)
    pos, offset = 0, 0
    for header, batch in zip(headers, sent, strict=True):
        assert header.base_offset == offset
        assert stored[pos + 17 : pos + header.size] == batch[17:]
        pos += header.size
        offset = header.next_offset
