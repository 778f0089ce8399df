"""The partition reassignment RPCs of the MetadataService (KIP-455), owned by its servicer.

Thin: convert, call `ReassignmentController`, convert back. AlterPartitionReassignments is a
controller write (the servicer forwards it to the controller); ListPartitionReassignments is
read from this instance's image. Per-partition problems come back in each partition's result.
"""

from __future__ import annotations

from riverlog.common.errors import RiverlogError
from riverlog.common.rpc.convert import error_code_to_proto
from riverlog.v1 import admin_pb2

from ..controller.reassignments import (
    OngoingReassignment,
    ReassignmentController,
    ReassignmentItem,
    ReassignmentResult,
)


def items_from_proto(
    request: admin_pb2.AlterPartitionReassignmentsRequest,
) -> list[ReassignmentItem]:
    return [
        ReassignmentItem(p.topic, p.partition, None if p.cancel else tuple(p.replicas))
        for p in request.partitions
    ]


def result_to_proto(result: ReassignmentResult) -> admin_pb2.ReassignablePartitionResult:
    return admin_pb2.ReassignablePartitionResult(
        topic=result.topic,
        partition=result.partition,
        error_code=error_code_to_proto(result.error_code),
        error_message=result.error_message,
    )


def ongoing_to_proto(ongoing: OngoingReassignment) -> admin_pb2.OngoingPartitionReassignment:
    p = ongoing.state
    return admin_pb2.OngoingPartitionReassignment(
        topic=ongoing.topic,
        partition=p.partition,
        replicas=p.replicas,
        adding_replicas=p.adding_replicas,
        removing_replicas=p.removing_replicas,
        isr=p.isr,
        leader=p.leader,
    )


class ReassignmentsRpc:
    """The two handlers' bodies; the servicer routes writes to the controller around them."""

    def __init__(self, reassignments: ReassignmentController) -> None:
        self.reassignments = reassignments

    async def alter(
        self, request: admin_pb2.AlterPartitionReassignmentsRequest
    ) -> admin_pb2.AlterPartitionReassignmentsResponse:
        results = await self.reassignments.alter(items_from_proto(request))
        return admin_pb2.AlterPartitionReassignmentsResponse(
            partitions=[result_to_proto(r) for r in results]
        )

    def list(
        self, request: admin_pb2.ListPartitionReassignmentsRequest
    ) -> admin_pb2.ListPartitionReassignmentsResponse:
        wanted = [(tp.topic, tp.partition) for tp in request.partitions] or None
        try:
            ongoing = self.reassignments.ongoing(wanted)
        except RiverlogError as exc:
            return admin_pb2.ListPartitionReassignmentsResponse(
                error_code=error_code_to_proto(exc.code), error_message=exc.message
            )
        return admin_pb2.ListPartitionReassignmentsResponse(
            partitions=[ongoing_to_proto(o) for o in ongoing]
        )
