"""`_speedups.Appender`, the C half of `send`'s append (decision 0015's addendum): it appends
only where `append_sticky` would append to the open sticky batch, leaves every other case to
it without changing anything, and leaves the accumulator exactly as `append_sticky` does."""

from __future__ import annotations

from typing import Any

import pytest

from riverlog.client.producer import accumulator
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
    acc._available = RECORD_MEMORY - 1
    before = state(acc)
    assert fast("t", TS, None, b"v") is None and state(acc) == before
    acc._available = 10 * RECORD_MEMORY
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
        accumulator.Appender(None, {}, {}, NoSlots, RecordFuture, 11, 144)  # type: ignore[misc]
    with pytest.raises(TypeError):
        accumulator.Appender(None, {}, {}, ProducerBatch, list, 11, 144)  # type: ignore[misc]


def test_use_compiled_off_leaves_the_python_path() -> None:
    acc = make()
    acc.use_compiled(False)
    assert acc.append_fast is None
    acc.use_compiled(True)
    assert acc.append_fast is not None
