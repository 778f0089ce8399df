"""Moving a large partition to a new node, against a real local cluster. Prints figures; not a
test.

Starts a cluster with the launcher (etcd, one metadata instance, four storage nodes, one
gateway, all on this machine), creates a topic of one partition with replication factor 3
(min.insync.replicas 2) and fills it with `--size-mb` MiB (default 1024) of 16 KiB records.
A second topic of three partitions (RF 3) carries a probe producer: 200 records/s of 100 bytes
with acks=all, whose acknowledgement latency is sampled the whole time.

Then, for each throttle in `--throttles` (MB/s; 0 means none; default "0,20"), the big
partition is reassigned so that one replica leaves and the node that has no copy joins
(KIP-455: the joining replica copies the whole log by follower fetch, joins the ISR, and the
leaving one is removed). Printed per move: seconds from the request to the end of the move,
MB/s copied, and the probe's p50/p99 acknowledgement latency in the 10 s before the move and
during it.

Before that (skipped with --balance-partitions 0): three storage nodes hold `--balance-partitions`
RF 3 partitions of `--balance-mb` MiB each with `balancer.enable=true`; a fourth node is added
and the figure is the time until every node holds within one replica of the others and no move
is in progress (the new node's share copied, under the balancer's own pace: its throttle,
`balancer.replication.throttled.rate`, is set to 0 here).

    .venv/bin/python bench/reassign_bench.py [--size-mb 1024] [--throttles 0,20]
        [--balance-partitions 24] [--balance-mb 16]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from bench_common import RECORD, fill, in_sync, wait_until
from produce_consume_bench import percentile

from riverlog.client import AdminClient, NewTopic, Producer, TopicPartition
from riverlog.cluster import LocalCluster
from riverlog.cluster.shape import add_process
from riverlog.common.node_config import FOLLOWER_THROTTLED_RATE, LEADER_THROTTLED_RATE
from riverlog.common.replication_throttle import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    throttled_replicas_for_moves,
)

RATES = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE)
LISTS = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)
PROBE_RATE = 200
WAIT_S = 1_800.0
WARM_UP_S = 5.0
BEFORE_S = 10.0


class Probe:
    """A producer sending PROBE_RATE records/s with acks=all; keeps (send time, latency)."""

    def __init__(self, address: str, topic: str) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._producer = Producer(
            bootstrap_servers=address, acks="all", linger_ms=0, client_id="probe"
        )
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        interval = 1.0 / PROBE_RATE
        next_at = time.monotonic()
        while not self._stop.is_set():
            sent = time.monotonic()

            def done(_meta: object, err: BaseException | None, sent: float = sent) -> None:
                if err is None:
                    self.samples.append((sent, time.monotonic() - sent))

            self._producer.send(self._topic, b"p" * 100, callback=done)
            next_at += interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def between(self, start: float, end: float) -> list[float]:
        return sorted(lat * 1000 for sent, lat in list(self.samples) if start <= sent < end)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._producer.close()


def move(admin: AdminClient, tp: TopicPartition, nodes: list[int], throttle_mb: float) -> float:
    """Reassign `tp` off one replica onto the node without a copy; returns the seconds taken."""
    part = admin.describe_topics([tp.topic])[tp.topic].partitions[tp.partition]
    joining = next(n for n in nodes if n not in part.replicas)
    target = [*part.replicas[1:], joining]
    set_throttle(admin, tp, part.replicas, joining, throttle_mb)
    start = time.monotonic()
    admin.alter_partition_reassignments({tp: target})
    wait_until(lambda: not admin.list_partition_reassignments([tp]), WAIT_S, 0.1)
    took = time.monotonic() - start
    set_throttle(admin, tp, part.replicas, joining, 0)
    after = admin.describe_topics([tp.topic])[tp.topic].partitions[tp.partition]
    if list(after.replicas) != target:
        raise SystemExit(f"the move did not complete: replicas {after.replicas}, not {target}")
    print(f"  {tp.topic}-{tp.partition}: {list(part.replicas)} -> {target} (node {joining} joins)")
    return took


def set_throttle(
    admin: AdminClient, tp: TopicPartition, replicas: tuple[int, ...], joining: int, mb: float
) -> None:
    """Kafka's throttle for one move, as `partitions reassign --throttle` sets it (decision
    0024): the rates on every node involved and the throttled-replica lists on the topic; 0
    removes both."""
    nodes = sorted({*replicas, joining})
    rate = int(mb * 1_048_576) if mb else None
    admin.alter_node_configs({n: dict.fromkeys(RATES, rate) for n in nodes})
    if rate is None:
        admin.alter_configs({tp.topic: dict.fromkeys(LISTS)})
        return
    target = (*replicas[1:], joining)
    lists = throttled_replicas_for_moves({tp: (replicas, target)})
    admin.alter_configs({topic: throttles.configs() for topic, throttles in lists.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--throttles", default="0,20", help="MB/s per move; 0 = none")
    parser.add_argument("--balance-partitions", type=int, default=24, help="0: skip that part")
    parser.add_argument("--balance-mb", type=int, default=16, help="MiB per balanced partition")
    args = parser.parse_args()
    throttles = [float(t) for t in args.throttles.split(",")]
    if args.balance_partitions:
        with tempfile.TemporaryDirectory(prefix="riverlog-balance-bench-") as root:
            balance(Path(root), args.balance_partitions, args.balance_mb)
    with tempfile.TemporaryDirectory(prefix="riverlog-reassign-bench-") as root:
        cluster = LocalCluster(
            root,
            storage_nodes=4,
            metadata_nodes=1,
            gateways=1,
            extra_config={"metadata": {"broker.heartbeat.interval.ms": "500"}},
        )
        cluster.start(timeout=180)
        try:
            run(cluster, args.size_mb, throttles)
        finally:
            cluster.stop()


def run(cluster: LocalCluster, size_mb: int, throttles: list[float]) -> None:
    address = cluster.gateway_address
    admin = AdminClient(bootstrap_servers=address)
    configs = {"min.insync.replicas": "2", "segment.bytes": str(128 * 1024 * 1024)}
    admin.create_topics([NewTopic("big", 1, 3, configs), NewTopic("probe", 3, 3, configs)])
    wait_until(lambda: in_sync(admin, "big") and in_sync(admin, "probe"), 60)
    took = fill(address, "big", size_mb * 1024 * 1024)
    print(f"filled {size_mb} MiB in {took:.1f} s ({size_mb / took:.0f} MiB/s, acks=1)")
    wait_until(lambda: in_sync(admin, "big"), WAIT_S)
    nodes = [1, 2, 3, 4]
    probe = Probe(address, "probe")
    time.sleep(WARM_UP_S)  # the probe's first sends set up channels and metadata: not counted
    try:
        for mb in throttles:
            time.sleep(BEFORE_S)  # the probe's "before" window (after the last move settled)
            start = time.monotonic()
            took = move(admin, TopicPartition("big", 0), nodes, mb)
            before = probe.between(start - BEFORE_S, start)
            during = probe.between(start, start + took)
            label = f"{mb:g} MB/s" if mb else "off"
            print(
                f"throttle {label}: {took:.1f} s, {size_mb * 1.048576 / took:.1f} MB/s copied; "
                f"probe acks=all p50/p99 before {percentile(before, 0.5):.2f}/"
                f"{percentile(before, 0.99):.2f} ms, during {percentile(during, 0.5):.2f}/"
                f"{percentile(during, 0.99):.2f} ms ({len(during)} samples)"
            )
    finally:
        probe.close()
        admin.close()


def replica_counts(admin: AdminClient) -> dict[int, int]:
    counts = {n.node_id: 0 for n in admin.describe_cluster().nodes if n.kind == "storage"}
    for topic in admin.describe_topics(admin.list_topics()).values():
        for part in topic.partitions:
            for node in part.replicas:
                counts[node] = counts.get(node, 0) + 1
    return counts


def balance(root: Path, partitions: int, mb_each: int) -> None:
    """Three storage nodes with `partitions` RF 3 partitions of `mb_each` MiB, the balancer on;
    a fourth node is added: seconds until the replica counts are within one and nothing
    moves."""
    cluster = LocalCluster(
        root,
        storage_nodes=3,
        metadata_nodes=1,
        gateways=1,
        extra_config={
            "metadata": {
                "broker.heartbeat.interval.ms": "500",
                "balancer.enable": "true",
                # the figure is the balancer's own pace; its default throttle (10 MiB/s)
                # would make it the rate's
                "balancer.replication.throttled.rate": "0",
            }
        },
    )
    cluster.start(timeout=180)
    try:
        address = cluster.gateway_address
        with AdminClient(bootstrap_servers=address) as admin:
            admin.create_topics([NewTopic("spread", partitions, 3, {"min.insync.replicas": "2"})])
            wait_until(lambda: in_sync(admin, "spread"), 60)
            value = b"x" * RECORD
            with Producer(bootstrap_servers=address, acks="1", batch_size=1024 * 1024) as p:
                for partition in range(partitions):
                    for _ in range(0, mb_each * 1024 * 1024 // RECORD, 64):
                        p.send_many("spread", [value] * 64, partition=partition)
                p.flush()
            start = time.monotonic()
            add_process(cluster, "storage")

            def settled() -> bool:
                counts = replica_counts(admin)
                return (
                    len(counts) == 4
                    and max(counts.values()) - min(counts.values()) <= 1
                    and not admin.list_partition_reassignments()
                )

            wait_until(settled, WAIT_S, 0.5)
            took = time.monotonic() - start
            counts = replica_counts(admin)
            print(
                f"balancer: {partitions} partitions x {mb_each} MiB (RF 3) on 3 nodes, a 4th "
                f"added: counts {dict(sorted(counts.items()))} after {took:.1f} s "
                f"({counts[4] * mb_each} MiB copied to the new node)"
            )
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
