"""The BalanceReplicas RPC of the MetadataService (decision 0025), owned by its servicer: the
controller's `ReplicaBalancer` plan converted to the wire. A controller write (the servicer
forwards it to the controller), so one planner with one set of limits answers every caller.
"""

from __future__ import annotations

from riverlog.v1 import admin_pb2

from ..controller.balance_plan import BalancePlan
from ..controller.balancer import ReplicaBalancer


def plan_to_proto(
    plan: BalancePlan, balancer: ReplicaBalancer, racks: dict[int, str]
) -> admin_pb2.BalanceReplicasResponse:
    before, after = plan.before, plan.after
    return admin_pb2.BalanceReplicasResponse(
        moves=[
            admin_pb2.BalanceMove(
                topic=m.topic,
                partition=m.partition,
                current=m.current,
                target=m.target,
                bytes_to_copy=m.bytes_to_copy,
            )
            for m in plan.moves
        ],
        nodes=[
            admin_pb2.NodeBalance(
                node_id=n,
                rack=racks.get(n, ""),
                replicas_before=before.replicas.get(n, 0),
                replicas_after=after.replicas.get(n, 0),
                leaders_before=before.leaders.get(n, 0),
                leaders_after=after.leaders.get(n, 0),
                bytes_before=-1 if before.disk_bytes is None else before.disk_bytes.get(n, 0),
                bytes_after=-1 if after.disk_bytes is None else after.disk_bytes.get(n, 0),
            )
            for n in sorted(before.replicas)
        ],
        moves_in_progress=plan.in_progress,
        running=balancer.running,
        enabled=balancer.config.balancer_enable,
        max_concurrent_moves=balancer.config.balancer_max_concurrent_moves,
        rack_violations_before=before.rack_violations,
        rack_violations_after=after.rack_violations,
        notes=list(plan.notes),
    )


class BalancerRpc:
    """The handler's body; the servicer routes it to the controller."""

    def __init__(self, balancer: ReplicaBalancer) -> None:
        self.balancer = balancer

    async def balance(
        self, request: admin_pb2.BalanceReplicasRequest
    ) -> admin_pb2.BalanceReplicasResponse:
        plan = await self.balancer.balance(request.dry_run)
        racks = {n.node_id: n.rack for n in self.balancer.image.cluster.nodes_of_kind("storage")}
        return plan_to_proto(plan, self.balancer, racks)
