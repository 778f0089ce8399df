"""Tiered storage (issue 15, decision 0039) against real local clusters. Prints figures; not a
test.

1. Historical read MB/s: the first `--read-bytes` (default 256MB) of a partition read from
   offset 0 by an SDK consumer, from local segments and from the remote tier: a directory store,
   and a real S3 server (moto's, on loopback, started and stopped by PID with the tiered tests'
   helper `tests/integration/tiered/moto_server.py`). The tiered partitions hold a little more
   than that, so every byte read comes from the store (checked: the leader's local log start is
   past it). `--rounds` reads each, alternating; the storage nodes' remote fetch count and chunk
   cache lookups (scraped) show the reads went remote.
2. Tail latency: a producer sends `--rate` records/s (default 1,000; 100 B, acks=1) to a
   partition of `--partition-bytes` (default 1GB, as issue 15 says) while a consumer reads its
   tail: p50/p99 of send → ack and send → poll(), with and without a historical reader (its own
   process) reading the same partition from offset 0 over and over, on a topic with tiering off
   (all local) and on (everything but the active segment only in the directory store). Kafka's
   comparison from KIP-405's tests: 21 → 60 ms without tiering, 25 → 42 ms with it.
3. Rejoin: a follower of each partition is stopped, its copy of the partition deleted and the
   node restarted; the figure is the time from the restart to the follower being back in the
   ISR, and the bytes it then holds locally (the whole log without tiering, the local tail with
   it: it starts at the leader's local log start, OFFSET_MOVED_TO_TIERED_STORAGE).

Parts 2 and 3 share one cluster (one metadata instance, two storage nodes tiering to a directory,
one gateway; both partitions replication factor 2, `--segment-bytes` segments, the tiered one
with local.retention.bytes 0 and the remote log manager running every 500 ms); part 1's S3 read
has its own cluster of one storage node tiering to the S3 server. Everything is on this machine:
the local segments and the directory store are both in the page cache, so the comparison is
between code paths (a zero-copy `sendfile` of local segments against remote chunks read into
and copied out of the bounded cache), not disks.

    .venv/bin/python bench/tiered_bench.py [--partition-bytes 1GB] [--read-bytes 256MB]
        [--segment-bytes 16MiB] [--rate 1000] [--latency-seconds 10] [--rounds 2] [--no-s3]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "tiered"))

from bench_common import (
    RECORD,
    fill,
    in_sync,
    mb_per_s,
    metric_samples,
    parse_size,
    read_partition,
    wait_until,
)
from moto_server import moto_server
from produce_consume_bench import measured, percentile
from replication_bench import fixed_rate

from riverlog.client import AdminClient, Consumer, NewTopic, TopicPartition
from riverlog.cluster import LocalCluster

WAIT_S = 900.0
READER_MAX_S = 600.0
BUCKET = "riverlog-bench"
TIERING = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "500",
    "remote.log.manager.task.retry.backoff.ms": "200",
    "log.retention.check.interval.ms": "500",
}
METADATA = {"broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "3000"}
REMOTE_FETCHES = "riverlog_remote_fetch_requests_total"
CACHE_LOOKUPS = "riverlog_remote_cache_lookups_total"


def topic_configs(segment_bytes: int, tiered: bool) -> dict[str, str]:
    configs = {"segment.bytes": str(segment_bytes), "min.insync.replicas": "1"}
    if tiered:
        configs |= {"remote.storage.enable": "true", "local.retention.bytes": "0"}
    return configs


def make_topics(
    admin: AdminClient, replicas: int, segment_bytes: int, prefix: str
) -> tuple[str, str]:
    """A local and a tiered topic of one partition each; returns their names."""
    local, tiered = f"{prefix}-local", f"{prefix}-tiered"
    admin.create_topics(
        [
            NewTopic(local, 1, replicas, topic_configs(segment_bytes, False)),
            NewTopic(tiered, 1, replicas, topic_configs(segment_bytes, True)),
        ]
    )
    wait_until(lambda: in_sync(admin, local) and in_sync(admin, tiered), 60)
    return local, tiered


def wait_tiered(admin: AdminClient, topic: str, below: int, segment_bytes: int) -> None:
    """Until every replica of `topic`'s partition keeps at most two segments locally and the
    leader's local log start is past offset `below` (all before it only in the store)."""
    tp = TopicPartition(topic, 0)

    def done() -> bool:
        leader = admin.describe_topics([topic])[topic].partitions[0].leader
        replicas = admin.describe_log_dirs([tp]).replicas(tp)
        return (
            leader in replicas
            and replicas[leader].local_log_start_offset >= below
            and all(r.size_bytes <= 2 * segment_bytes for r in replicas.values())
        )

    wait_until(done, WAIT_S, 0.5)


def remote_counters(cluster: LocalCluster) -> tuple[float, float, float]:
    """(remote fetches, chunk cache hits, misses) summed over the storage nodes, now."""
    fetches = sum(v for _, _, v in metric_samples(cluster, "storage", REMOTE_FETCHES))
    lookups = metric_samples(cluster, "storage", CACHE_LOOKUPS)
    hits = sum(v for _, labels, v in lookups if labels.get("result") == "hit")
    misses = sum(v for _, labels, v in lookups if labels.get("result") == "miss")
    return fetches, hits, misses


def read_rates(
    cluster: LocalCluster, topics: dict[str, str], read_bytes: int, rounds: int
) -> dict[str, list[float]]:
    """MB/s of reading the first `read_bytes` of each topic (label → topic) from offset 0,
    `rounds` times, alternating."""
    end = read_bytes // RECORD
    pids = {"client": os.getpid()}
    pids |= {name: p.pid for name, p in cluster.processes.items() if p.pid and p.role != "etcd"}
    rates: dict[str, list[float]] = {label: [] for label in topics}
    for r in range(rounds):
        for label, topic in topics.items():
            before = remote_counters(cluster)
            with measured(f"{label} read", pids):
                count, seconds = read_partition(cluster.gateway_address, topic, end=end)
            after = remote_counters(cluster)
            fetches, hits, misses = (a - b for a, b in zip(after, before, strict=True))
            rates[label].append(mb_per_s(count * RECORD, seconds))
            print(
                f"  round {r + 1} {label}: {count * RECORD / 1e6:,.0f} MB in {seconds:.1f} s, "
                f"{rates[label][-1]:,.0f} MB/s; remote fetches {fetches:,.0f}, cache "
                f"hits/misses {hits:,.0f}/{misses:,.0f}",
                flush=True,
            )
    return rates


def spread(values: list[float], unit: str = "") -> str:
    low, high = min(values), max(values)
    return f"{low:,.0f}{unit}" if round(low) == round(high) else f"{low:,.0f}-{high:,.0f}{unit}"


def s3_read(root: Path, args: argparse.Namespace) -> dict[str, list[float]]:
    """Part 1 against the S3 server: its own cluster, one storage node."""
    with moto_server(root) as s3:
        s3.create_bucket(BUCKET)
        store = {f"rsm.config.{k}": v for k, v in s3.store_settings(BUCKET, "bench").items()}
        store |= {
            "remote.log.storage.manager.class.name": "s3",
            "rsm.config.s3.request.timeout.ms": "30000",
        }
        with LocalCluster(
            root / "cluster",
            storage_nodes=1,
            metadata_nodes=1,
            gateways=1,
            extra_config={"storage": {**TIERING, **store}, "metadata": METADATA},
        ) as cluster:
            rates, _, _ = read_part(cluster, args, 1, args.read_bytes, "S3 (moto)")
            return rates


def read_part(
    cluster: LocalCluster, args: argparse.Namespace, replicas: int, size: int, label: str
) -> tuple[dict[str, list[float]], str, str]:
    """Local and tiered topics of `size` (at least the read plus two segments) filled alike;
    the read figures of both (the tiered one as `label`) and the two topics' names."""
    size = max(size, args.read_bytes + 2 * args.segment_bytes)
    with AdminClient(bootstrap_servers=cluster.gateway_address) as admin:
        local, tiered = make_topics(admin, replicas, args.segment_bytes, "tier-bench")
        for topic in (local, tiered):
            took = fill(cluster.gateway_address, topic, size)
            print(f"{topic}: filled {size / 1e6:,.0f} MB in {took:.1f} s", flush=True)
        start = time.monotonic()
        wait_tiered(admin, tiered, args.read_bytes // RECORD, args.segment_bytes)
        print(f"{tiered}: copied to the store, local data deleted "
              f"({time.monotonic() - start:.1f} s after the fill)", flush=True)  # fmt: skip
        wait_until(lambda: in_sync(admin, local) and in_sync(admin, tiered), WAIT_S)
    print(f"historical read of {args.read_bytes / 1e6:,.0f} MB from offset 0:", flush=True)
    topics = {"local": local, label: tiered}
    return read_rates(cluster, topics, args.read_bytes, args.rounds), local, tiered


def historical_reader(address: str, topic: str, ready: Any, stop: Any, out: Any) -> None:
    """In its own process: read partition 0 of `topic` from offset 0 to the end it had when
    this started, then again from 0, until `stop` (bounded by READER_MAX_S). Sets `ready` once
    records arrive; puts (value bytes read, seconds, passes) on `out`."""
    tp = TopicPartition(topic, 0)
    read = passes = 0
    with Consumer({"bootstrap.servers": address}) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        start = time.perf_counter()
        deadline = time.monotonic() + READER_MAX_S
        while not stop.is_set() and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                read += sum(len(r.value or b"") for r in batch)
            if read:
                ready.set()
            if consumer.position(tp) >= end:
                consumer.seek_to_beginning(tp)
                passes += 1
        out.put((read, time.perf_counter() - start, passes))


@contextmanager
def reading_history(address: str, topic: str) -> Iterator[list[tuple[int, float, int]]]:
    """A historical reader process for the block; yields a list that then holds its result."""
    ctx = mp.get_context("spawn")
    ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    process = ctx.Process(target=historical_reader, args=(address, topic, ready, stop, out))
    process.start()
    result: list[tuple[int, float, int]] = []
    try:
        if not ready.wait(120):
            raise TimeoutError("the historical reader read nothing in 120 s")
        yield result
        stop.set()
        result.append(out.get(timeout=60))
    finally:
        stop.set()
        process.join(30)
        if process.is_alive() and process.pid is not None:
            process.kill()  # by its PID
            process.join(10)


def tail_latency(address: str, topic: str, args: argparse.Namespace, history: bool) -> str:
    """One run of part 2: the tail's figures, and the historical reader's rate if any."""
    if not history:
        ack, e2e = fixed_rate(address, topic, "1", args.rate, args.latency_seconds, partitions=1)
        reader = "no historical reader"
    else:
        with reading_history(address, topic) as result:
            ack, e2e = fixed_rate(
                address, topic, "1", args.rate, args.latency_seconds, partitions=1
            )
        read, seconds, passes = result[0]
        reader = f"historical reader {mb_per_s(read, seconds):,.0f} MB/s ({passes} passes)"
    return (
        f"ack p50/p99 {percentile(ack, 0.5):.1f}/{percentile(ack, 0.99):.1f} ms, "
        f"end-to-end p50/p99 {percentile(e2e, 0.5):.1f}/{percentile(e2e, 0.99):.1f} ms "
        f"({len(e2e):,}/{int(args.rate * args.latency_seconds):,} seen); {reader}"
    )


def rejoin(cluster: LocalCluster, admin: AdminClient, topic: str) -> str:
    """Part 3 for one partition: a follower stopped, its copy deleted, the node restarted."""
    tp = TopicPartition(topic, 0)

    def isr() -> tuple[int, ...]:
        return tuple(admin.describe_topics([topic])[topic].partitions[0].isr)

    part = admin.describe_topics([topic])[topic].partitions[0]
    follower = next(n for n in part.replicas if n != part.leader)
    leader_bytes = admin.describe_log_dirs([tp]).replicas(tp)[part.leader].size_bytes
    process = cluster.storage(follower)
    process.stop()
    wait_until(lambda: follower not in isr(), WAIT_S)
    shutil.rmtree(cluster.log_dirs(follower)[0] / f"{topic}-0")
    start = time.monotonic()
    process.restart(timeout=120)
    ready = time.monotonic() - start
    wait_until(lambda: follower in isr(), WAIT_S, 0.1)
    took = time.monotonic() - start
    held = admin.describe_log_dirs([tp]).replicas(tp)[follower].size_bytes
    topics = admin.list_topics()  # the node's other replicas catch up too before what follows
    wait_until(lambda: all(in_sync(admin, t) for t in topics), WAIT_S)
    return (
        f"{took:.1f} s from the restart to the ISR (node ready after {ready:.1f} s); "
        f"it holds {held / 1e6:,.0f} MB locally (the leader {leader_bytes / 1e6:,.0f} MB)"
    )


def directory_parts(root: Path, args: argparse.Namespace) -> dict[str, list[float]]:
    """Parts 1 (directory store), 2 and 3 on one cluster tiering to a directory."""
    store = {"rsm.config.dir": str(root / "tier")}
    with LocalCluster(
        root / "cluster",
        storage_nodes=2,
        metadata_nodes=1,
        gateways=1,
        extra_config={"storage": {**TIERING, **store}, "metadata": METADATA},
    ) as cluster:
        rates, local, tiered = read_part(cluster, args, 2, args.partition_bytes, "directory")
        address = cluster.gateway_address
        print(f"tail latency at {args.rate:,} records/s of 100 B for {args.latency_seconds:g} s "
              f"(acks=1) on a partition of {args.partition_bytes / 1e6:,.0f} MB:")  # fmt: skip
        for topic in (local, tiered):  # producers, consumers and channels warmed up: not shown
            fixed_rate(address, topic, "1", args.rate, 2.0, partitions=1)
        for r in range(args.rounds):
            for label, topic in (("tiering off", local), ("tiering on", tiered)):
                for history in (False, True):
                    shown = tail_latency(address, topic, args, history)
                    print(f"  round {r + 1} {label}: {shown}", flush=True)
        print("a wiped follower rejoining the ISR:", flush=True)
        with AdminClient(bootstrap_servers=address) as admin:
            for label, topic in (("tiering off", local), ("tiering on", tiered)):
                print(f"  {label}: {rejoin(cluster, admin, topic)}", flush=True)
        return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partition-bytes", type=parse_size, default=parse_size("1GB"))
    parser.add_argument("--read-bytes", type=parse_size, default=parse_size("256MB"))
    parser.add_argument("--segment-bytes", type=parse_size, default=parse_size("16MiB"))
    parser.add_argument("--rate", type=int, default=1000, help="tail records/s")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-s3", action="store_true", help="skip the S3 server's read")
    args = parser.parse_args()
    args.read_bytes = min(args.read_bytes, args.partition_bytes)
    rates: dict[str, list[float]] = {}
    if not args.no_s3:
        with tempfile.TemporaryDirectory(prefix="riverlog-tiered-bench-s3-") as root:
            s3_rates = s3_read(Path(root), args)
            rates["local (1-node cluster)"] = s3_rates.pop("local")
            rates |= s3_rates
    with tempfile.TemporaryDirectory(prefix="riverlog-tiered-bench-") as root:
        rates |= directory_parts(Path(root), args)
    print(f"historical read MB/s over {args.rounds} rounds: "
          + "; ".join(f"{label} {spread(v)}" for label, v in rates.items()))  # fmt: skip


if __name__ == "__main__":
    main()
