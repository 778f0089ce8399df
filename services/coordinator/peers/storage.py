"""The coordinator's client of storage nodes: append `__consumer_offsets` records to a
partition's leader with acks=all, and read a partition from its start to its high watermark
when loading it.

Appends carry the coordinator's producer identity for the partition (decision 0008): a
producer id reserved per `__consumer_offsets` partition, the ownership epoch as producer epoch
and sequence numbers from 0 within that epoch. A storage node that tracks producer state
refuses a batch whose epoch is older than one it has seen (INVALID_PRODUCER_EPOCH): the zombie
owner's writes fail.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence

import grpc

from riverlog.common.cluster import ClusterImage, NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError, code_of
from riverlog.common.records import (
    BatchBuilder,
    BatchHeader,
    InvalidBatchError,
    iter_batches_records,
    next_fetch_offset,
    peek_size,
    validate_batch,
)
from riverlog.common.records.control import ControlRecordType, parse_control_type
from riverlog.common.rpc.channels import ChannelCache, closed_channel_raises
from riverlog.common.rpc.convert import acks_to_proto
from riverlog.common.rpc.status import answer_of, from_rpc_error
from riverlog.common.types import Acks, TopicPartition
from riverlog.v1 import data_pb2, storage_pb2, storage_pb2_grpc

from ..offsets_log import LogRecord, TxnProducer
from ..records import CoordinatorRecord

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
COORDINATOR_PRODUCER_ID_BASE = 1 << 62
"""Producer ids at and above this are reserved for coordinators: base + partition."""
_FETCH_BYTES = 4 * 1024 * 1024


def producer_id_for(partition: int) -> int:
    return COORDINATOR_PRODUCER_ID_BASE + partition


class StorageClient:
    """Calls to the leaders of `__consumer_offsets` partitions, over the shared `ChannelCache`
    (one channel per storage node, replaced when it restarts; `channels.on_image` follows the
    cluster to close those of nodes that left: a call cut so fails as NETWORK_EXCEPTION, which
    the shard and the marker channel retry at the partition's next leader). Lifecycle: one per
    coordinator process, used from its event loop; `close()` at shutdown."""

    def __init__(
        self,
        image: Callable[[], ClusterImage],
        topic: str = OFFSETS_TOPIC,
        channels: ChannelCache[storage_pb2_grpc.StorageServiceAsyncStub] | None = None,
    ) -> None:
        self._image = image
        self.topic = topic
        self._owns_channels = channels is None
        self.channels: ChannelCache[storage_pb2_grpc.StorageServiceAsyncStub] = (
            channels or ChannelCache(storage_pb2_grpc.StorageServiceStub, "storage node")
        )

    def for_topic(self, topic: str) -> StorageClient:
        """The same calls on another coordinator topic (`__transaction_state`), over the same
        channels (closed by this client)."""
        return StorageClient(self._image, topic, self.channels)

    def _leader(self, partition: int, topic: str | None = None) -> NodeInfo:
        topic = topic or self.topic
        node = self._image().leader_node(topic, partition)
        if node is None:
            raise RiverlogError(
                f"{topic}-{partition} has no live leader", ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
        return node

    def _stub(self, node: NodeInfo) -> storage_pb2_grpc.StorageServiceAsyncStub:
        return self.channels.stub(node)

    async def close(self) -> None:
        if self._owns_channels:
            await self.channels.close()

    async def write_txn_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        timeout_ms: int,
    ) -> None:
        """One partition's commit or abort marker at its leader (acks=all); RiverlogError with
        the storage node's code when refused or unreachable."""
        request = storage_pb2.WriteTxnMarkersRequest(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            committed=committed,
            coordinator_epoch=coordinator_epoch,
            topic=tp.topic,
            partition=tp.partition,
            timeout_ms=timeout_ms,
        )
        node = self._image().leader_node(tp.topic, tp.partition)
        if node is None:
            raise RiverlogError(f"{tp} has no live leader", ErrorCode.LEADER_NOT_AVAILABLE)
        with _closed_channel_raises(node):
            await answer_of(
                self._stub(node).WriteTxnMarkers(request, timeout=timeout_ms / 1000 + 1)
            )

    async def write_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        timeout_ms: int,
    ) -> None:
        """A transaction's marker in one partition of this client's topic (a group shard
        ending a transaction's offsets, decision 0031)."""
        tp = TopicPartition(self.topic, partition)
        await self.write_txn_marker(
            tp, producer_id, producer_epoch, committed, coordinator_epoch, timeout_ms
        )

    async def append(
        self,
        partition: int,
        records: Sequence[CoordinatorRecord],
        producer_epoch: int,
        base_sequence: int,
        timestamp_ms: int,
        timeout_ms: int,
        producer: TxnProducer | None = None,
        txn_records: Sequence[CoordinatorRecord] = (),
    ) -> int:
        """Append one batch with acks=all; the offset of its last record. With `producer`,
        `txn_records` follow in the same payload as that producer's transactional batch
        (TxnOffsetCommit): the storage node appends both or neither. Raises RiverlogError with
        the storage node's code (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
        INVALID_PRODUCER_EPOCH...)."""
        builder = BatchBuilder(
            producer_id=producer_id_for(partition),
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )
        for record in records:
            builder.append(timestamp_ms, record.key, record.value)
        payload = builder.build()
        if producer is not None:
            txn = BatchBuilder(
                producer_id=producer.producer_id,
                producer_epoch=producer.producer_epoch,
                base_sequence=producer.base_sequence,
                is_transactional=True,
            )
            for record in txn_records:
                txn.append(timestamp_ms, record.key, record.value)
            payload += txn.build()
        request = data_pb2.ProduceRequest(
            acks=acks_to_proto(Acks.ALL),
            timeout_ms=timeout_ms,
            partitions=[
                data_pb2.ProducePartition(topic=self.topic, partition=partition, records=payload)
            ],
            transactional_id=producer.transactional_id if producer is not None else "",
        )
        node = self._leader(partition)
        try:
            with _closed_channel_raises(node):
                response = await self._stub(node).Produce(request, timeout=timeout_ms / 1000 + 1)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from exc
        if not response.partitions:
            raise RiverlogError(
                "the leader answered with no partition", ErrorCode.UNKNOWN_SERVER_ERROR
            )
        result = response.partitions[0]
        code = code_of(result.error_code)
        if code != ErrorCode.NONE:
            raise RiverlogError(result.error_message or None, code)
        return int(result.last_offset)

    async def read(self, partition: int) -> AsyncIterator[LogRecord]:
        """Every record of the partition from its log start up to the high watermark seen by
        the first fetch (what was acknowledged before this owner took over). The log is
        compacted (decision 0014): offsets have gaps, some batches hold no record."""
        position = 0
        end: int | None = None
        while end is None or position < end:
            node = self._leader(partition)
            request = data_pb2.FetchRequest(
                max_wait_ms=0,
                max_bytes=_FETCH_BYTES,
                partitions=[
                    data_pb2.FetchPartition(
                        topic=self.topic,
                        partition=partition,
                        fetch_offset=position,
                        partition_max_bytes=_FETCH_BYTES,
                    )
                ],
            )
            try:
                with _closed_channel_raises(node):
                    response = await self._stub(node).Fetch(request, timeout=30)
            except grpc.RpcError as exc:
                raise from_rpc_error(exc) from exc
            part = response.partitions[0]
            code = code_of(part.error_code)
            if code == ErrorCode.OFFSET_OUT_OF_RANGE and position < part.log_start_offset:
                position = int(part.log_start_offset)
                continue
            if code != ErrorCode.NONE:
                raise RiverlogError(part.error_message or None, code)
            if end is None:
                end = int(part.high_watermark)
                position = max(position, int(part.log_start_offset))
            records, next_position = records_below(part.records, position, end)
            for record in records:
                yield record
            if next_position <= position and position < end:
                raise RiverlogError(
                    f"{self.topic}-{partition}: no progress reading at {position}",
                    ErrorCode.CORRUPT_MESSAGE,
                )
            position = next_position


def _closed_channel_raises(node: NodeInfo) -> closed_channel_raises:
    """A storage node's channel closed under a call (it left the cluster or restarted):
    NETWORK_EXCEPTION, retriable like any transport failure."""
    return closed_channel_raises(ErrorCode.NETWORK_EXCEPTION, f"storage node {node.node_id}")


def records_below(data: bytes, position: int, end: int) -> tuple[list[LogRecord], int]:
    """Pure: the records of fetched `data` at or after `position` and below `end`, markers
    included, each with its batch's transactional producer (decision 0031), and where the next
    fetch starts. That is after the last complete batch, not after the last record: in a
    compacted log the records at the end of a batch may be gone, a batch may be an empty
    header (a producer's last batch, kept for its sequence), and fetching from a removed
    offset returns the batch that held it again."""
    records: list[LogRecord] = []
    pos = 0
    while True:
        size = peek_size(data, pos)
        if size < 0 or pos + size > len(data):
            break
        header = validate_batch(data, pos)
        batch = data[pos : pos + size]
        pos += size
        for record in iter_batches_records(
            batch, position, validate_crc=False, include_control=True
        ):
            if record.offset >= end:
                return records, next_fetch_offset(data, position)
            records.append(_logged(header, record.offset, record.key, record.value))
    return records, next_fetch_offset(data, position)


def _logged(header: BatchHeader, offset: int, key: bytes | None, value: bytes | None) -> LogRecord:
    pid, epoch, last = header.producer_id, header.producer_epoch, header.last_sequence
    if not header.is_control:
        return LogRecord(offset, key, value, pid, epoch, last, header.is_transactional)
    try:
        commit = parse_control_type(key) is ControlRecordType.COMMIT
    except InvalidBatchError:
        return LogRecord(offset, None, None)  # not a transaction marker: nothing ends here
    return LogRecord(offset, None, None, pid, epoch, last, True, commit)
