"""Producer ids handed out from blocks the metadata service allocates: by the gateways to
idempotent producers (Kafka's InitProducerId without a transactional id), and by the
transaction coordinators to transactional ones.

Kafka's brokers hand out ids from blocks of 1000 that the controller allocates
(`RPCProducerIdManager` / `ProducerIdControlManager`); Riverlog's gateways play the broker's
part, because producers talk to gateways only. A gateway takes ids from its current block and
asks for the next block when 90% of the current one is used (in the background, so a producer
seldom waits); the metadata service advances one counter in etcd per block, so no two gateways,
and no gateway before and after a restart, ever hand out the same id. Ids of a block not used up
before a restart are lost, as in Kafka.

An idempotent producer's epoch is its own: a request naming its id and epoch gets the epoch
bumped (KIP-360's local bump, answered here so every client does it the same way), or a new id
when the epoch is at its maximum. A transactional id is refused here: its coordinator answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError

log = logging.getLogger(__name__)

MAX_PRODUCER_EPOCH: Final = 32767  # Kafka's Short.MAX_VALUE
PREFETCH_FRACTION: Final = 0.9  # Kafka's RPCProducerIdManager.PID_PREFETCH_THRESHOLD


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Ids `start` .. `start + length - 1`."""

    start: int
    length: int

    @property
    def end(self) -> int:
        return self.start + self.length


BlockSource = Callable[[], Awaitable[ProducerIdBlock]]


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int
    producer_epoch: int


class ProducerIdAllocator:
    """Ids from blocks. Lifecycle: built by the app with a `BlockSource` (the metadata
    service's AllocateProducerIds); used from the gateway's event loop; `close()` cancels a
    prefetch in progress."""

    def __init__(self, source: BlockSource) -> None:
        self._source = source
        self._block: ProducerIdBlock | None = None
        self._next = 0
        self._pending: ProducerIdBlock | None = None
        self._prefetch: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        """A producer id never handed out before; raises RiverlogError when no block can be
        had (the metadata service's error, retriable when it is)."""
        async with self._lock:
            if self._block is None or self._next >= self._block.end:
                await self._take_next_block()
            assert self._block is not None
            producer_id = self._next
            self._next += 1
            used = self._next - self._block.start
            if used >= self._block.length * PREFETCH_FRACTION:
                self._start_prefetch()
            return producer_id

    def take_now(self) -> int:
        """An id without waiting, for code that cannot await (the transaction coordinator's
        pure builders). Raises COORDINATOR_LOAD_IN_PROGRESS (retriable) when the block is used
        up, and starts fetching the next; `next_id()` at start-up fills the first block. Not to be
        mixed with concurrent `next_id()` calls (one user per allocator)."""
        if self._block is None or self._next >= self._block.end:
            if self._pending is not None:
                self._block, self._pending = self._pending, None
                self._prefetch = None
                self._next = self._block.start
            else:
                self._start_prefetch()
                raise RiverlogError(
                    "no producer id block yet; retry", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                )
        producer_id = self._next
        self._next += 1
        if producer_id + 1 - self._block.start >= self._block.length * PREFETCH_FRACTION:
            self._start_prefetch()
        return producer_id

    async def init_producer_id(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> ProducerIdAndEpoch:
        """Kafka's InitProducerId for an idempotent producer: a new id at epoch 0, or (with
        `producer_id` and `producer_epoch` >= 0) the same id at the next epoch."""
        if transactional_id:
            raise RiverlogError(
                f"transactional id {transactional_id!r} goes to its transaction coordinator",
                ErrorCode.NOT_COORDINATOR,
            )
        if (producer_id >= 0) != (producer_epoch >= 0):
            raise RiverlogError(
                "producer_id and producer_epoch must be given together", ErrorCode.INVALID_REQUEST
            )
        if producer_id >= 0 and producer_epoch < MAX_PRODUCER_EPOCH:
            return ProducerIdAndEpoch(producer_id, producer_epoch + 1)
        return ProducerIdAndEpoch(await self.next_id(), 0)

    async def _take_next_block(self) -> None:
        """Lock held: move to the prefetched block, fetching it now if it is not there (a
        prefetch that failed is tried again)."""
        if self._pending is None:
            task = self._prefetch
            if task is None or task.done():
                self._prefetch = None
                self._start_prefetch()
                task = self._prefetch
            assert task is not None
            try:
                await asyncio.shield(task)
            finally:
                if task.done():
                    self._prefetch = None
        assert self._pending is not None
        self._block, self._pending = self._pending, None
        self._prefetch = None
        self._next = self._block.start
        log.info("producer ids %d..%d", self._block.start, self._block.end - 1)

    def _start_prefetch(self) -> None:
        if self._pending is not None or self._prefetch is not None:
            return
        task = asyncio.create_task(self._fetch(), name="producer-id-block")
        task.add_done_callback(_consume_error)
        self._prefetch = task

    async def _fetch(self) -> None:
        block = await self._source()
        if block.length <= 0 or block.start < 0:
            raise RiverlogError(
                f"the metadata service gave an empty block {block}", ErrorCode.UNKNOWN_SERVER_ERROR
            )
        self._pending = block

    async def close(self) -> None:
        task, self._prefetch = self._prefetch, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, RiverlogError):
                await task


def _consume_error(task: asyncio.Task[None]) -> None:
    """A prefetch nobody awaited may fail: log it (the next request fetches again)."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("no producer id block: %s", task.exception())
