"""Protobuf ↔ domain values for the storage API, in one place, so the servicer and the zero-copy
server stay thin and the domain code never imports a `_pb2` module.

Decoding is forgiving where the proto is (unset fields are zeros) and strict where a value
cannot mean anything: an unknown `acks` becomes None (answered with INVALID_REQUIRED_ACKS per
partition), a `records` field is passed on as bytes without being looked into.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from riverlog.common.produce_request_parse import ParsedProducePartition, ParsedProduceRequest
from riverlog.common.records.control import ControlRecordType, EndTxnMarker, build_end_txn_marker
from riverlog.common.rpc.convert import (
    acks_from_proto,
    isolation_level_from_proto,
    offset_spec_from_proto,
)
from riverlog.common.types import Acks, IsolationLevel, OffsetSpec, TopicPartition
from riverlog.v1 import data_pb2, storage_pb2

from ..log import AppendOrigin
from ..replica.requests import (
    DeleteRecordsPartitionData,
    DeleteRecordsPartitionResult,
    EpochEndOffsetData,
    EpochEndOffsetResult,
    FetchParams,
    FetchPartitionData,
    FetchPartitionResult,
    ListOffsetsPartitionData,
    ListOffsetsPartitionResult,
    LogDirDescription,
    ProduceParams,
    ProducePartitionData,
    ProducePartitionResult,
)


def _optional_epoch(msg: data_pb2.ProducePartition | data_pb2.FetchPartition) -> int | None:
    return msg.current_leader_epoch if msg.HasField("current_leader_epoch") else None


# --- produce ------------------------------------------------------------------------------------


def produce_params_from_proto(request: data_pb2.ProduceRequest) -> ProduceParams:
    return _produce_params(request, [_optional_epoch(p) for p in request.partitions])


def produce_params_from_parsed(request: ParsedProduceRequest) -> ProduceParams:
    """The zero-copy channel's produce frame, read by hand: each partition's records stay a
    view of the received frame (writable, the frame being the channel's own), so the leader
    assigns offsets in place instead of in a copy (`validate_leader_append`)."""
    return _produce_params(request, [p.current_leader_epoch for p in request.partitions])


def _produce_params(
    request: data_pb2.ProduceRequest | ParsedProduceRequest, epochs: list[int | None]
) -> ProduceParams:
    """`request`'s fields, its partitions' with their `epochs` (how each form says "none")."""
    parts: Sequence[data_pb2.ProducePartition | ParsedProducePartition] = request.partitions
    return ProduceParams(
        acks=acks_from_proto(request.acks),
        timeout_ms=request.timeout_ms,
        partitions=[
            ProducePartitionData(
                tp=TopicPartition(p.topic, p.partition),
                records=p.records,
                current_leader_epoch=epoch,
            )
            for p, epoch in zip(parts, epochs, strict=True)
        ],
        correlation_id=request.correlation_id,
        transactional_id=request.transactional_id,
    )


def marker_params_from_proto(
    request: storage_pb2.WriteTxnMarkersRequest, now_ms: int
) -> ProduceParams:
    """The coordinator's marker as an acks=all append of one control batch (Kafka's
    WriteTxnMarkers → appendRecords with origin COORDINATOR)."""
    kind = ControlRecordType.COMMIT if request.committed else ControlRecordType.ABORT
    marker = build_end_txn_marker(
        EndTxnMarker(kind, request.coordinator_epoch),
        request.producer_id,
        request.producer_epoch,
        now_ms,
    )
    return ProduceParams(
        acks=Acks.ALL,
        timeout_ms=request.timeout_ms,
        partitions=[ProducePartitionData(TopicPartition(request.topic, request.partition), marker)],
        origin=AppendOrigin.COORDINATOR,
    )


def produce_response_to_proto(
    results: Iterable[ProducePartitionResult], correlation_id: int
) -> data_pb2.ProduceResponse:
    return data_pb2.ProduceResponse(
        correlation_id=correlation_id,
        partitions=[
            data_pb2.ProducePartitionResponse(
                topic=r.tp.topic,
                partition=r.tp.partition,
                error_code=int(r.error),  # type: ignore[arg-type]
                error_message=r.error_message,
                base_offset=r.base_offset,
                last_offset=r.last_offset,
                log_append_time_ms=r.log_append_time_ms,
                log_start_offset=r.log_start_offset,
            )
            for r in results
        ],
    )


# --- fetch --------------------------------------------------------------------------------------


def fetch_params_from_proto(request: data_pb2.FetchRequest) -> FetchParams:
    return FetchParams(
        partitions=[
            FetchPartitionData(
                tp=TopicPartition(p.topic, p.partition),
                fetch_offset=p.fetch_offset,
                partition_max_bytes=p.partition_max_bytes,
                current_leader_epoch=_optional_epoch(p),
                log_start_offset=p.log_start_offset,
                known_high_watermark=(
                    p.known_high_watermark if p.HasField("known_high_watermark") else None
                ),
            )
            for p in request.partitions
        ],
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        isolation=isolation_from_proto(request.isolation_level),
        replica_id=request.replica_id if request.HasField("replica_id") else None,
        correlation_id=request.correlation_id,
        rack_id=request.rack_id,
    )


def fetch_partition_to_proto(
    r: FetchPartitionResult, zero_copy: bool = False
) -> data_pb2.FetchPartitionResponse:
    """With `zero_copy` the records are left out and only their size is set: the zero-copy
    server sends the bytes after the header, from the files."""
    msg = data_pb2.FetchPartitionResponse(
        topic=r.tp.topic,
        partition=r.tp.partition,
        error_code=int(r.error),  # type: ignore[arg-type]
        error_message=r.error_message,
        high_watermark=r.high_watermark,
        last_stable_offset=r.last_stable_offset,
        log_start_offset=r.log_start_offset,
        log_end_offset=r.log_end_offset,
        aborted_transactions=[
            data_pb2.AbortedTransaction(producer_id=pid, first_offset=first)
            for pid, first in r.aborted_transactions
        ],
    )
    if r.records is not None and r.records.size:
        if zero_copy:
            msg.zero_copy_records_size = r.records.size
        else:
            msg.records = r.records.to_bytes()
    return msg


def fetch_response_to_proto(
    results: Iterable[FetchPartitionResult], correlation_id: int, zero_copy: bool = False
) -> data_pb2.FetchResponse:
    return data_pb2.FetchResponse(
        correlation_id=correlation_id,
        partitions=[fetch_partition_to_proto(r, zero_copy) for r in results],
    )


# --- list offsets, delete records, describe log dirs ------------------------------------------


def list_offsets_from_proto(request: data_pb2.ListOffsetsRequest) -> list[ListOffsetsPartitionData]:
    out: list[ListOffsetsPartitionData] = []
    isolation = isolation_from_proto(request.isolation_level)
    for p in request.partitions:
        spec = offset_spec_from_proto(p.spec)
        if spec is None:
            spec = OffsetSpec.TIMESTAMP if p.timestamp_ms >= 0 else OffsetSpec.LATEST
        out.append(
            ListOffsetsPartitionData(
                tp=TopicPartition(p.topic, p.partition),
                spec=spec,
                timestamp_ms=p.timestamp_ms,
                current_leader_epoch=(
                    p.current_leader_epoch if p.HasField("current_leader_epoch") else None
                ),
                isolation=isolation,
            )
        )
    return out


def isolation_from_proto(value: int) -> IsolationLevel:
    """Forgiving: a value the wire does not define reads uncommitted."""
    level = isolation_level_from_proto(value)
    return IsolationLevel.READ_UNCOMMITTED if level is None else level


def list_offsets_response_to_proto(
    results: Iterable[ListOffsetsPartitionResult],
) -> data_pb2.ListOffsetsResponse:
    return data_pb2.ListOffsetsResponse(
        partitions=[
            data_pb2.ListOffsetsPartitionResponse(
                topic=r.tp.topic,
                partition=r.tp.partition,
                error_code=int(r.error),  # type: ignore[arg-type]
                error_message=r.error_message,
                timestamp_ms=r.timestamp_ms,
                offset=r.offset,
                leader_epoch=r.leader_epoch,
            )
            for r in results
        ]
    )


def delete_records_from_proto(
    request: data_pb2.DeleteRecordsRequest,
) -> list[DeleteRecordsPartitionData]:
    return [
        DeleteRecordsPartitionData(tp=TopicPartition(p.topic, p.partition), offset=p.offset)
        for p in request.partitions
    ]


def delete_records_response_to_proto(
    results: Iterable[DeleteRecordsPartitionResult],
) -> data_pb2.DeleteRecordsResponse:
    return data_pb2.DeleteRecordsResponse(
        partitions=[
            data_pb2.DeleteRecordsPartitionResponse(
                topic=r.tp.topic,
                partition=r.tp.partition,
                error_code=int(r.error),  # type: ignore[arg-type]
                error_message=r.error_message,
                low_watermark=r.low_watermark,
            )
            for r in results
        ]
    )


def offsets_for_leader_epoch_from_proto(
    request: storage_pb2.OffsetsForLeaderEpochRequest,
) -> list[EpochEndOffsetData]:
    return [
        EpochEndOffsetData(
            tp=TopicPartition(p.topic, p.partition),
            leader_epoch=p.leader_epoch,
            current_leader_epoch=(
                p.current_leader_epoch if p.HasField("current_leader_epoch") else None
            ),
        )
        for p in request.partitions
    ]


def offsets_for_leader_epoch_response_to_proto(
    results: Iterable[EpochEndOffsetResult],
) -> storage_pb2.OffsetsForLeaderEpochResponse:
    return storage_pb2.OffsetsForLeaderEpochResponse(
        partitions=[
            storage_pb2.OffsetForLeaderEpochResult(
                topic=r.tp.topic,
                partition=r.tp.partition,
                error_code=int(r.error),  # type: ignore[arg-type]
                error_message=r.error_message,
                leader_epoch=r.leader_epoch,
                end_offset=r.end_offset,
            )
            for r in results
        ]
    )


def describe_log_dirs_to_proto(
    node_id: int,
    dirs: Iterable[LogDirDescription],
    isr_shrinks: int = 0,
    isr_expands: int = 0,
    under_replicated_partitions: int = 0,
) -> storage_pb2.DescribeLogDirsResponse:
    Info = storage_pb2.DescribeLogDirsResponse.PartitionInfo
    return storage_pb2.DescribeLogDirsResponse(
        node_id=node_id,
        isr_shrinks=isr_shrinks,
        isr_expands=isr_expands,
        under_replicated_partitions=under_replicated_partitions,
        log_dirs=[
            storage_pb2.DescribeLogDirsResponse.LogDir(
                path=d.path,
                error_code=int(d.error),  # type: ignore[arg-type]
                error_message=d.error_message,
                total_bytes=d.total_bytes,
                partitions=[
                    Info(
                        topic=p.tp.topic,
                        partition=p.tp.partition,
                        size_bytes=p.size_bytes,
                        log_start_offset=p.log_start_offset,
                        log_end_offset=p.log_end_offset,
                        high_watermark=p.high_watermark,
                        segment_count=p.segment_count,
                        remote_size_bytes=p.remote_size_bytes,
                        local_log_start_offset=p.local_log_start_offset,
                    )
                    for p in d.partitions
                ],
            )
            for d in dirs
        ],
    )
