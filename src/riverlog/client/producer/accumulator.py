"""The producer's buffer: records appended into one open batch per partition until the batch is
full (batch.size) or has waited linger.ms, then drained by the sender thread.

Records are encoded as they are appended (the codec's BatchBuilder), so the sender only joins,
compresses and checksums whole batches. Memory is bounded by buffer.memory, accounted per batch
(each reserves max(batch.size, its first record)): when it is used up, `append` blocks up to
max.block.ms for the sender to free some, and every waiting batch counts as ready meanwhile, as
in Kafka's BufferPool. One lock guards the deques; an append holds it only for the encode of one
record, and allocation, sender wake-ups and sticky-partition changes happen once per batch.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from riverlog.common.records.builder import BatchBuilder
from riverlog.common.records.compression import CompressionType
from riverlog.common.records.record import Header

from ..errors import ClientClosedError, ClientTimeoutError, RecordTooLargeError
from .batch import ProducerBatch
from .future import BatchResult, RecordFuture

_NO_HEADERS: tuple[Header, ...] = ()


class RecordAccumulator:
    """Per-partition deques of batches, shared by the application threads (`append*`) and the
    sender thread (`drain`, `reenqueue`, `expire`, `release`). Thread-safe throughout.

    `wakeup` is called (possibly with the lock held: it must be cheap and thread-safe) whenever
    the sender may have new work: a batch was created (a linger deadline started), a batch
    filled up, a flush began, or an append is waiting for memory.
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
        self._linger = linger_ms / 1000
        self._total_memory = buffer_memory
        self._available = buffer_memory
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

    # ---- application threads -------------------------------------------------------------

    def append(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        on_done: Callable[[RecordFuture], None] | None = None,
        trace_context: Any = None,
    ) -> RecordFuture:
        """Encode one record into `partition`'s open batch (a new one if it is full or sent)."""
        with self._lock:
            try:
                batch = self._open[topic][partition]
            except (KeyError, IndexError):
                batch = None
            if (
                batch is not None
                and not batch.closed
                and batch.builder.append(timestamp, key, value, headers or _NO_HEADERS)
            ):
                index = batch.count
                batch.count = index + 1
                future = RecordFuture(
                    batch.result,
                    index,
                    timestamp,
                    -1 if key is None else len(key),
                    -1 if value is None else len(value),
                )
                if on_done is not None:
                    batch.result.callbacks.append((future, on_done))  # type: ignore[union-attr]
                if trace_context is not None and batch.trace_context is None:
                    batch.trace_context = trace_context
                return future
            return self._append_slow(
                topic, partition, timestamp, key, value, headers, on_done, trace_context
            )[0]

    def append_sticky(
        self,
        topic: str,
        partitions: Sequence[int],
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        on_done: Callable[[RecordFuture], None] | None = None,
        trace_context: Any = None,
    ) -> RecordFuture:
        """Append to the topic's sticky partition (Kafka's partitioner for records without a
        key): the same partition until its batch fills up or is sent, then another one chosen
        at random from `partitions` (those with a leader; never empty)."""
        with self._lock:
            batch = self._sticky.get(topic)
            if batch is not None and not batch.closed:
                if batch.builder.append(timestamp, key, value, headers or _NO_HEADERS):
                    index = batch.count
                    batch.count = index + 1
                    future = RecordFuture(
                        batch.result,
                        index,
                        timestamp,
                        -1 if key is None else len(key),
                        -1 if value is None else len(value),
                    )
                    if on_done is not None:
                        batch.result.callbacks.append((future, on_done))  # type: ignore[union-attr]
                    if trace_context is not None and batch.trace_context is None:
                        batch.trace_context = trace_context
                    return future
                batch.closed = True  # full: ready now
                self._wakeup()
            # The sticky partition has no open batch (none yet, full or sent): move on.
            previous = -1 if batch is None else batch.partition
            choices = [p for p in partitions if p != previous] or list(partitions)
            partition = random.choice(choices)
            future, batch = self._append_slow(
                topic, partition, timestamp, key, value, headers, on_done, trace_context
            )
            self._sticky[topic] = batch
            return future

    def _append_slow(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        on_done: Callable[[RecordFuture], None] | None,
        trace_context: Any,
    ) -> tuple[RecordFuture, ProducerBatch]:
        """Lock held: append to the partition's open batch if it takes the record, else close
        it (full), reserve memory (maybe waiting) and open a new batch. Returns the record's
        future and its batch."""
        if self._closed:
            raise ClientClosedError("producer", "cannot send after close()")
        opens = self._open.setdefault(topic, [])
        if len(opens) <= partition:
            opens.extend([None] * (partition + 1 - len(opens)))
        batch = opens[partition]
        if batch is not None and not batch.closed:
            if batch.builder.append(timestamp, key, value, headers or _NO_HEADERS):
                return self._future(batch, timestamp, key, value, on_done, trace_context), batch
            batch.closed = True  # full: ready now
        estimate = 64 + (len(key) if key else 0) + (len(value) if value else 0)
        size = max(self._batch_size, estimate)
        if size > self._total_memory:
            raise RecordTooLargeError(
                f"a record of about {estimate} bytes is larger than buffer.memory "
                f"({self._total_memory})"
            )
        self._allocate(size)  # may wait, letting other threads append meanwhile
        batch = opens[partition]
        if batch is not None and not batch.closed:
            batch.closed = True  # opened by another thread while we waited: close it, ours next
        builder = BatchBuilder(self._compression, batch_size=self._batch_size)
        batch = ProducerBatch(topic, partition, builder, self._clock())
        batch.reserved = size
        try:
            builder.append(timestamp, key, value, headers or _NO_HEADERS)
        except BaseException:
            self._free(size)
            raise
        dq = self._deque(topic, partition)
        dq.append(batch)
        opens[partition] = batch
        self._active[(topic, partition)] = dq
        self._incomplete.add(batch)
        self._wakeup()
        return self._future(batch, timestamp, key, value, on_done, trace_context), batch

    def _deque(self, topic: str, partition: int) -> deque[ProducerBatch]:
        parts = self._deques.setdefault(topic, [])
        while len(parts) <= partition:
            parts.append(deque())
        return parts[partition]

    def _future(
        self,
        batch: ProducerBatch,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        on_done: Callable[[RecordFuture], None] | None,
        trace_context: Any,
    ) -> RecordFuture:
        """The future of the record just appended to `batch` (lock held)."""
        index = batch.count
        batch.count = index + 1
        key_size = -1 if key is None else len(key)
        future = RecordFuture(
            batch.result, index, timestamp, key_size, -1 if value is None else len(value)
        )
        if on_done is not None:
            batch.result.callbacks.append((future, on_done))  # type: ignore[union-attr]
        if trace_context is not None and batch.trace_context is None:
            batch.trace_context = trace_context
        return future

    def _allocate(self, size: int) -> None:
        """Reserve `size` bytes of buffer.memory, waiting up to max.block.ms (lock held)."""
        if self._available >= size:
            self._available -= size
            return
        deadline = time.monotonic() + self._max_block  # a real wait: real time, whatever clock
        self._waiters += 1
        try:
            while self._available < size:
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
        self._available -= size

    def _free(self, size: int) -> None:
        self._available += size
        if self._waiters:
            self._space.notify_all()

    # ---- sender thread -------------------------------------------------------------------

    def drain(
        self,
        now: float,
        max_bytes: int,
        muted: frozenset[tuple[str, int]] | set[tuple[str, int]],
        capacity: Callable[[tuple[str, int]], int] | None = None,
    ) -> tuple[list[ProducerBatch], float]:
        """Take the ready batches, oldest first per partition, up to `max_bytes` in all (at least
        one batch). With `capacity` (the idempotent producer) at most `capacity(tp)` new batches
        of a partition, and a retried batch, or one holding a sequence, alone (it may have been
        written: the leader answers a repeat only when no new batch comes with it). Returns
        them (closed) and the time at which the next check is due."""
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
                    if not (batch.closed or force or now >= batch.created + linger):
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
        """Put a batch back at the front of its partition for a retry at `retry_at`; a batch
        holding a sequence goes in sequence order among the other retries (Kafka's
        insertInSequenceOrder), whatever order their requests came back in."""
        batch.retry_at = retry_at
        with self._lock:
            dq = self._deque(batch.topic, batch.partition)
            if batch.base_sequence < 0:
                dq.appendleft(batch)
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
        """Remove and return every batch still queued (a forced close)."""
        with self._lock:
            batches = [batch for dq in self._active.values() for batch in dq]
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

    @property
    def available_memory(self) -> int:
        return self._available
