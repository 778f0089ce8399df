"""`_speedups.Appender`, the C half of `send`'s append (decision 0015's addendum): it appends
only where `append_sticky` would append to the open sticky batch, leaves every other case to
it without changing anything, and leaves the accumulator exactly as `append_sticky` does. And
`_speedups.SendFast`, `Producer.send`'s common case in C: what it serves and what it hands to
the Python send."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

import pytest
from client_fakes import FakeGateway, FakeServer

from riverlog.client import Producer
from riverlog.client.errors import ClientClosedError, RecordTooLargeError
from riverlog.client.producer import accumulator
from riverlog.client.producer import producer as producer_module
from riverlog.client.producer.accumulator import RECORD_MEMORY, RecordAccumulator
from riverlog.client.producer.batch import RECORD_OVERHEAD, ProducerBatch
from riverlog.client.producer.future import RecordFuture
from riverlog.common.records.reader import iter_batches_records

pytestmark = pytest.mark.skipif(accumulator.Appender is None, reason="the C extension is not built")

TS = 1_700_000_000_000


def make(**overrides: Any) -> RecordAccumulator:
    settings: dict[str, Any] = {
        "batch_size": 1024,
        "linger_ms": 10,
        "buffer_memory": 64 * 1024,
        "max_block_ms": 50,
        "delivery_timeout_ms": 1000,
    }
    settings.update(overrides)
    return RecordAccumulator(**settings)


def state(acc: RecordAccumulator) -> list[Any]:
    """Everything an append changes, per batch, and the memory left."""
    batches = [b for parts in acc._deques.values() for dq in parts for b in dq]
    return [acc.available_memory] + [
        (b.partition, b.count, b.estimate, b.reserved, b.timestamps, b.keys, b.values, b.headers)
        for b in batches
    ]


def send(acc: RecordAccumulator, use_c: bool, ts: int, key: Any, value: Any) -> RecordFuture:
    """What Producer.send does for a record without a partition."""
    fast = acc.append_fast if use_c else None
    if fast is not None:
        future = fast("t", ts, key, value)
        if future is not None:
            return future  # type: ignore[no-any-return]
    return acc.append_sticky("t", range(3), ts, key, value)


RECORDS: list[tuple[Any, Any]] = [
    (None, b"v" * 100),
    (b"k", b"v" * 50),
    (None, None),
    (b"", b""),
    (None, bytearray(b"converted by the Python path")),
    (memoryview(b"key"), b"v"),
    (None, b"w" * 300),
    (None, b"x" * 1500),  # larger than batch.size: a batch of its own
] * 6


def test_same_batches_futures_and_memory_as_the_python_path() -> None:
    c_acc, py_acc = make(), make()
    for i, (key, value) in enumerate(RECORDS):
        # the same sticky partition choices on both sides
        accumulator.random.seed(i)
        f_c = send(c_acc, True, TS + i, key, value)
        accumulator.random.seed(i)
        f_py = send(py_acc, False, TS + i, key, value)
        assert type(f_c) is RecordFuture and f_c._index == f_py._index
        assert (f_c._result.topic, f_c._result.partition) == ("t", f_py._result.partition)
        assert state(c_acc) == state(py_acc)
    c_acc.close()  # every batch ready
    built = [b.build() for b in c_acc.drain(0.0, 10**9, set())[0]]
    values = [r.value for data in built for r in iter_batches_records(data)]
    assert sorted(values, key=repr) == sorted(
        [None if v is None else bytes(v) for _, v in RECORDS], key=repr
    )


def test_leaves_to_python_whatever_it_does_not_take() -> None:
    acc = make(batch_size=1024, buffer_memory=2 * 1024 + 4 * RECORD_MEMORY)
    fast = acc.append_fast
    assert fast is not None
    assert fast("t", TS, None, b"v") is None  # no sticky batch yet
    acc.append_sticky("t", [0], TS, None, b"v" * 100)
    batch = acc._sticky["t"]
    assert fast("t", TS, None, "not bytes") is None  # type: ignore[arg-type]
    assert fast("t", TS, 5, b"v") is None  # type: ignore[arg-type]
    assert fast("t", TS, None, bytearray(b"v")) is None  # type: ignore[arg-type]
    before = state(acc)
    too_big = b"v" * (1024 - batch.estimate - RECORD_OVERHEAD + 1)
    assert fast("t", TS, None, too_big) is None  # past batch.size
    assert state(acc) == before
    future = fast("t", TS, b"k", b"v" * 10)
    assert future is not None and future._index == 1 and future._result is batch.result
    assert batch.keys == [None, b"k"] and batch.estimate == before[1][2] + RECORD_OVERHEAD + 11
    # buffer.memory short of one record's RECORD_MEMORY: not taken (the Python path waits)
    acc._memory.available = RECORD_MEMORY - 1
    before = state(acc)
    assert fast("t", TS, None, b"v") is None and state(acc) == before
    acc._memory.available = 10 * RECORD_MEMORY
    batch.headers = [None, None]  # a record with headers came: the Python path keeps them
    assert fast("t", TS, None, b"v") is None
    batch.headers = None
    batch.closed = True  # drained or full
    assert fast("t", TS, None, b"v") is None
    assert state(acc)[1][1] == 2


def test_the_lock_is_released_whatever_the_outcome() -> None:
    acc = make()
    fast = acc.append_fast
    assert fast is not None
    acc.append_sticky("t", [0], TS, None, b"v")
    for value in (b"v", b"v" * 5000, "str"):
        fast("t", TS, None, value)  # type: ignore[arg-type]
        assert acc._lock.acquire(blocking=False)
        acc._lock.release()
    with pytest.raises(TypeError):
        fast("t", TS, None)  # type: ignore[call-arg]


def test_refuses_a_batch_type_without_slots() -> None:
    class NoSlots:
        pass

    with pytest.raises(AttributeError):
        accumulator.Appender(None, {}, 0, NoSlots, RecordFuture, 11, 144)  # type: ignore[misc]
    with pytest.raises(TypeError):
        accumulator.Appender(None, {}, 0, ProducerBatch, list, 11, 144)  # type: ignore[misc]


def test_use_compiled_off_leaves_the_python_path() -> None:
    acc = make()
    acc.use_compiled(False)
    assert acc.append_fast is None
    acc.use_compiled(True)
    assert acc.append_fast is not None


# ---- SendFast: Producer.send's common case in C ---------------------------------------------


def test_send_is_the_c_one_only_where_nothing_per_record_needs_python(fake: FakeServer) -> None:
    with Producer({"bootstrap.servers": fake.address}) as plain:
        assert type(plain.send).__name__ == "SendFast"
    with Producer({"bootstrap.servers": fake.address}, value_serializer=bytes) as serialized:
        assert type(serialized.send).__name__ != "SendFast"


def test_send_in_c_and_every_call_it_hands_to_python(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 1)
    calls: list[tuple[Any, ...]] = []
    with Producer({"bootstrap.servers": fake.address, "linger.ms": 1}) as p:
        python_send = p._send_py

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls.append((args, kwargs))
            return python_send(*args, **kwargs)

        p.send("t", b"warm").result(10)  # metadata cached
        p.send = producer_module.SendFast(  # type: ignore[method-assign]
            p._accumulator.append_fast, p._topics, counted, p._max_record, False
        )
        # The sender drains nothing while the gateway's throttle lasts: the batch stays open.
        p._conn.throttle.record(p._conn._current, 60_000)
        opened = p.send("t", b"a0")  # the warm-up's batch is gone: Python opens a new one
        assert len(calls) == 1
        calls.clear()
        served_in_c = [
            p.send("t", b"a"),
            p.send("t", value=b"b"),
            p.send("t", None),
            p.send("t", b"c", None, None, None, None),  # as the asyncio producer calls it
        ]
        assert calls == []
        assert [f._index for f in served_in_c] == [1, 2, 3, 4]
        handed = [
            p.send("t", b"d", b"key"),  # a key: murmur2 partitioning, in Python
            p.send("t", b"e", headers=[("h", b"1")]),
            p.send("t", b"f", partition=0),
            p.send("t", b"g", timestamp_ms=5),
            p.send("t", bytearray(b"h")),
            p.send("t", b"i", callback=lambda m, e: None),
            p.send("t", b"j", None, [("h", None)]),
        ]
        assert len(calls) == len(handed)
        with pytest.raises(TypeError):
            p.send("t", "not bytes")
        with pytest.raises(RecordTooLargeError):
            p.send("t", b"x" * (p._max_record + 1))
        p._topics["t"] = p._topics["t"]._replace(expires_at=0.0)  # stale: Python refreshes
        calls.clear()
        handed.append(p.send("t", b"k"))
        assert len(calls) == 1
        p._conn.throttle._until.clear()
        p.flush(10)
    metas = [f.result(0) for f in [opened, *served_in_c, *handed]]
    assert [m.offset for m in metas] == list(range(1, 1 + len(metas)))
    values = [r.value for r in iter_batches_records(gateway.records("t", 0))]
    assert values[1:8] == [b"a0", b"a", b"b", None, b"c", b"d", b"e"]
    assert all(abs(m.timestamp - time.time() * 1000) < 60_000 for m in metas[:5])


def test_send_after_close_raises_as_the_python_send(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    p = Producer({"bootstrap.servers": fake.address})
    p.send("t", b"warm").result(10)
    p.close()
    with pytest.raises(ClientClosedError):
        p.send("t", b"late")


def test_the_memory_counter_moves_with_use_compiled() -> None:
    """buffer.memory's free bytes live in the Appender while it is used, and carry over exactly
    when the accumulator switches between it and the Python path."""
    acc = make()
    if acc.append_fast is None:
        pytest.skip("the C extension is not built")
    send(acc, True, TS, None, b"v")  # the first one opens the batch (and reserves for it)
    total = acc.available_memory
    for _ in range(5):
        send(acc, True, TS, None, b"v")
    assert acc.available_memory == total - 5 * RECORD_MEMORY
    acc.use_compiled(False)
    assert acc.append_fast is None and acc.available_memory == total - 5 * RECORD_MEMORY
    send(acc, False, TS, None, b"v")
    acc.use_compiled(True)
    assert acc.available_memory == total - 6 * RECORD_MEMORY
    send(acc, True, TS, None, b"v")
    assert acc.available_memory == total - 7 * RECORD_MEMORY


def test_the_cached_sticky_batch_follows_every_change_of_the_sticky_dict() -> None:
    """The Appender remembers the last topic's sticky batch; any change to the dict (a new
    batch, another partition, a removal) makes it look again."""
    acc = make()
    fast = acc.append_fast
    if fast is None:
        pytest.skip("the C extension is not built")
    acc.append_sticky("t", [0], TS, None, b"v")
    first = acc._sticky["t"]
    assert fast("t", TS, None, b"v")._result is first.result
    acc.append_sticky("u", [0, 1], TS, None, b"v")  # another topic's batch: the dict changed
    assert fast("t", TS, None, b"v")._result is first.result
    # a new open batch for "t" put in place (as a sticky partition change does)
    acc._sticky["t"] = other = ProducerBatch("t", 1, 0.0, batch_size=1024)
    future = fast("t", TS, None, b"w")
    assert future._result is other.result and other.values == [b"w"]
    assert first.count == 3
    del acc._sticky["t"]
    assert fast("t", TS, None, b"v") is None
    acc._sticky["t"] = other
    assert fast("t", TS, None, b"v")._index == 1


def test_a_lock_held_elsewhere_is_waited_for_and_every_append_releases_it() -> None:
    """The Appender takes a free lock without calling lock.acquire(); one held by another
    thread it waits for (the append happens once it is released), and it always gives the
    lock back (lock.locked() is what threading sees)."""
    acc = make()
    fast = acc.append_fast
    if fast is None:
        pytest.skip("the C extension is not built")
    acc.append_sticky("t", [0], TS, None, b"v")
    assert fast("t", TS, None, b"v") is not None and not acc._lock.locked()
    assert fast("t", TS, None, b"x" * 2000) is None and not acc._lock.locked()
    done: list[Any] = []
    with acc._lock:
        appender = threading.Thread(target=lambda: done.append(fast("t", TS, None, b"w")))
        appender.start()
        appender.join(0.2)
        assert not done  # waiting for the lock
        assert acc._lock.locked()
    appender.join(10)
    assert done and done[0]._index == 2 and not acc._lock.locked()
    # threading's own use of the lock still works after the C path took and released it
    assert acc._lock.acquire(blocking=False)
    acc._lock.release()


def test_an_append_that_runs_out_of_memory_changes_nothing() -> None:
    """A MemoryError anywhere in the C append (each allocation made to fail in turn with
    CPython's _testcapi.set_nomemory) leaves the batch and buffer.memory's counter as they
    were: the counter is charged only together with the batch's `reserved`, which gives it
    back, so no failure leaks budget; and the batch's columns always agree with its count."""
    testcapi = pytest.importorskip("_testcapi")
    acc = make(batch_size=1 << 20, buffer_memory=1 << 24)
    fast = acc.append_fast
    assert fast is not None
    acc.append_sticky("t", [0], TS, None, b"v" * 300)  # estimate and reserved: allocated ints
    batch = acc._sticky["t"]
    total = acc._total_memory
    failed = 0
    gc.disable()  # no collection inside the window: only the append allocates
    try:
        for nth in range(40):
            before = state(acc)
            testcapi.set_nomemory(nth, nth + 1)  # only the nth allocation from here fails
            try:
                future = fast("t", TS, None, b"v" * 300)
            except MemoryError:
                future = None
            finally:
                testcapi.remove_mem_hooks()
            if future is None:
                failed += 1
                assert state(acc) == before
            else:
                assert future._index == batch.count - 1
            assert batch.count == len(batch.timestamps) == len(batch.keys) == len(batch.values)
            assert acc.available_memory + batch.reserved == total
    finally:
        gc.enable()
    assert failed > 0
