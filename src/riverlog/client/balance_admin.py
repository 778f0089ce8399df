"""The replica balancer for `AdminClient` (decision 0025): the controller's plan, and a run
that carries it out, over the gateway's BalanceReplicas passthrough, and the draining mark that
keeps the balancer (and every placement) off a node being emptied. There is one planner, the
controller's, so a dry run here shows exactly what `balancer.enable` would do.
`BalanceAdminMixin` needs only the admin client's `_call`. Thread-safe, as the admin client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from riverlog.common.errors import ErrorCode, error_for
from riverlog.common.types import TopicPartition
from riverlog.v1 import admin_pb2


@dataclass(frozen=True, slots=True)
class BalanceMove:
    """One partition of the plan: current → target replicas (preferred leader first)."""

    partition: TopicPartition
    current: tuple[int, ...]
    target: tuple[int, ...]
    bytes_to_copy: int = 0


@dataclass(frozen=True, slots=True)
class NodeBalance:
    """A live storage node before and after the plan; bytes None when unknown."""

    node_id: int
    rack: str
    replicas: tuple[int, int]
    leaders: tuple[int, int]
    bytes: tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class BalancePlan:
    moves: tuple[BalanceMove, ...]
    nodes: Mapping[int, NodeBalance]
    moves_in_progress: int
    running: bool
    enabled: bool
    max_concurrent_moves: int
    rack_violations: tuple[int, int]
    notes: tuple[str, ...]

    def replica_spread(self, after: bool = False) -> int:
        counts = [n.replicas[after] for n in self.nodes.values()]
        return max(counts) - min(counts) if counts else 0

    def leader_spread(self, after: bool = False) -> int:
        counts = [n.leaders[after] for n in self.nodes.values()]
        return max(counts) - min(counts) if counts else 0


def plan_from_proto(r: admin_pb2.BalanceReplicasResponse) -> BalancePlan:
    return BalancePlan(
        moves=tuple(
            BalanceMove(
                TopicPartition(m.topic, m.partition),
                tuple(m.current),
                tuple(m.target),
                m.bytes_to_copy,
            )
            for m in r.moves
        ),
        nodes={
            n.node_id: NodeBalance(
                n.node_id,
                n.rack,
                (n.replicas_before, n.replicas_after),
                (n.leaders_before, n.leaders_after),
                None if n.bytes_before < 0 else (n.bytes_before, n.bytes_after),
            )
            for n in r.nodes
        },
        moves_in_progress=r.moves_in_progress,
        running=r.running,
        enabled=r.enabled,
        max_concurrent_moves=r.max_concurrent_moves,
        rack_violations=(r.rack_violations_before, r.rack_violations_after),
        notes=tuple(r.notes),
    )


class BalanceAdminMixin:
    """Mixed into AdminClient, which provides `_call`."""

    _call: Callable[[Callable[[Any], Any], Any], Any]

    def balance_replicas(self, dry_run: bool = True) -> BalancePlan:
        """The controller's balancing plan; with `dry_run` False the controller also starts a
        run that issues it batch by batch (balancer.max.concurrent.moves at a time) until
        balanced. Returns at once; the moves show in `list_partition_reassignments`."""
        request = admin_pb2.BalanceReplicasRequest(dry_run=dry_run)
        response = self._call(lambda s: s.BalanceReplicas, request)
        if response.error_code != ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        return plan_from_proto(response)

    def alter_node_draining(self, node_id: int, draining: bool = True) -> tuple[int, ...]:
        """Mark storage node `node_id` as being drained (or unmark it, `draining` False): the
        controller then places no new replica on it (new topics and partitions, reassignments,
        the balancer). Marking is what `riverlog partitions drain` does before it moves the
        node's replicas; the controller drops the mark once the node has unregistered and holds
        nothing. Returns every node marked after the change (`describe_cluster().draining`)."""
        request = admin_pb2.AlterNodeDrainingRequest(node_id=node_id, draining=draining)
        response = self._call(lambda s: s.AlterNodeDraining, request)
        if response.error_code != ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        return tuple(response.draining_nodes)
