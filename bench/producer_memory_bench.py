"""Peak RSS of an SDK producer with buffer.memory 32 MiB pushing as fast as it can (issue 10:
"a producer with buffer.memory of 32 MiB stays under 100 MiB RSS"). Prints figures; not a test.

The application side holds nothing: values come from a pool of 256 and no future is kept, so
what grows is the producer's own: its buffer (bounded by buffer.memory), the requests in flight
and grpcio's copies of them. VmRSS is sampled every 20 ms from /proc/self/status by a thread;
the baseline is the RSS after the producer connected and sent one record.

The buffer only fills when the cluster takes records slower than the application sends them,
so `--throttle-mb` (default 10) sets a producer_byte_rate quota on the bench's own client id
for the run (removed after): then the whole of buffer.memory is in use, which is the case the
bound is for. `--throttle-mb 0` runs unthrottled. A quota's rate is measured over its
whole window (11 samples of 1 s by default, as Kafka's), so a burst below about the window
times the quota is never throttled: the default of 240 MB (24 times the 10 MB/s quota) makes
the buffer fill; at the old default of 80 MB the run was never throttled (1.8 M records/s of
100 B).

    python bench/producer_memory_bench.py [--value-size 1024]     # starts a local cluster
    python bench/producer_memory_bench.py --bootstrap HOST:PORT
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time

from riverlog.client import AdminClient, NewTopic, Producer
from riverlog.cluster import LocalCluster
from riverlog.common.quota.entity import QuotaEntity


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1.0


class PeakSampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.02):
            self.peak = max(self.peak, rss_mb())


CLIENT_ID = "producer-memory-bench"


def run(
    bootstrap: str, megabytes: int, value_size: int, partitions: int, throttle_mb: float
) -> None:
    topic = f"memory-{value_size}-{int(time.time() * 1000)}"
    quota = QuotaEntity(None, CLIENT_ID)
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        if throttle_mb > 0:
            rate = {"producer_byte_rate": throttle_mb * 1e6}
            admin.alter_client_quotas([(quota, rate)])
            time.sleep(2)  # gateways apply quota changes within a second
    try:
        produce(bootstrap, topic, megabytes, value_size, partitions, throttle_mb)
    finally:
        if throttle_mb > 0:
            with AdminClient({"bootstrap.servers": bootstrap}) as admin:
                admin.alter_client_quotas([(quota, {"producer_byte_rate": None})])


def produce(
    bootstrap: str,
    topic: str,
    megabytes: int,
    value_size: int,
    partitions: int,
    throttle_mb: float,
) -> None:
    values = [os.urandom(value_size) for _ in range(256)]
    count = megabytes * 1024 * 1024 // value_size
    conf = {
        "bootstrap.servers": bootstrap,
        "client.id": CLIENT_ID,
        "buffer.memory": 32 * 1024 * 1024,
        "linger.ms": 5,
        "batch.size": 131072,
    }
    with Producer(conf) as producer:
        producer.send(topic, b"warm-up").result(30)
        base = rss_mb()
        sampler = PeakSampler()
        sampler.start()
        started = time.perf_counter()
        send = producer.send
        for i in range(count):
            send(topic, values[i & 255])
        producer.flush(120)
        elapsed = time.perf_counter() - started
        sampler.stop.set()
        sampler.join()
    throttled = f", throttled to {throttle_mb:g} MB/s" if throttle_mb > 0 else ""
    print(
        f"{megabytes} MB as {count:,} x {value_size} B, {partitions} partitions{throttled}: "
        f"{count / elapsed:,.0f} records/s; RSS {base:.0f} MiB after connecting, "
        f"peak {sampler.peak:.0f} MiB (+{sampler.peak - base:.0f} MiB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap")
    parser.add_argument("--megabytes", type=int, default=240)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--value-size", type=int, default=100, help="one size per process")
    parser.add_argument("--throttle-mb", type=float, default=10.0, help="MB/s; 0: none")
    args = parser.parse_args()
    sizes = (args.megabytes, args.value_size, args.partitions, args.throttle_mb)
    if args.bootstrap:
        run(args.bootstrap, *sizes)
        return
    with tempfile.TemporaryDirectory(prefix="riverlog-bench-") as data_dir:
        with LocalCluster(data_dir, storage_nodes=1, metadata_nodes=1, gateways=1) as cluster:
            run(cluster.gateway_address, *sizes)


if __name__ == "__main__":
    main()
