"""DescribeLogDirs (Kafka's API 35, decision 0040): every storage node's log dirs and what each
replica in them takes, on local disk and (tiered storage) in the remote tier.

Kafka's admin client sends DescribeLogDirs to each broker itself; a Riverlog client reaches only
gateways, so the gateway asks the storage nodes, all at once, and answers for the cluster. It
is also the one way the gateway reads replica sizes: reassignment progress
(`reassignment_progress.py`) asks through `ask` as well. A node that does not answer within
`NODE_TIMEOUT_S` (or the request's deadline) is listed with its error, and the answer covers the
others, as Kafka's admin client returns what it can; a node that holds replicas in the image but
is not live is listed as BROKER_NOT_AVAILABLE. Topics and partitions asked for that do not
exist come back as errors of their own, never as a failed call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from riverlog.common.cluster.image import ClusterImage, NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from .context import Deadline
from .routing.metadata_cache import MetadataCache
from .validation import topic_error

log = logging.getLogger(__name__)

NODE_TIMEOUT_S = 10.0
"""At most this long for one node's answer, so one paused node does not hold the rest back
until the client's own timeout."""


@dataclass(frozen=True, slots=True)
class ReplicaLogInfo:
    """One replica in one log dir (Kafka's DescribeLogDirsPartition plus the tiered fields)."""

    tp: TopicPartition
    size_bytes: int
    log_start_offset: int
    local_log_start_offset: int
    log_end_offset: int
    remote_size_bytes: int = 0
    offset_lag: int = 0
    is_future: bool = False


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    path: str
    replicas: tuple[ReplicaLogInfo, ...] = ()
    error_code: int = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class NodeLogDirs:
    """One storage node's dirs, or why there are none (`error_code`)."""

    node_id: int
    log_dirs: tuple[LogDirInfo, ...] = ()
    error_code: int = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class LogDirsError:
    """An asked topic (partition -1) or partition that cannot be described."""

    topic: str
    partition: int
    error_code: int
    error_message: str


@dataclass(frozen=True, slots=True)
class LogDirsQuery:
    """`topics`: topic → partitions (empty: all of the topic's); None: every replica.
    `node_ids`: the nodes to ask; empty: every storage node."""

    topics: Mapping[str, tuple[int, ...]] | None = None
    node_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class LogDirsAnswer:
    nodes: list[NodeLogDirs] = field(default_factory=list)
    errors: list[LogDirsError] = field(default_factory=list)


class LogDirsSender(Protocol):
    """Reads one node's log dirs (implemented by `peers.storage`)."""

    async def describe_log_dirs(self, node: NodeInfo, deadline: Deadline) -> list[LogDirInfo]: ...


def wanted_replicas(
    image: ClusterImage, topics: Mapping[str, tuple[int, ...]]
) -> tuple[frozenset[TopicPartition], list[LogDirsError]]:
    """The partitions a filter names that exist, and an error for each that does not (a bad
    or unknown topic once, an unknown partition of a known topic each), in request order."""
    found: set[TopicPartition] = set()
    errors: list[LogDirsError] = []
    for name, partitions in topics.items():
        bad = topic_error(name)
        info = image.topics.get(name) if bad is None else None
        if bad is not None:
            errors.append(LogDirsError(name, -1, bad.code, bad.message))
            continue
        if info is None:
            errors.append(
                LogDirsError(
                    name, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}"
                )
            )
            continue
        existing = {p.partition for p in info.partitions}
        for p in partitions or sorted(existing):
            if p in existing:
                found.add(TopicPartition(name, p))
            else:
                errors.append(
                    LogDirsError(
                        name,
                        p,
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"topic {name!r} has no partition {p}",
                    )
                )
    return frozenset(found), errors


def nodes_to_ask(image: ClusterImage, node_ids: Sequence[int]) -> list[int]:
    """The asked nodes, or every live storage node and every node the image places a replica
    on (so one that is down is named, not silently missing)."""
    if node_ids:
        return sorted(set(node_ids))
    ids = {n.node_id for n in image.nodes_of_kind("storage")}
    for topic in image.topics.values():
        for p in topic.partitions:
            ids.update(p.replicas)
    return sorted(i for i in ids if i >= 0)


def _only(dirs: Sequence[LogDirInfo], wanted: frozenset[TopicPartition]) -> tuple[LogDirInfo, ...]:
    return tuple(replace(d, replicas=tuple(r for r in d.replicas if r.tp in wanted)) for d in dirs)


class LogDirs:
    """Stateless; safe from many tasks at once."""

    def __init__(self, cache: MetadataCache, sender: LogDirsSender) -> None:
        self.cache = cache
        self.sender = sender

    async def describe(self, query: LogDirsQuery, deadline: Deadline) -> LogDirsAnswer:
        image = self.cache.image
        wanted: frozenset[TopicPartition] | None = None
        errors: list[LogDirsError] = []
        if query.topics is not None:
            wanted, errors = wanted_replicas(image, query.topics)
        ids = nodes_to_ask(image, query.node_ids)
        nodes = await self.ask(ids, deadline.earlier(NODE_TIMEOUT_S))
        if wanted is not None:
            nodes = [replace(n, log_dirs=_only(n.log_dirs, wanted)) for n in nodes]
        return LogDirsAnswer(nodes, errors)

    async def ask(self, node_ids: Sequence[int], deadline: Deadline) -> list[NodeLogDirs]:
        """Each node's log dirs, in the order of `node_ids`; a node that is not live or did
        not answer by `deadline` has its error instead."""
        image = self.cache.image
        live = [(i, image.storage_node(i)) for i in node_ids]
        calls = [self.sender.describe_log_dirs(n, deadline) for _, n in live if n is not None]
        answers = iter(await asyncio.gather(*calls, return_exceptions=True))
        out: list[NodeLogDirs] = []
        for node_id, node in live:
            if node is None:
                out.append(
                    NodeLogDirs(
                        node_id,
                        error_code=ErrorCode.BROKER_NOT_AVAILABLE,
                        error_message=f"storage node {node_id} is not live",
                    )
                )
                continue
            answer = next(answers)
            if isinstance(answer, RiverlogError):
                log.debug("no log dirs from node %d: %s", node_id, answer)
                out.append(
                    NodeLogDirs(node_id, error_code=answer.code, error_message=answer.message)
                )
            elif isinstance(answer, BaseException):
                raise answer
            else:
                out.append(NodeLogDirs(node_id, tuple(answer)))
        return out
