"""The asyncio SDK on the session cluster (real etcd, metadata, storage, a coordinator, a
gateway), held to the sync SDK's behavioural tests (test_client_roundtrip.py, groups/,
coordinator/test_transactional_clients.py): a round trip with keys, headers and explicit
partitions in order; the same errors for unknown topics, bad configs and bad calls; the admin
calls; two group members sharing a topic's partitions and committing; and a transaction's
commit and abort as a read_committed AIOConsumer sees them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from riverlog.client import (
    AbortableTransactionError,
    ClientClosedError,
    ClientTimeoutError,
    ConfigError,
    ConsumerRebalanceListener,
    ConsumerRecord,
    NewTopic,
    RiverlogError,
    TopicPartition,
    TransactionStateError,
)
from riverlog.client.aio import AIOAdminClient, AIOConsumer, AIOProducer
from riverlog.cluster import unique_topic_name
from riverlog.common.errors import ErrorCode
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


async def read_to_end(consumer: AIOConsumer, tps: list[TopicPartition]) -> list[ConsumerRecord]:
    """Every record up to the end offsets as the consumer sees them (the LSO under
    read_committed)."""
    consumer.assign(tps)
    ends = await consumer.end_offsets(tps)
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + WAIT_S
    while any([await consumer.position(tp) < ends[tp] for tp in tps]):
        assert time.monotonic() < deadline, "the consumer did not reach the end offsets"
        for records in (await consumer.poll(timeout_ms=200)).values():
            out.extend(records)
    return out


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


async def test_aio_errors_are_the_sync_errors(
    gateway_address: str, topic_name: str, new_topic: NewTopicFn
) -> None:
    with pytest.raises(ConfigError):
        AIOProducer({"bootstrap.servers": gateway_address, "enable.idempotence": "maybe"})
    with pytest.raises(ConfigError):
        AIOConsumer({"bootstrap.servers": gateway_address, "isolation.level": "sometimes"})
    topic = new_topic(partitions=1)
    async with aio_producer(gateway_address, max_block_ms=500) as p:
        with pytest.raises(
            ClientTimeoutError, match=f"topic '{topic_name}' not present in metadata"
        ):
            await p.send(topic_name, b"v")
        await p.send(topic, b"warm")  # metadata cached: the next send runs on the loop
        with pytest.raises(ValueError, match="partition 5"):
            p.send_nowait(topic, b"v", partition=5)
        with pytest.raises(TransactionStateError, match=r"needs transactional\.id"):
            await p.init_transactions()
    consumer = aio_consumer(gateway_address)
    with pytest.raises(RiverlogError) as info:
        consumer.subscribe([topic])
    assert info.value.code == ErrorCode.INVALID_GROUP_ID
    await consumer.close()
    with pytest.raises(ClientClosedError):
        await consumer.poll(timeout_ms=10)


async def test_aio_admin_client(gateway_address: str, topic_name: str) -> None:
    async with AIOAdminClient(bootstrap_servers=gateway_address, client_id="aio-admin") as admin:
        created = await admin.create_topics(
            [NewTopic(topic_name, 2, 1, {"retention.ms": "3600000"})]
        )
        assert created == {topic_name: None}
        with pytest.raises(RiverlogError) as info:
            await admin.create_topics([NewTopic(topic_name, 1, 1)])
        assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        listed, described = await asyncio.gather(
            admin.list_topics(), admin.describe_topics([topic_name])
        )
        assert topic_name in listed
        assert [p.partition for p in described[topic_name].partitions] == [0, 1]
        assert described[topic_name].configs["retention.ms"] == "3600000"
        assert await admin.create_partitions({topic_name: 3}) == {topic_name: None}
        assert await admin.delete_topics([topic_name]) == {topic_name: None}
        outcomes = await admin.delete_topics([topic_name], raise_on_error=False)
        assert outcomes[topic_name] is not None


@pytest.mark.slow
async def test_aio_group_members_share_partitions_and_commit(
    gateway_address: str, new_topic: NewTopicFn
) -> None:
    topic = new_topic(partitions=4)
    async with aio_producer(gateway_address) as p:
        await asyncio.gather(
            *(p.send_nowait(topic, b"%d" % i, partition=i % 4) for i in range(100))
        )
    group = unique_topic_name("aio-group")
    every = {(n, o) for n in range(4) for o in range(25)}
    read: list[set[tuple[int, int]]] = [set(), set()]
    members = [
        aio_consumer(gateway_address, group_id=group, enable_auto_commit=False) for _ in range(2)
    ]
    stop = asyncio.Event()

    assigned: list[set[TopicPartition]] = []

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_assigned(self, partitions):  # type: ignore[override]
            await asyncio.sleep(0)  # a coroutine, run on the test's loop
            assigned.append(set(partitions))

    async def member(i: int) -> None:
        c = members[i]
        c.subscribe([topic], listener=Listener() if i == 0 else None)
        while not stop.is_set():
            records = await c.poll(timeout_ms=200)
            for batch in records.values():
                read[i].update((r.partition, r.offset) for r in batch)
            if records:
                await c.commit()

    tasks = [asyncio.ensure_future(member(i)) for i in range(2)]
    try:
        deadline = time.monotonic() + WAIT_S
        while not (read[0] | read[1] >= every and all(len(m.assignment()) == 2 for m in members)):
            assert time.monotonic() < deadline, (read, [m.assignment() for m in members])
            for task in tasks:
                if task.done():
                    task.result()  # a member failed: show why
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:
        task.result()
    first, second = (m.assignment() for m in members)
    assert not first & second and len(first | second) == 4
    assert assigned and assigned[-1] <= first  # the async listener heard of its partitions
    # Each member's last commit covers what it read of the partitions it holds.
    async with AIOAdminClient(bootstrap_servers=gateway_address) as admin:
        deadline = time.monotonic() + WAIT_S
        while True:
            committed = await admin.list_group_offsets(group)
            offsets = {tp.partition: om.offset for tp, om in committed.items()}
            if offsets == dict.fromkeys(range(4), 25):
                break
            assert time.monotonic() < deadline, offsets
            await asyncio.sleep(0.2)
    for m in members:
        await m.close()


async def test_aio_transaction_commit_and_abort_as_read_committed_sees_them(
    gateway_address: str, new_topic: NewTopicFn
) -> None:
    topic = new_topic(partitions=3)
    tid = unique_topic_name("aio-txn")
    async with aio_producer(gateway_address, transactional_id=tid, linger_ms=10_000) as p:
        with pytest.raises(TransactionStateError, match="begin_transaction"):
            await p.begin_transaction()  # before init_transactions
        await p.init_transactions(timeout=60)
        with pytest.raises(TransactionStateError, match="send outside a transaction"):
            await p.send(topic, b"v")
        await p.begin_transaction()
        written = [p.send_nowait(topic, b"aborted-%d" % i, partition=i % 2) for i in range(10)]
        await p.flush(timeout=60)
        assert all(m.offset >= 0 for m in await asyncio.gather(*written))
        late = p.send_nowait(topic, b"late", partition=2)
        await p.abort_transaction(timeout=60)
        # Sent before the abort (nothing was in flight, so linger.ms did not hold it) or
        # dropped by it: either way it is part of the aborted transaction.
        (outcome,) = await asyncio.gather(late, return_exceptions=True)
        if isinstance(outcome, BaseException):
            assert isinstance(outcome, AbortableTransactionError), outcome
        await p.begin_transaction()
        kept = [p.send_nowait(topic, b"kept-%d" % i, partition=i % 3) for i in range(6)]
        await p.commit_transaction(timeout=60)  # flushes: linger.ms does not hold a commit
        assert all(m.offset >= 0 for m in await asyncio.gather(*kept))
    tps = [TopicPartition(topic, n) for n in range(3)]
    async with aio_consumer(gateway_address, isolation_level="read_uncommitted") as c:
        uncommitted = {r.value for r in await read_to_end(c, tps)}
    assert {b"aborted-%d" % i for i in range(10)} | {b"kept-0"} <= uncommitted
    async with aio_consumer(gateway_address, isolation_level="read_committed") as c:
        committed = sorted(r.value for r in await read_to_end(c, tps))
    assert committed == sorted(b"kept-%d" % i for i in range(6))


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
    async with aio_consumer(gateway_address, group_id=group) as again:
        again.subscribe([topic])
        first = await asyncio.wait_for(anext(again), WAIT_S)  # at the committed offset
        assert first.offset == 3
