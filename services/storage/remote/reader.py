"""Reads below the local log start (KIP-405's remote fetch): whole stored batches from the
remote segment holding the fetch offset, the same bytes a local read would have returned.

The remote segment is found in the replayed metadata (refreshed once when the offset is not
covered: a newer copy may have landed), the byte position by its offset index (fetched once
and kept in the cache), and the bytes are read in aligned chunks through a bounded LRU cache
(`remote.log.reader.cache.size.bytes`), so a consumer reading a segment from its start fetches
each chunk once. One read returns batches of one segment only (as Kafka's remote fetch); the
next fetch continues in the next one. Every batch header is checked (magic, offsets in order,
inside the segment): a segment that is missing or corrupt in the store is a clear error to the
reader (KAFKA_STORAGE_ERROR, CORRUPT_MESSAGE), never other bytes. The calls await the store's
I/O: the event loop keeps serving the tail meanwhile.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from dataclasses import dataclass

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records.header import (
    HEADER_SIZE,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidBatchError,
    parse_header,
)
from riverlog.common.records.reader import iter_record_timestamps
from riverlog.common.types import TopicPartition

from ..log.txn_index import AbortedTxn, CorruptTxnIndexError, decode_entries, search
from .metadata_manager import RemoteLogMetadataManager
from .segment_metadata import RemoteLogSegmentMetadata
from .storage import IndexType, RemoteResourceNotFoundError, RemoteStorageManager

CHUNK_BYTES = 1 << 20
_INDEX_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")


@dataclass(slots=True)
class RemoteRecords:
    """Stored batches read from the remote store (a StoredRecords: the transports send
    `to_bytes()`)."""

    data: bytes
    next_offset: int

    @property
    def size(self) -> int:
        return len(self.data)

    def to_bytes(self) -> bytes:
        return self.data

    def close(self) -> None:
        return None


class ChunkCache:
    """An LRU of byte strings bounded by their total size: remote chunks and offset indexes.
    Event-loop thread only."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self.size_bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[str, int]) -> bytes | None:
        value = self._entries.get(key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return value

    def put(self, key: tuple[str, int], value: bytes) -> None:
        if len(value) > self.capacity_bytes:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.size_bytes -= len(old)
        self._entries[key] = value
        self.size_bytes += len(value)
        while self.size_bytes > self.capacity_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.size_bytes -= len(evicted)


class RemoteLogReader:
    """Serves reads of offsets held only in the remote store. Coroutines on the event loop;
    any number may run at once (two reads of one missing chunk may both fetch it)."""

    def __init__(
        self,
        metadata: RemoteLogMetadataManager,
        store: RemoteStorageManager,
        cache_bytes: int = 64 * CHUNK_BYTES,
    ) -> None:
        self.metadata = metadata
        self.store = store
        self.cache = ChunkCache(cache_bytes)
        self.reads = 0

    async def segment_for(self, tp: TopicPartition, offset: int) -> RemoteLogSegmentMetadata:
        """The finished remote segment holding `offset`, else the first one after it (records
        removed by compaction or an aborted copy leave gaps); OFFSET_OUT_OF_RANGE when no
        remote segment reaches it."""
        state = self.metadata.state(tp)
        found = state.first_segment_from(offset) if state is not None else None
        if found is None or found.start_offset > offset:
            state = await self.metadata.refresh(tp)
            found = state.first_segment_from(offset)
        if found is None:
            raise RiverlogError(
                f"{tp}: offset {offset} is in no remote segment", ErrorCode.OFFSET_OUT_OF_RANGE
            )
        return found

    async def read(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int,
        min_one_message: bool = True,
    ) -> RemoteRecords:
        """Whole batches from the one holding `fetch_offset`, as `PartitionLog.read` gives
        them (at most `max_bytes`, the first whole when `min_one_message`, none holding an
        offset at or past `max_offset`), from one remote segment."""
        self.reads += 1
        segment = await self.segment_for(tp, fetch_offset)
        position = await self._position(segment, fetch_offset)
        out = bytearray()
        next_offset = -1
        end = segment.segment_size_bytes
        while position < end:
            head = await self._bytes(segment, position, min(HEADER_SIZE, end - position))
            header = self._check(segment, head, position)
            if header.next_offset > max_offset:
                break
            if header.next_offset > fetch_offset:
                if len(out) + header.size > max_bytes and not (min_one_message and not out):
                    break
                out += await self._bytes(segment, position, header.size)
                next_offset = header.next_offset
            position += header.size
        return RemoteRecords(bytes(out), next_offset)

    @staticmethod
    def _check(segment: RemoteLogSegmentMetadata, head: bytes, position: int) -> BatchHeader:
        where = f"remote segment {segment.segment_id} at byte {position}"
        try:
            header = parse_header(head)
        except InvalidBatchError as exc:
            raise RiverlogError(f"{where}: {exc}", ErrorCode.CORRUPT_MESSAGE) from exc
        if (
            header.magic != MAGIC
            or header.base_offset < segment.start_offset
            or header.last_offset > segment.end_offset
            or position + header.size > segment.segment_size_bytes
        ):
            raise RiverlogError(
                f"{where}: batch [{header.base_offset}, {header.last_offset}] of "
                f"{header.size} bytes does not belong to [{segment.start_offset}, "
                f"{segment.end_offset}]",
                ErrorCode.CORRUPT_MESSAGE,
            )
        return header

    async def offset_for_timestamp(
        self, tp: TopicPartition, timestamp: int, start_offset: int
    ) -> tuple[int, int] | None:
        """The first (offset, timestamp) in the remote tier at or after `start_offset` whose
        timestamp is >= `timestamp` (ListOffsets by timestamp; None: not in the remote tier).
        As the local search: the time index, then the offset index, then one batch decoded."""
        state = self.metadata.state(tp) or await self.metadata.refresh(tp)
        for segment in state.readable_segments():
            if segment.end_offset < start_offset or segment.max_timestamp_ms < timestamp:
                continue
            found = await self._find_in_segment(segment, timestamp, start_offset)
            if found is not None:
                return found
        return None

    async def _find_in_segment(
        self, segment: RemoteLogSegmentMetadata, timestamp: int, start_offset: int
    ) -> tuple[int, int] | None:
        key = (segment.segment_id.id, -3)
        index = self.cache.get(key)
        if index is None:
            index = await self.store.fetch_index(segment.segment_id, IndexType.TIMESTAMP)
            self.cache.put(key, index)
        from_offset = segment.start_offset
        for i in range(len(index) // _TIME_ENTRY.size):
            ts, relative = _TIME_ENTRY.unpack_from(index, i * _TIME_ENTRY.size)
            if ts > timestamp or (ts == 0 and relative == 0 and i > 0):
                break
            from_offset = segment.start_offset + relative
        position = await self._position(segment, max(from_offset, start_offset))
        end = segment.segment_size_bytes
        while position < end:
            head = await self._bytes(segment, position, min(HEADER_SIZE, end - position))
            header = self._check(segment, head, position)
            if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                if header.attributes & TIMESTAMP_TYPE_MASK:  # LogAppendTime: one for all
                    return max(header.base_offset, start_offset), header.max_timestamp
                batch = await self._bytes(segment, position, header.size)
                for offset, record_ts in iter_record_timestamps(batch, validate_crc=False):
                    if record_ts >= timestamp and offset >= start_offset:
                        return offset, record_ts
            position += header.size
        return None

    async def collect_aborted_txns(
        self, tp: TopicPartition, start_offset: int, upper_bound_offset: int
    ) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions meeting [start, upper) from the remote segments' .txnindex
        (Kafka's collectAbortedTransactions over the remote tier), and whether the search is
        complete (else the caller continues in the local log)."""
        state = self.metadata.state(tp)
        found: list[AbortedTxn] = []
        if state is None:
            return found, False
        for segment in state.readable_segments():
            if segment.end_offset < start_offset:
                continue
            key = (segment.segment_id.id, -2)
            data = self.cache.get(key)
            if data is None:
                try:
                    data = await self.store.fetch_index(segment.segment_id, IndexType.TRANSACTION)
                except RemoteResourceNotFoundError:
                    data = b""  # no ABORT marker in that segment: no .txnindex was copied
                self.cache.put(key, data)
            try:
                result = search(decode_entries(data), start_offset, upper_bound_offset)
            except CorruptTxnIndexError as exc:
                raise RiverlogError(
                    f"remote segment {segment.segment_id}: {exc}", ErrorCode.CORRUPT_MESSAGE
                ) from exc
            found.extend(result.aborted)
            if result.complete:
                return found, True
        return found, False

    async def _position(self, segment: RemoteLogSegmentMetadata, offset: int) -> int:
        """The position of the last indexed batch ending at or before `offset` (0: none)."""
        key = (segment.segment_id.id, -1)
        index = self.cache.get(key)
        if index is None:
            index = await self.store.fetch_index(segment.segment_id, IndexType.OFFSET)
            self.cache.put(key, index)
        position = 0
        base = segment.start_offset
        for i in range(len(index) // _INDEX_ENTRY.size):
            relative, pos = _INDEX_ENTRY.unpack_from(index, i * _INDEX_ENTRY.size)
            if relative == 0 and pos == 0 and i > 0:
                break  # a preallocated tail of zeros
            if base + relative > offset:
                break
            position = pos
        return position

    async def _bytes(self, segment: RemoteLogSegmentMetadata, start: int, size: int) -> bytes:
        """`size` bytes of the segment from `start`, through the chunk cache."""
        out = bytearray()
        while size > 0:
            chunk_no, skip = divmod(start, CHUNK_BYTES)
            chunk = await self._chunk(segment, chunk_no)
            piece = chunk[skip : skip + size]
            if not piece:
                raise RiverlogError(
                    f"remote segment {segment.segment_id} is shorter than its metadata says "
                    f"({segment.segment_size_bytes} bytes)",
                    ErrorCode.CORRUPT_MESSAGE,
                )
            out += piece
            start += len(piece)
            size -= len(piece)
        return bytes(out)

    async def _chunk(self, segment: RemoteLogSegmentMetadata, chunk_no: int) -> bytes:
        key = (segment.segment_id.id, chunk_no)
        chunk = self.cache.get(key)
        if chunk is None:
            start = chunk_no * CHUNK_BYTES
            end = min(start + CHUNK_BYTES, segment.segment_size_bytes)
            chunk = await self.store.fetch_log_segment(segment.segment_id, start, end)
            self.cache.put(key, chunk)
        return chunk
