"""Converters between the Gateway API's messages and the gateway's domain types.

Named `x_from_proto` / `x_to_proto`, one pair per request family. Batch bytes are moved as they
are (`bytes` in, `bytes` out); plain records become the shared `Record` tuple. The records path
reads `has_key`/`has_value` leniently: a non-empty key or value counts as present even when the
flag was left unset, so a client that forgets the flag does not lose its data to a null.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from riverlog.common.cluster.convert import node_to_proto, topic_to_proto
from riverlog.common.cluster.image import NodeInfo
from riverlog.common.produce_request_parse import ParsedProduceRequest
from riverlog.common.records import Record, produce_wire
from riverlog.common.rpc.convert import (
    acks_from_proto,
    error_code_to_proto,
    isolation_level_from_proto,
    offset_spec_from_proto,
)
from riverlog.common.types import TopicPartition
from riverlog.common.wire import encode_varint
from riverlog.v1 import admin_pb2, common_pb2, data_pb2, gateway_pb2

from .. import records
from ..admin import MetadataView
from ..fetch import FetchOptions, FetchPart, FetchPartResult
from ..log_dirs import LogDirInfo, LogDirsAnswer, LogDirsQuery, NodeLogDirs
from ..offsets import (
    DeleteRecordsPart,
    DeleteRecordsPartResult,
    ListOffsetsPart,
    ListOffsetsPartResult,
)
from ..produce import ProduceOptions, ProducePart, ProducePartResult
from ..records import EncodedProduceRecords, FetchedRecords, ProducedRecords, RecordResult


def _optional(msg: object, name: str) -> int | None:
    return getattr(msg, name) if msg.HasField(name) else None  # type: ignore[attr-defined]


# --- produce ------------------------------------------------------------------------------------


def produce_from_proto(
    msg: data_pb2.ProduceRequest | ParsedProduceRequest,
) -> tuple[ProduceOptions, list[ProducePart]]:
    """The request's options and parts; from a `ParsedProduceRequest` (what the gateway's
    Produce and ProduceStream read, decision 0015's addendum) the records stay views into the
    received bytes."""
    options = ProduceOptions(acks_from_proto(msg.acks), msg.timeout_ms, msg.transactional_id)
    if isinstance(msg, ParsedProduceRequest):
        return options, [
            ProducePart(TopicPartition(p.topic, p.partition), p.records, p.current_leader_epoch)
            for p in msg.partitions
        ]
    parts = [
        ProducePart(
            TopicPartition(p.topic, p.partition),
            p.records,
            _optional(p, "current_leader_epoch"),
        )
        for p in msg.partitions
    ]
    return options, parts


def produce_to_proto(
    results: Sequence[ProducePartResult], correlation_id: int = 0
) -> data_pb2.ProduceResponse:
    return data_pb2.ProduceResponse(
        correlation_id=correlation_id,
        partitions=[
            data_pb2.ProducePartitionResponse(
                topic=r.tp.topic,
                partition=r.tp.partition,
                error_code=r.error_code,  # type: ignore[arg-type]
                error_message=r.error_message,
                base_offset=r.base_offset,
                log_append_time_ms=r.log_append_time_ms,
                log_start_offset=r.log_start_offset,
                last_offset=r.last_offset,
            )
            for r in results
        ],
    )


# --- fetch --------------------------------------------------------------------------------------


def fetch_from_proto(msg: data_pb2.FetchRequest) -> tuple[FetchOptions, list[FetchPart]]:
    options = FetchOptions(
        max_wait_ms=msg.max_wait_ms,
        min_bytes=msg.min_bytes,
        max_bytes=msg.max_bytes,
        isolation_level=isolation_level_from_proto(msg.isolation_level),
        replica_id=_optional(msg, "replica_id"),
        rack_id=msg.rack_id,
    )
    parts = [
        FetchPart(
            TopicPartition(p.topic, p.partition),
            p.fetch_offset,
            p.partition_max_bytes,
            _optional(p, "current_leader_epoch"),
        )
        for p in msg.partitions
    ]
    return options, parts


def fetch_to_proto(
    results: Sequence[FetchPartResult], correlation_id: int = 0
) -> data_pb2.FetchResponse:
    response = data_pb2.FetchResponse(correlation_id=correlation_id)
    for r in results:
        # Filled in place: nesting a built message would copy the records once more.
        msg = response.partitions.add()
        msg.topic = r.tp.topic
        msg.partition = r.tp.partition
        msg.error_code = error_code_to_proto(r.error_code)
        msg.error_message = r.error_message
        msg.high_watermark = r.high_watermark
        msg.last_stable_offset = r.last_stable_offset
        msg.log_start_offset = r.log_start_offset
        msg.records = bytes(r.records)  # a view of the bytes read: protobuf takes bytes
        msg.log_end_offset = r.log_end_offset
        for pid, first in r.aborted_transactions:
            msg.aborted_transactions.add(producer_id=pid, first_offset=first)
    return response


_PARTITIONS_TAG = b"\x0a"  # FetchResponse.partitions: field 1, length-delimited
_RECORDS_TAG = b"\x42"  # FetchPartitionResponse.records: field 8, length-delimited


def fetch_to_wire(
    results: Sequence[FetchPartResult],
    correlation_id: int = 0,
    throttle_time_ms: int = 0,
    pushes: Mapping[TopicPartition, tuple[int, int]] | None = None,
    pushed_from: int | None = None,
) -> bytes:
    """`fetch_to_proto`'s message, serialized, with each partition's records spliced in as
    they are: the message is built without them (protobuf reads a message's fields in any
    order) and the records added as field 8 of their partition, so the fetched bytes are copied
    once, by the join, instead of into the message, by its encoder and out of it (decision
    0016, addendum: a third of the gateway's CPU at 1 KiB went to copies of the records).
    `pushes`: (push credit, push offset) of the partitions pushed after this answer;
    `pushed_from`: the fetch offset of an answer pushed unasked (`pushes.py`)."""
    pieces: list[bytes | memoryview] = []
    for r in results:
        msg = data_pb2.FetchPartitionResponse(
            topic=r.tp.topic,
            partition=r.tp.partition,
            error_code=error_code_to_proto(r.error_code),
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
        if pushed_from is not None:
            msg.fetch_offset = pushed_from
        push = pushes.get(r.tp) if pushes else None
        if push is not None:
            msg.push_credit, msg.push_offset = push
        head = msg.SerializeToString()
        size = len(r.records)
        if size:
            field = _RECORDS_TAG + encode_varint(size)
            length = len(head) + len(field) + size
            pieces += (_PARTITIONS_TAG, encode_varint(length), head, field, r.records)
        else:
            pieces += (_PARTITIONS_TAG, encode_varint(len(head)), head)
    tail = data_pb2.FetchResponse(
        throttle_time_ms=throttle_time_ms,
        correlation_id=correlation_id,
        pushed=pushed_from is not None,
    )
    pieces.append(tail.SerializeToString())
    return b"".join(pieces)


# --- offsets ------------------------------------------------------------------------------------


def list_offsets_from_proto(msg: data_pb2.ListOffsetsRequest) -> list[ListOffsetsPart]:
    return [
        ListOffsetsPart(
            TopicPartition(p.topic, p.partition),
            offset_spec_from_proto(p.spec),
            p.timestamp_ms,
            _optional(p, "current_leader_epoch"),
        )
        for p in msg.partitions
    ]


def list_offsets_to_proto(results: Sequence[ListOffsetsPartResult]) -> data_pb2.ListOffsetsResponse:
    return data_pb2.ListOffsetsResponse(
        partitions=[
            data_pb2.ListOffsetsPartitionResponse(
                topic=r.tp.topic,
                partition=r.tp.partition,
                error_code=r.error_code,  # type: ignore[arg-type]
                error_message=r.error_message,
                timestamp_ms=r.timestamp_ms,
                offset=r.offset,
                leader_epoch=r.leader_epoch,
            )
            for r in results
        ]
    )


def delete_records_from_proto(msg: data_pb2.DeleteRecordsRequest) -> list[DeleteRecordsPart]:
    return [
        DeleteRecordsPart(TopicPartition(p.topic, p.partition), p.offset) for p in msg.partitions
    ]


def delete_records_to_proto(
    results: Sequence[DeleteRecordsPartResult],
) -> data_pb2.DeleteRecordsResponse:
    return data_pb2.DeleteRecordsResponse(
        partitions=[
            data_pb2.DeleteRecordsPartitionResponse(
                topic=r.tp.topic,
                partition=r.tp.partition,
                error_code=r.error_code,  # type: ignore[arg-type]
                error_message=r.error_message,
                low_watermark=r.low_watermark,
            )
            for r in results
        ]
    )


# --- plain records ------------------------------------------------------------------------------


def record_from_proto(msg: common_pb2.Record) -> Record:
    headers = msg.headers
    return Record(
        -1,
        msg.timestamp_ms,
        msg.key if msg.has_key or msg.key else None,
        msg.value if msg.has_value or msg.value else None,
        [(h.key, h.value) for h in headers] if headers else [],
    )


_ProtoRecord = common_pb2.Record


def record_to_proto(record: Record) -> common_pb2.Record:
    """Only the fields that differ from their defaults are passed: protobuf's constructor
    costs per keyword, and this runs once per record of every FetchRecords answer."""
    offset, timestamp, key, value, headers, timestamp_type = record
    msg = _ProtoRecord(offset=offset, timestamp_ms=timestamp)
    if value is not None:
        msg.has_value = True
        if value:
            msg.value = value
    if key is not None:
        msg.has_key = True
        if key:
            msg.key = key
    if headers:
        msg.headers.extend(common_pb2.Header(key=k, value=v or b"") for k, v in headers)
    if timestamp_type:
        msg.timestamp_type = timestamp_type
    return msg


_ProtoResult = gateway_pb2.RecordResult


def produce_records_to_proto(results: Sequence[RecordResult]) -> gateway_pb2.ProduceRecordsResponse:
    return gateway_pb2.ProduceRecordsResponse(
        results=[
            _ProtoResult(partition=r.partition, offset=r.offset)
            if not r.error_code  # ErrorCode.NONE
            else _ProtoResult(
                partition=r.partition,
                offset=r.offset,
                error_code=r.error_code,  # type: ignore[arg-type]
                error_message=r.error_message,
            )
            for r in results
        ]
    )


def produced_records_to_proto(produced: ProducedRecords) -> gateway_pb2.ProduceRecordsResponse:
    if not produced.results_wire:
        return produce_records_to_proto(produced.results)
    response = gateway_pb2.ProduceRecordsResponse()
    response.MergeFromString(produced.results_wire)  # the results, encoded in C
    return response


_THROTTLE_TAG = b"\x10"  # ProduceRecordsResponse.throttle_time_ms: field 2, varint
_PRODUCE_RECORDS_TAG = b"\x1a"  # ProduceRecordsRequest.records: field 3, length-delimited


def produced_records_wire(results_wire: bytes, throttle_time_ms: int) -> bytes:
    """The serialized ProduceRecordsResponse of results C encoded (`ProducedRecords.
    results_wire`): sent as they are (decision 0045), not parsed into messages to be serialized
    again; the throttle time after them, as protobuf writes it (nothing when 0)."""
    if throttle_time_ms <= 0:
        return results_wire
    return results_wire + _THROTTLE_TAG + encode_varint(throttle_time_ms)


@dataclass(frozen=True, slots=True)
class UncountedProduceRecords:
    """A ProduceRecords request that may carry more records than MAX_REQUEST_RECORDS, read
    without the C extension: its records are counted (`counted_produce_records_request`) by the
    handler in a thread, not by the deserializer on the event loop."""

    data: bytes


def produce_records_request(
    data: bytes,
) -> EncodedProduceRecords | gateway_pb2.ProduceRecordsRequest | UncountedProduceRecords:
    """ProduceRecords' request deserializer: the bytes with the fields other than the records
    read in C (the records are encoded into batches from the bytes, decision 0045); the
    protobuf message where the C extension is not built, or, for a request that may be over the
    record cap, the bytes for the handler to count. Raises on bytes that are no request, as the
    message's `FromString` does (gRPC answers INTERNAL)."""
    if produce_wire.compiled():
        return EncodedProduceRecords.parse(data)
    limit = records.MAX_REQUEST_RECORDS
    # Each record's field starts with its tag byte 0x1A, so the 0x1A bytes (counted in C) are at
    # least the records (twice them with values: Record.value's tag is 0x1A too). Only a request
    # that may be over the cap is walked field by field, in Python: seconds for millions of small
    # records, so in a thread (the handler's), not here on the event loop.
    if len(data) > 2 * limit and data.count(_PRODUCE_RECORDS_TAG) > limit:
        return UncountedProduceRecords(data)
    return gateway_pb2.ProduceRecordsRequest.FromString(data)


def counted_produce_records_request(
    data: bytes,
) -> EncodedProduceRecords | gateway_pb2.ProduceRecordsRequest:
    """An `UncountedProduceRecords`' request, its records counted up to the cap: over it, the
    request's other fields with the count (refused by the handler, without a message per
    record); else the protobuf message. Raises as `FromString` on bytes that are no request."""
    limit = records.MAX_REQUEST_RECORDS
    counted = records.count_records(data, limit)
    if counted is not None and counted[0] > limit:
        rest = gateway_pb2.ProduceRecordsRequest.FromString(counted[1])
        partition = rest.partition if rest.HasField("partition") else None
        return EncodedProduceRecords(
            data,
            rest.topic,
            partition,
            rest.acks,
            rest.timeout_ms,
            rest.compression_type,
            counted[0],
        )
    return gateway_pb2.ProduceRecordsRequest.FromString(data)


def fetch_records_to_proto(result: FetchedRecords) -> gateway_pb2.FetchRecordsResponse:
    response = gateway_pb2.FetchRecordsResponse(
        error_code=result.error_code,  # type: ignore[arg-type]
        error_message=result.error_message,
        records=[record_to_proto(r) for r in result.records],
        high_watermark=result.high_watermark,
        log_start_offset=result.log_start_offset,
        next_offset=result.next_offset,
        last_stable_offset=result.last_stable_offset,
    )
    if result.records_wire:  # the records, encoded in C: parsed by protobuf's C code
        response.MergeFromString(bytes(result.records_wire))
    return response


# --- metadata -----------------------------------------------------------------------------------


def metadata_to_proto(view: MetadataView) -> gateway_pb2.GetMetadataResponse:
    return gateway_pb2.GetMetadataResponse(
        cluster_id=view.cluster_id,
        controller_id=view.controller_id,
        topics=[topic_to_proto(t) for t in view.topics],
        nodes=[_client_node(n) for n in view.nodes],
        errors=[
            admin_pb2.TopicResult(
                name=e.name,
                error_code=e.error_code,  # type: ignore[arg-type]
                error_message=e.error_message,
            )
            for e in view.errors
        ],
        metadata_version=view.version,
    )


# --- log dirs -----------------------------------------------------------------------------------


def log_dirs_query_from_proto(msg: admin_pb2.DescribeClusterLogDirsRequest) -> LogDirsQuery:
    """Empty `topics`: every replica (Kafka's null); a topic named twice asks the union."""
    if not msg.topics:
        return LogDirsQuery(None, tuple(msg.node_ids))
    topics: dict[str, tuple[int, ...]] = {}
    for t in msg.topics:
        before = topics.get(t.topic)
        if before == () or not t.partitions:  # every partition (empty) wins over any list
            topics[t.topic] = ()
        else:
            topics[t.topic] = tuple(dict.fromkeys((*(before or ()), *t.partitions)))
    return LogDirsQuery(topics, tuple(msg.node_ids))


def _log_dir_to_proto(d: LogDirInfo) -> admin_pb2.LogDirDescription:
    by_topic: dict[str, list[admin_pb2.LogDirPartition]] = {}
    for r in sorted(d.replicas, key=lambda r: r.tp):
        by_topic.setdefault(r.tp.topic, []).append(
            admin_pb2.LogDirPartition(
                partition=r.tp.partition,
                size_bytes=r.size_bytes,
                offset_lag=r.offset_lag,
                is_future=r.is_future,
                remote_size_bytes=r.remote_size_bytes,
                log_start_offset=r.log_start_offset,
                local_log_start_offset=r.local_log_start_offset,
                log_end_offset=r.log_end_offset,
            )
        )
    return admin_pb2.LogDirDescription(
        log_dir=d.path,
        error_code=error_code_to_proto(d.error_code),
        error_message=d.error_message,
        topics=[admin_pb2.LogDirTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


def _client_node(node: NodeInfo) -> common_pb2.Node:
    """A node as clients see it: without the internal zero-copy port, which no client uses
    (the SDK reads node ids, hosts and direct ports) and which only the cluster's own
    processes should reach (decision 0047)."""
    message = node_to_proto(node)
    message.ClearField("zero_copy_port")
    return message


def _node_log_dirs_to_proto(n: NodeLogDirs) -> admin_pb2.NodeLogDirs:
    return admin_pb2.NodeLogDirs(
        node_id=n.node_id,
        error_code=error_code_to_proto(n.error_code),
        error_message=n.error_message,
        log_dirs=[_log_dir_to_proto(d) for d in n.log_dirs],
    )


def log_dirs_to_proto(answer: LogDirsAnswer) -> admin_pb2.DescribeClusterLogDirsResponse:
    return admin_pb2.DescribeClusterLogDirsResponse(
        nodes=[_node_log_dirs_to_proto(n) for n in answer.nodes],
        errors=[
            admin_pb2.LogDirsError(
                topic=e.topic,
                partition=e.partition,
                error_code=error_code_to_proto(e.error_code),
                error_message=e.error_message,
            )
            for e in answer.errors
        ],
    )
