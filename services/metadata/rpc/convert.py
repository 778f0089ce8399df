"""Converters between the metadata protos and the service's domain types (`x_to_proto` /
`x_from_proto`). The image types' own converters live in `riverlog.common.cluster.convert`."""

from __future__ import annotations

from collections.abc import Awaitable, Collection, Mapping, Sequence
from typing import TypeVar

from google.protobuf.message import Message

from riverlog.common import node_config
from riverlog.common.cluster.convert import node_to_proto, partition_to_proto, topic_to_proto
from riverlog.common.cluster.image import ClusterImage
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import admin_pb2, common_pb2, metadata_pb2

from ..controller.alter_partition import AlterPartitionItem, AlterPartitionOutcome
from ..controller.elections import ElectionResult
from ..controller.topic_validation import ConfigOp, describe_configs
from ..controller.topics import NewTopic, TopicResult
from ..records import InstanceRecord

R = TypeVar("R", bound=Message)

# etcd could not be reached: the whole call fails (retriable) rather than answering an error.
UNREACHED = frozenset({ErrorCode.NETWORK_EXCEPTION})

_OP_TYPES = {
    admin_pb2.AlterConfigsRequest.Op.SET: "SET",
    admin_pb2.AlterConfigsRequest.Op.DELETE: "DELETE",
}


def new_topic_from_proto(msg: admin_pb2.CreatableTopic) -> NewTopic:
    return NewTopic(
        name=msg.name,
        num_partitions=msg.num_partitions,
        replication_factor=msg.replication_factor,
        configs=tuple(sorted(msg.configs.items())),
    )


def config_ops_from_proto(ops: Sequence[admin_pb2.AlterConfigsRequest.Op]) -> list[ConfigOp]:
    return [ConfigOp(op.name, op.value, _OP_TYPES.get(op.type, f"type {op.type}")) for op in ops]


def topic_result_to_proto(result: TopicResult) -> admin_pb2.TopicResult:
    return admin_pb2.TopicResult(
        name=result.name,
        error_code=int(result.error_code),  # type: ignore[arg-type]
        error_message=result.error_message,
        topic_id=result.topic_id,
    )


def topic_results_to_proto(results: Sequence[TopicResult]) -> list[admin_pb2.TopicResult]:
    return [topic_result_to_proto(r) for r in results]


def config_entries_to_proto(
    overrides: dict[str, str] | None,
) -> list[common_pb2.ConfigEntry]:
    return [
        common_pb2.ConfigEntry(name=name, value=value, is_default=is_default)
        for name, value, is_default in describe_configs(overrides or {})
    ]


def node_configs_to_proto(
    out: admin_pb2.DescribeConfigsResponse,
    configs: Mapping[str, Mapping[str, str]],
    requested: Sequence[str],
    all_nodes: bool,
) -> None:
    """DescribeConfigs of node entities into `out.nodes`: the requested ones (named as asked)
    then, with `all_nodes`, every other entity that has configs set; INVALID_REQUEST for a name
    that is neither a node id nor the default entity."""
    names: list[tuple[str, str]] = []
    for name in requested:
        try:
            names.append((name, node_config.validate_entity(name)))
        except RiverlogError as exc:
            out.nodes.add(name=name, error_code=exc.code, error_message=exc.message)
    if all_nodes:
        asked = {entity for _, entity in names}
        names.extend((e, e) for e in sorted(configs, key=_entity_order) if e not in asked)
    for name, entity in names:
        entry = out.nodes.add(name=name)
        entry.configs.extend(
            common_pb2.ConfigEntry(name=n, value=v, is_default=d)
            for n, v, d in node_config.describe(configs.get(entity, {}))
        )


def _entity_order(entity: str) -> tuple[int, int]:
    return (0, 0) if entity == node_config.DEFAULT_ENTITY else (1, int(entity))


def describe_topic_to_proto(
    image: ClusterImage, name: str, error_code: int, error_message: str
) -> admin_pb2.DescribeTopicsResponse.Topic:
    out = admin_pb2.DescribeTopicsResponse.Topic(
        name=name,
        error_code=error_code,  # type: ignore[arg-type]
        error_message=error_message,
    )
    topic = image.topics.get(name)
    if topic is not None:
        out.metadata.CopyFrom(topic_to_proto(topic))
    return out


def cluster_to_proto(
    image: ClusterImage,
    instances: Sequence[InstanceRecord],
    leader_elections: int = 0,
    isr_changes: int = 0,
    draining: Collection[int] = (),
) -> admin_pb2.DescribeClusterResponse:
    partitions = [p for t in image.topics.values() for p in t.partitions]
    return admin_pb2.DescribeClusterResponse(
        offline_partitions=sum(1 for p in partitions if p.leader < 0),
        under_replicated_partitions=sum(1 for p in partitions if len(p.isr) < len(p.replicas)),
        leader_elections=leader_elections,
        isr_changes=isr_changes,
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        controller_epoch=image.controller_epoch,
        metadata_instances=[
            admin_pb2.MetadataInstance(
                instance_id=i.instance_id,
                host=i.host,
                port=i.port,
                is_controller=i.instance_id == image.controller_id,
            )
            for i in sorted(instances, key=lambda i: i.instance_id)
        ],
        nodes=[node_to_proto(n) for _, n in sorted(image.nodes.items())],
        metadata_version=image.version,
        draining_nodes=sorted(draining),
    )


def alter_partition_items_from_proto(
    items: Sequence[metadata_pb2.AlterPartitionItem],
) -> list[AlterPartitionItem]:
    return [
        AlterPartitionItem(
            topic=i.topic,
            partition=i.partition,
            leader_epoch=i.leader_epoch,
            new_isr=tuple(i.new_isr),
            partition_epoch=i.partition_epoch,
        )
        for i in items
    ]


def alter_partition_outcome_to_proto(
    outcome: AlterPartitionOutcome,
) -> metadata_pb2.AlterPartitionResult:
    out = metadata_pb2.AlterPartitionResult(
        topic=outcome.item.topic,
        partition=outcome.item.partition,
        error_code=int(outcome.error_code),  # type: ignore[arg-type]
        error_message=outcome.error_message,
    )
    if outcome.state is not None:
        out.state.CopyFrom(partition_to_proto(outcome.state))
    return out


def election_result_to_proto(result: ElectionResult) -> admin_pb2.ElectLeadersResult:
    return admin_pb2.ElectLeadersResult(
        topic=result.topic,
        partition=result.partition,
        error_code=int(result.error_code),  # type: ignore[arg-type]
        error_message=result.error_message,
        leader=result.leader,
        leader_epoch=result.leader_epoch,
    )


async def answer_or_error(
    response_type: type[R], work: Awaitable[R], *, raised: frozenset[ErrorCode] = frozenset()
) -> R:
    """`work`'s response, or a `response_type` carrying the RiverlogError it raised (its
    `error_code` and `error_message`); codes in `raised` fail the whole call instead."""
    try:
        return await work
    except RiverlogError as exc:
        if exc.code in raised:
            raise
        response: R = response_type(error_code=int(exc.code), error_message=exc.message)
        return response
