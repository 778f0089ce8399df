"""Where requests wait for the log to move: fetches with `min_bytes` (long poll) and
`acks=all` produces waiting for the high watermark (Kafka's DelayedFetch and DelayedProduce).

Kafka keeps delayed operations in a timing wheel checked by a reaper thread; on asyncio the loop
is already the timer and the scheduler. A waiter is one future registered under the keys it
depends on (topic-partitions); whatever moves a partition (an append, a high watermark advance,
a leadership change, a deletion) calls `notify(key)`, which resolves those futures, and each
waiter re-checks its own condition. No polling: an idle long poll costs one future and one
timer until it is satisfied or its time is up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class Purgatory(Generic[K]):
    """Futures keyed by what they wait on.

    Lifecycle: one per storage node, created before the servers start; `close()` at shutdown
    wakes every waiter so in-flight requests answer with what they have. Only the event-loop
    thread may call it (no locks: the single-threaded loop orders every check and wake-up).
    """

    def __init__(self) -> None:
        self._watchers: dict[K, set[asyncio.Future[None]]] = {}
        self._closed = False

    def __len__(self) -> int:
        """Waiters registered now (a waiter under several keys counts once per key)."""
        return sum(len(futures) for futures in self._watchers.values())

    def notify(self, key: K) -> int:
        """Wake every waiter registered under `key`; returns how many were woken."""
        futures = self._watchers.pop(key, None)
        if not futures:
            return 0
        woken = 0
        for future in futures:
            if not future.done():
                future.set_result(None)
                woken += 1
        return woken

    def notify_all(self) -> None:
        for key in list(self._watchers):
            self.notify(key)

    def close(self) -> None:
        """Wake everyone and answer later waits at once (they see their condition as is)."""
        self._closed = True
        self.notify_all()

    async def wait_until(
        self, keys: Iterable[K], satisfied: Callable[[], bool], timeout_ms: int
    ) -> bool:
        """Return True as soon as `satisfied()` holds (checked now and after every wake-up of
        one of `keys`), False once `timeout_ms` has passed without it. Cancelling the caller
        (a client that went away) unregisters the waiter."""
        if satisfied():
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000.0
        watched = list(dict.fromkeys(keys))
        while not self._closed:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            future: asyncio.Future[None] = loop.create_future()
            for key in watched:
                self._watchers.setdefault(key, set()).add(future)
            try:
                await asyncio.wait((future,), timeout=remaining)
            finally:
                self._unregister(watched, future)
            if satisfied():
                return True
        return satisfied()

    def _unregister(self, keys: list[K], future: asyncio.Future[None]) -> None:
        if not future.done():
            future.cancel()
        for key in keys:
            futures = self._watchers.get(key)
            if futures is None:
                continue
            futures.discard(future)
            if not futures:
                del self._watchers[key]


class DelayedFetch:
    """One fetch waiting for `min_bytes`: it completes when the bytes it could return reach
    `min_bytes`, when one of its partitions turns to an error (leader moved, partition deleted:
    the client must hear about it now), or when `max_wait_ms` runs out.

    `available()` returns (bytes readable now, whether some partition has an error); the fetch
    logic supplies it so this class knows nothing of logs.
    """

    def __init__(
        self,
        purgatory: Purgatory[K],
        keys: Iterable[K],
        min_bytes: int,
        max_wait_ms: int,
        available: Callable[[], tuple[int, bool]],
    ) -> None:
        self._purgatory = purgatory
        self._keys = list(keys)
        self._min_bytes = min_bytes
        self._max_wait_ms = max_wait_ms
        self._available = available

    def try_complete(self) -> bool:
        size, has_error = self._available()
        return has_error or size >= self._min_bytes

    async def wait(self) -> bool:
        """True when satisfied (enough bytes or an error), False when the wait expired."""
        return await self._purgatory.wait_until(self._keys, self.try_complete, self._max_wait_ms)


class DelayedProduce:
    """An `acks=all` produce waiting until the high watermark of every partition it wrote
    passes its last offset (every ISR member has the records), or `timeout_ms` runs out.
    Whatever moves a partition's high watermark — a follower's fetch reporting its log end
    offset, an ISR shrink, a leadership change — notifies the partition's key; with replication
    factor 1 the leader's own append moves it and the produce completes at once."""

    def __init__(
        self,
        purgatory: Purgatory[K],
        keys: Iterable[K],
        timeout_ms: int,
        acknowledged: Callable[[], bool],
    ) -> None:
        self._purgatory = purgatory
        self._keys = list(keys)
        self._timeout_ms = timeout_ms
        self._acknowledged = acknowledged

    async def wait(self) -> bool:
        return await self._purgatory.wait_until(self._keys, self._acknowledged, self._timeout_ms)
