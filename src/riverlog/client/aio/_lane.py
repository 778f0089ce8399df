"""`Lane`: one worker thread that runs a sync client's blocking calls, in the order they were
submitted, so an asyncio client never blocks its event loop on a gRPC call or a wait.

One thread per client, not per call: the sync clients already do their I/O on their own
threads (the producer's sender, the consumer's fetches and heartbeat) or in short blocking calls;
the lane only keeps those calls off the loop. One worker also keeps the sync consumer's rule (used
from one thread at a time) and the producer's record order (a send that had to wait for metadata
or buffer memory is followed by every later send until the lane is idle again).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Lane:
    """A single-thread executor that knows whether it is idle. Created by the asyncio client;
    `submit`/`run` are called on the event loop's thread; the worker thread starts on the first
    call and ends at `shutdown`."""

    def __init__(self, name: str) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=name
        )
        # Calls submitted and not yet finished or cancelled. Not "the last one submitted is
        # done": a cancelled call is done at once, while the calls before it still run.
        self._pending = 0
        self._lock = threading.Lock()  # guards _pending's writes (loop and worker)

    @property
    def idle(self) -> bool:
        """Nothing submitted is still queued or running."""
        return self._pending == 0  # a plain read: the send path asks once per record

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        with self._lock:
            future = self._executor.submit(fn)
            self._pending += 1
        future.add_done_callback(self._finished)
        return future

    def _finished(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._pending -= 1

    async def run(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the worker after what is queued and await its result. Cancelling the
        awaiting task drops `fn` if it has not started; once started it runs to the end (a
        gRPC call or a wait is not interrupted) and its outcome is discarded."""
        return await asyncio.wrap_future(self.submit(fn))

    def shutdown(self) -> None:
        """Let the worker finish what is queued and exit; returns at once."""
        self._executor.shutdown(wait=False)
