"""What `Producer.send` returns: a light future per record over one shared result per batch.

A `concurrent.futures.Future` costs a Condition and a lock to create, too much once per record
at 150,000 records/s. So, as Kafka's Java client (FutureRecordMetadata over ProduceRequestResult),
each record gets a `RecordFuture` of five slots pointing at its batch's `BatchResult`, which
holds the one Event, the base offset or the error, and the callbacks of the batch's records.
`RecordFuture` has the `concurrent.futures.Future` methods an application uses (`result`,
`exception`, `done`, `add_done_callback`; `get` as Kafka's), but it is not one: it does not work
with `concurrent.futures.wait`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import NamedTuple

log = logging.getLogger(__name__)

Callback = Callable[["RecordMetadata | None", "BaseException | None"], None]
"""send(callback=...): called once with (metadata, None) or (None, exception), on the
producer's sender thread; keep it short, as Kafka's callbacks."""

_callbacks_lock = threading.Lock()  # guards BatchResult.callbacks once a batch left the buffer


class RecordMetadata(NamedTuple):
    """Where a record was written. `offset` is -1 with acks=0 (nothing is acknowledged);
    `timestamp` is the broker's append time when the topic uses LogAppendTime."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


class BatchResult:
    """The outcome of one batch, shared by its records' futures. Completed exactly once, by the
    sender thread (`complete`); read by any thread. `callbacks` may be appended to without the
    lock while the batch is still open in the accumulator (under the accumulator's lock)."""

    __slots__ = (
        "base_offset",
        "callbacks",
        "error",
        "event",
        "log_append_time",
        "partition",
        "topic",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.event = threading.Event()
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.callbacks: list[tuple[RecordFuture, Callable[[RecordFuture], None]]] | None = []

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


class RecordFuture:
    """The outcome of one `send`: resolves to RecordMetadata or raises the delivery error."""

    __slots__ = ("_index", "_key_size", "_result", "_timestamp", "_value_size")

    def __init__(
        self, result: BatchResult, index: int, timestamp: int, key_size: int, value_size: int
    ) -> None:
        self._result = result
        self._index = index
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size

    def done(self) -> bool:
        return self._result.event.is_set()

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        """A record cannot be taken back once sent; always False."""
        return False

    def _wait(self, timeout: float | None) -> BatchResult:
        result = self._result
        if not result.event.wait(timeout):
            from ..errors import ClientTimeoutError

            raise ClientTimeoutError(f"no delivery outcome for the record within {timeout} s")
        return result

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Wait up to `timeout` seconds (None: forever) for the outcome; raise the delivery
        error, or ClientTimeoutError if the wait runs out (the record may still be sent)."""
        result = self._wait(timeout)
        if result.error is not None:
            raise result.error
        return self._metadata(result)

    get = result  # Kafka's name

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The delivery error, or None once the record is acknowledged."""
        return self._wait(timeout).error

    def metadata(self) -> RecordMetadata | None:
        """The metadata if delivered, None while pending or when delivery failed."""
        result = self._result
        if not result.event.is_set() or result.error is not None:
            return None
        return self._metadata(result)

    def _metadata(self, result: BatchResult) -> RecordMetadata:
        base = result.base_offset
        offset = base + self._index if base >= 0 else -1
        timestamp = result.log_append_time if result.log_append_time >= 0 else self._timestamp
        return RecordMetadata(
            result.topic, result.partition, offset, timestamp, self._key_size, self._value_size
        )

    def add_done_callback(self, fn: Callable[[RecordFuture], None]) -> None:
        """Call `fn(self)` once the outcome is known: at once (in this thread) if it already is,
        else on the sender thread."""
        result = self._result
        with _callbacks_lock:
            callbacks = result.callbacks
            if callbacks is not None:
                callbacks.append((self, fn))
                return
        fn(self)

    def __repr__(self) -> str:
        r = self._result
        state = "pending" if not self.done() else ("failed" if r.error else "done")
        return f"<RecordFuture {r.topic}-{r.partition}#{self._index} {state}>"


def delivery_callback(callback: Callback) -> Callable[[RecordFuture], None]:
    """Adapt a Kafka-style `callback(metadata, exception)` to `add_done_callback`."""

    def on_done(future: RecordFuture) -> None:
        error = future._result.error
        if error is not None:
            callback(None, error)
        else:
            callback(future._metadata(future._result), None)

    return on_done
