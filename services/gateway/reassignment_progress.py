"""Progress of partition reassignments: each replica's log end offset and size in bytes, read
from the storage nodes (their DescribeLogDirs), so `riverlog partitions reassign --list` can show
bytes copied and remaining as kafka-reassign-partitions and Cruise Control do.

The metadata service knows which partitions move but nothing of their logs (it talks to etcd
only), so the gateway that answers ListPartitionReassignments asks every storage node hosting a
moving replica, all at once, for at most `PROGRESS_TIMEOUT_S` of the request's deadline. A node
that does not answer in time (down, paused) leaves its replicas out: progress is best effort and
never fails or holds up the listing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

from riverlog.common.cluster.image import NodeInfo
from riverlog.common.errors import RiverlogError
from riverlog.common.types import TopicPartition

from .context import Deadline
from .routing.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

PROGRESS_TIMEOUT_S = 2.0

ReplicaLog = tuple[int, int]
"""(log end offset, size in bytes) of one replica."""


class LogDirsSender(Protocol):
    """Reads one node's replicas (implemented by `peers.storage`)."""

    async def replica_logs(
        self, node: NodeInfo, deadline: Deadline
    ) -> dict[TopicPartition, ReplicaLog]: ...


class ReassignmentProgress:
    """Stateless; safe from many tasks at once."""

    def __init__(self, cache: MetadataCache, sender: LogDirsSender) -> None:
        self.cache = cache
        self.sender = sender

    async def replica_logs(
        self, moves: Mapping[TopicPartition, Sequence[int]], deadline: Deadline
    ) -> dict[TopicPartition, dict[int, ReplicaLog]]:
        """For each moving partition (→ its replicas): replica node → its log, where known."""
        node_ids = sorted({r for replicas in moves.values() for r in replicas})
        nodes = [n for n in (self.cache.image.storage_node(i) for i in node_ids) if n is not None]
        short = deadline.earlier(PROGRESS_TIMEOUT_S)
        answers = await asyncio.gather(
            *(self.sender.replica_logs(n, short) for n in nodes), return_exceptions=True
        )
        out: dict[TopicPartition, dict[int, ReplicaLog]] = {tp: {} for tp in moves}
        for node, answer in zip(nodes, answers, strict=True):
            if isinstance(answer, BaseException):
                if not isinstance(answer, RiverlogError):
                    raise answer
                log.debug("no reassignment progress from node %d: %s", node.node_id, answer)
                continue
            for tp, replicas in moves.items():
                if node.node_id in replicas and tp in answer:
                    out[tp][node.node_id] = answer[tp]
        return out
