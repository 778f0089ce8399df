"""The remote storage interface of tiered storage (Kafka's RemoteStorageManager, KIP-405): where
closed segments go once the leader has copied them off the node's disk.

A remote segment is a set of objects named by its `RemoteLogSegmentId`: the segment's `.log`
bytes, its offset index, time index, transaction index (when the segment has one), the producer
state snapshot taken at the segment's end and the leader-epoch checkpoint covering it. Every
object is written whole and never changed; a copy is finished only when its metadata says so
(`segment_metadata.py`), so a copy interrupted half-way is an orphan that the metadata never
names and a later delete removes. Implementations: `directory.py` (a local or shared
filesystem) and `s3.py` (S3-compatible object storage). All calls are coroutines: the event
loop that owns the logs never waits on the store.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition


class RemoteStorageError(RiverlogError):
    """The store failed (down, refused, timed out): retriable, the caller backs off and tries
    again. KAFKA_STORAGE_ERROR on the wire."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class RemoteResourceNotFoundError(RemoteStorageError):
    """An object of a segment the metadata names is missing: the reader gets a clear error,
    never other bytes (Kafka's RemoteResourceNotFoundException)."""


class IndexType(enum.Enum):
    """The files copied with a segment, by their suffix in the store (Kafka's
    RemoteStorageManager.IndexType)."""

    OFFSET = ".index"
    TIMESTAMP = ".timeindex"
    TRANSACTION = ".txnindex"
    PRODUCER_SNAPSHOT = ".snapshot"
    LEADER_EPOCH = ".leader-epoch-checkpoint"


SEGMENT_SUFFIX = ".log"


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    """One copy of one segment: a fresh random id per copy attempt, so a retried or repeated
    copy never overwrites objects another attempt wrote (Kafka's RemoteLogSegmentId)."""

    tp: TopicPartition
    id: str

    @classmethod
    def generate(cls, tp: TopicPartition) -> RemoteLogSegmentId:
        return cls(tp, uuid.uuid4().hex)

    def object_name(self, suffix: str) -> str:
        """The object's name below the store's prefix: `<topic>-<partition>/<id><suffix>`."""
        return f"{self.tp}/{self.id}{suffix}"

    def __str__(self) -> str:
        return f"{self.tp}/{self.id}"


@dataclass(frozen=True, slots=True)
class LogSegmentData:
    """What `copy_log_segment_data` uploads: the files of one closed segment, plus the
    leader-epoch entries covering it as checkpoint bytes (the cache's file also covers later
    segments, so the caller writes the slice that belongs to this one). Kafka's LogSegmentData."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot: Path | None
    leader_epoch_index: bytes

    def files(self) -> list[tuple[str, Path | bytes]]:
        """(suffix, source) of every object to write; the `.log` last, so a listing that shows
        it shows a whole copy."""
        out: list[tuple[str, Path | bytes]] = [
            (IndexType.OFFSET.value, self.offset_index),
            (IndexType.TIMESTAMP.value, self.time_index),
            (IndexType.LEADER_EPOCH.value, self.leader_epoch_index),
        ]
        if self.transaction_index is not None:
            out.append((IndexType.TRANSACTION.value, self.transaction_index))
        if self.producer_snapshot is not None:
            out.append((IndexType.PRODUCER_SNAPSHOT.value, self.producer_snapshot))
        out.append((SEGMENT_SUFFIX, self.log_segment))
        return out


class RemoteStorageManager(Protocol):
    """Copies, reads and deletes remote segments. Lifecycle: built from the node config
    (`factory.py`) → calls from the event loop, any number at once → `close()`.

    Every method raises RemoteStorageError when the store fails, and the fetches raise
    RemoteResourceNotFoundError for a missing object."""

    async def copy_log_segment_data(
        self, segment_id: RemoteLogSegmentId, data: LogSegmentData
    ) -> None:
        """Write every file of the segment (overwriting what an earlier attempt with the same
        id left)."""
        ...

    async def fetch_log_segment(
        self, segment_id: RemoteLogSegmentId, start_position: int, end_position: int | None = None
    ) -> bytes:
        """The segment's bytes in [start_position, end_position) (to its end when None or past
        it); b"" when start_position is at or past the end."""
        ...

    async def fetch_index(self, segment_id: RemoteLogSegmentId, index_type: IndexType) -> bytes:
        """One whole index file of the segment."""
        ...

    async def delete_log_segment_data(self, segment_id: RemoteLogSegmentId) -> None:
        """Remove every object of the segment; objects already gone are no error (a delete is
        retried until it succeeds)."""
        ...

    # -- plain objects: the remote log metadata (metadata_manager.py) lives next to the data --

    async def put_if_absent(self, name: str, data: bytes) -> bool:
        """Create object `name` (below the prefix) unless it exists, atomically: True when this
        call created it, False when it was there (whoever wrote it). The one primitive the
        metadata log's fencing rests on (S3's `If-None-Match: *`; a hard link in a
        directory)."""
        ...

    async def get_object(self, name: str) -> bytes | None:
        """The object's bytes; None when it does not exist."""
        ...

    async def list_objects(self, under: str = "") -> list[str]:
        """The names of every object below `under` (a `dir/` prefix), sorted."""
        ...

    async def delete_objects(self, names: list[str]) -> None:
        """Remove the objects; missing ones are no error."""
        ...

    async def delete_incomplete_objects(self, under: str) -> int:
        """Remove what writes killed half-way left directly below `under` (a `dir/` prefix),
        never listed as objects, and return how many: the directory store's temporary files; 0
        on S3, whose writes are atomic. Only for a prefix whose every writer but the caller is
        fenced (a fenced writer caught between its write and its create then fails with
        RemoteStorageError rather than finding its name taken): the metadata manager calls it
        for a partition's metadata once its leader has started its epoch."""
        ...

    async def close(self) -> None: ...
