"""The transaction coordinator's `MarkerChannel` over the storage nodes: each partition of an
ending transaction gets its commit or abort marker from its leader's WriteTxnMarkers, all
partitions at once, each retried until written (a leader moving, a node restarting), as Kafka's
TransactionMarkerChannelManager keeps sending until every marker is in.

A `__consumer_offsets` partition's marker goes to the coordinator instance owning that
partition instead (`PeerCoordinators`, decision 0031): it writes the marker at storage and
then commits or drops the producer's pending TxnOffsetCommit offsets. It is retried the same way
until the partition's current owner has it (the owner moving, restarting or still loading).

Kafka's answers that end the retries without a marker: UNKNOWN_TOPIC_OR_PARTITION (the topic was
deleted: nothing left to mark) and INVALID_PRODUCER_EPOCH (the partition has a newer epoch of the
producer, so this transaction's records are fenced there already). Only then, or once every
marker is written, is `done` called, and the coordinator writes CompleteCommit/CompleteAbort.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from riverlog.common.cluster import ClusterImage
from riverlog.common.cluster.image import OFFSETS_TOPIC, group_partition
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from ..txn.metadata import TransactionMetadata
from ..txn.state import TransactionState
from .coordinators import PeerCoordinators
from .storage import StorageClient

log = logging.getLogger(__name__)

# Final answers: retrying cannot change them. TRANSACTION_COORDINATOR_FENCED means a newer
# coordinator already wrote a marker for this producer, so ours is obsolete (Kafka's
# TransactionMarkerRequestCompletionHandler drops the partition on it too).
_GIVE_UP: Final = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    }
)
_TIMEOUT_MS: Final = 10_000
_BACKOFF_S: Final = 0.1
_BACKOFF_MAX_S: Final = 2.0


class StorageMarkerChannel:
    """Lifecycle: one per coordinator process, used on its event loop; `close()` cancels the
    markers still being sent (their transactions are finished by the next owner on load)."""

    def __init__(
        self,
        storage: StorageClient,
        image: Callable[[], ClusterImage],
        offsets: PeerCoordinators | None = None,
    ) -> None:
        self._storage = storage
        self._image = image
        self._offsets = offsets
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, meta: TransactionMetadata, done: Callable[[], None]) -> None:
        task = asyncio.create_task(
            self._write_all(meta, done), name=f"markers-{meta.transactional_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _write_all(self, meta: TransactionMetadata, done: Callable[[], None]) -> None:
        committed = meta.state is TransactionState.PREPARE_COMMIT
        epoch = self._coordinator_epoch(meta.transactional_id)
        await asyncio.gather(
            *(self._write_one(meta, tp, committed, epoch) for tp in sorted(meta.partitions))
        )
        done()

    async def _write_one(
        self, meta: TransactionMetadata, tp: TopicPartition, committed: bool, epoch: int
    ) -> None:
        backoff = _BACKOFF_S
        while True:
            try:
                await self._write(meta, tp, committed, epoch)
                return
            except RiverlogError as exc:
                if exc.code in _GIVE_UP:
                    log.warning("%s: no marker for %s: %s", meta.transactional_id, tp, exc)
                    return
                log.info("%s: marker for %s not written yet: %s", meta.transactional_id, tp, exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)

    async def _write(
        self, meta: TransactionMetadata, tp: TopicPartition, committed: bool, epoch: int
    ) -> None:
        pid, producer_epoch = meta.producer_id, meta.producer_epoch
        if tp.topic == OFFSETS_TOPIC and self._offsets is not None:
            await self._offsets.write_marker(
                tp.partition, pid, producer_epoch, committed, epoch, _TIMEOUT_MS
            )
        else:
            await self._storage.write_txn_marker(
                tp, pid, producer_epoch, committed, epoch, _TIMEOUT_MS
            )

    def _coordinator_epoch(self, transactional_id: str) -> int:
        """The epoch of the `__transaction_state` partition's owner (decision 0028)."""
        image = self._image()
        count = image.transaction_partitions()
        owner = image.transaction_owner(group_partition(transactional_id, count)) if count else None
        return owner.epoch if owner is not None else 0
