"""High watermarks for the consumer-lag gauges (decision 0033): one ListOffsets(LATEST,
read_uncommitted) per partition leader for all the partitions it leads, the same number
`kafka-consumer-groups.sh --describe` (and `riverlog groups describe`) compares committed
offsets with. Partitions without a live leader, or whose leader answers with an error, are
left out: their lag is not served rather than guessed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

import grpc

from riverlog.common.cluster import ClusterImage, NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError, code_of
from riverlog.common.rpc.channels import closed_channel_raises
from riverlog.common.types import TopicPartition
from riverlog.v1 import common_pb2, data_pb2

from .storage import StorageClient

log = logging.getLogger(__name__)

_TIMEOUT_S = 5.0


async def high_watermarks(
    storage: StorageClient, image: ClusterImage, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """The high watermark of each of `partitions` whose leader answered."""
    by_leader: dict[int, tuple[NodeInfo, list[TopicPartition]]] = {}
    for tp in partitions:
        node = image.leader_node(tp.topic, tp.partition)
        if node is not None:
            by_leader.setdefault(node.node_id, (node, []))[1].append(tp)
    answers = await asyncio.gather(*(_ask(storage, node, tps) for node, tps in by_leader.values()))
    out: dict[TopicPartition, int] = {}
    for answer in answers:
        out.update(answer)
    return out


async def _ask(
    storage: StorageClient, node: NodeInfo, tps: list[TopicPartition]
) -> dict[TopicPartition, int]:
    request = data_pb2.ListOffsetsRequest(
        partitions=[
            data_pb2.ListOffsetsPartition(
                topic=tp.topic, partition=tp.partition, spec=common_pb2.OFFSET_SPEC_LATEST
            )
            for tp in tps
        ],
        isolation_level=common_pb2.READ_UNCOMMITTED,
    )
    try:
        with closed_channel_raises(ErrorCode.NETWORK_EXCEPTION, f"storage node {node.node_id}"):
            response = await storage.channels.stub(node).ListOffsets(request, timeout=_TIMEOUT_S)
    except (grpc.RpcError, RiverlogError) as exc:
        log.debug("high watermarks from node %d: %s", node.node_id, exc)
        return {}
    return {
        TopicPartition(p.topic, p.partition): int(p.offset)
        for p in response.partitions
        if code_of(p.error_code) == ErrorCode.NONE and p.offset >= 0
    }
