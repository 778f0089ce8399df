"""The cluster image every process follows: immutable dataclasses for nodes, topics and
partitions, and the delta that moves an image forward. Pure values: no protos here (their
converters are in `convert.py`), so domain code of every service may use them.

The metadata service builds `ClusterImage`s from etcd and publishes `ClusterDelta`s on its
Watch stream (`MetadataUpdate` on the wire); storage nodes, gateways and coordinators hold the
same `ClusterImage` and move it with `apply_delta(delta)`. Images are values: `apply_delta`
returns a new image and never mutates the old one, so a listener can compare old and new freely.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Protocol

from riverlog.common.assignors.javaorder import java_string_hash
from riverlog.common.types import TopicPartition

NODE_KINDS: Final = ("storage", "gateway", "coordinator", "quota", "metadata")

NodeKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A registered cluster member; (kind, node_id) names it."""

    kind: str
    node_id: int
    host: str
    port: int
    rack: str = ""
    zero_copy_port: int = 0
    incarnation: int = 0
    offline_replicas: frozenset[TopicPartition] = frozenset()
    """Storage: replicas on its offline log dirs, never to lead or be in sync again until the
    node restarts (decision 0022)."""
    direct_port: int = 0
    """Storage: the direct data port for clients holding grants (decision 0047); 0: none."""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def key(self) -> NodeKey:
        return (self.kind, self.node_id)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    partition_epoch: int = 0
    adding_replicas: tuple[int, ...] = ()
    """Replicas joining in an ongoing reassignment (Kafka's addingReplicas; KIP-455)."""
    removing_replicas: tuple[int, ...] = ()
    """Replicas leaving once the reassignment completes (Kafka's removingReplicas)."""


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: str
    partitions: tuple[PartitionInfo, ...]
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    internal: bool = False


OFFSETS_TOPIC: Final = "__consumer_offsets"
TRANSACTION_STATE_TOPIC: Final = "__transaction_state"


def group_partition(group_id: str, num_partitions: int) -> int:
    """The `__consumer_offsets` partition of a group (Kafka's `partitionFor`:
    `Utils.abs(groupId.hashCode()) % numPartitions`, with Java's String.hashCode)."""
    return (java_string_hash(group_id) & 0x7FFFFFFF) % num_partitions


@dataclass(frozen=True, slots=True)
class CoordinatorAssignment:
    """The coordinator instance owning one `__consumer_offsets` partition (decision 0008).
    `epoch` grows at every change of owner and fences the previous owner's writes."""

    partition: int
    coordinator_id: int
    epoch: int
    incarnation: int = 0
    """The owner's incarnation when it got the partition (a restart means a new epoch)."""


@dataclass(frozen=True, slots=True)
class ClusterDelta:
    """One step of the Watch stream (a `MetadataUpdate`): a full snapshot or upserts/removals."""

    version: int
    controller_id: int
    controller_epoch: int
    cluster_id: str = ""
    snapshot: bool = False
    nodes: tuple[NodeInfo, ...] = ()
    removed_nodes: tuple[NodeKey, ...] = ()
    topics: tuple[TopicInfo, ...] = ()
    removed_topics: tuple[str, ...] = ()
    coordinators: tuple[CoordinatorAssignment, ...] = ()
    metadata_addresses: tuple[str, ...] = ()
    """The live metadata instances, complete; empty: unchanged."""
    node_configs: tuple[tuple[str, Mapping[str, str]], ...] = ()
    """Dynamic node configs per entity ("" the default, else a node id): upserts."""
    removed_node_configs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterImage:
    """What a process knows of the cluster at one metadata version (an etcd revision)."""

    version: int = -1
    cluster_id: str = ""
    controller_id: int = -1
    controller_epoch: int = 0
    nodes: Mapping[NodeKey, NodeInfo] = field(default_factory=lambda: MappingProxyType({}))
    topics: Mapping[str, TopicInfo] = field(default_factory=lambda: MappingProxyType({}))
    coordinators: Mapping[int, CoordinatorAssignment] = field(
        default_factory=lambda: MappingProxyType({})
    )
    """Owners of the `__consumer_offsets` partitions by partition (decision 0008)."""
    metadata_addresses: tuple[str, ...] = ()
    """The live metadata instances (host:port, by instance id), so every process follows the
    instances added and removed since it was given `--metadata` (decision 0026)."""
    node_configs: Mapping[str, Mapping[str, str]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    """Dynamic storage-node configs by entity ("" the default, else a node id; decision 0024)."""

    @classmethod
    def empty(cls) -> ClusterImage:
        return cls()

    def apply_delta(self, delta: ClusterDelta) -> ClusterImage:
        """Pure: a snapshot replaces everything, a delta upserts and removes. An update older
        than this image is ignored (a delta at this image's version too), except a snapshot
        of another cluster id, which always replaces."""
        if delta.snapshot:
            other_cluster = bool(self.cluster_id) and delta.cluster_id != self.cluster_id
            if delta.version < self.version and not other_cluster:
                return self
            return ClusterImage(
                version=delta.version,
                cluster_id=delta.cluster_id,
                controller_id=delta.controller_id,
                controller_epoch=delta.controller_epoch,
                nodes=MappingProxyType({n.key: n for n in delta.nodes}),
                topics=MappingProxyType({t.name: t for t in delta.topics}),
                coordinators=MappingProxyType({c.partition: c for c in delta.coordinators}),
                metadata_addresses=delta.metadata_addresses or self.metadata_addresses,
                node_configs=MappingProxyType(dict(delta.node_configs)),
            )
        if delta.version <= self.version:
            return self
        nodes = dict(self.nodes)
        for key in delta.removed_nodes:
            nodes.pop(key, None)
        for node in delta.nodes:
            nodes[node.key] = node
        topics = dict(self.topics)
        for name in delta.removed_topics:
            topics.pop(name, None)
        for topic in delta.topics:
            topics[topic.name] = topic
        coordinators = self.coordinators
        if delta.coordinators:
            merged = dict(coordinators)
            merged.update((c.partition, c) for c in delta.coordinators)
            coordinators = MappingProxyType(merged)
        node_configs = self.node_configs
        if delta.node_configs or delta.removed_node_configs:
            entities = dict(node_configs)
            for name in delta.removed_node_configs:
                entities.pop(name, None)
            entities.update(delta.node_configs)
            node_configs = MappingProxyType(entities)
        return ClusterImage(
            version=delta.version,
            cluster_id=delta.cluster_id or self.cluster_id,
            controller_id=delta.controller_id,
            controller_epoch=delta.controller_epoch,
            nodes=MappingProxyType(nodes),
            topics=MappingProxyType(topics),
            coordinators=coordinators,
            metadata_addresses=delta.metadata_addresses or self.metadata_addresses,
            node_configs=node_configs,
        )

    def offsets_partitions(self) -> int:
        """The partition count of `__consumer_offsets`; 0 before the controller created it."""
        topic = self.topics.get(OFFSETS_TOPIC)
        return len(topic.partitions) if topic is not None else 0

    def transaction_partitions(self) -> int:
        """The partition count of `__transaction_state`; 0 before the controller created it."""
        topic = self.topics.get(TRANSACTION_STATE_TOPIC)
        return len(topic.partitions) if topic is not None else 0

    def transaction_owner(self, partition: int) -> CoordinatorAssignment | None:
        """The owner of a `__transaction_state` partition: the owner of `__consumer_offsets`
        partition `partition` mod its count, with that partition's epoch (decision 0028)."""
        count = self.offsets_partitions()
        return self.coordinators.get(partition % count) if count else None

    def transaction_coordinator_for(self, transactional_id: str) -> tuple[int, NodeInfo | None]:
        """The transactional id's `__transaction_state` partition (Kafka's `partitionFor`, as
        for groups) and its live coordinator; partition -1 before the topic exists."""
        count = self.transaction_partitions()
        if count == 0:
            return -1, None
        partition = group_partition(transactional_id, count)
        owner = self.transaction_owner(partition)
        if owner is None or owner.coordinator_id < 0:
            return partition, None
        return partition, self.nodes.get(("coordinator", owner.coordinator_id))

    def coordinator_for(self, group_id: str) -> tuple[int, NodeInfo | None]:
        """The group's `__consumer_offsets` partition and its live coordinator (None when
        unassigned or gone); partition -1 before the topic exists."""
        count = self.offsets_partitions()
        if count == 0:
            return -1, None
        partition = group_partition(group_id, count)
        owner = self.coordinators.get(partition)
        if owner is None or owner.coordinator_id < 0:
            return partition, None
        return partition, self.nodes.get(("coordinator", owner.coordinator_id))

    def storage_node(self, node_id: int) -> NodeInfo | None:
        return self.nodes.get(("storage", node_id))

    def nodes_of_kind(self, kind: str) -> list[NodeInfo]:
        """Live nodes of one kind, by node id."""
        return sorted((n for n in self.nodes.values() if n.kind == kind), key=lambda n: n.node_id)

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return None
        found = info.partitions[partition]
        if found.partition == partition:
            return found
        return next((p for p in info.partitions if p.partition == partition), None)

    def leader_node(self, topic: str, partition: int) -> NodeInfo | None:
        """The live storage node leading the partition; None when unknown or offline."""
        info = self.partition(topic, partition)
        if info is None or info.leader < 0:
            return None
        return self.storage_node(info.leader)

    def to_snapshot(self) -> ClusterDelta:
        """This image as a snapshot delta (the first message of a Watch stream)."""
        return ClusterDelta(
            version=self.version,
            controller_id=self.controller_id,
            controller_epoch=self.controller_epoch,
            cluster_id=self.cluster_id,
            snapshot=True,
            nodes=tuple(sorted(self.nodes.values(), key=lambda n: n.key)),
            topics=tuple(self.topics[name] for name in sorted(self.topics)),
            coordinators=tuple(self.coordinators[p] for p in sorted(self.coordinators)),
            metadata_addresses=self.metadata_addresses,
            node_configs=tuple((n, self.node_configs[n]) for n in sorted(self.node_configs)),
        )


Listener = Callable[[ClusterImage, ClusterImage], Awaitable[None] | None]
"""Called with the old and the new image after each change."""


class ImageFeed(Protocol):
    """What domain code needs of whoever follows the cluster (`MetadataWatcher` in a process,
    a fake in tests): the current image and change listeners."""

    @property
    def image(self) -> ClusterImage: ...

    def add_listener(self, callback: Listener) -> None: ...

    def remove_listener(self, callback: Listener) -> None: ...

    async def wait_for(
        self, predicate: Callable[[ClusterImage], bool], timeout_s: float = 30.0
    ) -> ClusterImage:
        """The first image (the current one included) satisfying `predicate`; RiverlogError
        (REQUEST_TIMED_OUT) after `timeout_s`."""
        ...
