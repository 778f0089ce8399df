"""One owned coordinator partition at run time (`__consumer_offsets` for groups,
`__transaction_state` for transactions): one asyncio task that loads the partition, then drains
a queue of requests, writes what each produces, and runs the timers.

Everything about the partition's state happens on that task, so the domain needs no locks
(STYLE: one task per shard). A request is a function of the shard's state (a
`GroupCoordinator` or a `TransactionCoordinator`: anything with the `ShardState` methods) and a
reply callable; its `Outcome` records go to the partition leader with acks=all before its
continuation runs, and only then are they replayed into the state. Requests that arrive while
the partition loads are refused with COORDINATOR_LOAD_IN_PROGRESS; those parked when the shard
stops (the partition moved away) get NOT_COORDINATOR.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from riverlog.common.clock import Clock
from riverlog.common.errors import ErrorCode, RiverlogError

from .config import CoordinatorConfig
from .group.outcome import Outcome, TxnMarker
from .group.timer import Timer
from .offsets_log import OffsetsLog
from .records import CoordinatorRecord, LogRecord, owner_marker

log = logging.getLogger(__name__)


class ShardState(Protocol):
    """What a shard runs: the state of one partition, rebuilt by `replay()` of every record."""

    @property
    def timer(self) -> Timer: ...

    def replay_record(self, record: LogRecord) -> None:
        """Apply one written record (loading, and after each acks=all write), with what its
        batch says about transactions (markers, transactional records: decision 0031)."""

    def loaded(self) -> None:
        """The partition is replayed up to the owner marker: start serving (timers)."""

    def drain_outbox(self) -> list[Outcome]:
        """Outcomes produced outside a request (timers), to write after each step."""


St = TypeVar("St", bound=ShardState)
Handler = Callable[[St, Callable[[Any], None]], Outcome]

_RETRY_S = 0.2
_LOAD_RETRY_MAX_S = 2.0
_RETRIABLE_WRITE = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
    }
)
_FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED})


def write_error(code: ErrorCode) -> ErrorCode:
    """What a member is told when its records could not be written (Kafka's mapping in
    `GroupMetadataManager.appendForGroup`)."""
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, *_FENCED):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR


class Shard(Generic[St]):
    """Lifecycle: `start()`, then `submit()` from any task of the loop, `await stop()` when
    the partition moves away (or a write shows this owner is fenced: `fenced` turns True).
    `new_state` builds an empty state; loading replays the partition into a fresh one."""

    def __init__(
        self,
        topic: str,
        partition: int,
        epoch: int,
        config: CoordinatorConfig,
        clock: Clock,
        storage: OffsetsLog,
        new_state: Callable[[], St],
        owner_id: int = -1,
    ) -> None:
        self.topic = topic
        self.name = f"{topic}-{partition}"
        self.partition = partition
        self.owner_id = owner_id
        self.epoch = epoch
        self.config = config
        self.clock = clock
        self.storage = storage
        self._new_state = new_state
        self.coord: St = new_state()
        self.ready = False
        self.fenced = False
        self._sequence = 0
        self._queue: asyncio.Queue[tuple[Handler[St], Callable[[Any], None]]] = asyncio.Queue()
        self._waiting: set[asyncio.Future[Any]] = set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"shard-{self.name}")

    async def stop(self) -> None:
        """Cancel the task (a load in progress too) and wait for it to end. The wait is
        `asyncio.wait`, not `await task` under a suppressed CancelledError: that would also
        swallow a cancellation of the caller (the metadata watcher's task, cancelled at
        shutdown while it stops a shard), which then never ended (issue 10)."""
        task, self._task = self._task, None
        try:
            if task is not None:
                task.cancel()
                await asyncio.wait([task])
                if not task.cancelled() and task.exception() is not None:
                    log.error("%s: shard task failed", self.name, exc_info=task.exception())
        finally:
            error = RiverlogError(
                f"{self.name} moved to another coordinator", ErrorCode.NOT_COORDINATOR
            )
            for future in self._waiting:
                if not future.done():
                    future.set_exception(error)
            self._waiting.clear()

    async def submit(self, handler: Handler[St]) -> Any:
        """Run `handler` on the shard's task; its reply. Raises COORDINATOR_LOAD_IN_PROGRESS
        while loading, NOT_COORDINATOR when the shard stops first."""
        if not self.ready:
            raise RiverlogError(f"{self.name} is loading", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.add(future)

        def reply(value: Any) -> None:
            if future.done():
                return
            if isinstance(value, BaseException):
                future.set_exception(value)
            else:
                future.set_result(value)

        try:
            await self._queue.put((handler, reply))
            return await future
        finally:
            self._waiting.discard(future)

    def notify(self, handler: Callable[[St], None]) -> None:
        """Run `handler` on the shard's task with no reply (metadata changes)."""
        if self.ready:
            self._queue.put_nowait((lambda coord, _: _call(handler, coord), lambda _: None))

    # --- the task ---------------------------------------------------------------------------

    async def _run(self) -> None:
        await self._load()
        self.coord.loaded()
        self.ready = True
        log.info("%s loaded (epoch %d)", self.name, self.epoch)
        while True:
            item = await self._next()
            if item is not None:
                handler, reply = item
                try:
                    outcome = handler(self.coord, reply)
                except Exception:
                    log.exception("%s: handler failed", self.name)
                    reply(RiverlogError(code=ErrorCode.UNKNOWN_SERVER_ERROR))
                    outcome = Outcome()
                await self._write(outcome)
            self.coord.timer.expire()
            for queued in self.coord.drain_outbox():
                await self._write(queued)

    async def _next(self) -> tuple[Handler[St], Callable[[Any], None]] | None:
        deadline = self.coord.timer.next_deadline_ms()
        if deadline is None:
            return await self._queue.get()
        wait_s = max(0.0, (deadline - self.clock.monotonic_ms()) / 1000)
        try:
            async with asyncio.timeout(wait_s):
                return await self._queue.get()
        except TimeoutError:
            return None

    async def _load(self) -> None:
        """Fence, then read: the owner marker goes first with this owner's epoch (so storage
        refuses the previous owner's later writes), then everything up to it is replayed."""
        backoff = _RETRY_S
        fenced = False
        while True:
            fresh = self._new_state()
            try:
                if not fenced:
                    marker = Outcome([owner_marker(self.owner_id, self.epoch)])
                    await self._append_once(marker, self.config.offsets_commit_timeout_ms)
                    fenced = True
                async for record in self.storage.read(self.partition):
                    fresh.replay_record(record)
                self.coord = fresh
                return
            except RiverlogError as exc:
                log.info("%s: cannot load yet (%s)", self.name, exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _LOAD_RETRY_MAX_S)

    async def _write(self, outcome: Outcome) -> None:
        error = ErrorCode.NONE
        if outcome.marker is not None:
            error = await self._write_marker(outcome.marker)
        if outcome.records and error == ErrorCode.NONE:
            error = await self._append(outcome)
        if error == ErrorCode.NONE:
            if outcome.marker is not None:
                self.coord.replay_record(_marker_record(outcome.marker))
            self._replay_written(outcome)
        if outcome.after is not None:
            outcome.after(error)

    def _replay_written(self, outcome: Outcome) -> None:
        producer = outcome.producer
        for record in outcome.records:
            if producer is None:
                self.coord.replay_record(LogRecord(-1, record.key, record.value))
            else:
                self.coord.replay_record(
                    LogRecord(
                        -1,
                        record.key,
                        record.value,
                        producer.producer_id,
                        producer.producer_epoch,
                        producer.base_sequence + len(outcome.records) - 1,
                        transactional=True,
                    )
                )

    async def _owner_check(self, timeout_ms: int) -> ErrorCode:
        """Whether storage still takes this owner's writes (the owner marker again)."""
        try:
            await self._append_once(Outcome([owner_marker(self.owner_id, self.epoch)]), timeout_ms)
        except RiverlogError as exc:
            return exc.code
        return ErrorCode.NONE

    async def _write_marker(self, marker: TxnMarker) -> ErrorCode:
        """One attempt: the transaction coordinator's marker channel retries (here or at the
        partition's next owner), and it needs the storage node's own code to know when to
        give up (UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH)."""
        try:
            await self.storage.write_marker(
                self.partition,
                marker.producer_id,
                marker.producer_epoch,
                marker.committed,
                marker.coordinator_epoch,
                self.config.offsets_commit_timeout_ms,
            )
        except RiverlogError as exc:
            log.info("%s: marker not written: %s", self.name, exc)
            return exc.code
        return ErrorCode.NONE

    async def _append_once(self, outcome: Outcome, timeout_ms: int) -> int:
        """Append one payload; the offset of its last record. A transactional outcome (with
        `outcome.producer`) is the producer's batch behind one of the owner's, the owner
        marker again: storage takes both or neither, so a zombie owner, refused for its
        epoch, cannot write transactional offsets its successor never loaded (decision 0031)."""
        records: Sequence[CoordinatorRecord] = outcome.records
        txn_records: Sequence[CoordinatorRecord] = ()
        if outcome.producer is not None:
            records, txn_records = [owner_marker(self.owner_id, self.epoch)], outcome.records
        last = await self.storage.append(
            self.partition,
            records,
            self.epoch,
            self._sequence,
            self.clock.time_ms(),
            timeout_ms,
            producer=outcome.producer,
            txn_records=txn_records,
        )
        self._sequence += len(records)
        return last

    async def _append(self, outcome: Outcome) -> ErrorCode:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.offsets_commit_timeout_ms / 1000
        while True:
            remaining_ms = int((deadline - loop.time()) * 1000)
            try:
                await self._append_once(outcome, max(remaining_ms, 1))
                return ErrorCode.NONE
            except RiverlogError as exc:
                code = exc.code
            if code in _FENCED and outcome.producer is not None:
                # The client's producer or this owner: the owner's batch alone tells.
                code = await self._owner_check(max(remaining_ms, 1))
                if code == ErrorCode.NONE:
                    return ErrorCode.PRODUCER_FENCED
                if code not in _FENCED:
                    return write_error(code)
            if code in _FENCED:
                log.error(
                    "%s: epoch %d is fenced (%s); a newer owner exists",
                    self.name,
                    self.epoch,
                    code.name,
                )
                self.fenced = True
                return write_error(code)
            if code not in _RETRIABLE_WRITE or loop.time() + _RETRY_S >= deadline:
                log.warning("%s: write failed: %s", self.name, code.name)
                return write_error(code)
            await asyncio.sleep(_RETRY_S)


def _marker_record(marker: TxnMarker) -> LogRecord:
    return LogRecord(
        -1, None, None, marker.producer_id, marker.producer_epoch, -1, True, marker.committed
    )


def _call(handler: Callable[[St], None], coord: St) -> Outcome:
    handler(coord)
    return Outcome()
