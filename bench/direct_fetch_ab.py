"""The consumer's direct fetch path (decision 0047) against the gateway's, interleaved (A B A B):
CPU microseconds per record of the client, the gateway and the storage node, and records/s.
Prints figures; not a test.

Starts a cluster with the launcher (one storage node, one gateway; `--bootstrap` and `--pid`
use a running one), writes `--records` records of `--value-size` bytes into a topic of one
partition (`--partitions`) once, then reads them all from the start `--rounds` times with each
setting, alternating `direct.access` true and false, with the side-by-side harness's consumer
loop: `Consumer`, assign, poll(timeout_ms=1000), len(value) of every record. Medians at the end.

    .venv/bin/python bench/direct_fetch_ab.py [--records 200000] [--value-size 1024]
        [--rounds 3] [--partitions 1] [--storage-nodes 1] [--profile SECONDS]

`--profile S` runs `py-spy record` on this process for S seconds of each direct round
(svg files in the working directory).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import announce
from produce_consume_bench import cpu_seconds

from riverlog.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from riverlog.cluster import LocalCluster

PY_SPY = os.path.join(os.path.dirname(sys.executable), "py-spy")


def load(address: str, topic: str, partitions: int, records: int, size: int) -> None:
    with AdminClient({"bootstrap.servers": address}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    value = b"x" * size
    config = {"bootstrap.servers": address, "acks": "1", "linger.ms": 5, "batch.size": 131072}
    with Producer(config) as producer:
        chunk = [value] * 10_000
        for done in range(0, records, len(chunk)):
            producer.send_many(topic, chunk[: records - done])
        producer.flush()


def read_all(address: str, topic: str, partitions: int, records: int, direct: bool) -> float:
    config = {
        "bootstrap.servers": address,
        "auto.offset.reset": "earliest",
        "direct.access": direct,
    }
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        count = 0
        size = 0
        start = time.perf_counter()
        while count < records:
            for batch in consumer.poll(timeout_ms=1000).values():
                for record in batch:
                    size += len(record.value)
                count += len(batch)
        elapsed = time.perf_counter() - start
        used = consumer.metrics()["direct-fetch-total"]
        if direct != (used > 0):
            raise SystemExit(f"direct.access={direct} but {used} direct fetches")
        if direct:
            grants = consumer.metrics()["direct-grant-total"]
            print(f"  {used:.0f} direct fetches, {grants:.0f} grants")
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--storage-nodes", type=int, default=1)
    parser.add_argument("--profile", type=int, default=0)
    parser.add_argument("--profile-target", default="client", help="a process name (storage-1)")
    parser.add_argument("--bootstrap")
    parser.add_argument("--pid", action="append", default=[], help="NAME=PID with --bootstrap")
    args = parser.parse_args()
    if args.bootstrap:
        pids = {"client": os.getpid(), **{k: int(v) for k, v in (p.split("=") for p in args.pid)}}
        run(args.bootstrap, pids, args)
        return
    with tempfile.TemporaryDirectory(prefix="riverlog-direct-ab-") as data_dir:
        with LocalCluster(data_dir, storage_nodes=args.storage_nodes, gateways=1) as cluster:
            run(cluster.gateway_address, announce(cluster), args)


def run(address: str, pids: dict[str, int], args: argparse.Namespace) -> None:
    topic = f"direct-ab-{os.getpid()}"
    load(address, topic, args.partitions, args.records, args.value_size)
    results: dict[bool, list[tuple[float, dict[str, float]]]] = {True: [], False: []}
    for round_ in range(args.rounds):
        for direct in (True, False):
            profiler = None
            if args.profile and direct:
                out = f"direct-fetch-{args.profile_target}-{round_}.txt"
                profiler = subprocess.Popen(
                    [PY_SPY, "record", "-o", out, "--pid", str(pids[args.profile_target]),
                     "-d", str(args.profile), "-r", "200", "--idle", "-f", "raw"],
                    stdout=subprocess.DEVNULL,
                )  # fmt: skip
            before = {label: cpu_seconds(pid) for label, pid in pids.items()}
            elapsed = read_all(address, topic, args.partitions, args.records, direct)
            used = {label: cpu_seconds(pid) - before[label] for label, pid in pids.items()}
            if profiler is not None:
                profiler.wait()
            kinds = {"client": 0.0, "gateway": 0.0, "storage": 0.0}
            for label, cpu in used.items():
                kind = label.split("-")[0]
                if kind in kinds:
                    kinds[kind] += cpu / args.records * 1e6
            results[direct].append((args.records / elapsed, kinds))
            shown = ", ".join(f"{k} {v:.2f}" for k, v in kinds.items())
            print(
                f"round {round_} direct={direct!s:5}: {args.records / elapsed:,.0f} rec/s; "
                f"CPU us/record {shown}; all {sum(kinds.values()):.2f}",
                flush=True,
            )
    for direct, rows in results.items():
        rate = statistics.median(r for r, _ in rows)
        kinds = {k: statistics.median(c[k] for _, c in rows) for k in rows[0][1]}
        shown = ", ".join(f"{k} {v:.2f}" for k, v in kinds.items())
        print(
            f"median direct={direct!s:5}: {rate:,.0f} rec/s; CPU us/record {shown}; "
            f"all {sum(kinds.values()):.2f}"
        )


if __name__ == "__main__":
    main()
