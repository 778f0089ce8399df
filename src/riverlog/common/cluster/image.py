"""The cluster image every process follows: immutable dataclasses for nodes, topics and
partitions, the delta that moves an image forward, and converters to and from the protos.

The metadata service builds `ClusterImage`s from etcd and publishes `ClusterDelta`s on its
Watch stream (`MetadataUpdate` on the wire); storage nodes, gateways and coordinators hold the
same `ClusterImage` and move it with `apply(update)`. Images are values: `apply` returns a new
image and never mutates the old one, so a listener can compare old and new freely.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from riverlog.common.assignors.javaorder import java_string_hash
from riverlog.common.errors import ErrorCode
from riverlog.v1 import common_pb2, coordinator_pb2, metadata_pb2

NODE_KINDS: Final = ("storage", "gateway", "coordinator", "quota", "metadata")
_KIND_TO_PROTO: Final[dict[str, int]] = {
    "storage": common_pb2.NODE_KIND_STORAGE,
    "gateway": common_pb2.NODE_KIND_GATEWAY,
    "coordinator": common_pb2.NODE_KIND_COORDINATOR,
    "quota": common_pb2.NODE_KIND_QUOTA,
    "metadata": common_pb2.NODE_KIND_METADATA,
}
_KIND_FROM_PROTO: Final[dict[int, str]] = {v: k for k, v in _KIND_TO_PROTO.items()}

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


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: str
    partitions: tuple[PartitionInfo, ...]
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    internal: bool = False


OFFSETS_TOPIC: Final = "__consumer_offsets"


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

    @classmethod
    def empty(cls) -> ClusterImage:
        return cls()

    def apply(self, update: metadata_pb2.MetadataUpdate) -> ClusterImage:
        """The image after a Watch update (see `apply_delta`)."""
        return self.apply_delta(delta_from_proto(update))

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
        return ClusterImage(
            version=delta.version,
            cluster_id=delta.cluster_id or self.cluster_id,
            controller_id=delta.controller_id,
            controller_epoch=delta.controller_epoch,
            nodes=MappingProxyType(nodes),
            topics=MappingProxyType(topics),
            coordinators=coordinators,
        )

    def offsets_partitions(self) -> int:
        """The partition count of `__consumer_offsets`; 0 before the controller created it."""
        topic = self.topics.get(OFFSETS_TOPIC)
        return len(topic.partitions) if topic is not None else 0

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
        )


# --- converters -------------------------------------------------------------------------------


def kind_to_proto(kind: str) -> int:
    try:
        return _KIND_TO_PROTO[kind]
    except KeyError:
        raise ValueError(f"unknown node kind {kind!r}") from None


def kind_from_proto(value: int) -> str:
    """The kind name for a NodeKind value; raises ValueError for UNSPECIFIED/unknown."""
    try:
        return _KIND_FROM_PROTO[value]
    except KeyError:
        raise ValueError(f"unknown node kind {value}") from None


def node_to_proto(node: NodeInfo) -> common_pb2.Node:
    return common_pb2.Node(
        node_id=node.node_id,
        kind=kind_to_proto(node.kind),  # type: ignore[arg-type]
        host=node.host,
        port=node.port,
        rack=node.rack,
        zero_copy_port=node.zero_copy_port,
        incarnation=node.incarnation,
    )


def node_from_proto(msg: common_pb2.Node) -> NodeInfo:
    return NodeInfo(
        kind=kind_from_proto(msg.kind),
        node_id=msg.node_id,
        host=msg.host,
        port=msg.port,
        rack=msg.rack,
        zero_copy_port=msg.zero_copy_port,
        incarnation=msg.incarnation,
    )


def partition_to_proto(p: PartitionInfo) -> common_pb2.PartitionState:
    return common_pb2.PartitionState(
        partition=p.partition,
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        replicas=list(p.replicas),
        isr=list(p.isr),
        partition_epoch=p.partition_epoch,
    )


def partition_from_proto(msg: common_pb2.PartitionState) -> PartitionInfo:
    return PartitionInfo(
        partition=msg.partition,
        leader=msg.leader,
        leader_epoch=msg.leader_epoch,
        replicas=tuple(msg.replicas),
        isr=tuple(msg.isr),
        partition_epoch=msg.partition_epoch,
    )


def configs_to_proto(configs: Mapping[str, str]) -> list[common_pb2.ConfigEntry]:
    return [common_pb2.ConfigEntry(name=k, value=configs[k]) for k in sorted(configs)]


def topic_to_proto(topic: TopicInfo) -> common_pb2.TopicMetadata:
    return common_pb2.TopicMetadata(
        name=topic.name,
        topic_id=topic.topic_id,
        partitions=[partition_to_proto(p) for p in topic.partitions],
        configs=configs_to_proto(topic.configs),
        internal=topic.internal,
    )


def topic_from_proto(msg: common_pb2.TopicMetadata) -> TopicInfo:
    return TopicInfo(
        name=msg.name,
        topic_id=msg.topic_id,
        partitions=tuple(partition_from_proto(p) for p in msg.partitions),
        configs=MappingProxyType({c.name: c.value for c in msg.configs}),
        internal=msg.internal,
    )


def _known_nodes(msgs: Iterable[common_pb2.Node]) -> tuple[NodeInfo, ...]:
    """Nodes of kinds this build knows; a newer server's kinds are skipped, not fatal."""
    return tuple(node_from_proto(m) for m in msgs if m.kind in _KIND_FROM_PROTO)


def delta_to_proto(delta: ClusterDelta) -> metadata_pb2.MetadataUpdate:
    return metadata_pb2.MetadataUpdate(
        version=delta.version,
        controller_id=delta.controller_id,
        controller_epoch=delta.controller_epoch,
        snapshot=delta.snapshot,
        nodes=[node_to_proto(n) for n in delta.nodes],
        removed_nodes=[
            common_pb2.Node(kind=kind_to_proto(kind), node_id=node_id)  # type: ignore[arg-type]
            for kind, node_id in delta.removed_nodes
        ],
        topics=[topic_to_proto(t) for t in delta.topics],
        removed_topics=list(delta.removed_topics),
        cluster_id=delta.cluster_id,
        coordinator_assignments=[
            metadata_pb2.CoordinatorAssignment(
                partition=c.partition,
                coordinator_id=c.coordinator_id,
                coordinator_epoch=c.epoch,
                coordinator_incarnation=c.incarnation,
            )
            for c in delta.coordinators
        ],
    )


def delta_from_proto(msg: metadata_pb2.MetadataUpdate) -> ClusterDelta:
    return ClusterDelta(
        version=msg.version,
        controller_id=msg.controller_id,
        controller_epoch=msg.controller_epoch,
        cluster_id=msg.cluster_id,
        snapshot=msg.snapshot,
        nodes=_known_nodes(msg.nodes),
        removed_nodes=tuple(
            (_KIND_FROM_PROTO[m.kind], m.node_id)
            for m in msg.removed_nodes
            if m.kind in _KIND_FROM_PROTO
        ),
        topics=tuple(topic_from_proto(t) for t in msg.topics),
        removed_topics=tuple(msg.removed_topics),
        coordinators=tuple(
            CoordinatorAssignment(
                c.partition, c.coordinator_id, c.coordinator_epoch, c.coordinator_incarnation
            )
            for c in msg.coordinator_assignments
        ),
    )


def find_coordinator_to_proto(
    image: ClusterImage, keys: Iterable[str]
) -> coordinator_pb2.FindCoordinatorResponse:
    """Each group's coordinator as the image names it (the gateway and every coordinator
    answer FindCoordinator alike); COORDINATOR_NOT_AVAILABLE where there is none live."""
    out = coordinator_pb2.FindCoordinatorResponse()
    for key in keys:
        partition, node = image.coordinator_for(key)
        found = out.coordinators.add(key=key, partition=partition, node_id=-1)
        if node is None:
            found.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            found.error_message = f"no live coordinator for {OFFSETS_TOPIC}-{partition}"
        else:
            found.node_id, found.host, found.port = node.node_id, node.host, node.port
    return out
