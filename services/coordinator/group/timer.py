"""Keyed timers on an injected clock (Kafka's `CoordinatorTimer`): session expiry, rebalance
and sync timeouts, pending-member expiry and the offsets retention sweep.

The shard task owns one `Timer`: it sleeps until `next_deadline_ms()` (or a request arrives)
and then calls `expire()`, which runs the due callbacks in deadline order. Unit tests drive the
same object with a `ManualClock` and call `expire()` themselves, so no test sleeps. Scheduling
a key again replaces its previous timer, as Kafka's `schedule(key, ...)` does.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from riverlog.common.clock import Clock


@dataclass(order=True)
class _Entry:
    deadline_ms: int
    seq: int
    key: str = field(compare=False)
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class Timer:
    """Timers by key. Not thread-safe: used by one shard task (or one test)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._heap: list[_Entry] = []
        self._by_key: dict[str, _Entry] = {}
        self._seq = itertools.count()

    def schedule(self, key: str, delay_ms: int, callback: Callable[[], None]) -> None:
        """Run `callback` once `delay_ms` have passed, replacing any timer under `key`."""
        self.cancel(key)
        entry = _Entry(self.clock.monotonic_ms() + max(0, delay_ms), next(self._seq), key, callback)
        self._by_key[key] = entry
        heapq.heappush(self._heap, entry)

    def cancel(self, key: str) -> None:
        entry = self._by_key.pop(key, None)
        if entry is not None:
            entry.cancelled = True

    def is_scheduled(self, key: str) -> bool:
        return key in self._by_key

    def deadline_ms(self, key: str) -> int | None:
        entry = self._by_key.get(key)
        return entry.deadline_ms if entry is not None else None

    def next_deadline_ms(self) -> int | None:
        while self._heap and self._heap[0].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0].deadline_ms if self._heap else None

    def expire(self) -> int:
        """Run every callback whose deadline has passed; how many ran. A callback may schedule
        new timers (due ones run in this same call)."""
        ran = 0
        while True:
            deadline = self.next_deadline_ms()
            if deadline is None or deadline > self.clock.monotonic_ms():
                return ran
            entry = heapq.heappop(self._heap)
            del self._by_key[entry.key]
            entry.callback()
            ran += 1

    def clear(self) -> None:
        self._heap.clear()
        self._by_key.clear()
