"""A storage node killed with SIGKILL in the middle of writes comes back under the same id:
it re-registers, gets its partitions back, and every acknowledged batch reads back with the
bytes that were acknowledged. A SIGTERM stops it cleanly (clean-shutdown marker, unregistered).
Each test starts its own cluster, since it breaks a process."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from storage_harness import (
    StorageHarness,
    fetch_all,
    make_batch,
    produce_request,
    start_cluster,
    wait_until,
)

from riverlog.common.errors import ErrorCode
from riverlog.common.records.header import iter_batches
from riverlog.v1 import admin_pb2

pytestmark = pytest.mark.fault


@pytest.fixture
def own(tmp_path: Path) -> Iterator[StorageHarness]:
    # Checkpoints often, so a kill lands between checkpoints of every kind.
    cluster = start_cluster(
        tmp_path / "cluster",
        storage_nodes=1,
        **{"log.flush.offset.checkpoint.interval.ms": "200", "log.segment.bytes": "200000"},
    )
    try:
        yield StorageHarness(cluster)
    finally:
        cluster.stop()


def test_kill9_mid_writes_then_restart_keeps_every_acknowledged_batch(
    own: StorageHarness,
) -> None:
    topic = own.create_topic("kill9", partitions=3)
    acked: dict[int, dict[int, bytes]] = {p.partition: {} for p in topic.partitions}
    with own.storage() as stub:
        for p in topic.partitions:
            first = make_batch(5, tag=p.partition * 1_000_000)
            result = own.produce_when_ready(stub, topic.name, p.partition, first)
            acked[p.partition][result.base_offset] = first
    stop = threading.Event()
    errors: list[str] = []

    def writer(partition: int) -> None:
        with own.storage() as stub:
            for i in range(1, 100_000):
                if stop.is_set():
                    return
                batch = make_batch(5, tag=partition * 1_000_000 + i, value_size=300)
                try:
                    reply = stub.Produce(produce_request(topic.name, partition, batch), timeout=5)
                except grpc.RpcError:
                    return  # the node died under us: not acknowledged
                result = reply.partitions[0]
                if result.error_code != ErrorCode.NONE:
                    errors.append(f"{partition}: {result.error_message}")
                    return
                acked[partition][result.base_offset] = batch

    threads = [threading.Thread(target=writer, args=(p.partition,)) for p in topic.partitions]
    for thread in threads:
        thread.start()
    wait_until(lambda: min(len(a) for a in acked.values()) > 50, 60, "writes to pile up")
    node = own.cluster.storage(1)
    node.kill(signal.SIGKILL)
    stop.set()
    for thread in threads:
        thread.join(30)
    assert not errors

    node.restart(timeout=60)
    assert (own.log_dir() / ".kafka_cleanshutdown").exists() is False
    with own.storage() as stub:
        for partition, batches in acked.items():
            stored = wait_until(
                lambda partition=partition: _read_or_none(stub, topic.name, partition),
                30,
                f"partition {partition} to be served again",
            )
            by_offset = _split(stored)
            for base_offset, batch in batches.items():
                assert base_offset in by_offset, f"acknowledged batch at {base_offset} lost"
                assert by_offset[base_offset][17:] == batch[17:]
            # The log goes on where it stopped: new appends get the next offsets.
            end = max(h.next_offset for h in iter_batches(stored))
            reply = stub.Produce(produce_request(topic.name, partition, make_batch(1)), timeout=10)
            assert (reply.partitions[0].error_code, reply.partitions[0].base_offset) == (
                ErrorCode.NONE,
                end,
            )


def _read_or_none(stub, topic: str, partition: int) -> bytes | None:
    try:
        return fetch_all(lambda r: stub.Fetch(r, timeout=10), topic, partition) or None
    except AssertionError:
        return None  # not hosted yet (NOT_LEADER_OR_FOLLOWER while the image catches up)


def _split(stored: bytes) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    pos = 0
    for header in iter_batches(stored):
        out[header.base_offset] = stored[pos : pos + header.size]
        pos += header.size
    return out


def test_sigterm_stops_cleanly_and_unregisters(own: StorageHarness) -> None:
    topic = own.create_topic("sigterm")
    with own.storage() as stub:
        own.produce_when_ready(stub, topic.name, 0, make_batch(7))
    node = own.cluster.storage(1)
    node.stop(grace=30)
    assert node.returncode == 0
    assert (own.log_dir() / ".kafka_cleanshutdown").exists()

    def unregistered() -> bool:
        with own.metadata() as stub:
            reply = stub.DescribeCluster(admin_pb2.DescribeClusterRequest(), timeout=10)
        return all(n.node_id != 1 for n in reply.nodes)

    assert wait_until(unregistered, 5, "the node to leave the cluster")
    node.restart(timeout=60)
    with own.storage() as stub:
        stored = wait_until(lambda: _read_or_none(stub, topic.name, 0), 30, "the data back")
    assert iter_batches(stored)[-1].next_offset == 7
