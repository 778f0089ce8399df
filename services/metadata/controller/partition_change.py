"""A pure builder for leader and ISR changes of one partition, after Kafka's
`PartitionChangeBuilder`: state in, change out, no I/O, so every rule is unit-tested alone.

Rules:
- The leader stays while it is alive and in the ISR (or when nothing better can be elected).
- Otherwise the first replica, in replica order, that is alive and in the target ISR leads.
- With unclean election allowed and no such replica, the first alive replica leads and the ISR
  becomes just that replica. Without it, the partition is offline (leader -1), and an ISR
  that would become empty is left as it was (Kafka never shrinks the ISR to nothing), so the
  last in-sync replicas can lead again when one of them comes back.
- A new leader bumps the leader epoch; any change bumps the partition epoch.
- An ISR change that is not a subset of the replicas is refused (INVALID_REQUEST).

A replica on an offline log dir (decision 0022) counts as not live for its partition: callers
pass `eligible_nodes(...)` as the live nodes, so it leaves the ISR and cannot lead.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from riverlog.common.cluster.image import NodeInfo, PartitionInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import NO_LEADER, TopicPartition

OfflineReplicas = Mapping[TopicPartition, frozenset[int]]
"""Partition → the storage nodes whose replica of it is on an offline log dir."""


def offline_by_partition(nodes: Iterable[NodeInfo]) -> dict[TopicPartition, frozenset[int]]:
    """The offline replicas the live storage `nodes` reported, by partition."""
    found: dict[TopicPartition, set[int]] = {}
    for node in nodes:
        for tp in node.offline_replicas:
            found.setdefault(tp, set()).add(node.node_id)
    return {tp: frozenset(ids) for tp, ids in found.items()}


def eligible_nodes(
    live: Collection[int], offline: OfflineReplicas, topic: str, partition: int
) -> frozenset[int]:
    """The live nodes whose replica of `topic`-`partition` is not on an offline log dir."""
    gone = offline.get(TopicPartition(topic, partition))
    return frozenset(live) - gone if gone else frozenset(live)


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """The new state and what moved."""

    partition: PartitionInfo
    leader_changed: bool
    isr_changed: bool


class PartitionChangeBuilder:
    """Set targets, then `build()` once. Not thread-safe; cheap to create per change."""

    def __init__(
        self,
        current: PartitionInfo,
        live_nodes: Collection[int],
        unclean_leader_election: bool = False,
    ) -> None:
        self.current = current
        self.live = frozenset(live_nodes)
        self.unclean = unclean_leader_election
        self._target_isr: tuple[int, ...] | None = None
        self._target_replicas: tuple[int, ...] | None = None
        self._elect_preferred = False

    def set_target_isr(self, isr: Sequence[int]) -> PartitionChangeBuilder:
        self._target_isr = tuple(dict.fromkeys(isr))
        return self

    def set_target_replicas(self, replicas: Sequence[int]) -> PartitionChangeBuilder:
        if not replicas or len(set(replicas)) != len(replicas):
            raise RiverlogError(
                f"replicas must be distinct and non-empty: {list(replicas)}",
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            )
        self._target_replicas = tuple(replicas)
        return self

    def elect_preferred_leader(self) -> PartitionChangeBuilder:
        """Move leadership to the first replica when it is alive and in sync."""
        self._elect_preferred = True
        return self

    def _isr(self, replicas: tuple[int, ...]) -> tuple[int, ...]:
        isr = self._target_isr if self._target_isr is not None else self.current.isr
        extra = [r for r in isr if r not in replicas]
        if extra and self._target_isr is not None and self._target_replicas is None:
            raise RiverlogError(
                f"ISR {list(isr)} has replicas outside {list(replicas)}", ErrorCode.INVALID_REQUEST
            )
        return tuple(r for r in isr if r in replicas)

    def _elect(
        self, replicas: tuple[int, ...], isr: tuple[int, ...]
    ) -> tuple[int, tuple[int, ...]]:
        """(leader, isr) after election."""
        leader = self.current.leader
        eligible = [r for r in replicas if r in isr and r in self.live]
        if self._elect_preferred and eligible and eligible[0] == replicas[0]:
            return replicas[0], isr
        if leader in self.live and leader in isr and leader in replicas:
            return leader, isr
        if eligible:
            return eligible[0], isr
        if self.unclean:
            alive = [r for r in replicas if r in self.live]
            if alive:
                return alive[0], (alive[0],)
        return NO_LEADER, isr

    def build(self) -> PartitionChange | None:
        """The change, or None when nothing would change."""
        replicas = self._target_replicas or self.current.replicas
        isr = self._isr(replicas)
        leader, isr = self._elect(replicas, isr)
        if leader != NO_LEADER and leader not in isr:
            isr = (*isr, leader)
        if not isr and self.current.isr and leader == NO_LEADER:
            isr = tuple(r for r in self.current.isr if r in replicas)  # never empty the ISR
        leader_changed = leader != self.current.leader
        isr_changed = isr != self.current.isr
        replicas_changed = replicas != self.current.replicas
        if not (leader_changed or isr_changed or replicas_changed):
            return None
        new = replace(
            self.current,
            leader=leader,
            leader_epoch=self.current.leader_epoch + (1 if leader_changed else 0),
            replicas=replicas,
            isr=isr,
            partition_epoch=self.current.partition_epoch + 1,
        )
        return PartitionChange(new, leader_changed, isr_changed)


def new_partition(partition: int, replicas: Sequence[int]) -> PartitionInfo:
    """The initial state of a created partition: the first replica leads, all are in sync."""
    return PartitionInfo(
        partition=partition,
        leader=replicas[0],
        leader_epoch=0,
        replicas=tuple(replicas),
        isr=tuple(replicas),
        partition_epoch=0,
    )
