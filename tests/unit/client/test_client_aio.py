"""The asyncio SDK (`riverlog.client.aio`) against the in-process fake gateway, and its bridging
pieces on their own: a batch's outcome set on another thread resolves every record's asyncio
future (one registration per batch), cancellation and a closed loop are harmless; the producer's
sends keep call order across the worker thread, never block the event loop, survive cancellation
of the awaiting task and complete on close; the consumer loses no record to a cancelled poll and
hands records out one at a time; the admin client has every AdminClient method."""

from __future__ import annotations

import asyncio
import inspect
import threading

import pytest
from client_fakes import FakeGateway, FakeServer

from riverlog.client import (
    AdminClient,
    ClientClosedError,
    ClientTimeoutError,
    ConfigError,
    ConsumerRebalanceListener,
    NewTopic,
    Producer,
    RecordMetadata,
    RiverlogError,
    TopicPartition,
)
from riverlog.client.aio import AIOAdminClient, AIOConsumer, AIOProducer
from riverlog.client.aio._delivery import DeliveryBridge
from riverlog.client.aio._lane import Lane
from riverlog.client.aio.consumer import _LoopListener
from riverlog.client.producer.future import BatchResult, RecordFuture
from riverlog.common.partitioner import partition_for_key
from riverlog.common.records.reader import iter_batches_records

TP0 = TopicPartition("t", 0)


def batch_of(n: int) -> tuple[BatchResult, list[RecordFuture]]:
    result = BatchResult("t", 3)
    result.set_records([1000 + i for i in range(n)], [None] * n, [b"v"] * n)
    return result, [RecordFuture((result, i)) for i in range(n)]


def aio_producer(fake: FakeServer, **config: object) -> AIOProducer:
    return AIOProducer({"bootstrap.servers": fake.address, "linger.ms": 1}, **config)


def aio_consumer(fake: FakeServer, **config: object) -> AIOConsumer:
    return AIOConsumer({"bootstrap.servers": fake.address, "fetch.max.wait.ms": 10}, **config)


def stored_records(gateway: FakeGateway, topic: str) -> list:
    return list(iter_batches_records(gateway.records(topic, 0)))


def produce(fake: FakeServer, n: int) -> None:
    with Producer(bootstrap_servers=fake.address, linger_ms=0) as p:
        for i in range(n):
            p.send("t", b"v%d" % i, partition=0)


# ---- the bridge from the sender thread to the loop --------------------------------------------


async def test_a_batch_completed_on_another_thread_resolves_each_record() -> None:
    bridge = DeliveryBridge(asyncio.get_running_loop())
    result, futures = batch_of(3)
    waiters = [bridge.watch(f) for f in futures]
    assert bridge.pending == 1  # one registration for the batch, not one per record
    threading.Thread(target=result.complete, args=(40, -1, None)).start()
    got = await asyncio.gather(*waiters)
    assert got == [RecordMetadata("t", 3, 40 + i, 1000 + i, -1, 1) for i in range(3)]
    assert bridge.pending == 0


async def test_a_failed_batch_raises_its_error_in_every_waiter() -> None:
    bridge = DeliveryBridge(asyncio.get_running_loop())
    result, futures = batch_of(2)
    waiters = [bridge.watch(f) for f in futures]
    error = RiverlogError("boom")
    threading.Thread(target=result.complete, args=(-1, -1, error)).start()
    for waiter in waiters:
        with pytest.raises(RiverlogError, match="boom"):
            await waiter


async def test_a_cancelled_waiter_is_skipped_and_an_already_complete_batch_resolves() -> None:
    bridge = DeliveryBridge(asyncio.get_running_loop())
    result, futures = batch_of(2)
    first, second = bridge.watch(futures[0]), bridge.watch(futures[1])
    first.cancel()
    result.complete(7, 5, None)
    assert (await second).offset == 8
    assert first.cancelled()
    done = bridge.watch(futures[0])  # after completion: resolved at the next loop turn
    assert (await done) == RecordMetadata("t", 3, 7, 5, -1, 1)


def test_completion_after_the_loop_closed_does_not_raise() -> None:
    loop = asyncio.new_event_loop()
    bridge = DeliveryBridge(loop)
    result, futures = batch_of(1)
    loop.run_until_complete(asyncio.sleep(0))
    bridge.watch(futures[0])
    loop.close()
    assert result.complete(1, -1, None)  # the sender thread's call: no exception escapes


async def test_lane_runs_in_order_and_knows_when_idle() -> None:
    lane = Lane("test-lane")
    release = threading.Event()
    seen: list[int] = []
    try:
        first = asyncio.ensure_future(lane.run(lambda: (release.wait(5), seen.append(1))))
        second = asyncio.ensure_future(lane.run(lambda: seen.append(2)))
        await asyncio.sleep(0)
        assert not lane.idle
        release.set()
        await asyncio.gather(first, second)
        assert seen == [1, 2]
        assert lane.idle
    finally:
        lane.shutdown()


async def test_lane_is_not_idle_while_a_call_before_a_cancelled_one_runs() -> None:
    """A cancelled call is done at once; the calls before it are not (the asyncio producer
    appends on the loop only when the lane is idle: idle too early, a record would pass
    one still being appended on the worker)."""
    lane = Lane("test-lane")
    release = threading.Event()
    try:
        first = asyncio.ensure_future(lane.run(lambda: release.wait(5)))
        second = asyncio.ensure_future(lane.run(lambda: None))
        await asyncio.sleep(0)
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        assert not lane.idle  # the first call still runs
        release.set()
        assert await first
        assert lane.idle
    finally:
        release.set()
        lane.shutdown()


# ---- AIOProducer --------------------------------------------------------------------------------


async def test_send_returns_metadata_and_partitions_as_the_sync_producer(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 4)
    async with aio_producer(fake) as p:
        metadata = await p.send("t", b"v", key=b"key-1", headers=[("h", b"1")])
        assert metadata.partition == partition_for_key(b"key-1", 4)
        assert (metadata.topic, metadata.offset, metadata.serialized_value_size) == ("t", 0, 1)
        futures = [p.send_nowait("t", b"%d" % i, partition=2) for i in range(50)]
        offsets = [m.offset for m in await asyncio.gather(*futures)]
        assert offsets == list(range(50))
        assert await p.partitions_for("t") == [0, 1, 2, 3]


async def test_bad_arguments_and_configs_raise_the_sync_errors(fake: FakeServer) -> None:
    with pytest.raises(ConfigError):
        AIOProducer({"bootstrap.servers": fake.address, "acks": "most"})
    with pytest.raises(ConfigError):
        AIOConsumer({"bootstrap.servers": fake.address, "no.such.key": 1})
    async with aio_producer(fake, max_block_ms=200) as p:
        with pytest.raises(ClientTimeoutError, match="not present in metadata after 200 ms"):
            await p.send("nope", b"v")


async def test_waiting_for_metadata_blocks_neither_the_loop_nor_the_order(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    async def create_later() -> None:
        await asyncio.sleep(0.2)
        gateway.create("late", 1)

    async with aio_producer(fake, max_block_ms=30_000) as p:
        # The first send waits for metadata on the worker thread; the ones behind it follow it.
        futures = [p.send_nowait("late", b"%d" % i) for i in range(20)]
        # The topic is created by a task on this loop: were the loop blocked by the sends,
        # it never would be, and they would fail after max.block.ms.
        creator = asyncio.ensure_future(create_later())
        got = await asyncio.gather(*futures)
        await creator
        assert [m.offset for m in got] == list(range(20))
        assert [r.value for r in stored_records(gateway, "late")] == [b"%d" % i for i in range(20)]


async def test_accept_raises_what_the_sync_send_raises_and_returns_the_delivery(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    """`_accept` (the sync suite's way in, decision 0041): append errors raise from the call,
    on the loop's path and the worker's alike; delivery comes in the future it returns."""
    async with aio_producer(fake, max_block_ms=200) as p:
        with pytest.raises(ClientTimeoutError, match="not present in metadata"):
            await p._accept("nope", b"v")  # waited on the worker
        gateway.create("t", 1)
        first = await p._accept("t", b"a")  # metadata fetched on the worker
        second = await p._accept("t", b"b")  # appended on the loop
        with pytest.raises(ValueError, match="partition 5"):
            await p._accept("t", b"c", partition=5)
        assert [(await f).offset for f in (first, second)] == [0, 1]


async def test_cancelling_the_awaiting_task_does_not_take_the_record_back(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 1)
    async with aio_producer(fake, linger_ms=200) as p:
        task = asyncio.ensure_future(p.send("t", b"kept"))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await p.flush()
    assert b"kept" in gateway.records("t", 0)


async def test_close_delivers_pending_then_refuses(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    p = aio_producer(fake, linger_ms=60_000)
    futures = [p.send_nowait("t", b"v") for _ in range(5)]
    await p.close()
    assert [(await f).offset for f in futures] == list(range(5))
    with pytest.raises(ClientClosedError):
        await p.send("t", b"v")
    with pytest.raises(ClientClosedError):
        await p.send("never-seen", b"v")
    await p.flush()  # nothing left: returns
    await p.close()  # idempotent


async def test_close_with_timeout_fails_what_cannot_be_sent(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    from riverlog.common.errors import ErrorCode

    gateway.create("t", 1)
    gateway.produce_errors.extend([ErrorCode.NOT_LEADER_OR_FOLLOWER] * 10_000)
    p = aio_producer(fake, retry_backoff_ms=20, retry_backoff_max_ms=20)
    future = p.send_nowait("t", b"v")
    await p.close(timeout=0.3)
    with pytest.raises(ClientClosedError):
        await future


# ---- AIOConsumer --------------------------------------------------------------------------------


async def test_poll_and_iteration_hand_out_every_record_once(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 1)
    produce(fake, 30)
    async with aio_consumer(fake, auto_offset_reset="earliest", max_poll_records=7) as c:
        c.assign([TP0])
        first = await c.poll(timeout_ms=5000, max_records=3)
        assert [r.offset for r in first[TP0]] == [0, 1, 2]
        seen = [await anext(c)]
        assert seen[0].offset == 3
        assert await c.position(TP0) == 4  # records polled but not handed out do not count
        async for record in c:
            seen.append(record)
            if record.offset == 29:
                break
        assert [r.offset for r in seen] == list(range(3, 30))


async def test_a_cancelled_poll_loses_no_record(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    produce(fake, 200)
    async with aio_consumer(fake, auto_offset_reset="earliest", max_poll_records=5) as c:
        c.assign([TP0])
        offsets: list[int] = []
        for round_ in range(400):
            task = asyncio.ensure_future(c.poll(timeout_ms=50))
            if round_ % 2:
                await asyncio.sleep(0.001 * (round_ % 5))
                task.cancel()
            try:
                offsets += [r.offset for r in (await task).get(TP0, [])]
            except asyncio.CancelledError:
                pass
            if len(offsets) >= 200:
                break
        assert offsets == list(range(200))


async def test_closed_consumer_raises_and_iteration_ends(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 1)
    c = aio_consumer(fake)
    c.assign([TP0])
    await c.close()
    with pytest.raises(ClientClosedError):
        await c.poll()
    assert [r async for r in c] == []
    await c.close()  # idempotent


async def test_async_listener_runs_on_the_loop_while_the_worker_waits() -> None:
    loop = asyncio.get_running_loop()
    calls: list[tuple[str, set[TopicPartition], bool]] = []

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_assigned(self, partitions):  # type: ignore[override]
            calls.append(("assigned", set(partitions), asyncio.get_running_loop() is loop))

        async def on_partitions_revoked(self, partitions):  # type: ignore[override]
            calls.append(("revoked", set(partitions), asyncio.get_running_loop() is loop))

    adapter = _LoopListener(Listener(), loop)
    await asyncio.to_thread(adapter.on_partitions_assigned, {TP0})
    await asyncio.to_thread(adapter.on_partitions_lost, {TP0})  # Kafka's default: revoked
    assert calls == [("assigned", {TP0}, True), ("revoked", {TP0}, True)]


# ---- AIOAdminClient -----------------------------------------------------------------------------


def test_admin_client_has_every_admin_method_as_a_coroutine() -> None:
    names = {n for n, v in inspect.getmembers(AdminClient) if not n.startswith("_") and callable(v)}
    for name in names:
        assert inspect.iscoroutinefunction(getattr(AIOAdminClient, name)), name


async def test_admin_calls_through_the_asyncio_client(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    async with AIOAdminClient({"bootstrap.servers": fake.address}) as admin:
        await admin.create_topics([NewTopic("made", num_partitions=2, replication_factor=1)])
        assert "made" in await admin.list_topics()
    with pytest.raises(ClientClosedError):
        await admin.list_topics()


async def test_send_many_awaits_every_record_in_order(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 2)
    async with aio_producer(fake, batch_size=2000) as p:
        first = p.send_nowait("t", b"before", partition=1)
        got = await p.send_many("t", [b"%d" % i for i in range(500)], partition=1)
        after = await p.send("t", b"after", partition=1)
        assert (await first).offset == 0
        assert [m.offset for m in got] == list(range(1, 501))
        assert after.offset == 501
        with pytest.raises(ValueError, match="keys for"):
            await p.send_many("t", [b"a"], [b"k1", b"k2"])
