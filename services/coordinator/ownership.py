"""Which `__consumer_offsets` partitions this coordinator instance owns, following the
controller's assignment in the cluster image: a shard starts (and loads) for every partition
assigned here, and stops when the partition moves away or its epoch changes.

Requests find their shard here: NOT_COORDINATOR for a group whose partition is owned elsewhere
(the gateway then refreshes its routing), COORDINATOR_LOAD_IN_PROGRESS while it loads,
COORDINATOR_NOT_AVAILABLE before the topic exists.
"""

from __future__ import annotations

import logging

from riverlog.common.clock import Clock
from riverlog.common.cluster import ClusterImage, MetadataWatcher
from riverlog.common.cluster.image import OFFSETS_TOPIC, group_partition
from riverlog.common.errors import ErrorCode, RiverlogError

from .config import CoordinatorConfig
from .peers.storage import StorageClient
from .shard import Shard

log = logging.getLogger(__name__)


class Ownership:
    """The shards of one instance. Lifecycle: `attach()` once the watcher has its first image
    (starts the shards already assigned), `await stop()` at shutdown. Runs on the event loop:
    listener calls and request lookups never interleave mid-update."""

    def __init__(
        self,
        node_id: int,
        config: CoordinatorConfig,
        clock: Clock,
        watcher: MetadataWatcher,
        storage: StorageClient,
        incarnation: int = 0,
    ) -> None:
        self.node_id = node_id
        self.incarnation = incarnation
        self.config = config
        self.clock = clock
        self.watcher = watcher
        self.storage = storage
        self.shards: dict[int, Shard] = {}

    def partition_count(self, topic: str) -> int:
        info = self.watcher.image.topics.get(topic)
        return len(info.partitions) if info is not None else 0

    async def attach(self) -> None:
        self.watcher.add_listener(self._on_image)
        await self._on_image(ClusterImage.empty(), self.watcher.image)

    async def stop(self) -> None:
        for partition in sorted(self.shards):
            await self.shards.pop(partition).stop()

    async def _on_image(self, old: ClusterImage, new: ClusterImage) -> None:
        # Partitions given to a previous incarnation of this node id wait for the controller to
        # give them a new epoch for this one, so sequences never restart within an epoch.
        mine = {
            p: a.epoch
            for p, a in new.coordinators.items()
            if a.coordinator_id == self.node_id and a.incarnation in (0, self.incarnation)
        }
        for partition, shard in sorted(self.shards.items()):
            if mine.get(partition) != shard.epoch:
                log.info(
                    "__consumer_offsets-%d leaves this instance (epoch %d)", partition, shard.epoch
                )
                del self.shards[partition]
                await shard.stop()
        for partition, epoch in sorted(mine.items()):
            if partition not in self.shards:
                log.info("__consumer_offsets-%d assigned here (epoch %d)", partition, epoch)
                shard = Shard(
                    partition,
                    epoch,
                    self.config,
                    self.clock,
                    self.storage,
                    self.partition_count,
                    owner_id=self.node_id,
                )
                self.shards[partition] = shard
                shard.start()
        if _counts(old) != _counts(new):
            for shard in self.shards.values():
                shard.notify(lambda coord: coord.groups.on_partition_counts())

    def shard_for(self, group_id: str) -> Shard:
        if not group_id:
            raise RiverlogError("the group id is empty", ErrorCode.INVALID_GROUP_ID)
        count = self.watcher.image.offsets_partitions()
        if count == 0:
            raise RiverlogError(
                f"{OFFSETS_TOPIC} does not exist yet", ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
        partition = group_partition(group_id, count)
        shard = self.shards.get(partition)
        if shard is None or shard.fenced:
            raise RiverlogError(
                f"group {group_id} ({OFFSETS_TOPIC}-{partition}) is not coordinated here",
                ErrorCode.NOT_COORDINATOR,
            )
        if not shard.ready:
            raise RiverlogError(
                f"{OFFSETS_TOPIC}-{partition} is loading", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            )
        return shard

    def ready_shards(self) -> list[Shard]:
        return [s for _, s in sorted(self.shards.items()) if s.ready and not s.fenced]


def _counts(image: ClusterImage) -> dict[str, int]:
    return {name: len(t.partitions) for name, t in image.topics.items()}
