"""Calls from one coordinator instance to another: the marker of a transaction for a
`__consumer_offsets` partition goes to the instance owning that partition in this instance's
image (decision 0031), which writes it at storage and then commits or drops the producer's
pending offsets. Coordinators are not the partitions' storage leaders (unlike Kafka's brokers),
so the marker cannot simply be written at storage: the group coordinator must learn of it."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from riverlog.common.cluster import ClusterImage
from riverlog.common.errors import ErrorCode, RiverlogError, code_of
from riverlog.common.rpc.channels import ChannelCache
from riverlog.common.rpc.status import from_rpc_error
from riverlog.v1 import coordinator_pb2, coordinator_pb2_grpc


class OffsetsMarkerClient:
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
        try:
            response = await self.channels.stub(node).WriteOffsetsTxnMarker(
                request, timeout=timeout_ms / 1000 + 1
            )
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from exc
        code = code_of(response.error_code)
        if code != ErrorCode.NONE:
            raise RiverlogError(response.error_message or None, code)
