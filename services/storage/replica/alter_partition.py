"""Sends the leaders' ISR changes to the controller (Kafka's AlterPartitionManager).

A partition has at most one change in flight (its `IsrState.pending`); the manager batches the
changes waiting at the moment into one AlterPartition request and hands each answer back to its
partition. Answers, as Kafka reads them:

- NONE: the controller committed the change; its state (ISR, partition epoch) becomes ours.
- INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH: the change was based on a stale state. When the
  answer carries the partition's current state at our leader epoch we take it (and may ask
  again); otherwise the change stays pending until the image brings the newer state. An answer
  whose partition epoch is older than ours comes from a controller whose image lags the etcd
  write this node has already seen (storage nodes follow any metadata instance's image): no
  image will ever bring us a newer state, so the request is sent again after the backoff, as
  for a retriable error, until the controller has caught up. (Waiting on the image there left
  the change pending for good: no ISR change for the partition again, and a reassignment whose
  new replica could never join the ISR never completed.)
- retriable errors (the controller moving, a timeout, no answer at all): sent again after a
  backoff, as long as the partition still waits on that change.
- anything else (INELIGIBLE_REPLICA, an unknown partition...): the change is dropped; the next
  shrink/expand check decides afresh.

The controller is reached through a `ControllerChannel` (in `peers/`), so this module stays
free of gRPC and protobufs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from riverlog.common.errors import ERRORS, ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from .isr import AlterIsrRequest
from .partition import Partition

log = logging.getLogger(__name__)

_WAIT_FOR_IMAGE = frozenset({ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.FENCED_LEADER_EPOCH})


@dataclass(frozen=True, slots=True)
class AlterIsrOutcome:
    """The controller's answer for one partition: the error, and the partition's state when
    the answer carries one (leader epoch, ISR, partition epoch)."""

    tp: TopicPartition
    error: ErrorCode
    error_message: str = ""
    leader_epoch: int = -1
    isr: tuple[int, ...] | None = None
    partition_epoch: int = -1


class ControllerChannel(Protocol):
    async def alter_partition(self, requests: list[AlterIsrRequest]) -> list[AlterIsrOutcome]: ...


class AlterPartitionManager:
    """Lifecycle: `submit()` from any partition (event-loop thread), `start()` runs the sender
    task, `await stop()` ends it. `lookup(tp)` finds the partition an answer belongs to."""

    def __init__(
        self,
        channel: ControllerChannel,
        lookup: Callable[[TopicPartition], Partition | None],
        retry_backoff_ms: int = 500,
    ) -> None:
        self._channel = channel
        self._lookup = lookup
        self._backoff_s = retry_backoff_ms / 1000.0
        self._queue: dict[TopicPartition, AlterIsrRequest] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.sent = 0

    def submit(self, request: AlterIsrRequest) -> None:
        self._queue[request.tp] = request
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="alter-partition")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._queue:
                continue
            batch, self._queue = list(self._queue.values()), {}
            retry = await self.send(batch)
            if retry:
                await asyncio.sleep(self._backoff_s)
                for request in retry:
                    self._queue.setdefault(request.tp, request)
                self._wake.set()

    async def send(self, batch: list[AlterIsrRequest]) -> list[AlterIsrRequest]:
        """Send one batch and apply the answers; returns the requests to send again."""
        self.sent += 1
        try:
            outcomes = await self._channel.alter_partition(batch)
        except RiverlogError as exc:
            log.warning("AlterPartition of %d partitions failed: %s", len(batch), exc)
            if exc.retriable:
                return [r for r in batch if self._still_pending(r)]
            outcomes = [AlterIsrOutcome(r.tp, exc.code, exc.message) for r in batch]
        by_tp = {o.tp: o for o in outcomes}
        retry: list[AlterIsrRequest] = []
        for request in batch:
            outcome = by_tp.get(request.tp)
            if outcome is None:
                retry.append(request)
            elif self.apply(request, outcome):
                retry.append(request)
        return [r for r in retry if self._still_pending(r)]

    def apply(self, request: AlterIsrRequest, outcome: AlterIsrOutcome) -> bool:
        """Hand one answer to its partition; returns whether the request should be resent."""
        partition = self._lookup(request.tp)
        if partition is None:
            return False
        if outcome.error == ErrorCode.NONE:
            if outcome.isr is not None and outcome.leader_epoch == request.leader_epoch:
                partition.replication.on_alter_isr_result(
                    request, outcome.isr, outcome.partition_epoch
                )
            else:
                partition.replication.on_alter_isr_result(request, None, -1)
            return False
        log.info(
            "%s: AlterPartition %s refused: %s (%s)",
            request.tp,
            list(request.new_isr),
            outcome.error.name,
            outcome.error_message,
        )
        if outcome.error in _WAIT_FOR_IMAGE:
            same_epoch = outcome.isr is not None and outcome.leader_epoch == request.leader_epoch
            if same_epoch and outcome.partition_epoch > request.partition_epoch:
                assert outcome.isr is not None
                partition.replication.on_alter_isr_result(
                    request, outcome.isr, outcome.partition_epoch
                )
            elif same_epoch and 0 <= outcome.partition_epoch < request.partition_epoch:
                return True  # the controller has not seen our state yet: ask again
            return False  # otherwise pending until the image moves the partition on
        if ERRORS[outcome.error].retriable:
            return True
        partition.replication.on_alter_isr_result(request, None, -1)
        return False

    def _still_pending(self, request: AlterIsrRequest) -> bool:
        partition = self._lookup(request.tp)
        return partition is not None and partition.replication.isr_state.pending is request
