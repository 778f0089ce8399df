"""Pushed fetch answers on the session cluster (fetch.push.credit; decision 0019, push
addendum): once a partition is caught up, its records arrive without the consumer asking again;
a seek while a push is on its way never yields records from the old position; and switching
between pushed answers and the consumer's own fetches (credit running out) loses and repeats
nothing. The sync SDK only: the tests count the fetches the consumer sends (the asyncio SDK
runs the same fetcher). Pushes are the gateway's: these consumers fetch through it
(direct.access=false; the direct path long-polls at the leader instead, decision 0047)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from riverlog.client import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.timeout(120)

BOUNDED = {"delivery.timeout.ms": 60_000, "request.timeout.ms": 20_000}


class Counted:
    """A consumer whose fetches and received pushes are counted (wraps its fetcher's calls)."""

    def __init__(self, address: str, credit: int) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": address,
                "auto.offset.reset": "earliest",
                "fetch.push.credit": credit,
                "fetch.max.wait.ms": 2_000,
                "direct.access": False,
                "request.timeout.ms": 20_000,
            }
        )
        fetcher: Any = self.consumer._fetcher
        conn = fetcher._conn
        self.fetches = 0
        self.pushes = 0
        self.forgotten: list[TopicPartition] = []
        submit, on_push = conn.submit, fetcher._on_push

        def counting_submit(method: str, request: Any, *args: Any) -> Any:
            if method == "Fetch" and request.partitions:
                self.fetches += 1
            self.forgotten += [
                TopicPartition(p.topic, p.partition) for p in request.forgotten_partitions
            ]
            return submit(method, request, *args)

        def counting_push(server: int, response: Any) -> None:
            if response is not None:
                self.pushes += 1
            on_push(server, response)

        conn.submit = counting_submit
        fetcher._on_push = counting_push

    def take(self, count: int, bound_s: float = 30.0) -> list[int]:
        """Poll until `count` records came (bounded): their offsets, in order."""
        offsets: list[int] = []
        deadline = time.monotonic() + bound_s
        while len(offsets) < count and time.monotonic() < deadline:
            for records in self.consumer.poll(timeout_ms=200).values():
                offsets += [r.offset for r in records]
        return offsets


def test_caught_up_records_arrive_without_asking_again(
    gateway_address: str, new_topic: Any
) -> None:
    topic = new_topic()
    tp = TopicPartition(topic, 0)
    reader = Counted(gateway_address, credit=1_000)
    with Producer({"bootstrap.servers": gateway_address, **BOUNDED}) as producer, reader.consumer:
        reader.consumer.assign([tp])
        producer.send(topic, b"first", partition=0).result(30)
        assert reader.take(1) == [0]
        asked = reader.fetches
        got: list[int] = []
        for i in range(1, 21):
            producer.send(topic, b"v%d" % i, partition=0).result(30)
            got += reader.take(1)
        assert got == list(range(1, 21))
        assert reader.fetches == asked  # every one of them pushed
        assert reader.pushes >= 20


def test_a_seek_while_a_push_is_on_its_way_never_yields_stale_records(
    gateway_address: str, new_topic: Any
) -> None:
    topic = new_topic()
    tp = TopicPartition(topic, 0)
    reader = Counted(gateway_address, credit=1_000)
    with Producer({"bootstrap.servers": gateway_address, **BOUNDED}) as producer, reader.consumer:
        consumer = reader.consumer
        consumer.assign([tp])
        for i in range(10):
            producer.send(topic, b"v%d" % i, partition=0)
        producer.flush(30)
        assert reader.take(10) == list(range(10))  # caught up: a push is awaited from 10
        consumer.seek(tp, 5)  # back
        producer.send(topic, b"v10", partition=0).result(30)  # the old push carries it
        assert reader.take(6) == [5, 6, 7, 8, 9, 10]
        consumer.seek(tp, 13)  # ahead of the log end, while a push from 11 waits
        for i in range(11, 16):
            producer.send(topic, b"v%d" % i, partition=0).result(30)
        assert reader.take(3) == [13, 14, 15]
        assert consumer.position(tp) == 16


def test_nothing_lost_or_repeated_across_pushes_and_own_fetches(
    gateway_address: str, new_topic: Any
) -> None:
    topic = new_topic()
    tp = TopicPartition(topic, 0)
    reader = Counted(gateway_address, credit=2)  # every few answers the consumer asks again
    with Producer({"bootstrap.servers": gateway_address, **BOUNDED}) as producer, reader.consumer:
        reader.consumer.assign([tp])
        got: list[int] = []
        for i in range(60):
            producer.send(topic, b"v%d" % i, partition=0)
            if i % 3 == 0:
                producer.flush(30)
                got += reader.take(i + 1 - len(got))
        producer.flush(30)
        got += reader.take(60 - len(got))
        producer.send(topic, b"last", partition=0).result(30)
        got += reader.take(1)
        assert got == list(range(61))  # the last one next: nothing came twice before it
        assert reader.pushes > 0 and reader.fetches > 1  # both paths were taken


def test_a_revoked_partition_s_pushes_are_stopped(gateway_address: str, new_topic: Any) -> None:
    topic = new_topic(partitions=2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    reader = Counted(gateway_address, credit=1_000)
    with Producer({"bootstrap.servers": gateway_address, **BOUNDED}) as producer, reader.consumer:
        reader.consumer.assign([tp0])
        producer.send(topic, b"a", partition=0).result(30)
        assert reader.take(1) == [0]  # caught up: tp0 is pushed
        reader.consumer.assign([tp1])
        producer.send(topic, b"b", partition=0).result(30)  # pushed to a consumer without tp0
        producer.send(topic, b"c", partition=1).result(30)
        got: list[int] = []
        deadline = time.monotonic() + 30
        while (not got or not reader.forgotten) and time.monotonic() < deadline:
            for records in reader.consumer.poll(timeout_ms=200).values():
                got += [r.offset for r in records]
        assert got == [0]  # tp1's record only
        assert set(reader.forgotten) == {tp0}  # the gateway is told to stop pushing tp0
