"""Validation and offset assignment of a produce or replication payload, before any byte of it
is written (Kafka's LogValidator, for RecordBatch v2 only, on headers only).

A payload is one or more whole batches back to back. Every batch is checked first: magic 2,
a length that fits the payload, CRC-32C, `max.message.bytes`, a record count that matches the
offset range, no control batches from clients. Only when all pass does the leader assign
offsets, by rewriting each batch's baseOffset and partitionLeaderEpoch (both outside the CRC)
in a private copy; with `message.timestamp.type=LogAppendTime` it also sets maxTimestamp and
the timestamp-type bit, which are inside the CRC, so that batch's CRC is recomputed. Records
are never decoded: per-record work belongs to producers and consumers (docs/design.md §8); the
one exception is Kafka's: on a compacted topic every record must have a key, so the leader
reads the keys.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records.control import check_marker_header
from riverlog.common.records.header import (
    CRC_START,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidBatchError,
    crc32c,
    peek_size,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
)
from riverlog.common.records.rewrite import decode_raw

from .config import LogConfig
from .segment import AppendedBatch

_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35
_MAX_COMPRESSION = 4  # none, gzip, snappy, lz4, zstd

Payload = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What an append did. `log_append_time_ms` is the time stamped on the batches with
    LogAppendTime, -1 with CreateTime (and on followers); `max_timestamp` is the largest batch
    maxTimestamp after stamping; `valid_bytes` the bytes written."""

    first_offset: int
    last_offset: int
    log_append_time_ms: int
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int
    batch_count: int
    valid_bytes: int


@dataclass(frozen=True, slots=True)
class ValidatedAppend:
    """A checked payload ready for `LogSegment.append`: the bytes to write, where each batch
    is in them, and the summary."""

    data: Payload
    batches: list[AppendedBatch]
    info: AppendInfo
    # Follower appends: (partitionLeaderEpoch, base offset) where a batch's epoch is newer than
    # the previous batch's, for the leader epoch cache.
    epoch_starts: tuple[tuple[int, int], ...] = ()


def _error(message: str, code: ErrorCode) -> RiverlogError:
    return RiverlogError(message, code)


class AppendOrigin(enum.Enum):
    """Who wrote a leader's append (Kafka's AppendOrigin): clients may not write control
    batches; the transaction coordinator writes nothing else (its commit and abort markers)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


def _check_batches(
    payload: Payload,
    config: LogConfig,
    *,
    leader: bool,
    origin: AppendOrigin = AppendOrigin.CLIENT,
) -> list[BatchHeader]:
    if len(payload) == 0:
        raise _error("the payload holds no record batch", ErrorCode.INVALID_RECORD)
    if len(payload) > config.segment_bytes:
        raise _error(
            f"the payload of {len(payload)} bytes is larger than segment.bytes "
            f"({config.segment_bytes})",
            ErrorCode.RECORD_LIST_TOO_LARGE,
        )
    headers: list[BatchHeader] = []
    position = 0
    while position < len(payload):
        where = f"batch {len(headers)} at byte {position}"
        try:
            header = validate_batch(payload, position)
        except InvalidBatchError as exc:
            raise _error(f"{where}: {exc}", ErrorCode.CORRUPT_MESSAGE) from None
        if header.compression > _MAX_COMPRESSION:
            raise _error(
                f"{where}: unknown compression codec {header.compression}",
                ErrorCode.CORRUPT_MESSAGE,
            )
        if leader and origin is AppendOrigin.COORDINATOR:
            _check_marker_batch(header, where)
        elif leader:
            _check_client_batch(header, where, config)
            if config.compact_enabled:
                _check_keys(payload, position, where)
        headers.append(header)
        position += header.size
    return headers


def _check_marker_batch(header: BatchHeader, where: str) -> None:
    try:
        check_marker_header(header)
    except InvalidBatchError as exc:
        raise _error(f"{where}: {exc}", ErrorCode.INVALID_RECORD) from None


def _check_client_batch(header: BatchHeader, where: str, config: LogConfig) -> None:
    if header.size > config.max_message_bytes:
        raise _error(
            f"{where}: {header.size} bytes is larger than max.message.bytes "
            f"({config.max_message_bytes})",
            ErrorCode.MESSAGE_TOO_LARGE,
        )
    if header.records_count <= 0:
        raise _error(f"{where}: a batch must hold at least one record", ErrorCode.INVALID_RECORD)
    if header.last_offset_delta != header.records_count - 1:
        raise _error(
            f"{where}: {header.records_count} records but lastOffsetDelta "
            f"{header.last_offset_delta} (inconsistent offset range)",
            ErrorCode.INVALID_RECORD,
        )
    if header.is_control:
        raise _error(f"{where}: clients may not write control batches", ErrorCode.INVALID_RECORD)
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise _error(
            f"{where}: producer id {header.producer_id} with no base sequence",
            ErrorCode.INVALID_RECORD,
        )


def _check_keys(payload: Payload, position: int, where: str) -> None:
    """Every record of a compacted topic needs a key (Kafka's LogValidator.validateKey): the
    one place the leader decodes records, and only for compacted topics."""
    try:
        keys = decode_raw(payload, position).keys
    except InvalidBatchError as exc:
        raise _error(f"{where}: {exc}", ErrorCode.CORRUPT_MESSAGE) from None
    if None in keys:
        raise _error(
            f"{where}: compacted topic cannot accept message without key",
            ErrorCode.INVALID_RECORD,
        )


def validate_leader_append(
    payload: Payload,
    config: LogConfig,
    next_offset: int,
    leader_epoch: int,
    now_ms: int,
    origin: AppendOrigin = AppendOrigin.CLIENT,
) -> ValidatedAppend:
    """Check every batch, then assign offsets from `next_offset` in a copy of the payload, or
    in place when the payload is a writable memoryview: the caller hands over a buffer of its
    own (the zero-copy channel's received frame), which saves a copy of every batch."""
    headers = _check_batches(payload, config, leader=True, origin=origin)
    data: bytearray | memoryview
    if isinstance(payload, memoryview) and not payload.readonly:
        data = payload
        view = payload
    else:
        data = bytearray(payload)
        view = memoryview(data)
    append_time = config.log_append_time
    batches: list[AppendedBatch] = []
    offset = next_offset
    position = 0
    max_ts, offset_of_max, records = -1, next_offset, 0
    for header in headers:
        set_base_offset(view, position, offset)
        set_partition_leader_epoch(view, position, leader_epoch)
        batch_max_ts = header.max_timestamp
        if append_time:
            batch_max_ts = now_ms
            _restamp(view, position, header, header.attributes | TIMESTAMP_TYPE_MASK, now_ms)
        elif header.attributes & TIMESTAMP_TYPE_MASK:
            _restamp(view, position, header, header.attributes & ~TIMESTAMP_TYPE_MASK, batch_max_ts)
        last = offset + header.last_offset_delta
        batches.append(AppendedBatch(position, header.size, last, batch_max_ts))
        if batch_max_ts > max_ts:
            max_ts, offset_of_max = batch_max_ts, last
        records += header.records_count
        offset = last + 1
        position += header.size
    if view is not data:
        view.release()
    info = AppendInfo(
        first_offset=next_offset,
        last_offset=offset - 1,
        log_append_time_ms=now_ms if append_time else -1,
        max_timestamp=max_ts,
        offset_of_max_timestamp=offset_of_max,
        record_count=records,
        batch_count=len(headers),
        valid_bytes=len(data),
    )
    return ValidatedAppend(data, batches, info)


def _restamp(
    view: memoryview, position: int, header: BatchHeader, attributes: int, max_ts: int
) -> None:
    """Set the attributes and maxTimestamp of the batch at `position`, then its CRC."""
    _ATTRIBUTES.pack_into(view, position + _ATTRIBUTES_AT, attributes)
    _INT64.pack_into(view, position + _MAX_TIMESTAMP_AT, max_ts)
    crc = crc32c(view[position + CRC_START : position + header.size])
    _CRC.pack_into(view, position + CRC_START - 4, crc)


def split_batches(payload: Payload, limit: int) -> list[Payload]:
    """`payload` cut at batch boundaries into runs of at most `limit` bytes (a single larger
    batch stays whole, and the validation refuses it); one run when it fits. A payload whose
    headers cannot be walked is one run, left to the validation."""
    if len(payload) <= limit:
        return [payload]
    view = memoryview(payload)
    runs: list[Payload] = []
    start = position = 0
    end = len(payload)
    while position < end:
        try:
            size = peek_size(payload, position)
        except InvalidBatchError:
            size = -1
        if size <= 0 or position + size > end:
            break  # the rest is left whole to the validation
        if position > start and position + size - start > limit:
            runs.append(view[start:position])
            start = position
        position += size
    runs.append(view[start:])
    return runs


def merge_append_infos(infos: list[AppendInfo]) -> AppendInfo:
    """One AppendInfo for consecutive appends (a follower's fetch appended in runs)."""
    if len(infos) == 1:
        return infos[0]
    newest = max(infos, key=lambda i: i.max_timestamp)
    return AppendInfo(
        first_offset=infos[0].first_offset,
        last_offset=infos[-1].last_offset,
        log_append_time_ms=-1,
        max_timestamp=newest.max_timestamp,
        offset_of_max_timestamp=newest.offset_of_max_timestamp,
        record_count=sum(i.record_count for i in infos),
        batch_count=sum(i.batch_count for i in infos),
        valid_bytes=sum(i.valid_bytes for i in infos),
    )


def validate_follower_append(
    payload: Payload, config: LogConfig, log_end_offset: int
) -> ValidatedAppend:
    """Check every batch of a replicated payload, whose offsets the leader assigned: they must
    start at or after `log_end_offset` and increase. Kafka allows a gap (batches a compacting
    leader removed), so only going backwards is an error."""
    headers = _check_batches(payload, config, leader=False)
    batches: list[AppendedBatch] = []
    expected = log_end_offset
    position = 0
    max_ts, offset_of_max, records = -1, headers[0].base_offset, 0
    epoch_starts: list[tuple[int, int]] = []
    for i, header in enumerate(headers):
        if header.base_offset < expected:
            what = "log end offset" if i == 0 else "end of the previous batch"
            raise _error(
                f"batch {i} at byte {position}: base offset {header.base_offset} is before the "
                f"{what} {expected}",
                ErrorCode.INVALID_RECORD,
            )
        batches.append(
            AppendedBatch(position, header.size, header.last_offset, header.max_timestamp)
        )
        if not epoch_starts or header.partition_leader_epoch > epoch_starts[-1][0]:
            epoch_starts.append((header.partition_leader_epoch, header.base_offset))
        if header.max_timestamp > max_ts:
            max_ts, offset_of_max = header.max_timestamp, header.last_offset
        records += header.records_count
        expected = header.next_offset
        position += header.size
    info = AppendInfo(
        first_offset=headers[0].base_offset,
        last_offset=expected - 1,
        log_append_time_ms=-1,
        max_timestamp=max_ts,
        offset_of_max_timestamp=offset_of_max,
        record_count=records,
        batch_count=len(headers),
        valid_bytes=len(payload),
    )
    return ValidatedAppend(payload, batches, info, tuple(epoch_starts))
