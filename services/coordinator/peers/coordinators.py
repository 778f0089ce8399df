"""Calls from one coordinator instance to another (decision 0031):

- the marker of a transaction for a `__consumer_offsets` partition goes to the instance owning
  that partition in this instance's image, which writes it at storage and then commits or drops
  the producer's pending offsets. Coordinators are not the partitions' storage leaders (unlike
  Kafka's brokers), so the marker cannot simply be written at storage: the group coordinator
  must learn of it;
- before a TxnOffsetCommit is written, the group coordinator asks the transaction
  coordinator of its transactional id whether the group's partition is in the producer's
  ongoing transaction at that epoch (AddPartitionsToTxn with verify_only, KIP-890)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc

from riverlog.common.cluster import ClusterImage
from riverlog.common.errors import ErrorCode, RiverlogError, code_of
from riverlog.common.rpc.channels import ChannelCache, closed_channel_raises
from riverlog.common.rpc.status import answer_of, from_rpc_error
from riverlog.common.types import TopicPartition
from riverlog.v1 import coordinator_pb2, coordinator_pb2_grpc, transactions_pb2

_VERIFY_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
_VERIFY_BACKOFF_S = 0.05


class PeerCoordinators:
    """Lifecycle: one per coordinator process; `channels.on_image` follows the cluster to
    close the channels of instances that left; `close()` at shutdown."""

    def __init__(self, image: Callable[[], ClusterImage]) -> None:
        self._image = image
        self.channels: ChannelCache[coordinator_pb2_grpc.CoordinatorAsyncStub] = ChannelCache(
            coordinator_pb2_grpc.CoordinatorStub, "coordinator"
        )

    async def close(self) -> None:
        await self.channels.close()

    async def write_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        timeout_ms: int,
    ) -> None:
        """The marker at the partition's current owner; RiverlogError with its code (storage's
        for the marker itself, NOT_COORDINATOR and the like when it has moved or loads)."""
        image = self._image()
        owner = image.coordinators.get(partition)
        node = None
        if owner is not None and owner.coordinator_id >= 0:
            node = image.nodes.get(("coordinator", owner.coordinator_id))
        if node is None:
            raise RiverlogError(
                f"__consumer_offsets-{partition} has no live coordinator",
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
            )
        request = coordinator_pb2.WriteOffsetsTxnMarkerRequest(
            partition=partition,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            committed=committed,
            coordinator_epoch=coordinator_epoch,
        )
        with closed_channel_raises(
            ErrorCode.COORDINATOR_NOT_AVAILABLE, f"coordinator {node.node_id}"
        ):
            await answer_of(
                self.channels.stub(node).WriteOffsetsTxnMarker(
                    request, timeout=timeout_ms / 1000 + 1
                )
            )

    async def verify_in_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        tp: TopicPartition,
        timeout_ms: int,
    ) -> ErrorCode:
        """Whether `tp` is in the producer's ongoing transaction at this epoch, by its
        transaction coordinator (retried while that one moves or loads, up to `timeout_ms`):
        NONE, or its refusal (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE,
        INVALID_PRODUCER_ID_MAPPING); COORDINATOR_NOT_AVAILABLE when none answered."""
        request = transactions_pb2.AddPartitionsToTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            topics=[transactions_pb2.TxnTopic(name=tp.topic, partitions=[tp.partition])],
            verify_only=True,
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        backoff = _VERIFY_BACKOFF_S
        while True:
            code = await self._verify_once(transactional_id, request, timeout_ms)
            if code not in _VERIFY_RETRIABLE:
                return code
            if loop.time() + backoff >= deadline:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    async def _verify_once(
        self,
        transactional_id: str,
        request: transactions_pb2.AddPartitionsToTxnRequest,
        timeout_ms: int,
    ) -> ErrorCode:
        _, node = self._image().transaction_coordinator_for(transactional_id)
        if node is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            with closed_channel_raises(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"coordinator {node.node_id}"
            ):
                response = await self.channels.stub(node).AddPartitionsToTxn(
                    request, timeout=timeout_ms / 1000
                )
        except grpc.RpcError as exc:
            return from_rpc_error(exc).code
        except RiverlogError as exc:
            return exc.code
        return code_of(response.error_code)
