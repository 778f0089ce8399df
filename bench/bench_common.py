"""Helpers the cluster benchmarks share (imported by the `*_bench.py` scripts, run from `bench/`):
bounded waiting, filling a partition with large records, reading a partition from its start,
scraping a metric from every process of a role, and sizes written as `1GB` or `64MiB` on the
command line. Kept here so that a script needing another's helper imports it instead of copying
it; a bench script that is itself imported only for its figures' functions stays as it is.
"""

from __future__ import annotations

import os
import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from riverlog.client import AdminClient, Consumer, Producer, TopicPartition
from riverlog.cluster import LocalCluster
from riverlog.cluster.state import read_state

RECORD = 16 * 1024
"""The value size `fill` writes: large records, so a partition of a gigabyte fills quickly."""

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*")


def parse_size(text: str) -> int:
    """Bytes from `1GB`, `256MB` (powers of ten), `64MiB`, `1GiB` (powers of two) or a plain
    number of bytes; for argparse's `type=`."""
    match = _SIZE.fullmatch(text.lower())
    if match is None or match.group(2) not in _UNITS:
        raise ValueError(f"not a size: {text!r} (e.g. 1GB, 256MB, 64MiB, 4096)")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def mb_per_s(size_bytes: float, seconds: float) -> float:
    """Megabytes (10^6 bytes) per second; NaN for no time."""
    return size_bytes / 1e6 / seconds if seconds > 0 else float("nan")


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.2) -> None:
    """Poll `predicate` until true; raise after `timeout` seconds (a bench must not hang)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not reached in {timeout:g} s")
        time.sleep(interval)


def in_sync(admin: AdminClient, topic: str) -> bool:
    """Every replica of partition 0 of `topic` is in its ISR."""
    part = admin.describe_topics([topic])[topic].partitions[0]
    return len(part.isr) == len(part.replicas)


def fill(address: str, topic: str, size_bytes: int) -> float:
    """Write `size_bytes` of RECORD-byte values into partition 0 of `topic` (acks=1); returns
    the seconds it took."""
    value = b"x" * RECORD
    count = size_bytes // RECORD
    start = time.perf_counter()
    with Producer(
        bootstrap_servers=address, acks="1", linger_ms=5, batch_size=1024 * 1024
    ) as producer:
        for done in range(0, count, 64):
            producer.send_many(topic, [value] * min(64, count - done), partition=0)
        producer.flush()
    return time.perf_counter() - start


def read_partition(
    address: str,
    topic: str,
    rack: str = "",
    end: int | None = None,
    timeout: float = 1_800.0,
) -> tuple[int, float]:
    """Read partition 0 of `topic` from its start up to `end` (None: the end offset when the
    read starts), as an application does (every record handed over by poll()); returns the
    records read and the seconds it took. `rack`: the consumer's client.rack."""
    tp = TopicPartition(topic, 0)
    config = {"bootstrap.servers": address, "client.rack": rack}
    with Consumer(config) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        stop = consumer.end_offsets([tp])[tp] if end is None else end
        count = 0
        start = time.perf_counter()
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < stop:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not read up to offset {stop} in {timeout:g} s")
            for batch in consumer.poll(timeout_ms=1000).values():
                count += len(batch)
        return count, time.perf_counter() - start


def metric_samples(
    cluster: LocalCluster, role: str, name: str
) -> list[tuple[int, dict[str, str], float]]:
    """Every sample called `name` (e.g. `riverlog_remote_fetch_requests_total`) that the
    processes of `role` serve on /metrics right now: (node id, labels, value)."""
    out: list[tuple[int, dict[str, str], float]] = []
    for process in cluster.by_role(role):
        if process.metrics_url is None or process.node_id is None or not process.alive:
            continue
        with urllib.request.urlopen(process.metrics_url, timeout=10) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == name:
                    out.append((process.node_id, dict(s.labels), s.value))
    return out


def announce(cluster: LocalCluster) -> dict[str, int]:
    """The pids of this client and of `cluster`'s processes (for CPU accounting, by name),
    printed with the gateway's address once the cluster is up."""
    pids = {"client": os.getpid()}
    for name, process in sorted(cluster.processes.items()):
        if process.pid is not None:
            pids[name] = process.pid
    print(f"cluster up: gateway {cluster.gateway_address}; pids "
          + ", ".join(f"{n}={p}" for n, p in pids.items()))  # fmt: skip
    return pids


def zero_copy_ports(data_dir: str) -> dict[int, int]:
    """Each storage node's zero-copy port, from the state file of the cluster in `data_dir`
    (`riverlog cluster up --data-dir`)."""
    _, _, processes = read_state(Path(data_dir))
    return {
        p.spec.node_id: p.info["zero_copy_port"]
        for p in processes
        if p.spec.role == "storage" and p.spec.node_id is not None
    }
