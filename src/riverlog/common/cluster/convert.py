"""Converters between the cluster image (`image.py`, pure values) and the protos: nodes,
partitions, topics, Watch deltas (`MetadataUpdate`) and FindCoordinator answers. Adapters
(`rpc/`, `peers/`, the watcher and membership) use them; domain code never needs to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

from riverlog.common.errors import ErrorCode
from riverlog.common.rpc.convert import error_code_to_proto
from riverlog.common.types import TopicPartition
from riverlog.v1 import common_pb2, coordinator_pb2, metadata_pb2

from .image import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    ClusterDelta,
    ClusterImage,
    CoordinatorAssignment,
    NodeInfo,
    PartitionInfo,
    TopicInfo,
)

_KIND_TO_PROTO: Final[dict[str, int]] = {
    "storage": common_pb2.NODE_KIND_STORAGE,
    "gateway": common_pb2.NODE_KIND_GATEWAY,
    "coordinator": common_pb2.NODE_KIND_COORDINATOR,
    "quota": common_pb2.NODE_KIND_QUOTA,
    "metadata": common_pb2.NODE_KIND_METADATA,
}
_KIND_FROM_PROTO: Final[dict[int, str]] = {v: k for k, v in _KIND_TO_PROTO.items()}


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
        offline_replicas=tps_to_proto(node.offline_replicas),
        direct_port=node.direct_port,
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
        offline_replicas=tps_from_proto(msg.offline_replicas),
        direct_port=msg.direct_port,
    )


def tps_to_proto(tps: Iterable[TopicPartition]) -> list[common_pb2.TopicPartition]:
    return [common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition) for tp in sorted(tps)]


def tps_from_proto(msgs: Iterable[common_pb2.TopicPartition]) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(m.topic, m.partition) for m in msgs)


def partition_to_proto(p: PartitionInfo) -> common_pb2.PartitionState:
    return common_pb2.PartitionState(
        partition=p.partition,
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        replicas=list(p.replicas),
        isr=list(p.isr),
        partition_epoch=p.partition_epoch,
        adding_replicas=list(p.adding_replicas),
        removing_replicas=list(p.removing_replicas),
    )


def partition_from_proto(msg: common_pb2.PartitionState) -> PartitionInfo:
    return PartitionInfo(
        partition=msg.partition,
        leader=msg.leader,
        leader_epoch=msg.leader_epoch,
        replicas=tuple(msg.replicas),
        isr=tuple(msg.isr),
        partition_epoch=msg.partition_epoch,
        adding_replicas=tuple(msg.adding_replicas),
        removing_replicas=tuple(msg.removing_replicas),
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
        metadata_addresses=list(delta.metadata_addresses),
        node_configs=[
            common_pb2.NodeConfig(name=name, configs=configs_to_proto(configs))
            for name, configs in delta.node_configs
        ],
        removed_node_configs=list(delta.removed_node_configs),
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
        metadata_addresses=tuple(msg.metadata_addresses),
        node_configs=tuple(
            (n.name, MappingProxyType({c.name: c.value for c in n.configs}))
            for n in msg.node_configs
        ),
        removed_node_configs=tuple(msg.removed_node_configs),
    )


def apply_update(image: ClusterImage, update: metadata_pb2.MetadataUpdate) -> ClusterImage:
    """The image after a Watch update (see `ClusterImage.apply_delta`)."""
    return image.apply_delta(delta_from_proto(update))


def find_coordinator_to_proto(
    image: ClusterImage, keys: Iterable[str], transactions: bool = False
) -> coordinator_pb2.FindCoordinatorResponse:
    """Each group's (or, with `transactions`, each transactional id's) coordinator as the image
    names it (the gateway and every coordinator answer FindCoordinator alike);
    COORDINATOR_NOT_AVAILABLE where there is none live."""
    out = coordinator_pb2.FindCoordinatorResponse()
    topic = TRANSACTION_STATE_TOPIC if transactions else OFFSETS_TOPIC
    locate = image.transaction_coordinator_for if transactions else image.coordinator_for
    for key in keys:
        partition, node = locate(key)
        found = out.coordinators.add(key=key, partition=partition, node_id=-1)
        if node is None:
            found.error_code = error_code_to_proto(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            found.error_message = f"no live coordinator for {topic}-{partition}"
        else:
            found.node_id, found.host, found.port = node.node_id, node.host, node.port
    return out
