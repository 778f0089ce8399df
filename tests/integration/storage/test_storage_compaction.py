"""Log compaction across real processes (etcd, one metadata instance, two storage nodes with a
short `log.cleaner.backoff.ms`, one gateway): a compacted topic with small segments, fed many
updates of a few keys through the SDK, is compacted on the leader and on the follower (each
cleans its own replica), and a consumer reading from the beginning then gets exactly one
record per key, the latest."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from riverlog.client import Consumer, Producer, TopicPartition
from riverlog.cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEYS = 8
UPDATES = 1200
SEGMENT_MS = 1500


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("compaction"),
        storage_nodes=2,
        metadata_nodes=1,
        gateways=1,
        extra_config={"storage": {"log.cleaner.backoff.ms": "200"}},
    ) as local:
        yield local


def read_all(address: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record of partition 0 up to its end (bounded polls)."""
    tp = TopicPartition(topic, 0)
    out: list[tuple[int, bytes | None, bytes | None]] = []
    settings = {"bootstrap.servers": address, "fetch.max.wait.ms": 100}
    with Consumer({**settings, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        for _ in range(100):
            for records in consumer.poll(timeout_ms=300).values():
                out.extend((r.offset, r.key, r.value) for r in records)
            if consumer.position(tp) >= end:
                break
    return out


def log_bytes(cluster: LocalCluster, topic: str) -> dict[int, int]:
    """Bytes of the partition's .log files on each storage node."""
    sizes = {}
    for node in (1, 2):
        part = cluster.data_dir / "data" / f"storage-{node}" / f"{topic}-0"
        sizes[node] = sum(p.stat().st_size for p in Path(part).glob("*.log"))
    return sizes


def test_a_compacted_topic_keeps_the_latest_record_per_key(cluster: LocalCluster) -> None:
    topic = "compacted-updates"
    cluster.create_topic(
        topic,
        partitions=1,
        replication_factor=2,
        configs={
            "cleanup.policy": "compact",
            "segment.bytes": "8192",
            "segment.ms": str(SEGMENT_MS),
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    address = cluster.gateway_address
    latest: dict[bytes, bytes] = {}
    config = {"bootstrap.servers": address, "delivery.timeout.ms": 60_000}
    # Requests well below segment.bytes (a larger produce payload is refused).
    with Producer(
        config, acks="all", linger_ms=5, batch_size=2048, max_request_size=4096
    ) as producer:
        futures = []
        for i in range(UPDATES):
            key, value = b"key-%d" % (i % KEYS), b"value-%d-" % i + b"x" * 40
            latest[key] = value
            futures.append(producer.send(topic, value, key=key, partition=0))
        producer.flush()
        assert [f.result(30).offset for f in futures] == list(range(UPDATES))
        # Past segment.ms, one more record rolls the segment holding the last updates, so
        # every update is below the active segment and cleanable.
        time.sleep(SEGMENT_MS / 1000 + 0.5)
        producer.send(topic, b"roll", key=b"roller", partition=0).result(30)
    latest[b"roller"] = b"roll"
    produced = UPDATES * len(value)  # value bytes alone, a lower bound of what was written

    deadline = time.monotonic() + 60
    got = read_all(address, topic)
    while time.monotonic() < deadline and len(got) != len(latest):
        time.sleep(0.5)
        got = read_all(address, topic)
    assert len(got) == len(latest), f"not compacted in time: {len(got)} records"
    assert {key: value for _, key, value in got} == latest
    offsets = [offset for offset, _, _ in got]
    assert offsets == sorted(offsets) and offsets[-1] == UPDATES
    for _ in range(120):  # each replica compacts on its own schedule
        sizes = log_bytes(cluster, topic)
        if all(size < produced / 10 for size in sizes.values()):
            break
        time.sleep(0.5)
    assert all(size < produced / 10 for size in sizes.values()), (produced, sizes)
