"""The gateway's client of coordinator instances: one channel per instance (the shared
`ChannelCache`: replaced when the instance restarts, closed when it leaves the cluster), and
one call that turns transport failures (and a call cut by the instance leaving the cluster)
into COORDINATOR_NOT_AVAILABLE so the group router retries them like Kafka clients retry a
coordinator that went away."""

from __future__ import annotations

import logging
from typing import Any, Final

import grpc

from riverlog.common.cluster import NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.rpc.channels import ChannelCache, Rpcs, closed_channel_raises, pick
from riverlog.v1 import coordinator_pb2_grpc

log = logging.getLogger(__name__)

COORDINATOR_RPCS: Final[Rpcs[coordinator_pb2_grpc.CoordinatorAsyncStub]] = {
    "JoinGroup": lambda s: s.JoinGroup,
    "SyncGroup": lambda s: s.SyncGroup,
    "Heartbeat": lambda s: s.Heartbeat,
    "LeaveGroup": lambda s: s.LeaveGroup,
    "OffsetCommit": lambda s: s.OffsetCommit,
    "TxnOffsetCommit": lambda s: s.TxnOffsetCommit,
    "OffsetFetch": lambda s: s.OffsetFetch,
    "ListGroups": lambda s: s.ListGroups,
    "DescribeGroups": lambda s: s.DescribeGroups,
    "DeleteGroups": lambda s: s.DeleteGroups,
    "InitProducerId": lambda s: s.InitProducerId,
    "AddPartitionsToTxn": lambda s: s.AddPartitionsToTxn,
    "AddOffsetsToTxn": lambda s: s.AddOffsetsToTxn,
    "EndTxn": lambda s: s.EndTxn,
    "DescribeTransactions": lambda s: s.DescribeTransactions,
    "ListTransactions": lambda s: s.ListTransactions,
    "AbortTransaction": lambda s: s.AbortTransaction,
}
"""The group and transaction requests the gateway routes to a coordinator, by the name the
router passes."""


class CoordinatorPeers:
    """Lifecycle: one per gateway process, used from its event loop; `close()` at shutdown."""

    def __init__(self) -> None:
        self.channels: ChannelCache[coordinator_pb2_grpc.CoordinatorAsyncStub] = ChannelCache(
            coordinator_pb2_grpc.CoordinatorStub, "coordinator"
        )

    async def call(self, node: NodeInfo, method: str, request: Any, timeout_s: float) -> Any:
        """`method` on the coordinator `node`; RiverlogError(COORDINATOR_NOT_AVAILABLE) when it
        cannot be reached, REQUEST_TIMED_OUT when the deadline passes."""
        try:
            rpc = pick(COORDINATOR_RPCS, self.channels.stub(node), method)
            # The instance left the cluster (a clean stop unregisters it first) and its channel
            # was pruned under the call: retriable, so the router asks the partition's new
            # owner instead of the client waiting out its request timeout.
            with closed_channel_raises(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"coordinator {node.node_id} ({method})"
            ):
                return await rpc(request, timeout=max(timeout_s, 0.01))
        except grpc.RpcError as exc:
            status = exc.code() if hasattr(exc, "code") else None
            if status == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise RiverlogError(
                    f"coordinator {node.node_id} did not answer {method} in time",
                    ErrorCode.REQUEST_TIMED_OUT,
                ) from None
            log.info("coordinator %d unreachable for %s: %s", node.node_id, method, status)
            raise RiverlogError(
                f"coordinator {node.node_id} is unreachable ({status})",
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ) from None

    async def close(self) -> None:
        await self.channels.close()
