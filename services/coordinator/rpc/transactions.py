"""The transaction coordinator's RPCs (`transactions.proto`): each request goes to the shard of
its transactional id's `__transaction_state` partition; routing and load errors (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) come back as the response's error."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import groupby
from typing import Any

from riverlog.common.cluster.image import OFFSETS_TOPIC, group_partition
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.v1 import coordinator_pb2 as cpb
from riverlog.v1 import transactions_pb2 as pb

from ..group.outcome import NOTHING, Outcome
from ..ownership import Ownership
from ..txn.coordinator import ProducerIdAndEpoch, TransactionCoordinator
from ..txn.metadata import TransactionMetadata
from ..txn.state import TransactionState

Handler = Callable[[TransactionCoordinator, Callable[[Any], None]], Outcome]


def _error(exc: RiverlogError) -> dict[str, Any]:
    return {"error_code": int(exc.code), "error_message": exc.message}


def topics_to_proto(partitions: Iterable[TopicPartition]) -> list[pb.TxnTopic]:
    ordered = sorted(partitions)
    return [
        pb.TxnTopic(name=topic, partitions=[tp.partition for tp in group])
        for topic, group in groupby(ordered, key=lambda tp: tp.topic)
    ]


def describe_to_proto(meta: TransactionMetadata) -> pb.TransactionDescription:
    return pb.TransactionDescription(
        transactional_id=meta.transactional_id,
        transaction_state=meta.state.value,
        transaction_timeout_ms=meta.timeout_ms,
        transaction_start_time_ms=meta.start_ms,
        producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        topics=topics_to_proto(meta.partitions),
    )


def _describe(transactional_id: str) -> Handler:
    def describe(c: TransactionCoordinator, reply: Callable[[Any], None]) -> Outcome:
        reply(c.describe(transactional_id))
        return NOTHING

    return describe


class TransactionRpc:
    """Adapts the RPCs to the transaction shards. Stateless apart from the ownership."""

    def __init__(self, ownership: Ownership[TransactionCoordinator]) -> None:
        self.ownership = ownership

    async def _on_shard(self, transactional_id: str, handler: Handler) -> Any:
        return await self.ownership.shard_for(transactional_id).submit(handler)

    async def init_producer_id(
        self, request: pb.InitProducerIdRequest
    ) -> pb.InitProducerIdResponse:
        tid = request.transactional_id
        expected = None
        if request.HasField("producer_id") and request.producer_id >= 0:
            expected = (request.producer_id, request.producer_epoch)
        try:
            producer = await self._on_shard(
                tid,
                lambda c, r: c.init_producer_id(tid, request.transaction_timeout_ms, r, expected),
            )
        except RiverlogError as exc:
            return pb.InitProducerIdResponse(**_error(exc), producer_id=-1, producer_epoch=-1)
        assert isinstance(producer, ProducerIdAndEpoch)
        return pb.InitProducerIdResponse(
            producer_id=producer.producer_id, producer_epoch=producer.producer_epoch
        )

    async def add_partitions(
        self, request: pb.AddPartitionsToTxnRequest
    ) -> pb.AddPartitionsToTxnResponse:
        partitions = [
            TopicPartition(topic.name, p) for topic in request.topics for p in topic.partitions
        ]
        if not partitions or any(not tp.topic or tp.partition < 0 for tp in partitions):
            return pb.AddPartitionsToTxnResponse(
                error_code=ErrorCode.INVALID_REQUEST,  # type: ignore[arg-type]
                error_message="name at least one partition, each with a topic and a partition >= 0",
            )
        if request.verify_only:
            return await self._verify(request, partitions)
        return await self._add(
            request.transactional_id, request.producer_id, request.producer_epoch, partitions
        )

    async def _verify(
        self, request: pb.AddPartitionsToTxnRequest, partitions: list[TopicPartition]
    ) -> pb.AddPartitionsToTxnResponse:
        """KIP-890 part 1 (a partition leader's check before a transactional first write)."""
        tid, pid, epoch = request.transactional_id, request.producer_id, request.producer_epoch
        try:
            await self._on_shard(
                tid, lambda c, r: c.verify_partitions(tid, pid, epoch, partitions, r)
            )
        except RiverlogError as exc:
            return pb.AddPartitionsToTxnResponse(**_error(exc))
        return pb.AddPartitionsToTxnResponse()

    async def add_offsets(self, request: pb.AddOffsetsToTxnRequest) -> pb.AddOffsetsToTxnResponse:
        """The group's `__consumer_offsets` partition joins the transaction (Kafka's
        AddOffsetsToTxn), so TxnOffsetCommit's offsets commit or abort with it."""
        count = self.ownership.watcher.image.offsets_partitions()
        if not request.group_id:
            return pb.AddOffsetsToTxnResponse(
                error_code=ErrorCode.INVALID_GROUP_ID,  # type: ignore[arg-type]
                error_message="the group id is empty",
            )
        if count == 0:
            return pb.AddOffsetsToTxnResponse(
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,  # type: ignore[arg-type]
                error_message=f"{OFFSETS_TOPIC} does not exist yet",
            )
        offsets = TopicPartition(OFFSETS_TOPIC, group_partition(request.group_id, count))
        added = await self._add(
            request.transactional_id, request.producer_id, request.producer_epoch, [offsets]
        )
        return pb.AddOffsetsToTxnResponse(
            error_code=added.error_code, error_message=added.error_message
        )

    async def _add(
        self, tid: str, producer_id: int, epoch: int, partitions: list[TopicPartition]
    ) -> pb.AddPartitionsToTxnResponse:
        try:
            await self._on_shard(
                tid, lambda c, r: c.add_partitions(tid, producer_id, epoch, partitions, r)
            )
        except RiverlogError as exc:
            return pb.AddPartitionsToTxnResponse(**_error(exc))
        return pb.AddPartitionsToTxnResponse()

    async def end_txn(self, request: pb.EndTxnRequest) -> pb.EndTxnResponse:
        tid = request.transactional_id
        try:
            producer = await self._on_shard(
                tid,
                lambda c, r: c.end_transaction(
                    tid, request.producer_id, request.producer_epoch, request.committed, r
                ),
            )
        except RiverlogError as exc:
            return pb.EndTxnResponse(**_error(exc), producer_id=-1, producer_epoch=-1)
        assert isinstance(producer, ProducerIdAndEpoch)
        return pb.EndTxnResponse(
            producer_id=producer.producer_id, producer_epoch=producer.producer_epoch
        )

    async def abort(self, request: cpb.AbortTransactionRequest) -> cpb.AbortTransactionResponse:
        """An operator's abort of a hanging transaction (fence, then abort what is open)."""
        tid = request.transactional_id
        if not tid:
            return cpb.AbortTransactionResponse(
                error_code=ErrorCode.INVALID_REQUEST,  # type: ignore[arg-type]
                error_message="the transactional id is empty",
            )
        try:
            previous, producer = await self._on_shard(tid, lambda c, r: c.admin_abort(tid, r))
        except RiverlogError as exc:
            return cpb.AbortTransactionResponse(**_error(exc), producer_id=-1, producer_epoch=-1)
        assert isinstance(producer, ProducerIdAndEpoch)
        return cpb.AbortTransactionResponse(
            previous_state=previous.value,
            producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch,
        )

    async def describe(
        self, request: pb.DescribeTransactionsRequest
    ) -> pb.DescribeTransactionsResponse:
        out = pb.DescribeTransactionsResponse()
        for tid in request.transactional_ids:
            try:
                meta = await self._on_shard(tid, _describe(tid))
            except RiverlogError as exc:
                out.transactions.add(transactional_id=tid, **_error(exc))
                continue
            if meta is None:
                out.transactions.add(
                    transactional_id=tid,
                    error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
                    error_message=f"transactional id {tid!r} is not known",
                )
            else:
                out.transactions.append(describe_to_proto(meta))
        return out

    async def list(self, request: pb.ListTransactionsRequest) -> pb.ListTransactionsResponse:
        """The transactions of every partition loaded here (the gateway merges instances)."""
        try:
            states = frozenset(TransactionState(s) for s in request.state_filters)
        except ValueError:
            names = ", ".join(s.value for s in TransactionState)
            return pb.ListTransactionsResponse(
                error_code=ErrorCode.INVALID_REQUEST,  # type: ignore[arg-type]
                error_message=f"unknown state in {list(request.state_filters)} (one of {names})",
            )
        producers = set(request.producer_id_filters)
        out = pb.ListTransactionsResponse()
        if any(not s.ready for s in self.ownership.shards.values()):
            out.error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # type: ignore[assignment]
            out.error_message = "some __transaction_state partitions are loading"

        def listing(c: TransactionCoordinator, reply: Callable[[Any], None]) -> Outcome:
            reply(c.listing(states))
            return NOTHING

        for shard in self.ownership.ready_shards():
            try:
                rows = await shard.submit(listing)
            except RiverlogError:
                continue  # moved away meanwhile: its new owner lists it
            for row in rows:
                if producers and row.producer_id not in producers:
                    continue
                out.transactions.add(
                    transactional_id=row.transactional_id,
                    producer_id=row.producer_id,
                    transaction_state=row.state.value,
                )
        return out
