"""`DeliveryBridge`: turns the sync producer's `RecordFuture`s into asyncio futures.

A record's outcome is set by the producer's sender thread, once per batch (`BatchResult`). The
bridge registers one done-callback per batch, not per record, and that callback hands the batch
to the event loop with a single `call_soon_threadsafe`; on the loop, every record waiting on the
batch gets its `RecordMetadata` or the batch's error (the same exception object the sync
future raises). No thread per call, one loop wake-up per batch.
"""

from __future__ import annotations

import asyncio
import logging

from ..producer.future import BatchResult, RecordFuture, RecordMetadata

log = logging.getLogger(__name__)


class DeliveryBridge:
    """Bound to one event loop; `watch` is called on the loop's thread, `_on_done` on the
    sender thread (or the loop's, when the batch was already complete)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiting: dict[BatchResult, list[tuple[asyncio.Future[RecordMetadata], int]]] = {}

    def watch(self, future: RecordFuture) -> asyncio.Future[RecordMetadata]:
        """An asyncio future resolved with the record's outcome. Cancelling it only stops the
        waiting: a record cannot be taken back once sent."""
        result, index = future
        waiter: asyncio.Future[RecordMetadata] = self._loop.create_future()
        waiting = self._waiting.get(result)
        if waiting is None:
            self._waiting[result] = waiting = []
            future.add_done_callback(self._on_done)
        waiting.append((waiter, index))
        return waiter

    @property
    def pending(self) -> int:
        """Batches with records still awaited."""
        return len(self._waiting)

    def _on_done(self, future: RecordFuture) -> None:
        try:
            self._loop.call_soon_threadsafe(self._resolve, future[0])
        except RuntimeError:  # the loop is closed: nobody is left to wait
            log.debug("event loop closed before %r completed", future)

    def _resolve(self, result: BatchResult) -> None:
        error = result.error
        for waiter, index in self._waiting.pop(result, ()):
            if waiter.done():  # cancelled by its awaiter
                continue
            if error is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(result.metadata(index))
