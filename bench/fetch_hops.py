"""The fetch half of one record's latency, hop by hop, against a running cluster. Prints
figures; not a test.

`latency_probe.py --hops` times the produce half (the leader's lane, the gateway's
ProduceStream, the SDK's send). This times the other half: how long a record written on the
leader takes to reach a reader that is already waiting for it, through each layer in turn:

1. a fetch parked on the leader's zero-copy port (what the gateway does);
2. a FetchStream request parked through the gateway (a plain gRPC client);
3. the SDK consumer's `poll()` (its fetch parked through the gateway, then its threads).

Each round parks the reader at the end of the log, waits 10 ms, writes one 100-byte record on
the leader's produce lane (as the gateway does) and takes the time from the write to the
reader having the record; `--hop-count` rounds per layer. The differences between the rows
are the gateway's fetch hop and the SDK consumer's hand-over (decision 0019, session 7).

    .venv/bin/python bench/fetch_hops.py --bootstrap 127.0.0.1:PORT --data-dir DATA_DIR
        [--hop-count 200]
"""

from __future__ import annotations

import argparse
import asyncio
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import grpc
from bench_common import zero_copy_ports
from latency_probe import summary

from riverlog.client import AdminClient, Consumer, NewTopic, TopicPartition
from riverlog.common.records import BatchBuilder
from riverlog.common.zerocopy import AsyncProduceLane, ZeroCopyFetchClient
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2, gateway_pb2_grpc

_WAIT_MS = 5_000


class Writer:
    """Writes one record at a time on the leader's produce lane, from a loop thread."""

    def __init__(self, port: int, topic: str, value: bytes) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._lane = AsyncProduceLane("127.0.0.1", port)
        self._topic = topic
        self._value = value
        self._pending: Future[data_pb2.ProduceResponse] | None = None

    def write(self) -> int:
        """Send one record; returns the send time (the answer is awaited after)."""
        builder = BatchBuilder()
        builder.append(int(time.time() * 1000), None, self._value)
        part = data_pb2.ProducePartition(topic=self._topic, partition=0, records=builder.build())
        request = data_pb2.ProduceRequest(
            acks=common_pb2.ACKS_LEADER, timeout_ms=30_000, partitions=[part]
        )
        sent = time.monotonic_ns()
        self._pending = asyncio.run_coroutine_threadsafe(
            self._lane.produce(request, 30), self._loop
        )
        return sent

    def acknowledged(self) -> None:
        assert self._pending is not None
        self._pending.result(30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._lane.close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def fetch_request(topic: str, offset: int) -> data_pb2.FetchRequest:
    return data_pb2.FetchRequest(
        max_wait_ms=_WAIT_MS,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=[
            data_pb2.FetchPartition(
                topic=topic, partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
            )
        ],
    )


def rounds(name: str, count: int, writer: Writer, park: Callable[[], Callable[[], int]]) -> str:
    """`count` rounds: `park()` starts a reader waiting and returns what waits for its
    receipt time; the record is written 10 ms later."""
    took = []
    for _ in range(count):
        received = park()
        time.sleep(0.01)
        sent = writer.write()
        took.append(received() - sent)
        writer.acknowledged()
    return summary(name, took)


def in_thread(work: Callable[[], int]) -> Callable[[], int]:
    """Runs `work` (it blocks until the record is in, then returns the time) in a thread."""
    out: queue.SimpleQueue[int | BaseException] = queue.SimpleQueue()

    def run() -> None:
        try:
            out.put(work())
        except BaseException as e:  # reported by the caller
            out.put(e)

    threading.Thread(target=run, daemon=True).start()

    def received() -> int:
        result = out.get(timeout=60)
        if isinstance(result, BaseException):
            raise result
        return result

    return received


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--data-dir", required=True, help="the cluster's (riverlog cluster up)")
    parser.add_argument("--hop-count", type=int, default=200)
    args = parser.parse_args()
    ports = zero_copy_ports(args.data_dir)
    topic = f"fetch-hops-{int(time.time())}"
    with AdminClient(bootstrap_servers=args.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    channel = grpc.insecure_channel(args.bootstrap)
    stub = gateway_pb2_grpc.GatewayStub(channel)
    leader = -1
    for _ in range(100):  # the new topic's leader, once elected
        metadata = stub.GetMetadata(gateway_pb2.GetMetadataRequest(topics=[topic]))
        leader = metadata.topics[0].partitions[0].leader if metadata.topics[0].partitions else -1
        if leader in ports:
            break
        time.sleep(0.1)
    writer = Writer(ports[leader], topic, b"x" * 100)
    writer.write()
    writer.acknowledged()  # the partition has its first record; the next one is offset 1
    offset = [1]

    def next_offset() -> int:
        offset[0] += 1
        return offset[0] - 1

    with ZeroCopyFetchClient("127.0.0.1", ports[leader]) as direct:

        def park_direct() -> Callable[[], int]:
            request = fetch_request(topic, next_offset())
            return in_thread(lambda: (direct.fetch(request), time.monotonic_ns())[1])

        print(rounds("leader's zero-copy fetch", args.hop_count, writer, park_direct), flush=True)

    requests: queue.SimpleQueue[data_pb2.FetchRequest | None] = queue.SimpleQueue()

    def fed() -> Iterator[data_pb2.FetchRequest]:
        while (item := requests.get()) is not None:
            yield item

    answers = stub.FetchStream(fed())

    def park_stream() -> Callable[[], int]:
        requests.put(fetch_request(topic, next_offset()))
        return in_thread(lambda: (next(answers), time.monotonic_ns())[1])

    print(rounds("gateway's FetchStream", args.hop_count, writer, park_stream), flush=True)
    requests.put(None)
    channel.close()
    with Consumer(bootstrap_servers=args.bootstrap) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, offset[0])
        consumer.poll(timeout_ms=0)  # its fetch goes out and parks

        def park_consumer() -> Callable[[], int]:
            def poll() -> int:
                for _ in range(100):
                    if consumer.poll(timeout_ms=1_000):
                        return time.monotonic_ns()
                raise TimeoutError("the consumer got nothing")

            return in_thread(poll)

        print(rounds("SDK consumer poll()", args.hop_count, writer, park_consumer), flush=True)
    writer.close()


if __name__ == "__main__":
    main()
