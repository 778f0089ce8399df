"""Progress of partition reassignments: each replica's log end offset and size in bytes, read
from the storage nodes (their DescribeLogDirs, through `log_dirs.LogDirs.ask`, the gateway's one
way of reading replica sizes), so `riverlog partitions reassign --list` can show bytes copied and
remaining as kafka-reassign-partitions and Cruise Control do.

The metadata service knows which partitions move but nothing of their logs (it talks to etcd
only), so the gateway that answers ListPartitionReassignments asks every storage node hosting a
moving replica, all at once, for at most `PROGRESS_TIMEOUT_S` of the request's deadline. A node
that does not answer in time (down, paused) leaves its replicas out: progress is best effort and
never fails or holds up the listing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from riverlog.common.types import TopicPartition

from .context import Deadline
from .log_dirs import LogDirs

PROGRESS_TIMEOUT_S = 2.0

ReplicaLog = tuple[int, int]
"""(log end offset, size in bytes) of one replica."""


class ReassignmentProgress:
    """Stateless; safe from many tasks at once."""

    def __init__(self, log_dirs: LogDirs) -> None:
        self.log_dirs = log_dirs

    async def replica_logs(
        self, moves: Mapping[TopicPartition, Sequence[int]], deadline: Deadline
    ) -> dict[TopicPartition, dict[int, ReplicaLog]]:
        """For each moving partition (→ its replicas): replica node → its log, where known."""
        node_ids = sorted({r for replicas in moves.values() for r in replicas})
        answers = await self.log_dirs.ask(node_ids, deadline.earlier(PROGRESS_TIMEOUT_S))
        out: dict[TopicPartition, dict[int, ReplicaLog]] = {tp: {} for tp in moves}
        for node in answers:
            for log_dir in node.log_dirs:
                for replica in log_dir.replicas:
                    replicas = moves.get(replica.tp)
                    if replicas is not None and node.node_id in replicas:
                        out[replica.tp][node.node_id] = (replica.log_end_offset, replica.size_bytes)
        return out
