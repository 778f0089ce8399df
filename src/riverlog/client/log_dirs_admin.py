"""Log dirs and replica sizes for `AdminClient` (Kafka's Admin describeLogDirs, API 35), over
the gateway's DescribeLogDirs, which asks every storage node at once (decision 0040).

Kafka's answer is per broker, per log dir, per replica: the size in bytes, the offset lag of a
future replica and whether it is one. Riverlog adds the tiered-storage view of each replica:
the bytes in the remote tier, the log start offset and the local log start offset. A storage
node that did not answer (down, paused) does not fail the call: the result names it in
`node_errors` and covers the others, as Kafka's admin client returns the brokers it reached.
`LogDirsAdminMixin` needs only the admin client's `_call`. Thread-safe, as the admin client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.types import TopicPartition
from riverlog.v1 import admin_pb2


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One replica in one log dir (Kafka's ReplicaInfo, plus the tiered-storage fields)."""

    size_bytes: int
    """Bytes on this node's local disk."""
    offset_lag: int = 0
    """A future replica's lag behind the current one (Riverlog has none yet: 0)."""
    is_future: bool = False
    remote_size_bytes: int = 0
    """Bytes of the finished copies in the remote tier (0 when the topic is not tiered)."""
    log_start_offset: int = 0
    local_log_start_offset: int = 0
    log_end_offset: int = 0


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """Kafka's LogDirDescription: the dir's error (None: online) and its replicas."""

    error: RiverlogError | None
    replica_infos: Mapping[TopicPartition, ReplicaInfo] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(r.size_bytes for r in self.replica_infos.values())


@dataclass(frozen=True, slots=True)
class LogDirs:
    """What describe_log_dirs returns: node → log dir path → description for the nodes that
    answered, and the nodes that did not (BROKER_NOT_AVAILABLE, REQUEST_TIMED_OUT, ...)."""

    nodes: Mapping[int, Mapping[str, LogDirDescription]]
    node_errors: Mapping[int, RiverlogError] = field(default_factory=dict)
    errors: Mapping[TopicPartition, RiverlogError] = field(default_factory=dict)
    """Asked topics (partition -1) and partitions that do not exist (raise_on_error=False)."""

    def replicas(self, tp: TopicPartition) -> dict[int, ReplicaInfo]:
        """Node → this partition's replica there (its current one, not a future one)."""
        return {
            node: info
            for node, dirs in self.nodes.items()
            for d in dirs.values()
            for p, info in d.replica_infos.items()
            if p == tp and not info.is_future
        }


def _topics_to_proto(
    topics: Iterable[str | TopicPartition],
) -> list[admin_pb2.DescribableLogDirTopic]:
    """Topic names (every partition) and partitions, grouped by topic in first-seen order."""
    grouped: dict[str, list[int] | None] = {}
    for item in topics:
        if isinstance(item, TopicPartition):
            parts = grouped.setdefault(item.topic, [])
            if parts is not None and item.partition not in parts:
                parts.append(item.partition)
        else:
            grouped[item] = None
    return [
        admin_pb2.DescribableLogDirTopic(topic=t, partitions=parts or [])
        for t, parts in grouped.items()
    ]


def log_dirs_from_proto(response: admin_pb2.DescribeClusterLogDirsResponse) -> LogDirs:
    nodes: dict[int, dict[str, LogDirDescription]] = {}
    node_errors: dict[int, RiverlogError] = {}
    for n in response.nodes:
        if n.error_code:  # NONE is 0
            node_errors[n.node_id] = error_for(n.error_code, n.error_message)
            continue
        nodes[n.node_id] = {
            d.log_dir: LogDirDescription(
                error_for(d.error_code, d.error_message) if d.error_code else None,
                {
                    TopicPartition(t.topic, p.partition): ReplicaInfo(
                        p.size_bytes,
                        p.offset_lag,
                        p.is_future,
                        p.remote_size_bytes,
                        p.log_start_offset,
                        p.local_log_start_offset,
                        p.log_end_offset,
                    )
                    for t in d.topics
                    for p in t.partitions
                },
            )
            for d in n.log_dirs
        }
    errors = {
        TopicPartition(e.topic, e.partition): error_for(e.error_code, e.error_message)
        for e in response.errors
    }
    return LogDirs(nodes, node_errors, errors)


class LogDirsAdminMixin:
    """Mixed into AdminClient, which provides `_call`."""

    _call: Callable[[Callable[[Any], Any], Any], Any]

    def describe_log_dirs(
        self,
        topics: Iterable[str | TopicPartition] | None = None,
        node_ids: Iterable[int] | None = None,
        raise_on_error: bool = True,
    ) -> LogDirs:
        """The log dirs of the storage nodes `node_ids` (None: all) with the replicas of
        `topics` in them: names (every partition) or TopicPartitions; None: every replica.
        A topic or partition that does not exist raises UNKNOWN_TOPIC_OR_PARTITION naming it,
        or with `raise_on_error=False` is returned in `errors`. Needs DESCRIBE on the cluster
        (CLUSTER_AUTHORIZATION_FAILED otherwise)."""
        request = admin_pb2.DescribeClusterLogDirsRequest(
            topics=_topics_to_proto(topics) if topics is not None else [],
            node_ids=sorted(set(node_ids or ())),
        )
        if topics is not None and not request.topics:
            return LogDirs({})  # Kafka: an empty list describes nothing
        response = self._call(lambda s: s.DescribeLogDirs, request)
        if response.error_code != ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        result = log_dirs_from_proto(response)
        if raise_on_error and result.errors:
            raise next(iter(result.errors.values()))
        return result
