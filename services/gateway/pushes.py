"""Fetch answers pushed unasked on a FetchStream (decision 0019, push addendum), the way
RabbitMQ Streams delivers chunks against a consumer's credit.

A FetchStream request with `push_credit` > 0 lets the gateway, after answering, go on fetching
each caught-up partition (its answer reached the high watermark, or the last stable offset
under read_committed) from the answer's next offset, and send that answer the moment the leader
gives it, without waiting for the client to ask: the client's next fetch round trip is out of
the path of a record appended to a caught-up partition. This module holds the pure parts: when
a push follows an answer (`next_push`), the credit it spends (`PushCredit`), and the stream's
table of partitions being pushed (`PushTable`), where a later request naming a partition
replaces its pushes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from riverlog.common.errors import ErrorCode
from riverlog.common.records.reader import next_fetch_offset
from riverlog.common.types import TopicPartition

__all__ = ["PushCredit", "PushTable", "next_push"]


def next_push(
    error_code: int,
    records: bytes | memoryview,
    fetch_offset: int,
    high_watermark: int,
    last_stable_offset: int,
    read_committed: bool,
) -> int | None:
    """The offset a push after this answer is fetched from, or None for no push: an error (the
    client's own path takes over), or records left to read (its prefetching reads faster)."""
    if error_code != ErrorCode.NONE:
        return None
    end = last_stable_offset if read_committed and last_stable_offset >= 0 else high_watermark
    if end < 0:
        return None
    after = next_fetch_offset(records, fetch_offset) if records else fetch_offset
    return after if after >= end else None


class PushCredit:
    """What one partition may still be pushed: `answers` answers and `max_bytes` record bytes
    (the request's fetch max bytes). An empty answer (a long poll that ran out) spends an
    answer too, so a client that stopped reading is left alone after a bounded time."""

    __slots__ = ("answers", "max_bytes")

    def __init__(self, answers: int, max_bytes: int) -> None:
        self.answers = answers
        self.max_bytes = max_bytes

    def spend(self, size: int) -> int:
        """Count one answer of `size` record bytes; the answers that may still follow it (0:
        none, the client asks again)."""
        self.answers = max(self.answers - 1, 0)
        self.max_bytes -= size
        return self.answers if self.max_bytes > 0 else 0

    def left(self) -> int:
        """The answers that may follow, without spending any."""
        return self.answers if self.max_bytes > 0 else 0


class PushTable:
    """One stream's partitions being pushed. Each request naming a partition takes a new
    generation of it (`claim`): a push whose generation is no longer current is not sent, so an
    explicit fetch replaces the pushes before it. Used on the event loop only."""

    def __init__(self) -> None:
        self._generation: dict[TopicPartition, int] = {}
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}

    def claim(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """A new generation of each of `tps`; their pushes in progress are cancelled."""
        claimed = {}
        for tp in tps:
            claimed[tp] = self._generation.get(tp, 0) + 1
            self._generation[tp] = claimed[tp]
            task = self._tasks.pop(tp, None)
            if task is not None:
                task.cancel()
        return claimed

    def current(self, tp: TopicPartition, generation: int) -> bool:
        return self._generation.get(tp) == generation

    def start(self, tp: TopicPartition, task: asyncio.Task[None]) -> None:
        """`task` pushes `tp` (its generation checked by the caller)."""
        old = self._tasks.pop(tp, None)
        if old is not None:
            old.cancel()
        self._tasks[tp] = task
        task.add_done_callback(lambda t: self._forget(tp, t))

    def _forget(self, tp: TopicPartition, task: asyncio.Task[None]) -> None:
        if self._tasks.get(tp) is task:
            del self._tasks[tp]

    def running(self) -> int:
        return len(self._tasks)

    async def close(self) -> None:
        """Cancel every push (the stream ended)."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
