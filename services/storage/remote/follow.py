"""Tiered storage's link to the node's replicas: after every metadata change, the remote log
manager runs a task for exactly the partitions this node leads, and deletes the remote data of
topics deleted while it led them. The one place that reads both the cluster image and the
replica manager for tiering (app.py wires it when `remote.log.storage.system.enable`)."""

from __future__ import annotations

from typing import Protocol

from riverlog.common.clock import Clock
from riverlog.common.cluster.image import ClusterImage
from riverlog.common.types import TopicPartition

from ..log.partition_log import PartitionLog
from ..remote_log_config import RemoteLogConfig
from .aux_state import RemoteLogAuxState, fetch_aux_state
from .factory import remote_storage_manager
from .reader import RemoteLogReader
from .remote_log_manager import RemoteLogManager


class LeaderView(Protocol):
    """What the follower reads of the replica manager (replica/replica_manager.py)."""

    def leader_logs(self) -> dict[TopicPartition, tuple[PartitionLog, int]]: ...

    def follower_logs(self) -> dict[TopicPartition, PartitionLog]: ...


class TieringFollower:
    """A MetadataWatcher listener (added after the replica manager's, so it sees the
    replicas the change made) owning the node's RemoteLogManager and the reader of the remote
    tier that fetches use."""

    def __init__(self, manager: RemoteLogManager, replicas: LeaderView) -> None:
        self.manager = manager
        self.reader = RemoteLogReader(
            manager.metadata, manager.store, manager.config.reader_cache_size_bytes
        )
        self._replicas = replicas

    def on_image(self, old: ClusterImage, new: ClusterImage) -> None:
        led = set(self.manager.led())
        gone = {
            tp
            for tp in led
            if (old_topic := old.topics.get(tp.topic)) is not None
            and (
                (new_topic := new.topics.get(tp.topic)) is None
                or new_topic.topic_id != old_topic.topic_id
            )
        }
        self.manager.sync_leaders(
            self._replicas.leader_logs(), gone, self._replicas.follower_logs()
        )

    async def aux_state(
        self, tp: TopicPartition, leader_local_start: int
    ) -> RemoteLogAuxState | None:
        """For a follower starting at its leader's local log start (the fetchers' hook)."""
        return await fetch_aux_state(
            self.manager.metadata, self.manager.store, tp, leader_local_start
        )

    async def stop(self) -> None:
        await self.manager.stop()

    # -- what the Prometheus families read (prometheus.py) ----------------------------------

    @property
    def bytes_copied(self) -> int:
        return self.manager.bytes_copied

    @property
    def remote_reads(self) -> int:
        return self.reader.reads

    @property
    def cache_hits(self) -> int:
        return self.reader.cache.hits

    @property
    def cache_misses(self) -> int:
        return self.reader.cache.misses


def remote_log_manager_for(
    config: RemoteLogConfig, clock: Clock, replicas: LeaderView
) -> TieringFollower:
    return TieringFollower(
        RemoteLogManager(config, remote_storage_manager(config), clock), replicas
    )
