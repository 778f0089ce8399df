"""Follower replication over the zero-copy channel against gRPC Fetch: catch-up time and CPU.

    .venv/bin/python bench/replication_fetch_bench.py [--mb 100] [--rounds 2] [--dir PATH]

For each transport (`replica.fetch.zero.copy.enable` true, then false) it starts a local cluster
of real processes (etcd, one metadata instance, three storage nodes, no gateway), creates a
topic with replication factor 3 and one partition, stops both followers (SIGTERM, by PID),
writes about `--mb` MB of 16 KiB batches to the leader with gRPC Produce (acks=1, 1 MiB
requests), then starts the followers again and measures, from the first byte a follower writes
until both hold as many log bytes as the leader (segment file sizes on disk, polled every few
ms; process start-up is left out), the time taken and the CPU seconds (user + system, from
/proc) the leader and the followers spent meanwhile. Prints MB/s replicated (both followers'
bytes) and CPU per GB replicated. The followers pull with Kafka's defaults (1 MiB per
partition per fetch, 10 MiB per response).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from riverlog.cluster import LocalCluster
from riverlog.common.errors import ErrorCode, raise_for
from riverlog.common.records import BatchBuilder
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import (
    admin_pb2,
    common_pb2,
    data_pb2,
    metadata_pb2_grpc,
    storage_pb2_grpc,
)

TOPIC = "replication-bench"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def build_batches(total_bytes: int, value_size: int = 100) -> list[bytes]:
    value = b"v" * value_size
    now = int(time.time() * 1000)
    batches: list[bytes] = []
    size = i = 0
    while size < total_bytes:
        builder = BatchBuilder(batch_size=16384)
        while builder.append(now, b"key-%d" % i, value):
            i += 1
        batches.append(builder.build())
        size += len(batches[-1])
    return batches


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def create_topic(metadata_address: str) -> int:
    with sync_channel(metadata_address) as channel:
        stub = metadata_pb2_grpc.MetadataServiceStub(channel)  # type: ignore[no-untyped-call]
        topic = admin_pb2.CreatableTopic(
            name=TOPIC,
            num_partitions=1,
            replication_factor=3,
            configs={"segment.bytes": str(256 * 1024 * 1024)},
        )
        reply = stub.CreateTopics(admin_pb2.CreateTopicsRequest(topics=[topic]), timeout=30)
        for result in reply.topics:
            raise_for(result.error_code, result.error_message)
        for _ in range(600):
            described = stub.DescribeTopics(
                admin_pb2.DescribeTopicsRequest(names=[TOPIC]), timeout=10
            )
            [t] = described.topics
            if t.metadata.partitions and t.metadata.partitions[0].leader >= 0:
                return int(t.metadata.partitions[0].leader)
            time.sleep(0.05)
    raise RuntimeError("the topic has no leader")


def produce(address: str, batches: list[bytes]) -> None:
    per_request = max(1, (1 << 20) // len(batches[0]))
    with sync_channel(address) as channel:
        stub = storage_pb2_grpc.StorageServiceStub(channel)  # type: ignore[no-untyped-call]
        for i in range(0, len(batches), per_request):
            request = data_pb2.ProduceRequest(
                acks=common_pb2.ACKS_LEADER,
                partitions=[
                    data_pb2.ProducePartition(
                        topic=TOPIC, partition=0, records=b"".join(batches[i : i + per_request])
                    )
                ],
            )
            for _attempt in range(200):
                [result] = stub.Produce(request, timeout=30).partitions
                if result.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    break
                time.sleep(0.05)
            raise_for(result.error_code, result.error_message)


def log_bytes(cluster: LocalCluster, node_id: int) -> int:
    """Bytes in the replica's segment files on disk (0 while it has none)."""
    directory = cluster.data_dir / "data" / f"storage-{node_id}" / f"{TOPIC}-0"
    try:
        return sum(p.stat().st_size for p in directory.glob("*.log"))
    except OSError:
        return 0


def run(root: Path, zero_copy: bool, batches: list[bytes]) -> tuple[float, float, float]:
    """(seconds from the first replicated byte to the last, leader CPU s, followers' CPU s)."""
    config = {"replica.fetch.zero.copy.enable": "true" if zero_copy else "false"}
    with LocalCluster(
        root, storage_nodes=3, metadata_nodes=1, gateways=0, extra_config={"storage": config}
    ) as cluster:
        leader_id = create_topic(cluster.metadata_addresses[0])
        leader = cluster.storage(leader_id)
        followers = [p for p in cluster.by_role("storage") if p.node_id != leader_id]
        for follower in followers:
            follower.stop()
        assert leader.address is not None and leader.pid is not None
        produce(leader.address, batches)
        target = log_bytes(cluster, leader_id)
        ids = [f.node_id for f in followers if f.node_id is not None]
        for follower in followers:
            follower.spawn()
        # From the first byte a follower writes: process start-up is not replication.
        for _ in range(1_000_000):
            if any(log_bytes(cluster, i) > 0 for i in ids):
                break
            time.sleep(0.001)
        start = time.perf_counter()
        leader_cpu = cpu_seconds(leader.pid)
        follower_cpu = sum(cpu_seconds(f.pid) for f in followers if f.pid is not None)
        for _ in range(1_000_000):
            if all(log_bytes(cluster, i) >= target for i in ids):
                break
            time.sleep(0.002)
        elapsed = time.perf_counter() - start
        spent_leader = cpu_seconds(leader.pid) - leader_cpu
        spent_followers = (
            sum(cpu_seconds(f.pid) for f in followers if f.pid is not None) - follower_cpu
        )
        for follower in followers:
            follower.wait_ready(60)
        return elapsed, spent_leader, spent_followers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=100, help="MB written while followers are down")
    parser.add_argument("--rounds", type=int, default=2, help="clusters per transport")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    batches = build_batches(args.mb * 1_000_000)
    size = sum(len(b) for b in batches)
    replicated = 2 * size
    print(f"{size / 1e6:.1f} MB to each of 2 followers ({replicated / 1e6:.1f} MB replicated)")
    results: dict[str, list[tuple[float, float, float]]] = {}
    for name, zero_copy in (("zero-copy", True), ("gRPC Fetch", False)):
        for i in range(args.rounds):
            with tempfile.TemporaryDirectory(dir=args.dir) as root:
                results.setdefault(name, []).append(
                    run(Path(root) / f"cluster-{i}", zero_copy, batches)
                )
    for name, rounds in results.items():
        best = min(r[0] for r in rounds)
        print(
            f"{name:<11} catch-up best {best:6.2f} s ({replicated / best / 1e6:7.1f} MB/s), "
            f"median {statistics.median(r[0] for r in rounds):6.2f} s; "
            f"leader CPU {statistics.median(r[1] for r in rounds) / replicated * 1e9:6.2f} s/GB, "
            f"followers CPU {statistics.median(r[2] for r in rounds) / replicated * 1e9:6.2f} s/GB"
        )


if __name__ == "__main__":
    main()
