"""Which partitions this node hosts and in what role, kept in step with the cluster image.

Kafka's ReplicaManager applying metadata deltas: for every partition whose replicas include this
node a log is opened or created (with the topic's configs over the node's log defaults) and a
`Partition` takes the leader, epoch and ISR of the image. Logs of deleted topics, and of
partitions a reassignment moved off this node (KIP-455; also found at startup), are deleted; a
topic deleted and created again under the same name has a new topic id, so its old log (whose
id is in the partition directory's `partition.metadata`, as Kafka keeps it) is deleted and the
partition starts empty. Requests find their partition through `get_partition`, which turns
"not here" into the error a client can act on.

Replication hangs off it: every image change is passed on to `on_partitions_changed` (the
follower fetchers follow it), ISR changes a leader wants go to `alter_isr` (the AlterPartition
sender), and `maybe_shrink_isr()` runs periodically. ISR shrink/expand counts and the number of
under-replicated partitions are kept for DescribeLogDirs and OpenTelemetry.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from riverlog.common.clock import SYSTEM_CLOCK, Clock
from riverlog.common.cluster.image import ClusterImage, PartitionInfo, TopicInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from ..log import LogConfig, LogManager, PartitionLog
from ..producer.manager import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from .isr import AlterIsrRequest
from .partition import DEFAULT_REPLICA_LAG_TIME_MAX_MS, Partition
from .purgatory import Purgatory

log = logging.getLogger(__name__)

PARTITION_METADATA_FILE: Final = "partition.metadata"


def read_topic_id(directory: Path) -> str | None:
    """The topic id recorded in a partition directory (Kafka's `version: 0` / `topic_id: x`)."""
    try:
        text = (directory / PARTITION_METADATA_FILE).read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id" and value.strip():
            return value.strip()
    return None


def write_topic_id(directory: Path, topic_id: str) -> None:
    path = directory / PARTITION_METADATA_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"version: 0\ntopic_id: {topic_id}\n", encoding="utf-8")
    tmp.replace(path)


class ReplicaManager:
    """The hosted partitions. Lifecycle: built after the LogManager has loaded the log dirs;
    `apply_image()` with the first complete image, then again as a MetadataWatcher listener at
    every change. Only the event-loop thread calls it."""

    def __init__(
        self,
        node_id: int,
        log_manager: LogManager,
        base_config: LogConfig,
        purgatory: Purgatory[TopicPartition],
        *,
        clock: Clock = SYSTEM_CLOCK,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        alter_isr: Callable[[AlterIsrRequest], None] | None = None,
        may_lead: Callable[[], bool] | None = None,
    ) -> None:
        self.node_id = node_id
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.log_manager = log_manager
        self.base_config = base_config
        self.purgatory = purgatory
        self.clock = clock
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.alter_isr = alter_isr
        self.may_lead = may_lead
        self.image = ClusterImage.empty()
        self._partitions: dict[TopicPartition, Partition] = {}
        # Called after every applied image (the follower fetchers listen).
        self.on_partitions_changed: list[Callable[[], None]] = []
        # remote.log.storage.system.enable on this node (set by the app): without it, topics
        # with remote.storage.enable keep plain retention here.
        self.remote_storage_system_enable = False
        # Told of every failed write to a partition's log (set by the app: log/dir_failure.py).
        self.on_storage_error: Callable[[Path | None, BaseException], None] | None = None
        # Counts of partitions since stopped here, so the node's totals never go down.
        self._retired_shrinks = 0
        self._retired_expands = 0

    @property
    def partitions(self) -> Mapping[TopicPartition, Partition]:
        return self._partitions

    def storage_error(self, tp: TopicPartition, exc: BaseException) -> None:
        """A write to `tp`'s log failed with `exc`: tell the log dir failure channel."""
        if self.on_storage_error is not None:
            self.on_storage_error(self.log_manager.log_dir_of(tp), exc)

    def log_config(self, topic_configs: Mapping[str, str]) -> LogConfig:
        """The node's defaults with the topic's overrides (keys the log does not read, such as
        compression.type, are validated and ignored by LogConfig)."""
        overrides = dict(topic_configs)
        try:
            config = LogConfig.from_overrides(overrides, self.base_config)
        except RiverlogError as exc:
            log.error("topic configs %s rejected (%s); using the node defaults", overrides, exc)
            return self.base_config
        if config.remote_storage_enable and not self.remote_storage_system_enable:
            # Tiering is off on this node: the topic's logs keep Kafka's plain retention.
            return dataclasses.replace(config, remote_storage_enable=False)
        return config

    # --- following the image ------------------------------------------------------------------

    def on_image(self, old: ClusterImage, new: ClusterImage) -> None:
        """MetadataWatcher listener."""
        self.apply_image(new)

    def apply_image(self, image: ClusterImage) -> None:
        self.image = image
        wanted: dict[TopicPartition, tuple[TopicInfo, PartitionInfo]] = {}
        for topic in image.topics.values():
            for info in topic.partitions:
                if self.node_id in info.replicas:
                    wanted[TopicPartition(topic.name, info.partition)] = (topic, info)
        for tp, partition in list(self._partitions.items()):
            entry = wanted.get(tp)
            if entry is None or entry[0].topic_id != partition.topic_id:
                self._stop_replica(tp)
        self._delete_orphan_logs(image)
        for tp, (topic, info) in sorted(wanted.items()):
            try:
                self._make_replica(tp, topic, info)
            except (OSError, RiverlogError) as exc:
                log.error("%s: cannot host the replica: %s", tp, exc)
        for callback in list(self.on_partitions_changed):
            callback()

    def _make_replica(self, tp: TopicPartition, topic: TopicInfo, info: PartitionInfo) -> None:
        config = self.log_config(topic.configs)
        partition = self._partitions.get(tp)
        if partition is None:
            partition_log = self.log_manager.get(tp)
            if partition_log is not None:
                recorded = read_topic_id(partition_log.dir)
                if recorded is not None and recorded != topic.topic_id:
                    log.info(
                        "%s: topic recreated (id %s, log has %s); deleting the old log",
                        tp,
                        topic.topic_id,
                        recorded,
                    )
                    self.log_manager.delete(tp)
                    partition_log = None
            if partition_log is None:
                partition_log = self.log_manager.get_or_create(tp, config)
                log.info("%s: created the log in %s", tp, partition_log.dir)
            if read_topic_id(partition_log.dir) != topic.topic_id:
                write_topic_id(partition_log.dir, topic.topic_id)
            partition = Partition(
                tp,
                topic.topic_id,
                partition_log,
                self.node_id,
                self._changed,
                clock=self.clock,
                replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
                alter_isr=self.alter_isr,
                may_lead=self.may_lead,
            )
            self._partitions[tp] = partition
        partition.update_config(config)
        partition.apply_state(info)

    def _stop_replica(self, tp: TopicPartition) -> None:
        """Stop hosting `tp` and delete its log: its topic is gone, or a reassignment moved it
        off this node (Kafka's StopReplica with delete, as KRaft brokers do on a delta)."""
        stopped = self._partitions.pop(tp)
        stopped.stop()
        self._retired_shrinks += stopped.replication.isr_shrinks
        self._retired_expands += stopped.replication.isr_expands
        log.info("%s: no longer a replica here (topic deleted or reassigned); deleting the log", tp)
        self.log_manager.delete(tp)
        self.purgatory.notify(tp)

    def _delete_orphan_logs(self, image: ClusterImage) -> None:
        """Logs on disk (found at startup) of topics that no longer exist, or exist under a new
        id (the topic was deleted while this node was away), or of partitions whose replicas no
        longer include this node (a reassignment moved it away meanwhile: Kafka's stray
        partitions)."""
        for partition_log in list(self.log_manager.all_logs()):
            tp = partition_log.tp
            if tp in self._partitions:
                continue
            topic = image.topics.get(tp.topic)
            recorded = read_topic_id(partition_log.dir)
            if topic is None or (recorded is not None and recorded != topic.topic_id):
                log.info("%s: its topic is gone (or recreated); deleting the stray log", tp)
                self.log_manager.delete(tp)
                continue
            info = image.partition(tp.topic, tp.partition)
            if info is not None and self.node_id not in info.replicas:
                log.info("%s: reassigned away from this node; deleting the stray log", tp)
                self.log_manager.delete(tp)

    def _changed(self, tp: TopicPartition) -> None:
        self.purgatory.notify(tp)

    # --- lookup -------------------------------------------------------------------------------

    def get_partition(
        self, tp: TopicPartition, current_leader_epoch: int | None, require_leader: bool = True
    ) -> Partition:
        """The hosted partition, after the epoch (and leadership) checks; raises
        NOT_LEADER_OR_FOLLOWER when the partition exists on other nodes only,
        UNKNOWN_TOPIC_OR_PARTITION when it does not exist at all."""
        partition = self._partitions.get(tp)
        if partition is None:
            raise self._not_hosted(tp)
        if require_leader:
            partition.require_leader(current_leader_epoch)
        else:
            partition.check_epoch(current_leader_epoch)
        return partition

    def _not_hosted(self, tp: TopicPartition) -> RiverlogError:
        if self.image.partition(tp.topic, tp.partition) is not None:
            return RiverlogError(
                f"{tp} is not hosted on node {self.node_id}", ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        return RiverlogError(
            f"{tp}: no such topic or partition", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self._partitions.values() if p.is_leader]

    def leader_logs(self) -> dict[TopicPartition, tuple[PartitionLog, int]]:
        """The logs this node leads, with their leader epochs (tiered storage's copy tasks)."""
        return {tp: (p.log, p.leader_epoch) for tp, p in self._partitions.items() if p.is_leader}

    def follower_logs(self) -> dict[TopicPartition, PartitionLog]:
        """The logs this node follows (tiered storage learns what is copied for them)."""
        return {tp: p.log for tp, p in self._partitions.items() if p.role.value == "follower"}

    def follower_partitions(self) -> list[Partition]:
        return [p for p in self._partitions.values() if p.role.value == "follower"]

    # --- ISR upkeep and metrics ---------------------------------------------------------------

    def maybe_shrink_isr(self) -> int:
        """Ask to drop lagging followers from every led partition; returns how many asked."""
        return sum(1 for p in self.leader_partitions() if p.replication.maybe_shrink_isr())

    @property
    def isr_shrinks(self) -> int:
        return self._retired_shrinks + sum(
            p.replication.isr_shrinks for p in self._partitions.values()
        )

    @property
    def isr_expands(self) -> int:
        return self._retired_expands + sum(
            p.replication.isr_expands for p in self._partitions.values()
        )

    @property
    def under_replicated_partitions(self) -> int:
        return sum(1 for p in self._partitions.values() if p.replication.under_replicated)

    def close(self) -> None:
        self._partitions.clear()
        self.purgatory.close()
