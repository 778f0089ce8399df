"""Fetch throughput of a real storage node: gRPC Fetch against the zero-copy (sendfile) channel.

    .venv/bin/python bench/fetch_bench.py [--mb 200] [--fetch-mb 4] [--value-size 100]
                                          [--partitions 1] [--rounds 3] [--dir PATH]

Starts a local cluster of real processes with `riverlog.cluster.LocalCluster` (etcd, one
metadata instance, one storage node, no gateway), creates a topic through the metadata API,
writes about `--mb` MB of 16 KiB record batches with gRPC Produce (1 MiB requests, acks=1),
then reads the whole topic back `--rounds` times through (a) the gRPC Fetch and (b) the
zero-copy channel (`riverlog.common.zerocopy.ZeroCopyFetchClient`), each fetch asking for up
to `--fetch-mb` MB. Prints MB/s and records/s per transport (best and median round). The
reader checks every response (error codes, offsets contiguous, bytes counted) but decodes no
record: it counts records from the batch headers, as a consumer's fetcher would before handing
batches on. Produce throughput is printed too, for scale. Everything runs on this machine, so
the figures include the client's own cost and the data is in the page cache.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from riverlog.cluster import LocalCluster
from riverlog.common.errors import ErrorCode, raise_for
from riverlog.common.records import BatchBuilder
from riverlog.common.records.header import iter_batches
from riverlog.common.rpc.channel import sync_channel
from riverlog.common.zerocopy import ZeroCopyFetchClient
from riverlog.v1 import (
    admin_pb2,
    common_pb2,
    data_pb2,
    metadata_pb2_grpc,
    storage_pb2_grpc,
)

TOPIC = "fetch-bench"
Fetch = Callable[[data_pb2.FetchRequest], data_pb2.FetchResponse]


def build_batches(total_bytes: int, value_size: int, batch_size: int = 16384) -> list[bytes]:
    value = b"v" * value_size
    now = int(time.time() * 1000)
    batches: list[bytes] = []
    size = 0
    i = 0
    while size < total_bytes:
        builder = BatchBuilder(batch_size=batch_size)
        while builder.append(now, b"key-%d" % i, value):
            i += 1
        batch = builder.build()
        batches.append(batch)
        size += len(batch)
    return batches


def create_topic(metadata_address: str, partitions: int) -> dict[int, int]:
    """Create the topic; returns partition -> leader once every partition has one."""
    with sync_channel(metadata_address) as channel:
        stub = metadata_pb2_grpc.MetadataServiceStub(channel)  # type: ignore[no-untyped-call]
        reply = stub.CreateTopics(
            admin_pb2.CreateTopicsRequest(
                topics=[
                    admin_pb2.CreatableTopic(
                        name=TOPIC,
                        num_partitions=partitions,
                        replication_factor=1,
                        configs={"segment.bytes": str(256 * 1024 * 1024)},
                    )
                ]
            ),
            timeout=30,
        )
        for result in reply.topics:
            raise_for(result.error_code, result.error_message)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            described = stub.DescribeTopics(
                admin_pb2.DescribeTopicsRequest(names=[TOPIC]), timeout=10
            )
            for t in described.topics:
                leaders = {p.partition: p.leader for p in t.metadata.partitions}
                if len(leaders) == partitions and min(leaders.values()) >= 0:
                    return leaders
            time.sleep(0.05)
    raise RuntimeError("the topic has no leaders")


def produce(
    stub: storage_pb2_grpc.StorageServiceStub, batches: list[bytes], partitions: int
) -> float:
    """Write every batch, ~1 MiB per request, round-robin over the partitions; seconds taken."""
    per_request = max(1, (1 << 20) // len(batches[0]))
    start = time.perf_counter()
    for n, i in enumerate(range(0, len(batches), per_request)):
        payload = b"".join(batches[i : i + per_request])
        request = data_pb2.ProduceRequest(
            acks=common_pb2.ACKS_LEADER,
            partitions=[
                data_pb2.ProducePartition(topic=TOPIC, partition=n % partitions, records=payload)
            ],
        )
        for _attempt in range(200):  # the node may not host the partition for a moment
            [result] = stub.Produce(request, timeout=30).partitions
            if result.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                break
            time.sleep(0.05)
        raise_for(result.error_code, result.error_message)
    return time.perf_counter() - start


def read_all(fetch: Fetch, partitions: int, fetch_bytes: int) -> tuple[int, int, float]:
    """Read every partition from 0 to its high watermark; (bytes, records, seconds)."""
    offsets = dict.fromkeys(range(partitions), 0)
    done: set[int] = set()
    total_bytes = total_records = 0
    start = time.perf_counter()
    while len(done) < partitions:
        request = data_pb2.FetchRequest(
            max_bytes=fetch_bytes,
            partitions=[
                data_pb2.FetchPartition(
                    topic=TOPIC, partition=p, fetch_offset=o, partition_max_bytes=fetch_bytes
                )
                for p, o in offsets.items()
                if p not in done
            ],
        )
        for p in fetch(request).partitions:
            raise_for(p.error_code, p.error_message)
            if not p.records:
                if offsets[p.partition] >= p.high_watermark:
                    done.add(p.partition)
                continue
            headers = iter_batches(p.records)
            if headers[0].base_offset > offsets[p.partition]:
                raise RuntimeError(f"gap before offset {headers[0].base_offset}")
            total_bytes += len(p.records)
            total_records += sum(h.records_count for h in headers)
            offsets[p.partition] = headers[-1].next_offset
    return total_bytes, total_records, time.perf_counter() - start


def report(name: str, rounds: list[tuple[int, int, float]]) -> None:
    size, records, _ = rounds[0]
    rates = sorted(size / s / 1e6 for _, _, s in rounds)
    rec_rates = sorted(records / s for _, _, s in rounds)
    print(
        f"{name:<22} {size / 1e6:8.1f} MB {records:>10,} records   "
        f"best {rates[-1]:8.1f} MB/s {rec_rates[-1]:>12,.0f} rec/s   "
        f"median {statistics.median(rates):8.1f} MB/s {statistics.median(rec_rates):>12,.0f} rec/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="MB to write and read back")
    parser.add_argument("--fetch-mb", type=float, default=4.0, help="max bytes per fetch (MB)")
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where the cluster's data goes")
    args = parser.parse_args()

    batches = build_batches(args.mb * 1_000_000, args.value_size)
    size = sum(len(b) for b in batches)
    records = sum(h.records_count for b in batches for h in iter_batches(b))
    print(
        f"{size / 1e6:.1f} MB in {len(batches)} batches, {records:,} records of "
        f"{args.value_size} B values; fetches of up to {args.fetch_mb} MB"
    )
    fetch_bytes = int(args.fetch_mb * 1_000_000)
    with (
        tempfile.TemporaryDirectory(dir=args.dir) as root,
        LocalCluster(
            Path(root) / "cluster", storage_nodes=1, metadata_nodes=1, gateways=0
        ) as cluster,  # entering starts it; leaving stops every process by PID
    ):
        create_topic(cluster.metadata_addresses[0], args.partitions)
        node = cluster.storage(1)
        assert node.address is not None
        with sync_channel(node.address) as channel:
            stub = storage_pb2_grpc.StorageServiceStub(channel)  # type: ignore[no-untyped-call]
            elapsed = produce(stub, batches, args.partitions)
            print(
                f"{'produce (gRPC, acks=1)':<22} {size / 1e6:8.1f} MB in {elapsed:.2f} s: "
                f"{size / elapsed / 1e6:.1f} MB/s, {records / elapsed:,.0f} rec/s"
            )
            grpc_rounds = [
                read_all(lambda r: stub.Fetch(r, timeout=60), args.partitions, fetch_bytes)
                for _ in range(args.rounds)
            ]
        with ZeroCopyFetchClient("127.0.0.1", int(node.info["zero_copy_port"])) as client:
            zero_copy_rounds = [
                read_all(client.fetch, args.partitions, fetch_bytes) for _ in range(args.rounds)
            ]
        for rounds in (grpc_rounds, zero_copy_rounds):
            if rounds[0][:2] != (size, records):
                raise RuntimeError(f"read back {rounds[0][:2]}, wrote {(size, records)}")
        report("fetch (gRPC)", grpc_rounds)
        report("fetch (zero-copy)", zero_copy_rounds)
        best = lambda rs: max(b / s for b, _, s in rs)  # noqa: E731
        print(f"zero-copy / gRPC: {best(zero_copy_rounds) / best(grpc_rounds):.2f}x")


if __name__ == "__main__":
    main()
