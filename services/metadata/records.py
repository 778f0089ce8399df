"""The JSON values stored under each etcd key (see `store.py` for the key schema), as typed
records with one encoder and one decoder each.

Values are compact, key-sorted JSON so that byte equality means record equality: the
controller key is compared by value in every fenced transaction.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from riverlog.common.cluster.image import CoordinatorAssignment, NodeInfo, PartitionInfo, TopicInfo
from riverlog.common.types import TopicPartition


def _dumps(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _loads(raw: bytes) -> dict[str, Any]:
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {raw[:80]!r}")
    return value


@dataclass(frozen=True, slots=True)
class ControllerRecord:
    """The controller key's value: who holds it, under which epoch, and where to reach it."""

    instance_id: int
    epoch: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def encode(self) -> bytes:
        return _dumps(
            {
                "instance_id": self.instance_id,
                "epoch": self.epoch,
                "host": self.host,
                "port": self.port,
            }
        )

    @classmethod
    def decode(cls, raw: bytes) -> ControllerRecord:
        d = _loads(raw)
        return cls(int(d["instance_id"]), int(d["epoch"]), str(d["host"]), int(d["port"]))


@dataclass(frozen=True, slots=True)
class InstanceRecord:
    """A live metadata instance (`instances/<id>`)."""

    instance_id: int
    host: str
    port: int

    def encode(self) -> bytes:
        return _dumps({"instance_id": self.instance_id, "host": self.host, "port": self.port})

    @classmethod
    def decode(cls, raw: bytes) -> InstanceRecord:
        d = _loads(raw)
        return cls(int(d["instance_id"]), str(d["host"]), int(d["port"]))


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """`topics/<name>`: identity, size and explicitly set configs of a topic."""

    topic_id: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    internal: bool = False

    def encode(self) -> bytes:
        return _dumps(
            {
                "topic_id": self.topic_id,
                "partitions": self.partitions,
                "configs": dict(self.configs),
                "internal": self.internal,
            }
        )

    @classmethod
    def decode(cls, raw: bytes) -> TopicRecord:
        d = _loads(raw)
        configs = {str(k): str(v) for k, v in dict(d.get("configs", {})).items()}
        return cls(
            topic_id=str(d["topic_id"]),
            partitions=int(d["partitions"]),
            configs=MappingProxyType(configs),
            internal=bool(d.get("internal", False)),
        )


def partition_encode(p: PartitionInfo) -> bytes:
    """`partitions/<topic>/<p>` (the partition number is in the key)."""
    return _dumps(
        {
            "replicas": list(p.replicas),
            "leader": p.leader,
            "leader_epoch": p.leader_epoch,
            "isr": list(p.isr),
            "partition_epoch": p.partition_epoch,
            **({"adding_replicas": list(p.adding_replicas)} if p.adding_replicas else {}),
            **({"removing_replicas": list(p.removing_replicas)} if p.removing_replicas else {}),
        }
    )


def partition_decode(partition: int, raw: bytes) -> PartitionInfo:
    d = _loads(raw)
    return PartitionInfo(
        partition=partition,
        leader=int(d["leader"]),
        leader_epoch=int(d["leader_epoch"]),
        replicas=tuple(int(r) for r in d["replicas"]),
        isr=tuple(int(r) for r in d["isr"]),
        partition_epoch=int(d.get("partition_epoch", 0)),
        adding_replicas=tuple(int(r) for r in d.get("adding_replicas", ())),
        removing_replicas=tuple(int(r) for r in d.get("removing_replicas", ())),
    )


def node_encode(node: NodeInfo, lease_id: int) -> bytes:
    """`nodes/<kind>/<id>`: the registration, with the lease that keeps it alive."""
    return _dumps(
        {
            "kind": node.kind,
            "node_id": node.node_id,
            "host": node.host,
            "port": node.port,
            "rack": node.rack,
            "zero_copy_port": node.zero_copy_port,
            "direct_port": node.direct_port,
            "incarnation": node.incarnation,
            "offline_replicas": [[tp.topic, tp.partition] for tp in sorted(node.offline_replicas)],
            "lease_id": lease_id,
        }
    )


def node_decode(raw: bytes) -> tuple[NodeInfo, int]:
    """The node and its lease id."""
    d = _loads(raw)
    node = NodeInfo(
        kind=str(d["kind"]),
        node_id=int(d["node_id"]),
        host=str(d["host"]),
        port=int(d["port"]),
        rack=str(d.get("rack", "")),
        zero_copy_port=int(d.get("zero_copy_port", 0)),
        direct_port=int(d.get("direct_port", 0)),
        incarnation=int(d.get("incarnation", 0)),
        offline_replicas=frozenset(
            TopicPartition(str(t), int(p)) for t, p in d.get("offline_replicas", ())
        ),
    )
    return node, int(d.get("lease_id", 0))


def coordinator_encode(assignment: CoordinatorAssignment) -> bytes:
    """`coordinators/<p>`: the owner of __consumer_offsets-p and its epoch (decision 0008)."""
    return _dumps(
        {
            "coordinator_id": assignment.coordinator_id,
            "epoch": assignment.epoch,
            "incarnation": assignment.incarnation,
        }
    )


def coordinator_decode(partition: int, raw: bytes) -> CoordinatorAssignment:
    obj = _loads(raw)
    return CoordinatorAssignment(
        partition,
        int(obj["coordinator_id"]),
        int(obj["epoch"]),
        int(obj.get("incarnation", 0)),
    )


def topic_info(
    name: str, record: TopicRecord, partitions: Mapping[int, PartitionInfo]
) -> TopicInfo:
    """The image's view of a topic from its record and partition entries."""
    return TopicInfo(
        name=name,
        topic_id=record.topic_id,
        partitions=tuple(partitions[p] for p in sorted(partitions) if p < record.partitions),
        configs=record.configs,
        internal=record.internal,
    )


def node_configs_encode(configs: Mapping[str, str]) -> bytes:
    """A node config entity's value: {"configs": {name: value}} (decision 0024)."""
    return _dumps({"configs": dict(configs)})


def node_configs_decode(raw: bytes) -> Mapping[str, str]:
    configs = _loads(raw)["configs"]
    if not isinstance(configs, dict):
        raise ValueError(f"expected configs to be an object, got {raw[:80]!r}")
    return MappingProxyType({str(k): str(v) for k, v in configs.items()})


def draining_nodes_encode(nodes: Collection[int]) -> bytes:
    """The draining storage nodes' value: {"nodes": [id, ...]} (decision 0025's addendum)."""
    return _dumps({"nodes": sorted(nodes)})


def draining_nodes_decode(raw: bytes) -> frozenset[int]:
    nodes = _loads(raw)["nodes"]
    if not isinstance(nodes, list):
        raise ValueError(f"expected nodes to be a list, got {raw[:80]!r}")
    return frozenset(int(n) for n in nodes)
