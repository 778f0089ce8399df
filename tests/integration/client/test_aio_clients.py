"""What only the asyncio SDK has, on the session cluster (real etcd, metadata, storage, a
coordinator, a gateway): `send_nowait` futures gathered keep the order of the calls, `async for`
hands out every record once, in order, a `commit()` after it counts only the records handed out,
and an `async def` rebalance listener is awaited on the application's loop.

The sync SDK's behavioural tests (test_client_roundtrip.py, groups/test_groups.py,
coordinator/test_transactional_clients.py, idempotence/, acls/) run against the asyncio SDK
too, through the `sdk` fixture (sdk_flavours.py): configurations, errors, ordering, groups,
commits, seeks and transactions are checked there, once for both SDKs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from riverlog.client import (
    ConsumerRebalanceListener,
    ConsumerRecord,
    TopicPartition,
)
from riverlog.client.aio import AIOConsumer, AIOProducer
from riverlog.cluster import unique_topic_name
from riverlog.common.partitioner import partition_for_key

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

NewTopicFn = Callable[..., str]
BOUNDED = {"delivery.timeout.ms": 60_000, "request.timeout.ms": 20_000}
WAIT_S = 120


def aio_producer(address: str, **config: object) -> AIOProducer:
    return AIOProducer({"bootstrap.servers": address, **BOUNDED}, **config)


def aio_consumer(address: str, **config: object) -> AIOConsumer:
    settings = {"auto.offset.reset": "earliest", "fetch.max.wait.ms": 100, **config}
    return AIOConsumer({"bootstrap.servers": address, **settings})


async def test_aio_round_trip_with_keys_headers_and_partitions_in_order(
    gateway_address: str, new_topic: NewTopicFn
) -> None:
    topic = new_topic(partitions=3)
    async with aio_producer(gateway_address, linger_ms=5) as p:
        keyed = [
            p.send_nowait(topic, b"v%d" % i, key=b"k%d" % (i % 6), headers=[("i", b"%d" % i)])
            for i in range(60)
        ]
        pinned = [p.send_nowait(topic, b"p%d" % i, partition=2) for i in range(20)]
        keyed_md = await asyncio.gather(*keyed)
        pinned_md = await asyncio.gather(*pinned)
        last = await p.send(topic, None, key=b"tombstone", partition=1)
    for i, md in enumerate(keyed_md):
        assert md.partition == partition_for_key(b"k%d" % (i % 6), 3)
    assert [md.partition for md in pinned_md] == [2] * 20
    offsets_2 = [md.offset for md in pinned_md]
    assert offsets_2 == sorted(offsets_2)  # in call order
    assert last.serialized_value_size == -1

    tps = [TopicPartition(topic, n) for n in range(3)]
    async with aio_consumer(gateway_address) as c:
        c.assign(tps)
        got: list[ConsumerRecord] = []
        async for record in c:
            got.append(record)
            if len(got) == 81:
                break
    by_partition: dict[int, list[ConsumerRecord]] = {}
    for record in got:
        by_partition.setdefault(record.partition, []).append(record)
    for records in by_partition.values():
        assert [r.offset for r in records] == list(range(len(records)))
    sent_order = [r.value for r in got if r.value is not None and r.value.startswith(b"v")]
    for key in range(6):  # one key, one partition: the order of the sends
        values = [v for v in sent_order if int(v[1:]) % 6 == key]
        assert values == sorted(values, key=lambda v: int(v[1:]))
    headers = {r.value: r.headers for r in got if r.value and r.value.startswith(b"v")}
    assert headers[b"v7"] == [("i", b"7")]
    assert [r.value for r in by_partition[2] if r.value and r.value.startswith(b"p")] == [
        b"p%d" % i for i in range(20)
    ]
    assert any(r.key == b"tombstone" and r.value is None for r in by_partition[1])


async def test_aio_commit_counts_only_the_records_handed_out(
    gateway_address: str, new_topic: NewTopicFn
) -> None:
    topic = new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    async with aio_producer(gateway_address) as p:
        await p.send_many(topic, [b"%d" % i for i in range(10)], partition=0)
    group = unique_topic_name("aio-commit")
    async with aio_consumer(gateway_address, group_id=group, enable_auto_commit=False) as c:
        c.assign([tp])
        seen = []
        async for record in c:  # the poll behind it fetched more than these three
            seen.append(record.offset)
            if len(seen) == 3:
                break
        await c.commit()
        assert await c.position(tp) == 3
        committed = await c.committed([tp])
        assert committed[tp] is not None and committed[tp].offset == 3
    assigned: list[set[TopicPartition]] = []

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_assigned(self, partitions):  # type: ignore[override]
            await asyncio.sleep(0)  # a coroutine, awaited on the test's loop
            assigned.append(set(partitions))

    async with aio_consumer(gateway_address, group_id=group) as again:
        again.subscribe([topic], listener=Listener())
        first = await asyncio.wait_for(anext(again), WAIT_S)  # at the committed offset
        assert first.offset == 3
        assert assigned == [{tp}]  # awaited inside the poll that joined the group
