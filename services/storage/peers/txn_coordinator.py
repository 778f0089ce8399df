"""The partition leader's client of the transaction coordinators (KIP-890 part 1): asks the
transactional id's coordinator, found in the followed cluster image (decision 0028), whether a
partition is in the producer's ongoing transaction (AddPartitionsToTxn with verify_only).

Channels are cached per coordinator instance (pruned as the image changes). Every failure comes
back as an error code (transport failures, and a call cut by the coordinator leaving the
cluster or restarting, as COORDINATOR_NOT_AVAILABLE), never an exception.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, TypeAlias

import grpc

from riverlog.common.cluster import ClusterImage
from riverlog.common.errors import ErrorCode, RiverlogError, code_of
from riverlog.common.rpc.channels import ChannelCache, closed_channel_raises
from riverlog.common.rpc.status import from_rpc_error
from riverlog.common.types import TopicPartition
from riverlog.v1 import coordinator_pb2_grpc, transactions_pb2

log = logging.getLogger(__name__)

_TIMEOUT_S: Final = 10.0

CoordinatorChannels: TypeAlias = "ChannelCache[coordinator_pb2_grpc.CoordinatorAsyncStub]"


def coordinator_channels() -> CoordinatorChannels:
    return ChannelCache(coordinator_pb2_grpc.CoordinatorStub, "txn-coordinator")


class TxnCoordinatorClient:
    """Implements the produce handler's `TxnVerifier`."""

    def __init__(self, channels: CoordinatorChannels, image: Callable[[], ClusterImage]) -> None:
        self._channels = channels
        self._image = image

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> tuple[ErrorCode, str]:
        _, node = self._image().transaction_coordinator_for(transactional_id)
        if node is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no coordinator for {transactional_id!r}"
        request = transactions_pb2.AddPartitionsToTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            topics=[transactions_pb2.TxnTopic(name=tp.topic, partitions=[tp.partition])],
            verify_only=True,
        )
        try:
            with closed_channel_raises(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"coordinator {node.node_id}"
            ):
                response = await self._channels.stub(node).AddPartitionsToTxn(
                    request, timeout=_TIMEOUT_S
                )
        except (grpc.RpcError, RiverlogError) as exc:
            error = from_rpc_error(exc) if isinstance(exc, grpc.RpcError) else exc
            log.info("%s: verification of %s failed: %s", transactional_id, tp, error)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error)
        return code_of(response.error_code), response.error_message
