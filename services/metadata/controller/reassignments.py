"""Partition reassignment on the controller (KIP-455): AlterPartitionReassignments,
ListPartitionReassignments, and completing moves whose target has joined the ISR.

The decisions are `reassignment`'s pure steps; this module runs them against the image and
writes them as the partition changes of `ReplicationController` are written: fenced controller
transactions that also compare each partition key's mod revision with the one the decision read,
so a move decided on a stale image, or by a deposed controller, never lands (a concurrent ISR
change or election makes it decide again). Nothing is held in
memory: a move is the partition's `adding_replicas` / `removing_replicas` in etcd, so a new
controller resumes it, and a task completes every move that can complete whenever the image
changes while a reassignment is in progress (an ISR expansion, a node coming back, a takeover)
and every `SAFETY_CHECK_S` as a safety net. Lifecycle: `start()`, `await stop()`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from riverlog.common.cluster.image import PartitionInfo
from riverlog.common.errors import ErrorCode, RiverlogError

from ..image import MetadataImage
from ..records import partition_encode
from ..store import Compare, Op
from . import reassignment as steps
from .background import cancel_all, wait_woken
from .elections import PartitionUpdate
from .replication import PARTITIONS_PER_TXN, ReplicationController, chunks

log = logging.getLogger(__name__)

SAFETY_CHECK_S = 5.0
_RETRIES = 5


@dataclass(frozen=True, slots=True)
class ReassignmentItem:
    """One partition of AlterPartitionReassignments; `target` None cancels (Kafka's null)."""

    topic: str
    partition: int
    target: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """One partition of ListPartitionReassignments."""

    topic: str
    state: PartitionInfo


class ReassignmentController:
    """Reassignments of the active controller (the completion task idles on standbys)."""

    def __init__(self, replication: ReplicationController, image: MetadataImage) -> None:
        self.replication = replication
        self.image = image
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        image.add_listener(self._on_image)

    def start(self) -> None:
        self._task = asyncio.create_task(self._complete_loop(), name="controller-reassignments")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_all([task])

    def _require_controller(self) -> None:
        if not self.replication.election.is_controller:
            raise RiverlogError("this instance is not the controller", ErrorCode.NOT_CONTROLLER)

    async def _write(self, updates: Sequence[PartitionUpdate]) -> list[PartitionUpdate]:
        """Write `updates` in fenced, revision-checked transactions; the ones written."""
        written: list[PartitionUpdate] = []
        keys = self.image.keys
        for chunk in chunks(updates, PARTITIONS_PER_TXN):
            compares: list[Compare] = []
            ops: list[Op] = []
            for u in chunk:
                key = keys.partition(u.topic, u.after.partition)
                compares.append(Compare(key, self.image.revisions.get(key, 0)))
                ops.append(Op(key, partition_encode(u.after)))
            if await self.replication.election.write(compares, ops) is not None:
                written.extend(chunk)
        self.replication.count_written(written)  # leader elections and ISR changes
        return written

    async def _decide_and_write(
        self, decide: Callable[[], list[PartitionUpdate]]
    ) -> list[PartitionUpdate]:
        """`decide()` against the image of the moment, then its changes written (one at a
        time per instance: `_lock`)."""
        self._require_controller()
        async with self._lock:
            updates = decide()
            return await self._write(updates) if updates else []

    def _live(self) -> frozenset[int]:
        return frozenset(self.replication.live_storage())

    def _on_image(self) -> None:
        if self.replication.election.is_controller and self.ongoing():
            self._wake.set()

    # --- AlterPartitionReassignments ------------------------------------------------------------

    def _decide(self, item: ReassignmentItem) -> PartitionUpdate | None:
        """The change `item` asks for against the current image; raises its error."""
        topics = self.image.cluster.topics
        topic, current = steps.find_partition(topics, item.topic, item.partition)
        live = self._live()
        if item.target is None:
            after: PartitionInfo | None = steps.cancel(current, live)
        else:
            steps.validate_target(topic, item.partition, item.target, live)
            steps.validate_not_draining(
                topic, current, item.partition, item.target, self.image.draining
            )
            after = steps.start(current, item.target, live)
        return PartitionUpdate(item.topic, current, after) if after is not None else None

    def _decide_all(
        self,
        items: Sequence[ReassignmentItem],
        pending: Sequence[int],
        results: dict[int, ReassignmentResult],
        todo: dict[tuple[str, int], int],
    ) -> list[PartitionUpdate]:
        """The changes of the `pending` items; each one's result in `results` (success until
        written), the index of each change to write in `todo`."""
        updates: list[PartitionUpdate] = []
        for i in pending:
            item = items[i]
            results[i] = ReassignmentResult(item.topic, item.partition)
            try:
                update = self._decide(item)
            except RiverlogError as exc:
                name = f"{item.topic}-{item.partition}"
                why = exc.message if exc.message.startswith(name) else f"{name}: {exc.message}"
                results[i] = ReassignmentResult(item.topic, item.partition, exc.code, why)
                continue
            if update is not None:
                todo[(item.topic, item.partition)] = i
                updates.append(update)
        return updates

    async def alter(self, items: Sequence[ReassignmentItem]) -> list[ReassignmentResult]:
        """Start, replace or cancel each item's reassignment; one result per item, in order.
        A bad item changes nothing and does not stop the others; a partition named twice is
        refused (INVALID_REQUEST) both times."""
        results: dict[int, ReassignmentResult] = {}
        names = Counter((item.topic, item.partition) for item in items)
        pending: list[int] = []
        for i, item in enumerate(items):
            if names[(item.topic, item.partition)] > 1:
                results[i] = ReassignmentResult(
                    item.topic,
                    item.partition,
                    ErrorCode.INVALID_REQUEST,
                    f"{item.topic}-{item.partition} appears more than once in the request",
                )
            else:
                pending.append(i)
        for attempt in range(_RETRIES):
            if not pending:
                break
            todo: dict[tuple[str, int], int] = {}
            decide = partial(self._decide_all, items, pending, results, todo)
            written = await self._decide_and_write(decide)
            for u in written:
                todo.pop((u.topic, u.after.partition), None)
                log.info(
                    "%s-%d: reassignment written: replicas %s adding %s removing %s, leader %d",
                    u.topic,
                    u.after.partition,
                    list(u.after.replicas),
                    list(u.after.adding_replicas),
                    list(u.after.removing_replicas),
                    u.after.leader,
                )
            pending = sorted(todo.values())
            if pending:
                await asyncio.sleep(0.05 * (attempt + 1))  # raced with another change: decide again
        for i in pending:
            results[i] = ReassignmentResult(
                items[i].topic,
                items[i].partition,
                ErrorCode.INVALID_UPDATE_VERSION,
                "the partition keeps changing; retry",
            )
        self._wake.set()
        return [results[i] for i in range(len(items))]

    # --- ListPartitionReassignments -------------------------------------------------------------

    def ongoing(
        self, partitions: Sequence[tuple[str, int]] | None = None
    ) -> list[OngoingReassignment]:
        """Reassignments in progress (of `partitions`; None: all), by topic and partition.
        RiverlogError(UNKNOWN_TOPIC_OR_PARTITION) naming every asked partition that does not
        exist, as Kafka's ListPartitionReassignments answers, rather than an empty list that
        reads as "not moving"."""
        wanted = set(partitions) if partitions else None
        if wanted:
            topics = self.image.cluster.topics
            unknown = sorted(
                (t, p)
                for t, p in wanted
                if t not in topics or not 0 <= p < len(topics[t].partitions)
            )
            if unknown:
                names = ", ".join(f"{t}-{p}" for t, p in unknown)
                raise RiverlogError(
                    f"unknown topic or partition: {names}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
        out: list[OngoingReassignment] = []
        for name in sorted(self.image.cluster.topics):
            for p in self.image.cluster.topics[name].partitions:
                if steps.is_reassigning(p) and (wanted is None or (name, p.partition) in wanted):
                    out.append(OngoingReassignment(name, p))
        return out

    # --- completion -----------------------------------------------------------------------------

    async def complete_once(self) -> list[PartitionUpdate]:
        """Complete every reassignment whose target is in sync; the changes written."""

        def decide() -> list[PartitionUpdate]:
            ready = steps.completable(self.image.cluster.topics, self._live())
            return [PartitionUpdate(name, before, after) for name, before, after in ready]

        written = await self._decide_and_write(decide)
        for u in written:
            log.info(
                "%s-%d: reassignment complete: replicas %s, isr %s, leader %d (epoch %d)",
                u.topic,
                u.after.partition,
                list(u.after.replicas),
                list(u.after.isr),
                u.after.leader,
                u.after.leader_epoch,
            )
        return written

    async def _complete_loop(self) -> None:
        while True:
            await wait_woken(self._wake, SAFETY_CHECK_S)
            if not self.replication.election.is_controller or not self.ongoing():
                continue
            try:
                await self.complete_once()
            except RiverlogError as exc:
                log.warning("completing reassignments failed: %s", exc)
                await asyncio.sleep(0.5)
                self._wake.set()
            except Exception:
                log.exception("completing reassignments failed")
                await asyncio.sleep(0.5)
                self._wake.set()
