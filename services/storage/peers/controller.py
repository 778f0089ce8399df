"""The storage node's client of the controller for ISR changes: AlterPartition through the
failover MetadataClient (any metadata instance forwards it to the active controller).

Converts the replica layer's `AlterIsrRequest`s to the agreed AlterPartition messages and the
answers back to `AlterIsrOutcome`s; a whole-request error becomes that error on every item.
"""

from __future__ import annotations

from collections.abc import Callable

from riverlog.common.cluster import MetadataClient
from riverlog.common.errors import ErrorCode, code_of
from riverlog.common.types import TopicPartition
from riverlog.v1 import metadata_pb2

from ..replica.alter_partition import AlterIsrOutcome
from ..replica.isr import AlterIsrRequest

_TIMEOUT_S = 10.0


class ControllerClient:
    """`incarnation()` gives the node's current registration incarnation (the controller
    refuses changes from an older incarnation of this node)."""

    def __init__(
        self, client: MetadataClient, node_id: int, incarnation: Callable[[], int]
    ) -> None:
        self._client = client
        self._node_id = node_id
        self._incarnation = incarnation

    async def alter_partition(self, requests: list[AlterIsrRequest]) -> list[AlterIsrOutcome]:
        message = metadata_pb2.AlterPartitionRequest(
            node_id=self._node_id,
            node_incarnation=self._incarnation(),
            partitions=[
                metadata_pb2.AlterPartitionItem(
                    topic=r.tp.topic,
                    partition=r.tp.partition,
                    leader_epoch=r.leader_epoch,
                    new_isr=list(r.new_isr),
                    partition_epoch=r.partition_epoch,
                )
                for r in requests
            ],
        )
        response = await self._client.call("AlterPartition", message, timeout_s=_TIMEOUT_S)
        if int(response.error_code) != ErrorCode.NONE:
            code = code_of(response.error_code)
            return [AlterIsrOutcome(r.tp, code, response.error_message) for r in requests]
        outcomes: list[AlterIsrOutcome] = []
        for item in response.partitions:
            has_state = item.HasField("state")
            outcomes.append(
                AlterIsrOutcome(
                    tp=TopicPartition(item.topic, item.partition),
                    error=code_of(item.error_code),
                    error_message=item.error_message,
                    leader_epoch=item.state.leader_epoch if has_state else -1,
                    isr=tuple(item.state.isr) if has_state else None,
                    partition_epoch=item.state.partition_epoch if has_state else -1,
                )
            )
        return outcomes
