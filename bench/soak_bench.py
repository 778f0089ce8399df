"""Soak: produce and consume at a steady rate for a long time and watch every process's memory
and open file descriptors. Prints figures; not a test (`make test` does not run it).

Starts a local cluster (etcd, one metadata instance, three storage nodes, one group
coordinator, one quota instance, one gateway; all on this machine), creates a topic of
`--partitions` partitions with replication factor `--replication-factor`, then for `--minutes`
(default 30):

- a producer thread sends `--rate` records/s (default 2,000) of `--value-size`-byte values
  (acks=all, idempotent, the SDK's defaults otherwise), paced against the clock;
- a consumer in a group (`group.id`, auto commit) reads them as they come;
- every `--sample-seconds` (default 30) the sampler reads VmRSS (/proc/PID/status) and the
  number of open descriptors (/proc/PID/fd) of every cluster process and of this client
  process, and the counts produced, consumed and failed.

At the end it prints the samples as a table and each process's growth: from the first sample
and from the first sample after the warm-up (`--warmup-minutes`, default a fifth of the run),
to the last, with the warm-up growth also per hour. A leak shows as growth that keeps its slope
after the warm-up; caches and buffers filling show as growth that flattens.

    .venv/bin/python bench/soak_bench.py [--minutes 30] [--rate 2000] [--sample-seconds 30]
        [--partitions 6] [--replication-factor 2] [--value-size 100] [--warmup-minutes M]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from riverlog.client import AdminClient, Consumer, NewTopic, Producer
from riverlog.cluster import LocalCluster


@dataclass
class Sample:
    at_s: float
    produced: int
    consumed: int
    failed: int
    rss_kb: dict[str, int]
    fds: dict[str, int]


@dataclass
class Counters:
    produced: int = 0
    consumed: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def rss_kb(pid: int) -> int:
    """VmRSS of `pid` in kB (-1 when the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def open_fds(pid: int) -> int:
    """Open file descriptors of `pid` (-1 when the process is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def produce(
    address: str, topic: str, args: argparse.Namespace, c: Counters, stop: threading.Event
) -> None:
    """Send `args.rate` records/s until `stop`, in steps of 10 ms against the clock."""
    value = b"x" * args.value_size

    def done(future: object) -> None:
        error = future.exception(0)  # type: ignore[attr-defined]
        with c.lock:
            if error is None:
                c.produced += 1
            else:
                c.failed += 1
                if len(c.errors) < 5:
                    c.errors.append(repr(error))

    with Producer({"bootstrap.servers": address, "acks": "all", "linger.ms": 5}) as producer:
        start = time.monotonic()
        sent = 0
        while not stop.is_set():
            due = int((time.monotonic() - start) * args.rate)
            for i in range(sent, due):
                producer.send(topic, value, key=b"k%d" % (i % 1000)).add_done_callback(done)
            sent = max(sent, due)
            stop.wait(0.01)
        producer.flush(60)


def consume(address: str, topic: str, group: str, c: Counters, stop: threading.Event) -> None:
    config = {
        "bootstrap.servers": address,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
    }
    consumer = Consumer(config)
    try:
        consumer.subscribe([topic])
        while not stop.is_set():
            for records in consumer.poll(timeout_ms=500).values():
                with c.lock:
                    c.consumed += len(records)
    finally:
        consumer.close()


def sample(pids: dict[str, int], c: Counters, start: float) -> Sample:
    with c.lock:
        produced, consumed, failed = c.produced, c.consumed, c.failed
    return Sample(
        time.monotonic() - start,
        produced,
        consumed,
        failed,
        {name: rss_kb(pid) for name, pid in pids.items()},
        {name: open_fds(pid) for name, pid in pids.items()},
    )


def print_table(samples: list[Sample], names: list[str]) -> None:
    print("\nsamples (RSS MB / open fds per process):")
    header = f"{'min':>6} {'produced':>10} {'consumed':>10} {'failed':>6}  " + "  ".join(
        f"{n:>15}" for n in names
    )
    print(header)
    for s in samples:
        cells = "  ".join(f"{s.rss_kb[n] / 1024:>9.1f}/{s.fds[n]:>5}" for n in names)
        print(f"{s.at_s / 60:>6.1f} {s.produced:>10,} {s.consumed:>10,} {s.failed:>6,}  {cells}")


def print_growth(samples: list[Sample], names: list[str], warmup_s: float) -> None:
    first, last = samples[0], samples[-1]
    after = next((s for s in samples if s.at_s >= warmup_s), first)
    hours = max(last.at_s - after.at_s, 1e-9) / 3600
    print(
        f"\ngrowth per process: first sample ({first.at_s / 60:.1f} min) → last "
        f"({last.at_s / 60:.1f} min), and after the warm-up ({after.at_s / 60:.1f} min) → last"
    )
    print(
        f"{'process':>15} {'RSS MB first→last':>20} {'Δ':>8} {'Δ warm':>8} {'MB/h warm':>10}"
        f" {'fds first→last':>15} {'Δ warm':>7}"
    )
    for n in names:
        mb = [s.rss_kb[n] / 1024 for s in (first, after, last)]
        fd = [s.fds[n] for s in (first, after, last)]
        print(
            f"{n:>15} {mb[0]:>9.1f} → {mb[2]:>7.1f} {mb[2] - mb[0]:>+8.1f} {mb[2] - mb[1]:>+8.1f}"
            f" {(mb[2] - mb[1]) / hours:>+10.1f} {fd[0]:>6} → {fd[2]:>5} {fd[2] - fd[1]:>+7}"
        )


def run(cluster: LocalCluster, args: argparse.Namespace) -> None:
    address = cluster.gateway_address
    topic, group = f"soak-{int(time.time())}", "soak-group"
    with AdminClient({"bootstrap.servers": address}) as admin:
        admin.create_topics([NewTopic(topic, args.partitions, args.replication_factor)])
    pids = {"client": os.getpid()}
    pids.update({n: p.pid for n, p in sorted(cluster.processes.items()) if p.pid is not None})
    names = list(pids)
    print(
        f"topic {topic}: {args.partitions} partitions, RF {args.replication_factor}; "
        f"{args.rate:,} records/s of {args.value_size} B (acks=all) for {args.minutes:g} min, "
        f"consumer group {group}; sampling every {args.sample_seconds:g} s"
    )
    counters, stop = Counters(), threading.Event()
    threads = [
        threading.Thread(target=produce, args=(address, topic, args, counters, stop)),
        threading.Thread(target=consume, args=(address, topic, group, counters, stop)),
    ]
    start = time.monotonic()
    for t in threads:
        t.start()
    samples = [sample(pids, counters, start)]
    end = start + args.minutes * 60
    try:
        while time.monotonic() < end and all(t.is_alive() for t in threads):
            stop.wait(min(args.sample_seconds, max(0.0, end - time.monotonic())))
            samples.append(sample(pids, counters, start))
            s = samples[-1]
            # acknowledged minus consumed: a consumer may see a record before its ack arrives
            lag = s.produced - s.consumed
            print(
                f"  {s.at_s / 60:5.1f} min: acknowledged {s.produced:,}, consumed "
                f"{s.consumed:,} (difference {lag:,}), failed {s.failed:,}",
                flush=True,
            )
    finally:
        stop.set()
        for t in threads:
            t.join(120)
    dead = [n for n, p in cluster.processes.items() if not p.alive]
    rate = samples[-1].produced / max(samples[-1].at_s, 1e-9)
    print(
        f"\nproduced {samples[-1].produced:,} ({rate:,.0f}/s), consumed "
        f"{samples[-1].consumed:,}, failed {samples[-1].failed:,}; processes dead: {dead or 'none'}"
    )
    if counters.errors:
        print(f"first produce errors: {counters.errors}")
    print_table(samples, names)
    warmup = args.warmup_minutes if args.warmup_minutes is not None else args.minutes / 5
    print_growth(samples, names, warmup * 60)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=2000, help="records/s")
    parser.add_argument("--sample-seconds", type=float, default=30.0)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--replication-factor", type=int, default=2)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--warmup-minutes", type=float, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="riverlog-soak-") as data_dir:
        with LocalCluster(
            data_dir, storage_nodes=3, metadata_nodes=1, gateways=1, coordinators=1, quota_nodes=1
        ) as cluster:
            print(f"cluster up: gateway {cluster.gateway_address}")
            run(cluster, args)


if __name__ == "__main__":
    main()
