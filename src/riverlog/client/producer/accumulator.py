"""The producer's buffer: records appended into one open batch per partition until the batch is
full (batch.size) or ready to go, then drained by the sender thread.

An append only checks the record's types, adds its size to the batch's estimate and appends
the record to the batch's columns: the records are encoded when the sender builds the batch
(`ProducerBatch.build`, decision 0015). When a batch is ready (Kafka's linger.ms, made
adaptive): when it is full, at a flush or close, while an append waits for memory, when every
request sent before the batch was created has its answer (so nothing waits on a timer while
the producer is idle, and under load a batch gathers what comes during one round trip), or
linger.ms after it was created, whichever comes first (with linger.ms 0: only while such a
request is in flight, at most 5 ms). Memory is bounded by buffer.memory, accounted per batch
(each reserves max(batch.size, its first record)): when it is used up, `append` blocks up to
max.block.ms for the sender to free some, and every waiting batch counts as ready meanwhile,
as in Kafka's BufferPool. One lock guards the deques; an append holds it for a few attribute
updates, and allocation, sender wake-ups and sticky-partition changes happen once per batch.
"""

from __future__ import annotations

import math
import random
import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Container, Sequence
from itertools import accumulate, repeat
from operator import add
from typing import Any, Final

from riverlog.common.records.compression import CompressionType

from ..errors import ClientClosedError, ClientTimeoutError, RecordTooLargeError
from .batch import RECORD_OVERHEAD, ProducerBatch, Record
from .future import BatchResult, RecordFuture, RecordFutures

try:
    from riverlog.common.records._speedups import Appender
except ImportError:  # built without a C compiler: `append_sticky` only
    Appender = None  # type: ignore[assignment,misc]

RECORD_MEMORY: Final = 144
"""What a queued record costs in memory beyond its key and value bytes, counted against
buffer.memory from append to outcome: its slots in the batch's columns (three 8-byte list
slots and the lists' spare room), its timestamp (a 32-byte int) and the header of its value's
bytes object (33 B), about 100 B; counted as when a record was a tuple (72 B more), which keeps
room for the futures the application holds. Without it, a buffer of 100-byte records held
about twice buffer.memory, and the producer passed 100 MiB RSS with buffer.memory at 32 MiB
(bench/producer_memory_bench.py)."""


OnDone = Callable[[RecordFuture], None]


def as_bytes(data: object, what: str) -> bytes | None:
    """A key or value as the batch keeps it: bytes or None (a bytearray or memoryview copied)."""
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"record {what} must be bytes or None, not {type(data).__name__}")


ZERO_LINGER_HOLD_MS = 5
"""With linger.ms 0, the longest a batch waits for the requests in flight sent before it."""


def _lengths(column: Sequence[bytes | None]) -> list[int]:
    """len() of each item, 0 for None."""
    try:
        return list(map(len, column))  # type: ignore[arg-type]
    except TypeError:
        return [len(item) if item is not None else 0 for item in column]


class _Memory:
    """buffer.memory's free bytes where the C Appender (which keeps them itself, as its
    `available`) is not in use."""

    __slots__ = ("available",)

    def __init__(self, available: int) -> None:
        self.available = available


class RecordAccumulator:
    """Per-partition deques of batches, shared by the application threads (`append*`) and the
    sender thread (`drain`, `reenqueue`, `expire`, `release`). Thread-safe throughout.

    `wakeup` is called (possibly with the lock held: it must be cheap and thread-safe) whenever
    the sender may have new work: a batch was created, a batch filled up, a flush began, or an
    append is waiting for memory. `headers` arguments are encoded headers (`encode_headers`).
    """

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        buffer_memory: int,
        compression: CompressionType = CompressionType.NONE,
        max_block_ms: int,
        delivery_timeout_ms: int,
        wakeup: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._batch_size = batch_size
        # linger.ms 0 waits for nothing but requests in flight, and for them at most as long as
        # the default linger.ms (decision 0015): one request per record loads the gateway more
        # than a round trip of batching delays a record.
        self._linger = (linger_ms or ZERO_LINGER_HOLD_MS) / 1000
        self._total_memory = buffer_memory
        # buffer.memory's free bytes, read and written under the lock: the C Appender's own
        # counter where it is used (no dict operation per record), else a _Memory.
        self._memory: _Memory | Any = _Memory(buffer_memory)
        self._compression = compression
        self._max_block = max_block_ms / 1000
        self._delivery_timeout = delivery_timeout_ms / 1000
        self._wakeup = wakeup
        self._clock = clock
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._deques: dict[str, list[deque[ProducerBatch]]] = {}
        self._active: dict[tuple[str, int], deque[ProducerBatch]] = {}
        self._open: dict[str, list[ProducerBatch | None]] = {}  # per partition, maybe closed
        self._sticky: dict[str, ProducerBatch] = {}  # the batch of each topic's sticky partition
        self._incomplete: set[ProducerBatch] = set()
        self._waiters = 0
        self._flushes = 0
        self._closed = False
        self._drain_start = 0
        # `append_fast(topic, timestamp, key, value)`: `append_sticky`'s common case in C (an
        # open sticky batch with room, memory to spare, bytes or None key and value, no
        # headers), returning the future, or None when `append_sticky` must decide. None where
        # the extension is not built (`use_compiled(False)` in tests).
        self.append_fast: Callable[[str, int, bytes | None, bytes | None], Any] | None = None
        self.use_compiled(True)

    def use_compiled(self, on: bool) -> None:
        """Use the C append where the extension is built (on), or only the Python path. Only
        at construction or while nothing appends (tests): a send already holding the old
        Appender would charge memory to a counter no longer used."""
        with self._lock:
            available = self._memory.available
            self.append_fast = None
            self._memory = _Memory(available)
            if on and Appender is not None:
                self.append_fast = self._memory = Appender(
                    self._lock,
                    self._sticky,
                    available,
                    ProducerBatch,
                    RecordFuture,
                    RECORD_OVERHEAD,
                    RECORD_MEMORY,
                )

    # ---- application threads -------------------------------------------------------------

    def append(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: bytes | None = None,
        on_done: OnDone | None = None,
        trace_context: Any = None,
    ) -> RecordFuture:
        """Add one record to `partition`'s open batch (a new one if it is full or sent)."""
        if type(value) is not bytes:
            value = as_bytes(value, "value")
        if key is not None and type(key) is not bytes:
            key = as_bytes(key, "key")
        with self._lock:
            try:
                batch = self._open[topic][partition]
            except (KeyError, IndexError):
                batch = None
            if batch is not None and not batch.closed:
                size = batch.estimate + RECORD_OVERHEAD + (len(value) if value else 0)
                if key:
                    size += len(key)
                if headers:
                    size += len(headers)
                if size <= batch.limit and self._memory.available >= RECORD_MEMORY:
                    return self._add_to_open(
                        batch, size, (timestamp, key, value, headers), on_done, trace_context
                    )
            return self._append_slow(
                topic, partition, (timestamp, key, value, headers), on_done, trace_context
            )[0]

    def append_sticky(
        self,
        topic: str,
        partitions: Sequence[int],
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: bytes | None = None,
        on_done: OnDone | None = None,
        trace_context: Any = None,
    ) -> RecordFuture:
        """Append to the topic's sticky partition (Kafka's partitioner for records without a
        key): the same partition until its batch fills up or is sent, then another one chosen
        at random from `partitions` (those with a leader; never empty)."""
        if type(value) is not bytes:
            value = as_bytes(value, "value")
        if key is not None and type(key) is not bytes:
            key = as_bytes(key, "key")
        with self._lock:
            batch = self._sticky.get(topic)
            if batch is not None and not batch.closed:
                size = batch.estimate + RECORD_OVERHEAD + (len(value) if value else 0)
                if key:
                    size += len(key)
                if headers:
                    size += len(headers)
                if size <= batch.limit:
                    if self._memory.available >= RECORD_MEMORY:
                        return self._add_to_open(
                            batch, size, (timestamp, key, value, headers), on_done, trace_context
                        )
                    # buffer.memory is short: the slow path waits for it (same partition)
                    future, batch = self._append_slow(
                        topic, batch.partition, (timestamp, key, value, headers), on_done,
                        trace_context,
                    )  # fmt: skip
                    self._sticky[topic] = batch
                    return future
                batch.closed = True  # full: ready now
                self._wakeup()
            partition = self._next_sticky(batch, partitions)
            future, batch = self._append_slow(
                topic, partition, (timestamp, key, value, headers), on_done, trace_context
            )
            self._sticky[topic] = batch
            return future

    def append_many(
        self,
        topic: str,
        partitions: Sequence[int] | None,
        partition_of: Sequence[int] | None,
        timestamp: int,
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        on_done: OnDone | None = None,
    ) -> RecordFutures:
        """Append many records at once (`Producer.send_many`): to `partition_of[i]` each, or
        without it to the sticky partition (chosen among `partitions`), a whole run of records
        per batch. Keys and values must be bytes or None already."""
        out = RecordFutures()
        n = len(values)
        if keys is None:
            keys = tuple(repeat(None, n))
        # cum[i]: the estimated bytes of records 0..i, for bisecting how many fit a batch
        cum = list(accumulate(map(add, _lengths(values), _lengths(keys)), initial=0))
        cum = list(map(add, cum, range(0, (n + 1) * RECORD_OVERHEAD, RECORD_OVERHEAD)))
        with self._lock:
            i = 0
            while i < n:
                if partition_of is not None:
                    partition = partition_of[i]
                    opens = self._open.get(topic)
                    batch = opens[partition] if opens and partition < len(opens) else None
                    end = i + 1  # the run of records that go to this partition
                    while end < n and partition_of[end] == partition:
                        end += 1
                else:
                    assert partitions is not None
                    batch = self._sticky.get(topic)
                    end = n
                if batch is not None and not batch.closed:
                    fit = bisect_right(cum, cum[i] + batch.limit - batch.estimate, i + 1, end + 1)
                    # and no more than buffer.memory has room for (RECORD_MEMORY each)
                    fit = min(fit, i + 1 + max(self._memory.available, 0) // RECORD_MEMORY)
                    if fit > i + 1:
                        fit -= 1  # records i..fit-1 fit
                        self._memory.available -= (fit - i) * RECORD_MEMORY
                        batch.reserved += (fit - i) * RECORD_MEMORY
                        first = batch.count
                        batch.timestamps.extend(repeat(timestamp, fit - i))
                        batch.keys.extend(keys[i:fit])
                        batch.values.extend(values[i:fit])
                        if batch.headers is not None:
                            batch.headers.extend(repeat(None, fit - i))
                        batch.estimate += cum[fit] - cum[i]
                        batch.count = first + fit - i
                        out.add_run(batch.result, first, fit - i)
                        if on_done is not None:
                            self._callbacks(batch, first, on_done)
                        i = fit
                        continue
                    batch.closed = True  # full: ready now
                    self._wakeup()
                if partition_of is None:
                    assert partitions is not None
                    partition = self._next_sticky(batch, partitions)
                record = (timestamp, keys[i], values[i], None)
                future, batch = self._append_slow(topic, partition, record, on_done, None)
                out.add_run(batch.result, future[1], 1)
                if partition_of is None:
                    self._sticky[topic] = batch
                i += 1
        return out

    @staticmethod
    def _callbacks(batch: ProducerBatch, first: int, on_done: OnDone) -> None:
        """Lock held: `on_done` for each record of `batch` from `first` on."""
        result = batch.result
        callbacks = result.callbacks
        assert callbacks is not None  # an open batch has no outcome yet
        callbacks.extend(
            (RecordFuture((result, index)), on_done) for index in range(first, batch.count)
        )

    def _add_to_open(
        self,
        batch: ProducerBatch,
        size: int,
        record: Record,
        on_done: OnDone | None,
        trace_context: Any,
    ) -> RecordFuture:
        """Add `record` (timestamp, key, value, headers) to the open `batch` it fits (estimate
        `size` with it; the caller checked the batch limit and buffer.memory, lock held)."""
        index = batch.count
        timestamp, key, value, headers = record
        if headers is None and batch.headers is None:
            batch.timestamps.append(timestamp)
            batch.keys.append(key)
            batch.values.append(value)
            batch.count = index + 1
        else:
            batch.add(record)
        batch.estimate = size
        self._memory.available -= RECORD_MEMORY
        batch.reserved += RECORD_MEMORY
        future: RecordFuture = RecordFuture((batch.result, index))
        if on_done is not None or trace_context is not None:
            self._extras(batch, future, on_done, trace_context)
        return future

    @staticmethod
    def _extras(
        batch: ProducerBatch, future: RecordFuture, on_done: OnDone | None, trace_context: Any
    ) -> None:
        if on_done is not None:
            batch.result.callbacks.append((future, on_done))  # type: ignore[union-attr]
        if trace_context is not None and batch.trace_context is None:
            batch.trace_context = trace_context

    @staticmethod
    def _next_sticky(batch: ProducerBatch | None, partitions: Sequence[int]) -> int:
        """The sticky partition has no open batch (none yet, full or sent): move on."""
        previous = -1 if batch is None else batch.partition
        choices = [p for p in partitions if p != previous] or list(partitions)
        return random.choice(choices)

    def _append_slow(
        self,
        topic: str,
        partition: int,
        record: Record,
        on_done: OnDone | None,
        trace_context: Any,
    ) -> tuple[RecordFuture, ProducerBatch]:
        """Lock held: append to the partition's open batch if it takes the record, else close
        it (full), reserve memory (maybe waiting) and open a new batch. Returns the record's
        future and its batch."""
        if self._closed:
            raise ClientClosedError("producer", "cannot send after close()")
        _, key, value, headers = record
        estimate = 64 + (len(key) if key else 0) + (len(value) if value else 0)
        estimate += len(headers) if headers else 0
        size = max(self._batch_size, estimate)
        if size + RECORD_MEMORY > self._total_memory:
            raise RecordTooLargeError(
                f"a record of about {estimate} bytes is larger than buffer.memory "
                f"({self._total_memory})"
            )
        self._allocate(RECORD_MEMORY)  # may wait, letting other threads append meanwhile
        # buffer.memory charged and not yet in a batch's `reserved` (which gives it back):
        # freed if anything fails before a batch holds it, or the budget would shrink for good.
        charged = RECORD_MEMORY
        try:
            opens = self._open.setdefault(topic, [])
            if len(opens) <= partition:
                opens.extend([None] * (partition + 1 - len(opens)))
            batch = opens[partition]
            if batch is not None and not batch.closed:
                if batch.append(record):
                    batch.reserved += RECORD_MEMORY
                    charged = 0
                    return self._future(batch, on_done, trace_context), batch
                batch.closed = True  # full: ready now
            self._allocate(size)  # may wait, letting other threads append meanwhile
            charged += size
            batch = opens[partition]
            if batch is not None and not batch.closed:
                batch.closed = True  # opened by another thread while we waited: ours next
            batch = ProducerBatch(
                topic,
                partition,
                self._clock(),
                batch_size=self._batch_size,
                compression=self._compression,
            )
            batch.append(record)
            batch.reserved = charged
            dq = self._deque(topic, partition)
            dq.append(batch)  # queued: the sender releases it, and its `reserved` with it
            charged = 0
        finally:
            if charged:
                self._free(charged)
        opens[partition] = batch
        self._active[(topic, partition)] = dq
        self._incomplete.add(batch)
        self._wakeup()
        return self._future(batch, on_done, trace_context), batch

    def _deque(self, topic: str, partition: int) -> deque[ProducerBatch]:
        parts = self._deques.setdefault(topic, [])
        while len(parts) <= partition:
            parts.append(deque())
        return parts[partition]

    def _future(
        self, batch: ProducerBatch, on_done: OnDone | None, trace_context: Any
    ) -> RecordFuture:
        """The future of the record just appended to `batch` (lock held)."""
        future: RecordFuture = RecordFuture((batch.result, batch.count - 1))
        if on_done is not None or trace_context is not None:
            self._extras(batch, future, on_done, trace_context)
        return future

    def _allocate(self, size: int) -> None:
        """Reserve `size` bytes of buffer.memory, waiting up to max.block.ms (lock held)."""
        if self._memory.available >= size:
            self._memory.available -= size
            return
        deadline = time.monotonic() + self._max_block  # a real wait: real time, whatever clock
        self._waiters += 1
        try:
            while self._memory.available < size:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ClientTimeoutError(
                        f"failed to allocate {size} bytes of buffer.memory within max.block.ms "
                        f"({round(self._max_block * 1000)} ms): the producer sends slower than "
                        "records are appended"
                    )
                if self._closed:
                    raise ClientClosedError("producer", "closed while waiting for buffer memory")
                self._wakeup()  # exhausted: every batch is ready, so the sender frees memory
                self._space.wait(min(remaining, 0.1))
        finally:
            self._waiters -= 1
        self._memory.available -= size

    def _free(self, size: int) -> None:
        self._memory.available += size
        if self._waiters:
            self._space.notify_all()

    # ---- sender thread -------------------------------------------------------------------

    def drain(
        self,
        now: float,
        max_bytes: int,
        muted: Container[tuple[str, int]],
        capacity: Callable[[tuple[str, int]], int] | None = None,
        oldest_in_flight: float = -math.inf,
    ) -> tuple[list[ProducerBatch], float]:
        """Take the ready batches, oldest first per partition, up to `max_bytes` in all (at least
        one batch). With `capacity` (the idempotent producer) at most `capacity(tp)` new batches
        of a partition, and a retried batch, or one holding a sequence, alone (it may have been
        written: the leader answers a repeat only when no new batch comes with it).
        `oldest_in_flight`: when the oldest request still awaiting its answer was sent (inf:
        none is; the default, -inf, makes batches wait for linger.ms only). Returns them
        (closed) and the time at which the next check is due."""
        out: list[ProducerBatch] = []
        total = 0
        next_check = now + 3600.0
        linger = self._linger
        with self._lock:
            force = self._flushes > 0 or self._closed or self._waiters > 0
            items = list(self._active.items())
            if not items:
                return out, next_check
            start = self._drain_start % len(items)
            self._drain_start += 1
            for key, dq in items[start:] + items[:start]:
                if key in muted:
                    continue
                room = -1 if capacity is None else capacity(key)
                taken = 0
                while dq:
                    batch = dq[0]
                    # Idempotence: a batch that holds a sequence is in its window already and
                    # is not counted against `room`; a retried one travels alone.
                    held = capacity is not None and batch.base_sequence >= 0
                    alone = held or (capacity is not None and batch.attempts > 0)
                    if taken and alone:
                        break
                    if not held and taken == room:
                        break
                    if batch.retry_at > now:
                        next_check = min(next_check, batch.retry_at)
                        break
                    if not (
                        batch.closed
                        or force
                        or oldest_in_flight > batch.created  # nothing older is in flight
                        or now >= batch.created + linger
                    ):
                        next_check = min(next_check, batch.created + linger)
                        break
                    size = batch.size
                    if out and total + size > max_bytes:
                        return out, now
                    dq.popleft()
                    batch.closed = True
                    out.append(batch)
                    total += size
                    taken += 1
                    if alone:
                        break
                if not dq:
                    del self._active[key]
        return out, next_check

    def reenqueue(self, batch: ProducerBatch, retry_at: float) -> None:
        """Put a batch back at the front of its partition for a retry at `retry_at`: in creation
        order among the batches put back before it, or, holding a sequence, in sequence order
        among the other retries (Kafka's insertInSequenceOrder), whatever order their requests
        came back in."""
        batch.retry_at = retry_at
        with self._lock:
            dq = self._deque(batch.topic, batch.partition)
            if batch.base_sequence < 0:
                # In creation order among the other retries (those of a later request may be
                # back first: DELEGATION_TOKEN_EXPIRED answers of two frames in flight), so a
                # producer without idempotence keeps the partition's order.
                at = 0
                while at < len(dq) and dq[at].serial < batch.serial:
                    at += 1
                dq.insert(at, batch)
            else:
                at = 0
                while at < len(dq) and 0 <= dq[at].base_sequence < batch.base_sequence:
                    at += 1
                dq.insert(at, batch)
            self._active[(batch.topic, batch.partition)] = dq

    def expire(self, now: float) -> list[ProducerBatch]:
        """Remove and return the queued batches older than delivery.timeout.ms."""
        expired: list[ProducerBatch] = []
        limit = now - self._delivery_timeout
        with self._lock:
            for key, dq in list(self._active.items()):
                while dq and dq[0].created <= limit:
                    batch = dq.popleft()
                    batch.closed = True
                    expired.append(batch)
                if not dq:
                    del self._active[key]
        return expired

    def release(self, *batches: ProducerBatch) -> None:
        """The batches have their outcome: give back their memory (one lock for them all)."""
        with self._lock:
            for batch in batches:
                self._incomplete.discard(batch)
                self._free(batch.reserved)
                batch.reserved = 0

    def abort_queued(self) -> list[ProducerBatch]:
        """Remove and return every batch still queued, closed (a forced close, an aborted
        transaction: later appends open new batches)."""
        with self._lock:
            batches = [batch for dq in self._active.values() for batch in dq]
            for batch in batches:
                batch.closed = True
            self._active.clear()
            for parts in self._deques.values():
                for dq in parts:
                    dq.clear()
            return batches

    # ---- flush and close -----------------------------------------------------------------

    def begin_flush(self) -> list[BatchResult]:
        """Make every batch ready now; returns the results to wait for."""
        with self._lock:
            self._flushes += 1
            results = [batch.result for batch in self._incomplete]
        self._wakeup()
        return results

    def end_flush(self) -> None:
        with self._lock:
            self._flushes -= 1

    def close(self) -> list[BatchResult]:
        """Refuse further appends; every queued batch is ready from now on."""
        with self._lock:
            self._closed = True
            for opens in self._open.values():
                for batch in opens:
                    if batch is not None:
                        batch.closed = True  # appends take the slow path, which refuses
            self._space.notify_all()
            results = [batch.result for batch in self._incomplete]
        self._wakeup()
        return results

    def has_incomplete(self) -> bool:
        return bool(self._incomplete)

    def has_queued(self) -> bool:
        return bool(self._active)

    def queued_partitions(self) -> list[tuple[str, int]]:
        """The partitions with batches waiting to be drained (the transactional sender adds
        new ones to the transaction first)."""
        with self._lock:
            return list(self._active)

    @property
    def available_memory(self) -> int:
        return self._memory.available
