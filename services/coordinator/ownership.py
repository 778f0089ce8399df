"""Which coordinator partitions this instance owns, following the controller's assignment in
the cluster image: a shard starts (and loads) for every partition assigned here, and stops when
the partition moves away or its epoch changes. One `Ownership` per `ShardKind`: groups on
`__consumer_offsets`, transactions on `__transaction_state` (whose partition q goes with
`__consumer_offsets` partition q mod its count, decision 0028).

Once the instance begins to stop it takes nothing more: when instances shut down together, the
controller hands each leaving instance's partitions to the others while they are still
registered, and a stopping instance that started loading them would hold its exit until the
launcher's SIGKILL (issue 10). Changes are applied to the shard table in one step, with no
await in between, so an image arriving while shards stop cannot interleave with `stop()`.

Requests find their shard here: NOT_COORDINATOR for a key whose partition is owned elsewhere
(the gateway then refreshes its routing), COORDINATOR_LOAD_IN_PROGRESS while it loads,
COORDINATOR_NOT_AVAILABLE before the topic exists.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic

from riverlog.common.clock import Clock
from riverlog.common.cluster.image import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    ClusterImage,
    CoordinatorAssignment,
    ImageFeed,
    group_partition,
)
from riverlog.common.errors import ErrorCode, RiverlogError

from .config import CoordinatorConfig
from .offsets_log import OffsetsLog
from .shard import Shard, St

Notify = Callable[[Callable[[St], None]], None]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OwnershipChange:
    """What one image changes for an instance: shards to stop, shards to start (partition →
    epoch), and partitions assigned here that a stopping instance declines."""

    stop: tuple[int, ...] = ()
    start: Mapping[int, int] = field(default_factory=dict)
    declined: tuple[int, ...] = ()


def plan_ownership(
    held: Mapping[int, int], assigned: Mapping[int, int], stopping: bool
) -> OwnershipChange:
    """Pure: from the epochs of the shards running (`held`) and of the partitions the image
    assigns to this instance, which shards stop (moved away or re-epoched) and which start. A
    stopping instance starts none: it declines them, and the controller moves them on once
    its registration is gone."""
    stop = tuple(p for p, epoch in sorted(held.items()) if assigned.get(p) != epoch)
    wanted = {p: epoch for p, epoch in sorted(assigned.items()) if held.get(p) != epoch}
    if stopping:
        return OwnershipChange(stop, {}, tuple(wanted))
    return OwnershipChange(stop, wanted)


@dataclass(frozen=True, slots=True)
class ShardKind(Generic[St]):
    """One kind of coordinator partition: its topic, who owns each of its partitions in an
    image, and how to build the state of one (given the shard's `notify`)."""

    topic: str
    key_name: str  # in messages: "group", "transactional id"
    empty_key: ErrorCode
    owners: Callable[[ClusterImage], Mapping[int, CoordinatorAssignment]]
    count: Callable[[ClusterImage], int]
    new_state: Callable[[Notify[St]], St]
    on_topics_changed: Callable[[St], None] | None = None


def group_owners(image: ClusterImage) -> Mapping[int, CoordinatorAssignment]:
    return image.coordinators


def transaction_owners(image: ClusterImage) -> Mapping[int, CoordinatorAssignment]:
    owners = {}
    for partition in range(image.transaction_partitions()):
        owner = image.transaction_owner(partition)
        if owner is not None:
            owners[partition] = owner
    return owners


def groups_kind(
    new_state: Callable[[Notify[St]], St], on_topics_changed: Callable[[St], None] | None = None
) -> ShardKind[St]:
    return ShardKind(
        OFFSETS_TOPIC,
        "group",
        ErrorCode.INVALID_GROUP_ID,
        group_owners,
        ClusterImage.offsets_partitions,
        new_state,
        on_topics_changed,
    )


def transactions_kind(new_state: Callable[[Notify[St]], St]) -> ShardKind[St]:
    return ShardKind(
        TRANSACTION_STATE_TOPIC,
        "transactional id",
        ErrorCode.INVALID_REQUEST,
        transaction_owners,
        ClusterImage.transaction_partitions,
        new_state,
    )


class Ownership(Generic[St]):
    """The shards of one kind on one instance. Lifecycle: `attach()` once the watcher has its
    first image (starts the shards already assigned), `begin_stop()` as soon as shutdown
    starts (before unregistering: from then on nothing new is taken), `await stop()` to stop
    the shards. Runs on the event loop: listener calls and request lookups never interleave
    mid-update."""

    def __init__(
        self,
        node_id: int,
        config: CoordinatorConfig,
        clock: Clock,
        watcher: ImageFeed,
        storage: OffsetsLog,
        kind: ShardKind[St],
        incarnation: int = 0,
    ) -> None:
        self.node_id = node_id
        self.incarnation = incarnation
        self.config = config
        self.clock = clock
        self.watcher = watcher
        self.storage = storage
        self.kind = kind
        self.shards: dict[int, Shard[St]] = {}
        self.stopping = False
        self._attached = False

    async def attach(self) -> None:
        if self.stopping:
            return
        self.watcher.add_listener(self._on_image)
        self._attached = True
        await self._on_image(ClusterImage.empty(), self.watcher.image)

    def begin_stop(self) -> None:
        """Take no partition from now on (idempotent). Shards already running keep serving
        until `stop()` (or until their partition moves away), so requests still get answers
        while the instance unregisters."""
        self.stopping = True

    async def stop(self) -> None:
        """Stop following the image and stop every shard at once (loads are cancelled)."""
        self.stopping = True
        if self._attached:
            self._attached = False
            self.watcher.remove_listener(self._on_image)
        shards, self.shards = self.shards, {}
        await _stop_all(shards.values())

    def assigned(self, image: ClusterImage) -> dict[int, int]:
        """Partition → epoch of what `image` assigns to this incarnation. Partitions given to a
        previous incarnation of this node id wait for the controller to give them a new epoch
        for this one, so sequences never restart within an epoch."""
        return {
            p: a.epoch
            for p, a in self.kind.owners(image).items()
            if a.coordinator_id == self.node_id and a.incarnation in (0, self.incarnation)
        }

    async def _on_image(self, old: ClusterImage, new: ClusterImage) -> None:
        held = {p: shard.epoch for p, shard in self.shards.items()}
        change = plan_ownership(held, self.assigned(new), self.stopping)
        stopped = [self.shards.pop(p) for p in change.stop]
        topic = self.kind.topic
        for shard in stopped:
            log.info("%s leaves this instance (epoch %d)", shard.name, shard.epoch)
        for partition in change.declined:
            log.info("%s-%d assigned here while stopping: declined", topic, partition)
        for partition, epoch in change.start.items():
            log.info("%s-%d assigned here (epoch %d)", topic, partition, epoch)
            shard = self._new_shard(partition, epoch)
            self.shards[partition] = shard
            shard.start()
        changed = self.kind.on_topics_changed
        if changed is not None and _counts(old) != _counts(new):
            for shard in self.shards.values():
                shard.notify(changed)
        await _stop_all(stopped)

    def _new_shard(self, partition: int, epoch: int) -> Shard[St]:
        """A shard whose state can hand work back to it (`notify`), e.g. when the markers of a
        transaction are written."""
        built: list[Shard[St]] = []

        def notify(handler: Callable[[St], None]) -> None:
            built[0].notify(handler)

        shard = Shard(
            self.kind.topic,
            partition,
            epoch,
            self.config,
            self.clock,
            self.storage,
            lambda: self.kind.new_state(notify),
            owner_id=self.node_id,
        )
        built.append(shard)
        return shard

    def shard_for(self, key: str) -> Shard[St]:
        kind = self.kind
        if not key:
            raise RiverlogError(f"the {kind.key_name} is empty", kind.empty_key)
        count = kind.count(self.watcher.image)
        if count == 0:
            raise RiverlogError(
                f"{kind.topic} does not exist yet", ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
        partition = group_partition(key, count)
        shard = self.shards.get(partition)
        if shard is None or shard.fenced:
            raise RiverlogError(
                f"{kind.key_name} {key} ({kind.topic}-{partition}) is not coordinated here",
                ErrorCode.NOT_COORDINATOR,
            )
        if not shard.ready:
            raise RiverlogError(
                f"{kind.topic}-{partition} is loading", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            )
        return shard

    def shard_at(self, partition: int) -> Shard[St]:
        """The ready shard of a partition (a marker names the partition, not a key)."""
        shard = self.shards.get(partition)
        if shard is None or shard.fenced:
            raise RiverlogError(
                f"{self.kind.topic}-{partition} is not coordinated here", ErrorCode.NOT_COORDINATOR
            )
        if not shard.ready:
            raise RiverlogError(
                f"{self.kind.topic}-{partition} is loading", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            )
        return shard

    def ready_shards(self) -> list[Shard[St]]:
        return [s for _, s in sorted(self.shards.items()) if s.ready and not s.fenced]


async def _stop_all(shards: Iterable[Shard[St]]) -> None:
    await asyncio.gather(*(shard.stop() for shard in shards))


def _counts(image: ClusterImage) -> dict[str, int]:
    return {name: len(t.partitions) for name, t in image.topics.items()}
