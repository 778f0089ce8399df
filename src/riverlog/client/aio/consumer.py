"""`AIOConsumer`: the `Consumer` for asyncio applications, a thin layer over the sync one.

Fetching, positions, offset resets, isolation, groups (join, sync, heartbeats, commits,
rebalance listeners) and errors are the sync consumer's own; this module runs its blocking calls
on one worker thread (`Lane`, which also keeps the sync consumer's one-thread-at-a-time rule)
and awaits them (decision 0037). Calls that never wait (`subscribe`, `assign`, reads of state)
run on the event loop when the worker is idle.

Records are never lost to cancellation: a `poll` cancelled while the worker is inside the sync
`poll` keeps that call's records (or its error) for the next `poll`. `async for` hands out
records one at a time from the last poll; a `commit()` of "everything consumed" commits only
what was handed out.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from typing import Any, Self, TypeVar

from riverlog.common.types import TopicPartition

from .._closing import AsyncClosing
from ..consumer import Consumer, ConsumerRebalanceListener, ConsumerRecord, OffsetAndMetadata
from ..consumer.group import ConsumerGroupMetadata
from ._lane import Lane
from ._wrap import awaitable

T = TypeVar("T")
Records = dict[TopicPartition, list[ConsumerRecord]]


class AIOConsumer(AsyncClosing):
    """Reads partitions from coroutines; same configuration, errors and semantics as
    `Consumer` (it is one, underneath).

        async with AIOConsumer({"bootstrap.servers": "127.0.0.1:9092",
                                "group.id": "billing"}) as consumer:
            consumer.subscribe(["events"])
            async for record in consumer:
                ...

    Use it from one task at a time, as the sync consumer from one thread (calls from several
    tasks are run one after another). The rebalance listener's callbacks may be plain or
    `async def` methods; either way they run while `poll` waits for them, as the sync
    consumer's do inside poll(). Lifecycle: created → assign or subscribe → poll... →
    `await close()` (also on leaving `async with`).
    """

    def __init__(self, conf: Mapping[str, object] | None = None, **kwargs: object) -> None:
        self._consumer = Consumer(conf, **kwargs)
        self.config = self._consumer.config
        self._lane = Lane(f"{self._consumer.client_id}-aio")
        self._kept: dict[TopicPartition, deque[ConsumerRecord]] = {}  # handed out by no poll yet
        self._kept_lock = threading.Lock()  # the worker adds a cancelled poll's records
        self._kept_error: BaseException | None = None
        self._closed = False

    @property
    def _sync(self) -> Consumer:
        return self._consumer

    @property
    def client_id(self) -> str:
        return self._consumer.client_id

    async def _call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the worker, after a kept error (of a cancelled poll or a deferred
        subscribe/assign) is raised."""
        self._raise_kept_error()
        if self._closed:
            return fn()  # the sync consumer raises ClientClosedError without blocking
        return await self._lane.run(fn)

    def _raise_kept_error(self) -> None:
        with self._kept_lock:
            error, self._kept_error = self._kept_error, None
        if error is not None:
            raise error

    def _now_or_queued(self, fn: Callable[[], None]) -> None:
        """A call that does not wait: now, on the loop, if the worker is idle; else after what
        the worker runs (a cancelled poll), its error raised by the next awaited call."""
        if self._lane.idle or self._closed:
            fn()
        else:
            self._lane.submit(fn).add_done_callback(self._keep)

    # ---- assignment and groups (no waiting) -------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """As `Consumer.assign`."""
        wanted = list(partitions)
        self._drop_kept(lambda tp: tp not in wanted)
        self._now_or_queued(functools.partial(self._consumer.assign, wanted))

    def subscribe(
        self,
        topics: Sequence[str] = (),
        pattern: str | re.Pattern[str] | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """As `Consumer.subscribe`; `listener`'s methods may be coroutines (see the class)."""
        if listener is not None:
            listener = _LoopListener(listener, asyncio.get_running_loop())
        self._now_or_queued(functools.partial(self._consumer.subscribe, topics, pattern, listener))

    def assignment(self) -> set[TopicPartition]:
        return self._consumer.assignment()

    def subscription(self) -> set[str]:
        return self._consumer.subscription()

    def group_metadata(self) -> ConsumerGroupMetadata:
        return self._consumer.group_metadata()

    def highwater(self, tp: TopicPartition) -> int | None:
        return self._consumer.highwater(tp)

    def metrics(self) -> dict[str, float]:
        return self._consumer.metrics()

    async def unsubscribe(self) -> None:
        """As `Consumer.unsubscribe` (it leaves the group: a call to the coordinator)."""
        self._drop_kept(lambda tp: True)
        await self._call(self._consumer.unsubscribe)

    # ---- polling ----------------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> Records:
        """As `Consumer.poll`: `{TopicPartition: [ConsumerRecord, ...]}`, waiting up to
        `timeout_ms` for some. Records kept from a cancelled poll or an `async for` come first,
        without a call."""
        kept = self._take_kept(max_records)
        if kept:
            return kept
        self._raise_kept_error()
        if self._closed:
            return self._consumer.poll(timeout_ms, max_records)  # raises ClientClosedError
        future = self._lane.submit(functools.partial(self._poll_on_worker, timeout_ms, max_records))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.add_done_callback(self._keep)  # records of a poll already under way
            raise

    getmany = poll  # aiokafka's name

    def _poll_on_worker(self, timeout_ms: int, max_records: int | None) -> Records:
        """The sync poll, unless a cancelled poll that ran just before left records (or an
        error) behind: those come first, in order."""
        kept = self._take_kept(max_records)
        if kept:
            return kept
        self._raise_kept_error()
        return self._consumer.poll(timeout_ms, max_records)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ConsumerRecord:
        """The next record, polling (a max.poll.records batch at a time) until there is one;
        ends when the consumer is closed."""
        while True:
            record = self._next_kept()
            if record is not None:
                return record
            if self._closed:
                raise StopAsyncIteration
            records = await self.poll(timeout_ms=self.config.fetch_max_wait_ms)
            with self._kept_lock:
                for tp, batch in records.items():
                    self._kept.setdefault(tp, deque()).extend(batch)

    # ---- records kept for later -------------------------------------------------------------

    def _keep(self, future: concurrent.futures.Future[Any]) -> None:
        """Done-callback (any thread) of a call nobody awaits any more: keep its records or its
        error for the next call."""
        if future.cancelled():
            return
        error = future.exception()
        with self._kept_lock:
            if error is not None:
                if self._kept_error is None:
                    self._kept_error = error
                return
            records = future.result()
            if isinstance(records, dict):
                for tp, batch in records.items():
                    self._kept.setdefault(tp, deque()).extend(batch)

    def _take_kept(self, max_records: int | None) -> Records:
        limit = self.config.max_poll_records if max_records is None else max_records
        out: Records = {}
        with self._kept_lock:
            for tp, queue in list(self._kept.items()):
                while queue and limit > 0:
                    out.setdefault(tp, []).append(queue.popleft())
                    limit -= 1
                if not queue:
                    del self._kept[tp]
        return out

    def _next_kept(self) -> ConsumerRecord | None:
        with self._kept_lock:
            for tp, queue in self._kept.items():
                record = queue.popleft()
                if not queue:
                    del self._kept[tp]
                return record
        return None

    def _drop_kept(self, which: Callable[[TopicPartition], bool]) -> None:
        with self._kept_lock:
            for tp in [tp for tp in self._kept if which(tp)]:
                del self._kept[tp]

    def _handed_out(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """What "commit everything consumed" means here: each position, except that a
        partition with kept records is at its first kept record (worker thread)."""
        consumed = self._consumer._subs.consumed()
        with self._kept_lock:
            for tp, queue in self._kept.items():
                if queue:
                    consumed[tp] = queue[0].offset
        return {tp: OffsetAndMetadata(offset) for tp, offset in consumed.items()}

    # ---- offsets and positions --------------------------------------------------------------

    async def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """As `Consumer.commit_sync`: `offsets` (each the NEXT offset to read), or every
        record handed out so far when None."""

        def commit() -> None:
            wanted = self._handed_out() if offsets is None and self._kept else offsets
            self._consumer.commit_sync(wanted, timeout_ms)

        await self._call(commit)

    commit_sync = commit  # the sync consumer's name

    async def seek(self, tp: TopicPartition, offset: int) -> None:
        """As `Consumer.seek` (records kept for `tp` are dropped)."""
        self._drop_kept(lambda kept: kept == tp)
        await self._call(functools.partial(self._consumer.seek, tp, offset))

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """As `Consumer.seek_to_beginning`."""
        self._drop_kept(lambda tp: not partitions or tp in partitions)
        await self._call(functools.partial(self._consumer.seek_to_beginning, *partitions))

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        """As `Consumer.seek_to_end`."""
        self._drop_kept(lambda tp: not partitions or tp in partitions)
        await self._call(functools.partial(self._consumer.seek_to_end, *partitions))

    async def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int:
        """As `Consumer.position`, less the records kept for `tp` (not handed out yet)."""

        def position() -> int:
            with self._kept_lock:
                kept = self._kept.get(tp)
                if kept:
                    return kept[0].offset
            return self._consumer.position(tp, timeout_ms)

        return await self._call(position)

    committed = awaitable(Consumer.committed)
    offsets_for_times = awaitable(Consumer.offsets_for_times)
    beginning_offsets = awaitable(Consumer.beginning_offsets)
    end_offsets = awaitable(Consumer.end_offsets)

    # ---- lifecycle --------------------------------------------------------------------------

    async def close(self) -> None:
        """As `Consumer.close` (commits with enable.auto.commit, leaves the group), after a
        poll still under way ends. Records kept and not handed out are dropped. Idempotent."""
        if self._closed:
            return
        try:
            await self._lane.run(self._consumer.close)
        finally:
            self._closed = True
            self._drop_kept(lambda tp: True)
            self._lane.shutdown()

    def __repr__(self) -> str:
        return f"<AIOConsumer over {self._consumer!r}>"


class _LoopListener(ConsumerRebalanceListener):
    """Runs an application's listener from the worker thread (inside the sync poll): a
    coroutine method on the event loop, awaited there while the worker waits for it; a plain
    method on the worker, as the sync consumer would."""

    def __init__(self, listener: ConsumerRebalanceListener, loop: asyncio.AbstractEventLoop):
        self._listener = listener
        self._loop = loop

    def _run(self, method: Callable[[Set[TopicPartition]], Any], tps: Set[TopicPartition]) -> None:
        outcome = method(tps)
        if asyncio.iscoroutine(outcome):
            asyncio.run_coroutine_threadsafe(outcome, self._loop).result()

    def on_partitions_revoked(self, partitions: Set[TopicPartition]) -> None:
        self._run(self._listener.on_partitions_revoked, partitions)

    def on_partitions_assigned(self, partitions: Set[TopicPartition]) -> None:
        self._run(self._listener.on_partitions_assigned, partitions)

    def on_partitions_lost(self, partitions: Set[TopicPartition]) -> None:
        listener = self._listener
        if type(listener).on_partitions_lost is ConsumerRebalanceListener.on_partitions_lost:
            self._run(listener.on_partitions_revoked, partitions)  # Kafka's default, awaited
        else:
            self._run(listener.on_partitions_lost, partitions)
