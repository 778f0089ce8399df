"""RecordAccumulator: batching by batch.size and linger.ms, drain limits and ordering, retries
at the front, delivery expiry, sticky partitioning, and bounded buffer.memory with back pressure
(an append blocks, then fails after max.block.ms; freeing memory unblocks it)."""

from __future__ import annotations

import math
import threading

import pytest

from riverlog.client.errors import ClientClosedError, ClientTimeoutError, RecordTooLargeError
from riverlog.client.producer.accumulator import RECORD_MEMORY, RecordAccumulator
from riverlog.common.records.reader import iter_batches_records

VALUE = b"v" * 100


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(clock: Clock | None = None, **overrides: int) -> tuple[RecordAccumulator, list[int]]:
    wakeups: list[int] = []
    settings = {
        "batch_size": 1024,
        "linger_ms": 10,
        "buffer_memory": 64 * 1024,
        "max_block_ms": 50,
        "delivery_timeout_ms": 1000,
    }
    settings.update(overrides)
    acc = RecordAccumulator(**settings, wakeup=lambda: wakeups.append(1), clock=clock or Clock())
    return acc, wakeups


def fill(acc: RecordAccumulator, n: int, partition: int = 0, topic: str = "t") -> list:
    return [
        acc.append(topic, partition, 1_700_000_000_000 + i, None, VALUE, None) for i in range(n)
    ]


def test_records_share_a_batch_until_batch_size() -> None:
    clock = Clock()
    acc, wakeups = make(clock)
    futures = fill(acc, 20)  # ~110 bytes each: 1024-byte batches hold 8
    batches, _ = acc.drain(clock.now, 10**6, set())
    # Two full batches are ready at once; the open third waits for linger.ms.
    assert [b.count for b in batches] == [8, 8]
    assert all(b.size <= 1024 for b in batches)
    assert len(wakeups) == 3  # one per new batch, not per record
    assert [f._index for f in futures[:9]] == [0, 1, 2, 3, 4, 5, 6, 7, 0]


def test_linger_makes_a_partial_batch_ready() -> None:
    clock = Clock()
    acc, _ = make(clock)
    fill(acc, 3)
    batches, next_check = acc.drain(clock.now, 10**6, set())
    assert batches == [] and next_check == pytest.approx(clock.now + 0.010)
    clock.now += 0.011
    batches, _ = acc.drain(clock.now, 10**6, set())
    assert [b.count for b in batches] == [3]
    records = list(iter_batches_records(batches[0].build()))
    assert [r.offset for r in records] == [0, 1, 2] and records[0].value == VALUE


def test_flush_makes_everything_ready_at_once() -> None:
    clock = Clock()
    acc, _ = make(clock)
    fill(acc, 2, partition=0)
    fill(acc, 2, partition=1)
    results = acc.begin_flush()
    assert len(results) == 2
    batches, _ = acc.drain(clock.now, 10**6, set())
    acc.end_flush()
    assert sorted(b.partition for b in batches) == [0, 1]


def test_drain_respects_max_bytes_but_always_takes_one() -> None:
    clock = Clock()
    acc, _ = make(clock)
    for p in range(4):
        fill(acc, 8, partition=p)
    clock.now += 1
    first, _ = acc.drain(clock.now, 2000, set())
    assert len(first) == 2
    rest, _ = acc.drain(clock.now, 1, set())
    assert len(rest) == 1  # one batch even if it alone is over the limit


def test_muted_partitions_are_skipped() -> None:
    clock = Clock()
    acc, _ = make(clock)
    fill(acc, 1, partition=0)
    fill(acc, 1, partition=1)
    clock.now += 1
    batches, _ = acc.drain(clock.now, 10**6, {("t", 0)})
    assert [b.partition for b in batches] == [1]


def test_reenqueued_batch_goes_first_after_its_backoff() -> None:
    clock = Clock()
    acc, _ = make(clock)
    fill(acc, 9)  # the ninth record closes a full batch of eight
    first, _ = acc.drain(clock.now, 10**6, set())
    assert len(first) == 1
    fill(acc, 8)  # seven fill the open batch, the eighth opens another
    acc.reenqueue(first[0], clock.now + 0.1)
    batches, next_check = acc.drain(clock.now, 10**6, set())
    assert batches == [] and next_check == pytest.approx(clock.now + 0.1)
    clock.now += 0.2
    batches, _ = acc.drain(clock.now, 10**6, set())
    assert batches[0] is first[0] and [b.count for b in batches] == [8, 8, 1]


def test_batches_put_back_keep_creation_order_whatever_request_came_back_first() -> None:
    """Two requests of one partition in flight (F2 then F3) both put back, F2's answer first:
    F3's batches must not go before F2's (a producer without idempotence would reorder)."""
    clock = Clock()
    acc, _ = make(clock)
    fill(acc, 8 * 4 + 1)  # four full batches and an open one
    clock.now += 1
    f2 = acc.drain(clock.now, 2 * 1024, set())[0][:2]
    f3 = acc.drain(clock.now, 2 * 1024, set())[0][:2]
    assert len(f2) == len(f3) == 2
    for batch in f2 + f3:  # the order the sender puts them back in
        acc.reenqueue(batch, clock.now)
    batches, _ = acc.drain(clock.now, 10**6, set())
    assert batches[:4] == f2 + f3 and len(batches) == 5
    for batch in [*reversed(f3), *reversed(f2)]:  # now F3's first, each group in reverse
        acc.reenqueue(batch, clock.now)
    batches, _ = acc.drain(clock.now, 10**6, set())
    assert batches[:4] == f2 + f3


def test_capacity_limits_new_batches_and_a_batch_holding_a_sequence_goes_alone() -> None:
    """The idempotent producer's drain: `capacity` counts batches that get a new sequence; a
    batch that holds one is in its window already (not counted) and travels alone, while a
    retried batch without a sequence (its sequences were rewritten) is counted and alone."""
    clock = Clock()
    acc, _ = make(clock)
    fill(acc, 8 * 4)  # four full batches
    clock.now += 1
    room = {("t", 0): 2}
    first, _ = acc.drain(clock.now, 10**6, set(), room.__getitem__)
    assert len(first) == 2
    held, rewritten = first
    held.base_sequence, held.attempts = 0, 1
    rewritten.attempts = 1  # its sequence was taken back (base_sequence -1)
    acc.reenqueue(rewritten, clock.now)
    acc.reenqueue(held, clock.now)
    room[("t", 0)] = 0
    batches, _ = acc.drain(clock.now, 10**6, set(), room.__getitem__)
    assert batches == [held]  # no room needed, and alone
    batches, _ = acc.drain(clock.now, 10**6, set(), room.__getitem__)
    assert batches == []  # no room for a batch that needs a sequence
    room[("t", 0)] = 5
    batches, _ = acc.drain(clock.now, 10**6, set(), room.__getitem__)
    assert batches == [rewritten]  # a retry: alone
    batches, _ = acc.drain(clock.now, 10**6, set(), room.__getitem__)
    assert len(batches) == 2


def test_expire_takes_batches_past_delivery_timeout() -> None:
    clock = Clock()
    acc, _ = make(clock, linger_ms=10_000, delivery_timeout_ms=1000)
    fill(acc, 2)
    assert acc.expire(clock.now + 0.5) == []
    expired = acc.expire(clock.now + 1.0)
    assert [b.count for b in expired] == [2]
    assert not acc.has_queued()


def test_sticky_partition_until_its_batch_fills() -> None:
    clock = Clock()
    acc, _ = make(clock)
    parts = [acc.append_sticky("t", range(4), 0, None, VALUE, None)._result.partition
             for _ in range(8)]  # fmt: skip
    assert len(set(parts)) == 1  # one batch's worth stays on one partition
    ninth = acc.append_sticky("t", range(4), 0, None, VALUE, None)._result.partition
    assert ninth != parts[0]  # the batch filled up: move on
    batches, _ = acc.drain(clock.now, 10**6, set())
    assert [(b.partition, b.count) for b in batches] == [(parts[0], 8)]


def test_sticky_moves_on_once_its_batch_is_sent() -> None:
    clock = Clock()
    acc, _ = make(clock)
    first = acc.append_sticky("t", range(3), 0, None, VALUE, None)._result.partition
    clock.now += 1
    acc.drain(clock.now, 10**6, set())
    second = acc.append_sticky("t", range(3), 0, None, VALUE, None)._result.partition
    assert second != first


def test_sticky_only_uses_available_partitions() -> None:
    acc, _ = make()
    seen = {acc.append_sticky("t", [2], 0, None, VALUE, None)._result.partition for _ in range(30)}
    assert seen == {2}


def test_buffer_full_blocks_then_times_out() -> None:
    full = 1024 + 8 * RECORD_MEMORY  # a batch's reservation and its records' Python cost
    acc, wakeups = make(buffer_memory=2 * full, batch_size=1024, max_block_ms=50)
    fill(acc, 8, partition=0)
    fill(acc, 8, partition=1)  # both batches' reservations taken
    assert acc.available_memory == 0
    before = len(wakeups)
    with pytest.raises(ClientTimeoutError, match=r"buffer\.memory within max\.block\.ms \(50 ms\)"):
        fill(acc, 1, partition=2)
    assert len(wakeups) > before  # the sender was told every batch is ready
    assert acc.available_memory == 0  # nothing leaked


def test_freeing_memory_unblocks_a_waiting_append() -> None:
    clock = Clock()
    full = 1024 + 8 * RECORD_MEMORY
    acc, _ = make(clock, buffer_memory=full, batch_size=1024, max_block_ms=30_000)
    fill(acc, 8)
    assert acc.available_memory == 0
    done = threading.Event()
    errors: list[BaseException] = []

    def blocked_send() -> None:
        try:
            fill(acc, 1, partition=1)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
        done.set()

    thread = threading.Thread(target=blocked_send)
    thread.start()
    assert not done.wait(0.05)  # blocked on memory
    batches, _ = acc.drain(clock.now, 10**6, set())  # exhausted: the full batch is ready
    assert len(batches) == 1
    acc.release(batches[0])
    assert done.wait(10)
    thread.join(10)
    assert errors == []
    assert acc.available_memory == full - (1024 + RECORD_MEMORY)  # the new batch, one record


def test_record_larger_than_buffer_memory_is_refused() -> None:
    acc, _ = make(buffer_memory=2048)
    with pytest.raises(RecordTooLargeError):
        acc.append("t", 0, 0, None, b"x" * 4096, None)
    assert acc.available_memory == 2048


def test_bad_record_type_frees_its_reservation() -> None:
    acc, _ = make()
    with pytest.raises(TypeError):
        acc.append("t", 0, 0, None, "text", None)  # type: ignore[arg-type]
    assert acc.available_memory == 64 * 1024
    fill(acc, 1)  # the accumulator still works


class FailingClock(Clock):
    """A clock that raises while `failing`: a failure (a MemoryError, a KeyboardInterrupt)
    while a new batch is being opened, after its memory was reserved."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    def __call__(self) -> float:
        if self.failing:
            raise MemoryError
        return self.now


def test_a_failure_while_opening_a_batch_gives_its_memory_back() -> None:
    clock = FailingClock()
    acc, _ = make(clock)
    clock.failing = True
    with pytest.raises(MemoryError):
        acc.append("t", 0, 0, None, VALUE, None)
    assert acc.available_memory == 64 * 1024
    clock.failing = False
    fill(acc, 8)  # a full batch (~110 bytes each, 1024-byte batches)
    charged = acc.available_memory
    clock.failing = True
    with pytest.raises(MemoryError):  # the open batch is full: a new one would open
        fill(acc, 1)
    assert acc.available_memory == charged
    clock.failing = False
    fill(acc, 1)  # the accumulator still works


def test_close_refuses_appends_and_readies_batches() -> None:
    clock = Clock()
    acc, _ = make(clock, linger_ms=60_000)
    fill(acc, 1)
    results = acc.close()
    assert len(results) == 1
    with pytest.raises(ClientClosedError):
        fill(acc, 1)
    batches, _ = acc.drain(clock.now, 10**6, set())
    assert len(batches) == 1


def test_release_returns_memory_and_completes_tracking() -> None:
    clock = Clock()
    acc, _ = make(clock)
    fill(acc, 8)
    clock.now += 1
    batches, _ = acc.drain(clock.now, 10**6, set())
    assert acc.has_incomplete()
    acc.release(batches[0])
    assert not acc.has_incomplete() and acc.available_memory == 64 * 1024


def test_a_batch_goes_at_once_when_nothing_older_is_in_flight() -> None:
    """Adaptive linger (decision 0015): nothing in flight, or only requests sent after the
    batch was created: ready now; a request sent before it still in flight: wait for linger.ms
    at most."""
    clock = Clock()
    acc, _ = make(clock)
    fill(acc, 1)
    batches, next_check = acc.drain(clock.now, 10**6, set(), None, clock.now - 1)
    assert batches == [] and next_check == pytest.approx(clock.now + 0.010)
    batches, _ = acc.drain(clock.now, 10**6, set(), None, math.inf)  # nothing in flight
    assert [b.count for b in batches] == [1]
    fill(acc, 1)
    clock.now += 0.001
    batches, _ = acc.drain(clock.now, 10**6, set(), None, clock.now)  # sent after it
    assert [b.count for b in batches] == [1]


def test_linger_zero_waits_only_for_requests_in_flight() -> None:
    clock = Clock()
    acc, _ = make(clock, linger_ms=0)
    fill(acc, 1)
    batches, next_check = acc.drain(clock.now, 10**6, set(), None, clock.now - 1)
    assert batches == [] and next_check == pytest.approx(clock.now + 0.005)
    clock.now += 0.005
    batches, _ = acc.drain(clock.now, 10**6, set(), None, clock.now - 1)
    assert [b.count for b in batches] == [1]  # at most ZERO_LINGER_HOLD_MS


def test_append_many_fills_batches_by_runs() -> None:
    clock = Clock()
    acc, wakeups = make(clock)
    futures = acc.append_many("t", range(3), None, 5, None, [VALUE] * 20)
    assert len(futures) == 20 and len(wakeups) == 5  # per batch opened, and per one filled
    batches, _ = acc.drain(clock.now, 10**6, set(), None, math.inf)
    assert sorted(b.count for b in batches) == [4, 8, 8]
    assert len({b.partition for b in batches}) >= 2  # sticky moves on when a batch fills
    assert [f._index for f in futures][7:10] == [7, 0, 1]
    records = [r for b in batches for r in iter_batches_records(b.build())]
    assert len(records) == 20 and {r.timestamp for r in records} == {5}


def test_append_many_to_given_partitions_keeps_each_partition_in_order() -> None:
    clock = Clock()
    acc, _ = make(clock)
    values = [b"%03d" % i for i in range(12)]
    futures = acc.append_many("t", None, [i % 3 for i in range(12)], 0, values, values)
    batches, _ = acc.drain(clock.now, 10**6, set(), None, math.inf)
    by_partition = {
        b.partition: [r.value for r in iter_batches_records(b.build())] for b in batches
    }
    assert by_partition == {p: values[p::3] for p in range(3)}
    assert [f._result.partition for f in futures] == [i % 3 for i in range(12)]
