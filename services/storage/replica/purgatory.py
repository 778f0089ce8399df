"""Where requests wait for the log to move: fetches with `min_bytes` (long poll) and
`acks=all` produces waiting for the high watermark (Kafka's DelayedFetch and DelayedProduce).

Kafka keeps delayed operations in a timing wheel checked by a reaper thread; on asyncio the loop
is already the timer and the scheduler. A waiter is one future registered, with its condition,
under the keys it depends on (topic-partitions); whatever moves a partition (an append, a high
watermark advance, a leadership change, a deletion) calls `notify(key)`, which checks the
condition of each waiter under that key right there (Kafka's checkAndComplete calls tryComplete
in the notifying thread) and resolves only the futures whose condition now holds. A waiter whose
condition does not hold yet stays registered and is not woken: with five acks=all produces and
two follower fetches waiting on one partition, an append used to wake all seven tasks to find
that one or two could go (decision 0010, issue 10). No polling: an idle long poll costs one
future and one timer until it is satisfied or its time is up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

log = logging.getLogger(__name__)


class _Waiter:
    """One registered wait: its future (result True: satisfied, False: timed out or the
    purgatory closed) and its condition."""

    __slots__ = ("future", "satisfied")

    def __init__(self, future: asyncio.Future[bool], satisfied: Callable[[], bool]) -> None:
        self.future = future
        self.satisfied = satisfied


class Purgatory(Generic[K]):
    """Waiters keyed by what they wait on.

    Lifecycle: one per storage node, created before the servers start; `close()` at shutdown
    wakes every waiter so in-flight requests answer with what they have. Only the event-loop
    thread may call it (no locks: the single-threaded loop orders every check and wake-up).
    Conditions run inside `notify`, so they must be cheap, must not notify themselves, and
    see the state the notifier left (callers notify once their change is complete).
    """

    def __init__(self) -> None:
        self._watchers: dict[K, dict[_Waiter, None]] = {}
        self._closed = False
        self.checks = 0
        """Conditions checked by `notify` (a count for tests and profiles)."""

    def __len__(self) -> int:
        """Waiters registered now (a waiter under several keys counts once per key)."""
        return sum(len(waiters) for waiters in self._watchers.values())

    def notify(self, key: K) -> int:
        """Check the condition of every waiter registered under `key` and resolve those whose
        condition holds; returns how many were resolved. A condition that raises resolves its
        waiter too: the request then runs on and meets the error itself."""
        waiters = self._watchers.get(key)
        if not waiters:
            return 0
        completed = 0
        for waiter in list(waiters):
            if waiter.future.done():
                continue
            self.checks += 1
            try:
                ready = waiter.satisfied()
            except Exception:
                log.debug("a purgatory condition raised; completing its waiter", exc_info=True)
                ready = True
            if ready and not waiter.future.done():
                waiter.future.set_result(True)
                completed += 1
        return completed

    def notify_all(self) -> None:
        for key in list(self._watchers):
            self.notify(key)

    def close(self) -> None:
        """Wake everyone and answer later waits at once (they see their condition as is)."""
        self._closed = True
        for waiters in list(self._watchers.values()):
            for waiter in list(waiters):
                if not waiter.future.done():
                    waiter.future.set_result(False)

    async def wait_until(
        self, keys: Iterable[K], satisfied: Callable[[], bool], timeout_ms: int
    ) -> bool:
        """Return True as soon as `satisfied()` holds (checked now and at every `notify` of
        one of `keys`), False once `timeout_ms` has passed without it. Cancelling the caller
        (a client that went away) unregisters the waiter."""
        if satisfied():
            return True
        if self._closed:
            return False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        waiter = _Waiter(future, satisfied)
        watched = list(dict.fromkeys(keys))
        for key in watched:
            self._watchers.setdefault(key, {})[waiter] = None
        timer = loop.call_later(max(timeout_ms, 0) / 1000.0, _expire, future)
        try:
            done = await future
        finally:
            timer.cancel()
            self._unregister(watched, waiter)
        if done:
            return True
        return satisfied()

    def _unregister(self, keys: list[K], waiter: _Waiter) -> None:
        if not waiter.future.done():
            waiter.future.cancel()
        for key in keys:
            waiters = self._watchers.get(key)
            if waiters is None:
                continue
            waiters.pop(waiter, None)
            if not waiters:
                del self._watchers[key]


def _expire(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)


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
