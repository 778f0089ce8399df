"""What `Producer.send` returns: a per-record view over one shared result per batch.

A `concurrent.futures.Future` costs a Condition and a lock to create, far too much once per
record. So, as Kafka's Java client (FutureRecordMetadata over ProduceRequestResult), a batch has
one `BatchResult` (the one `Latch`, an Event made of one lock, the base offset or the error,
the callbacks of its records, and, once the batch is built, its records' timestamps and key and
value sizes, packed), and
each record gets a `RecordFuture`: a 2-tuple (result, index) created by C code, with no
Python-level `__init__` and nothing copied per record. Its metadata is computed only when asked
for. `RecordFutures` is the same for the records of one `send_many`: one object for
them all, a `RecordFuture` created only for a record that is looked at.

`RecordFuture` has the `concurrent.futures.Future` methods an application uses (`result`,
`exception`, `done`, `add_done_callback`; `get` as Kafka's), but it is not one: it does not
work with `concurrent.futures.wait`, and being a tuple it has a length and compares by value.
"""

from __future__ import annotations

import logging
import struct
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, NamedTuple

log = logging.getLogger(__name__)

Callback = Callable[["RecordMetadata | None", "BaseException | None"], None]
"""send(callback=...): called once with (metadata, None) or (None, exception), on the
producer's sender thread; keep it short, as Kafka's callbacks."""

_INT64 = struct.Struct("q")
_INT32 = struct.Struct("i")
_callbacks_lock = threading.Lock()  # guards BatchResult.callbacks once a batch left the buffer
_latch_lock = threading.Lock()  # makes Latch.set once-only


class RecordMetadata(NamedTuple):
    """Where a record was written. `offset` is -1 with acks=0 (nothing is acknowledged);
    `timestamp` is the broker's append time when the topic uses LogAppendTime."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


def _sizes(column: Sequence[bytes | None]) -> bytes | None:
    """The lengths of a key or value column (-1 for None) as native int32s, or None when every
    one is None."""
    n = len(column)
    if column.count(None) == n:
        return None
    try:
        return struct.pack(f"{n}i", *map(len, column))  # type: ignore[arg-type]
    except TypeError:
        return struct.pack(f"{n}i", *[-1 if item is None else len(item) for item in column])


class Latch:
    """A one-shot `threading.Event` (`set`, `is_set`, `wait`) made of one lock: an Event is a
    Condition, a deque, an instance dict and bound methods, about ten objects the cycle
    collector tracks and a few microseconds of Python to create, once per batch; at 1 KiB
    records that was a tenth of a microsecond per record and most of what kept the young
    collections running (decision 0015's addendum, perf-kib). The lock is held until `set`;
    waiters acquire it and hand it straight back. Unlike an Event it cannot be cleared."""

    __slots__ = ("_lock", "_set")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._set = False

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        """Wake every waiter; later calls do nothing. Thread-safe."""
        with _latch_lock:
            if self._set:
                return
            self._set = True
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        """True once set; False if `timeout` seconds passed first."""
        if self._set:
            return True
        if self._lock.acquire(True, -1 if timeout is None else max(timeout, 0.0)):
            self._lock.release()
            return True
        return self._set


class BatchResult:
    """The outcome of one batch, shared by its records' futures. Completed exactly once, by the
    sender thread (`complete`); read by any thread. `callbacks` may be appended to without the
    lock while the batch is still open in the accumulator (under the accumulator's lock)."""

    __slots__ = (
        "base_offset",
        "callbacks",
        "error",
        "event",
        "key_sizes",
        "log_append_time",
        "partition",
        "timestamps",
        "topic",
        "value_sizes",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.event = Latch()
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.callbacks: list[tuple[RecordFuture, Callable[[RecordFuture], None]]] | None = []
        # Once built, per record: timestamps (int64) and key and value sizes (int32, None when
        # all are null), packed: a few bytes per record, kept while a future is.
        self.timestamps: bytes | None = None
        self.key_sizes: bytes | None = None
        self.value_sizes: bytes | None = None

    def set_records(
        self,
        timestamps: Sequence[int],
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
    ) -> None:
        """Keep what the records' metadata needs, compactly (the batch was just built)."""
        self.timestamps = struct.pack(f"{len(timestamps)}q", *timestamps)
        self.key_sizes = _sizes(keys)
        self.value_sizes = _sizes(values)

    def complete(self, base_offset: int, log_append_time: int, error: BaseException | None) -> bool:
        """Set the outcome, wake waiters and run the callbacks. The first call wins (the sender
        thread, or a forced close); later ones return False and change nothing."""
        with _callbacks_lock:
            callbacks = self.callbacks
            if callbacks is None:
                return False
            self.callbacks = None
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
        self.event.set()
        for future, fn in callbacks:
            try:
                fn(future)
            except Exception:  # a user callback must not kill the sender thread
                log.exception("producer callback for %s-%d raised", self.topic, self.partition)
        return True

    def metadata(self, index: int) -> RecordMetadata:
        """Record `index`'s metadata (the batch succeeded)."""
        base = self.base_offset
        timestamp = self.log_append_time
        if timestamp < 0 and self.timestamps is not None:
            timestamp = _INT64.unpack_from(self.timestamps, 8 * index)[0]
        keys, values = self.key_sizes, self.value_sizes
        return RecordMetadata(
            self.topic,
            self.partition,
            base + index if base >= 0 else -1,
            timestamp,
            -1 if keys is None else _INT32.unpack_from(keys, 4 * index)[0],
            -1 if values is None else _INT32.unpack_from(values, 4 * index)[0],
        )

    def wait(self, timeout: float | None) -> BatchResult:
        if not self.event.wait(timeout):
            from ..errors import ClientTimeoutError

            raise ClientTimeoutError(f"no delivery outcome for the record within {timeout} s")
        return self


if TYPE_CHECKING:
    _Pair = tuple[BatchResult, int]
    _C_PAIR = True
else:
    try:  # a 2-tuple whose items read as ._result and ._index like slots (C member descriptors)
        from riverlog.common.records._speedups import FuturePair as _Pair

        _C_PAIR = True
    except ImportError:  # built without a C compiler: properties, below
        _Pair = tuple
        _C_PAIR = False


class RecordFuture(_Pair):
    """The outcome of one `send`: resolves to RecordMetadata or raises the delivery error.
    Created as `RecordFuture((result, index))` (the cheapest way to make one: no Python code
    runs)."""

    __slots__ = ()

    # The batch's result and the record's index in it: read without a call where the C
    # extension is built (callers read them per record, as the side-by-side harness does), by
    # C getters (property of an itemgetter) elsewhere.
    _result: BatchResult
    _index: int
    if not _C_PAIR:
        _result = property(itemgetter(0))  # type: ignore[assignment]
        _index = property(itemgetter(1))  # type: ignore[assignment]

    def done(self) -> bool:
        return self[0].event.is_set()

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        """A record cannot be taken back once sent; always False."""
        return False

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Wait up to `timeout` seconds (None: forever) for the outcome; raise the delivery
        error, or ClientTimeoutError if the wait runs out (the record may still be sent)."""
        result = self[0].wait(timeout)
        if result.error is not None:
            raise result.error
        return result.metadata(self[1])

    get = result  # Kafka's name

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The delivery error, or None once the record is acknowledged."""
        return self[0].wait(timeout).error

    def metadata(self) -> RecordMetadata | None:
        """The metadata if delivered, None while pending or when delivery failed."""
        result = self[0]
        if not result.event.is_set() or result.error is not None:
            return None
        return result.metadata(self[1])

    def add_done_callback(self, fn: Callable[[RecordFuture], None]) -> None:
        """Call `fn(self)` once the outcome is known: at once (in this thread) if it already is,
        else on the sender thread."""
        result = self[0]
        with _callbacks_lock:
            callbacks = result.callbacks
            if callbacks is not None:
                callbacks.append((self, fn))
                return
        fn(self)

    def __repr__(self) -> str:
        r = self[0]
        state = "pending" if not self.done() else ("failed" if r.error else "done")
        return f"<RecordFuture {r.topic}-{r.partition}#{self[1]} {state}>"


def new_future(result: BatchResult, index: int) -> RecordFuture:
    return RecordFuture((result, index))


class RecordFutures(Sequence[RecordFuture]):
    """The outcome of one `send_many`: its records in order, as runs of consecutive records of
    one batch. `futures[i]` is record i's RecordFuture (made when asked for); `result()` waits
    for every batch and returns every record's metadata, or raises the first error."""

    __slots__ = ("_results", "_starts")

    def __init__(self) -> None:
        self._starts: list[int] = []  # index of the first record of each run
        self._results: list[tuple[BatchResult, int, int]] = []  # (result, first index, count)

    def add_run(self, result: BatchResult, first: int, count: int) -> None:
        start = self._starts[-1] + self._results[-1][2] if self._results else 0
        self._starts.append(start)
        self._results.append((result, first, count))

    def __len__(self) -> int:
        return self._starts[-1] + self._results[-1][2] if self._results else 0

    def __getitem__(self, i: int) -> RecordFuture:  # type: ignore[override]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("record index out of range")
        run = bisect_right(self._starts, i) - 1
        result, first, _ = self._results[run]
        return new_future(result, first + i - self._starts[run])

    def __iter__(self) -> Iterator[RecordFuture]:
        for result, first, count in self._results:
            for index in range(first, first + count):
                yield new_future(result, index)

    def runs(self) -> list[RecordFuture]:
        """One future per batch run (its first record's): once they are all done, so is
        every record (the asyncio producer waits on these only)."""
        return [new_future(result, first) for result, first, _ in self._results]

    def done(self) -> bool:
        return all(r.event.is_set() for r, _, _ in self._results)

    def _wait(self, timeout: float | None) -> None:
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        for result, _, _ in self._results:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            result.wait(remaining)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The first delivery error among the records, or None once all are acknowledged."""
        self._wait(timeout)
        return next((r.error for r, _, _ in self._results if r.error is not None), None)

    def result(self, timeout: float | None = None) -> list[RecordMetadata]:
        """Every record's metadata, in order; raises the first delivery error."""
        error = self.exception(timeout)
        if error is not None:
            raise error
        return [
            r.metadata(i) for r, first, count in self._results for i in range(first, first + count)
        ]

    def __repr__(self) -> str:
        return f"<RecordFutures {len(self)} records in {len(self._results)} batch runs>"


def delivery_callback(callback: Callback) -> Callable[[RecordFuture], None]:
    """Adapt a Kafka-style `callback(metadata, exception)` to `add_done_callback`."""

    def on_done(future: RecordFuture) -> None:
        result, index = future
        error = result.error
        if error is not None:
            callback(None, error)
        else:
            callback(result.metadata(index), None)

    return on_done
