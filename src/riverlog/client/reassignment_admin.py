"""Partition reassignment for `AdminClient` (Kafka's Admin alterPartitionReassignments and
listPartitionReassignments, KIP-455), over the gateway's passthrough RPCs.

A target of None cancels the partition's reassignment in progress (Kafka's
`Optional.empty()`). Per-partition refusals (UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR, NO_REASSIGNMENT_IN_PROGRESS) come back
as RiverlogError, raised for the first by default or returned per partition.
`ReassignmentAdminMixin` needs only the admin client's `_call`. Thread-safe, as the admin client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.types import TopicPartition
from riverlog.v1 import admin_pb2, common_pb2


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """Kafka's PartitionReassignment: the replicas during the move (target first, then the
    leaving ones), the replicas being added and removed; with the ISR and leader for progress."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    isr: tuple[int, ...] = ()
    leader: int = -1
    replica_logs: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    """Replica node → (log end offset, size in bytes), where its storage node answered."""

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def bytes_copied(self) -> int:
        """Bytes the adding replicas hold so far."""
        return sum(self.replica_logs[r][1] for r in self.adding_replicas if r in self.replica_logs)

    @property
    def bytes_remaining(self) -> int | None:
        """Bytes the adding replicas lack next to the leader's log; None when unknown."""
        leader = self.replica_logs.get(self.leader)
        if leader is None:
            return None
        held = [self.replica_logs.get(r, (0, 0))[1] for r in self.adding_replicas]
        return sum(max(0, leader[1] - size) for size in held)


class ReassignmentAdminMixin:
    """Mixed into AdminClient, which provides `_call`."""

    _call: Callable[[Callable[[Any], Any], Any], Any]

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        raise_on_error: bool = True,
    ) -> dict[TopicPartition, RiverlogError | None]:
        """Move each partition to its target replica list, or cancel its move (None). Returns
        at once: the controller completes the move once the target replicas are in sync."""
        request = admin_pb2.AlterPartitionReassignmentsRequest(
            partitions=[
                admin_pb2.ReassignablePartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    replicas=list(target or ()),
                    cancel=target is None,
                )
                for tp, target in reassignments.items()
            ]
        )
        response = self._call(lambda s: s.AlterPartitionReassignments, request)
        if response.error_code != ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        out: dict[TopicPartition, RiverlogError | None] = {}
        for r in response.partitions:
            tp = TopicPartition(r.topic, r.partition)
            if r.error_code == ErrorCode.NONE:
                out[tp] = None
                continue
            out[tp] = error_for(r.error_code, r.error_message)  # it names the partition
        if raise_on_error:
            failed = next((e for e in out.values() if e is not None), None)
            if failed is not None:
                raise failed
        return out

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress (of `partitions`; None: all). Asking about a
        partition that does not exist raises UNKNOWN_TOPIC_OR_PARTITION naming it, as Kafka's
        ListPartitionReassignments answers (an empty answer means "not moving")."""
        request = admin_pb2.ListPartitionReassignmentsRequest(
            partitions=[
                common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)
                for tp in partitions or ()
            ]
        )
        response = self._call(lambda s: s.ListPartitionReassignments, request)
        if response.error_code != ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        return {
            TopicPartition(p.topic, p.partition): PartitionReassignment(
                tuple(p.replicas),
                tuple(p.adding_replicas),
                tuple(p.removing_replicas),
                tuple(p.isr),
                p.leader,
                {r.node_id: (r.log_end_offset, r.size_bytes) for r in p.replica_progress},
            )
            for p in response.partitions
        }
