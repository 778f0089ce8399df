"""Consume throughput from the leader vs from a follower (issue 15, decision 0038): a local
cluster of three storage nodes in racks a, b and c, one gateway with
`replica.selector.class=rack-aware`; one partition, RF 3, 100-byte records produced acks=all.
The same data is read from the start by a consumer without `client.rack` (the leader serves it)
and by one with the rack of a follower (that follower serves it), alternating. Prints figures;
not a test.

    .venv/bin/python bench/follower_fetch_bench.py [--records 300000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from bench_common import metric_samples, read_partition

from riverlog.client import AdminClient, NewTopic, Producer
from riverlog.cluster import LocalCluster
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import admin_pb2, metadata_pb2_grpc

RACKS = ["a", "b", "c"]
VALUE = b"x" * 100


def produce(address: str, topic: str, records: int) -> float:
    with Producer({"bootstrap.servers": address, "acks": "all", "linger.ms": 5}) as producer:
        start = time.perf_counter()
        for _ in range(records):
            producer.send(topic, VALUE)
        producer.flush()
        return records / (time.perf_counter() - start)


def leader_of(cluster: LocalCluster, topic: str) -> int:
    with sync_channel(cluster.metadata_addresses[0]) as channel:
        stub = metadata_pb2_grpc.MetadataServiceStub(channel)
        reply = stub.DescribeTopics(admin_pb2.DescribeTopicsRequest(names=[topic]), timeout=10)
    return int(reply.topics[0].metadata.partitions[0].leader)


def served(cluster: LocalCluster, topic: str) -> dict[tuple[int, str], float]:
    """riverlog_consumer_fetches_total of `topic` per (node, leader|follower), scraped."""
    samples = metric_samples(cluster, "storage", "riverlog_consumer_fetches_total")
    return {(node, labels["replica"]): v for node, labels, v in samples if labels["topic"] == topic}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="riverlog-follower-fetch-bench-") as data_dir:
        with LocalCluster(
            data_dir, storage_nodes=3, metadata_nodes=1, gateways=1, racks=RACKS,
            extra_config={"gateway": {"replica.selector.class": "rack-aware"}},
        ) as cluster:  # fmt: skip
            address = cluster.gateway_address
            topic = f"follower-fetch-bench-{int(time.time())}"
            with AdminClient({"bootstrap.servers": address}) as admin:
                admin.create_topics([NewTopic(topic, 1, 3)])
            rate = produce(address, topic, args.records)
            leader = leader_of(cluster, topic)
            follower_rack = RACKS[leader % 3]  # node n is in RACKS[(n - 1) % 3]: the next node
            print(f"{args.records:,} x {len(VALUE)} B produced at {rate:,.0f} rec/s; "
                  f"leader: node {leader} (rack {RACKS[leader - 1]}); "
                  f"follower read: rack {follower_rack}")  # fmt: skip
            for r in range(args.rounds):
                for label, rack in (("leader", ""), ("follower", follower_rack)):
                    count, elapsed = read_partition(address, topic, rack)
                    print(f"round {r + 1} consume from the {label}: {count / elapsed:,.0f} rec/s "
                          f"({count * len(VALUE) / elapsed / 1e6:.1f} MB/s of values)")  # fmt: skip
            print("consumer fetches served (node, replica):", served(cluster, topic))


if __name__ == "__main__":
    main()
