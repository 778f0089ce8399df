"""Rewrite one stored RecordBatch v2 keeping only some of its records: what the log cleaner does
to each batch of a compacted log (Kafka's MemoryRecords.filterTo).

The rewritten batch keeps what the log and the producer state rely on: the base offset, the
lastOffsetDelta (so the batch still ends at the same offset and the producer's last sequence is
unchanged), the partition leader epoch, the producer id, epoch and base sequence, the
attributes and the codec. The kept records are copied as they are encoded (their offset deltas
stay relative to the same base offset), so records keep their offsets and the log gets gaps.
Only when the base timestamp changes (the cleaner stamps a delete horizon, KIP-534: bit 6 of
the attributes set and baseTimestamp = the horizon) is each record's timestampDelta
re-encoded against the new base. A batch whose every record goes can be kept as an empty
header (recordsCount 0, Kafka's `writeEmptyHeader`) so a producer's last sequence survives.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .compression import CompressionType, compress, decompress
from .header import (
    COMPRESSION_MASK,
    CRC_START,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidBatchError,
    crc32c,
    parse_header,
)
from .varint import encode_varint, encode_varint32, read_unsigned

Buffer = bytes | bytearray | memoryview


@dataclass(slots=True)
class RawRecords:
    """The records of one batch, located but not copied: row i of each list is record i;
    `recs[starts[i]:ends[i]]` is its encoding (length prefix included) and `recs[ts_ends[i]:
    ends[i]]` everything after its timestampDelta."""

    header: BatchHeader
    recs: bytes
    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    tombstones: list[bool] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    ts_ends: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)


def _signed(z: int) -> int:
    return (z >> 1) ^ -(z & 1)


def decode_raw(batch: Buffer, pos: int = 0) -> RawRecords:
    """Locate every record of the ONE whole batch at `pos` (decompressing it if needed).
    Raises InvalidBatchError when a record runs past its batch."""
    header = parse_header(batch, pos)
    body = memoryview(batch)[pos + HEADER_SIZE : pos + header.size]
    codec = header.attributes & COMPRESSION_MASK
    recs = decompress(codec, body) if codec else bytes(body)
    out = RawRecords(header, recs)
    base_offset, base_ts = header.base_offset, header.base_timestamp
    add_offset, add_ts, add_key = out.offsets.append, out.timestamps.append, out.keys.append
    add_tomb, add_start, add_ts_end = out.tombstones.append, out.starts.append, out.ts_ends.append
    add_end = out.ends.append
    read = read_unsigned
    n = len(recs)
    p = 0
    try:
        for _ in range(header.records_count):
            start = p
            z = recs[p]
            if z < 0x80:
                p += 1
            else:
                z, p = read(recs, p)
            end = p + (z >> 1)
            if z & 1 or end > n:
                raise InvalidBatchError(f"bad record length at {start} of the records")
            z = recs[p + 1]  # after the attributes byte: timestampDelta
            if z < 0x80:
                p += 2
            else:
                z, p = read(recs, p + 1)
            add_ts(base_ts + _signed(z))
            add_ts_end(p)
            z = recs[p]  # offsetDelta
            if z < 0x80:
                p += 1
            else:
                z, p = read(recs, p)
            add_offset(base_offset + _signed(z))
            z = recs[p]  # keyLength
            if z < 0x80:
                p += 1
            else:
                z, p = read(recs, p)
            if z & 1:
                add_key(None)
            else:
                key_end = p + (z >> 1)
                add_key(recs[p:key_end])
                p = key_end
            z = recs[p]  # valueLength
            add_tomb(z == 1)
            add_start(start)
            add_end(end)
            p = end
    except IndexError:
        raise InvalidBatchError("records run past the end of their batch") from None
    if header.attributes & TIMESTAMP_TYPE_MASK:
        out.timestamps = [header.max_timestamp] * len(out.offsets)
    return out


def _record_with_base(raw: RawRecords, i: int, base_ts: int) -> bytes:
    """Record i re-encoded with its timestampDelta against `base_ts`."""
    recs = raw.recs
    _, after_len = read_unsigned(recs, raw.starts[i])  # then the attributes byte
    body = b"".join(
        (
            recs[after_len : after_len + 1],
            encode_varint(raw.timestamps[i] - base_ts),
            recs[raw.ts_ends[i] : raw.ends[i]],
        )
    )
    return encode_varint32(len(body)) + body


def rebuild_batch(raw: RawRecords, keep: list[int], delete_horizon_ms: int | None = None) -> bytes:
    """The batch of `raw` holding only the records at indexes `keep` (at least one), with
    bit 6 set and baseTimestamp = `delete_horizon_ms` when given (else the original base)."""
    if not keep:
        raise ValueError("a rebuilt batch needs a record; use empty_batch")
    h = raw.header
    attributes = h.attributes
    log_append = bool(attributes & TIMESTAMP_TYPE_MASK)
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
        base_ts = delete_horizon_ms
    else:
        base_ts = h.base_timestamp
    recs = raw.recs
    if base_ts == h.base_timestamp:
        parts = [recs[raw.starts[i] : raw.ends[i]] for i in keep]
    else:
        parts = [_record_with_base(raw, i, base_ts) for i in keep]
    payload = b"".join(parts)
    codec = attributes & COMPRESSION_MASK
    if codec:
        payload = compress(CompressionType(codec), payload)
    max_ts = h.max_timestamp if log_append else max(raw.timestamps[i] for i in keep)
    return _pack(h, attributes, base_ts, max_ts, len(keep), payload)


def empty_batch(header: BatchHeader) -> bytes:
    """A header-only batch with the same base offset, lastOffsetDelta and producer fields:
    what the cleaner keeps of a producer's last batch once all its records are gone."""
    attributes = header.attributes & ~COMPRESSION_MASK & ~DELETE_HORIZON_MASK
    ts = header.max_timestamp
    return _pack(header, attributes, ts, ts, 0, b"")


def _pack(
    h: BatchHeader, attributes: int, base_ts: int, max_ts: int, count: int, payload: bytes
) -> bytes:
    out = bytearray(HEADER_SIZE)
    out += payload
    HEADER_STRUCT.pack_into(
        out,
        0,
        h.base_offset,
        len(out) - LOG_OVERHEAD,
        h.partition_leader_epoch,
        h.magic,
        0,
        attributes,
        h.last_offset_delta,
        base_ts,
        max_ts,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        count,
    )
    out[CRC_START - 4 : CRC_START] = crc32c(memoryview(out)[CRC_START:]).to_bytes(4, "big")
    return bytes(out)


def delete_horizon_ms(header: BatchHeader) -> int | None:
    """The batch's delete horizon (KIP-534), or None when the cleaner has not stamped one."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None
