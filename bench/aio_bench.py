"""What the asyncio SDK costs next to the sync one (issue 16 item 5, decision 0037): against a
local cluster (etcd, one metadata instance, one storage node, one gateway), 100-byte records,
3 partitions, acks=all. Prints figures; not a test.

- produce throughput: sync `send` in a loop then `flush`, vs `AIOProducer.send_nowait` in a
  loop then `flush`, in windows of 10,000 gathered futures, and `send_many` per window;
- produce one at a time (each record awaited before the next: bound by the round trip):
  sync `send().result()` vs `await AIOProducer.send`, records/s and median latency;
- consume throughput from the start: sync `poll` loop vs `await AIOConsumer.poll` vs
  `async for`;
- the event loop's responsiveness while the asyncio producer runs at full speed: the largest
  delay of a 1 ms ticker.

    .venv/bin/python bench/aio_bench.py [--records 200000] [--one-by-one 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from riverlog.client import Consumer, Producer
from riverlog.client.aio import AIOConsumer, AIOProducer
from riverlog.cluster import LocalCluster
from riverlog.common.types import TopicPartition

PARTITIONS = 3
VALUE = b"x" * 100
WINDOW = 10_000


def conf(address: str) -> dict[str, object]:
    return {"bootstrap.servers": address, "linger.ms": 5, "acks": "all"}


def sync_produce(address: str, topic: str, n: int) -> float:
    with Producer(conf(address)) as p:
        p.send(topic, VALUE)  # metadata
        p.flush()
        start = time.perf_counter()
        for _ in range(n):
            p.send(topic, VALUE)
        p.flush()
        return n / (time.perf_counter() - start)


async def aio_produce(address: str, topic: str, n: int, how: str) -> tuple[float, float]:
    """records/s and the largest ticker delay (ms) meanwhile. `how`: "flush" (send_nowait
    every record, keep the futures, flush: the sync loop's shape), "gather" (await each window
    of 10,000 futures), "many" (send_many per window)."""
    worst = 0.0
    stop = False

    async def ticker() -> None:
        nonlocal worst
        while not stop:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            worst = max(worst, time.perf_counter() - t - 0.001)

    async with AIOProducer(conf(address)) as p:
        await p.send(topic, VALUE)
        tick = asyncio.ensure_future(ticker())
        start = time.perf_counter()
        if how == "flush":
            futures = [p.send_nowait(topic, VALUE) for _ in range(n)]
            await p.flush()
            assert all(f.done() for f in futures[:-1000])
        for first in range(0, n if how != "flush" else 0, WINDOW):
            size = min(WINDOW, n - first)
            if how == "gather":
                await asyncio.gather(*[p.send_nowait(topic, VALUE) for _ in range(size)])
            else:
                await p.send_many(topic, [VALUE] * size)
        await p.flush()
        rate = n / (time.perf_counter() - start)
        stop = True
        await tick
    return rate, worst * 1000


def sync_one_by_one(address: str, topic: str, n: int) -> tuple[float, float]:
    latencies = []
    with Producer(conf(address)) as p:
        p.send(topic, VALUE).result()
        start = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            p.send(topic, VALUE).result()
            latencies.append(time.perf_counter() - t)
        return n / (time.perf_counter() - start), statistics.median(latencies) * 1000


async def aio_one_by_one(address: str, topic: str, n: int) -> tuple[float, float]:
    latencies = []
    async with AIOProducer(conf(address)) as p:
        await p.send(topic, VALUE)
        start = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            await p.send(topic, VALUE)
            latencies.append(time.perf_counter() - t)
        return n / (time.perf_counter() - start), statistics.median(latencies) * 1000


def consumer_conf(address: str) -> dict[str, object]:
    return {"bootstrap.servers": address, "auto.offset.reset": "earliest"}


def sync_consume(address: str, tps: list[TopicPartition], n: int) -> float:
    with Consumer(consumer_conf(address)) as c:
        c.assign(tps)
        start, got = time.perf_counter(), 0
        while got < n:
            got += sum(map(len, c.poll(timeout_ms=500).values()))
        return got / (time.perf_counter() - start)


async def aio_consume(address: str, tps: list[TopicPartition], n: int, iterate: bool) -> float:
    async with AIOConsumer(consumer_conf(address)) as c:
        c.assign(tps)
        start, got = time.perf_counter(), 0
        if iterate:
            async for _ in c:
                got += 1
                if got >= n:
                    break
        else:
            while got < n:
                got += sum(map(len, (await c.poll(timeout_ms=500)).values()))
        return got / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--one-by-one", type=int, default=2_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        with LocalCluster(data_dir, storage_nodes=1, metadata_nodes=1, gateways=1) as cluster:
            address = cluster.gateway_address
            cluster.create_topic("aio-bench", PARTITIONS, 1)
            cluster.create_topic("aio-bench-2", PARTITIONS, 1)
            n = args.records
            print(f"produce, {n} records of 100 bytes, {PARTITIONS} partitions, acks=all")
            print(
                f"  sync send + flush:           {sync_produce(address, 'aio-bench', n):>9,.0f}/s"
            )
            for how, label in (
                ("flush", "aio send_nowait + flush:     "),
                ("gather", "aio send_nowait + gather:    "),
                ("many", "aio send_many:               "),
            ):
                rate, worst = asyncio.run(aio_produce(address, "aio-bench-2", n, how))
                print(f"  {label}{rate:>9,.0f}/s (loop held <= {worst:.0f} ms)")
            m = args.one_by_one
            print(f"produce one at a time, {m} records")
            rate, p50 = sync_one_by_one(address, "aio-bench", m)
            print(f"  sync send().result():        {rate:>9,.0f}/s, median {p50:.2f} ms")
            rate, p50 = asyncio.run(aio_one_by_one(address, "aio-bench-2", m))
            print(f"  await aio send():            {rate:>9,.0f}/s, median {p50:.2f} ms")
            tps = [TopicPartition("aio-bench", p) for p in range(PARTITIONS)]
            print(f"consume {n} records from the start")
            print(f"  sync poll:                   {sync_consume(address, tps, n):>9,.0f}/s")
            rate = asyncio.run(aio_consume(address, tps, n, iterate=False))
            print(f"  await aio poll:              {rate:>9,.0f}/s")
            rate = asyncio.run(aio_consume(address, tps, n, iterate=True))
            print(f"  async for:                   {rate:>9,.0f}/s")


if __name__ == "__main__":
    main()
