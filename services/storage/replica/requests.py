"""The storage node's requests and per-partition results as plain values, so the domain code
(replica manager, produce, fetch) never sees a protobuf and the same logic serves the gRPC
servicer and the zero-copy socket. Converters live in `rpc/convert.py`.

Every result carries an `error` code and message: one bad partition never fails the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from riverlog.common.errors import ErrorCode, RiverlogError

# The shared vocabulary, re-exported for the storage request types' users.
from riverlog.common.types import Acks as Acks
from riverlog.common.types import IsolationLevel as IsolationLevel
from riverlog.common.types import OffsetSpec as OffsetSpec
from riverlog.common.types import TopicPartition

from ..log import AppendOrigin

NO_OFFSET = -1
NO_TIMESTAMP = -1


class StoredRecords(Protocol):
    """Whole stored batches read from a log: a size, and the bytes on demand (the zero-copy
    channel sends them from the files instead)."""

    @property
    def size(self) -> int: ...

    def to_bytes(self) -> bytes: ...

    def close(self) -> None: ...


class _Result:
    """Mixin: the error fields every per-partition result has."""

    error: ErrorCode
    error_message: str

    def fail(self, exc: RiverlogError) -> None:
        self.error = exc.code
        self.error_message = exc.message

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.NONE


# --- produce ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducePartitionData:
    tp: TopicPartition
    records: bytes | memoryview  # a writable view: the leader may assign offsets in it
    current_leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class ProduceParams:
    """`acks` is None when the request carried a value Kafka does not know."""

    acks: Acks | None
    timeout_ms: int
    partitions: list[ProducePartitionData]
    correlation_id: int = 0
    origin: AppendOrigin = AppendOrigin.CLIENT
    # The producer's transactional.id: names its coordinator for KIP-890 verification.
    transactional_id: str = ""


@dataclass(slots=True)
class ProducePartitionResult(_Result):
    tp: TopicPartition
    error: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    base_offset: int = NO_OFFSET
    last_offset: int = NO_OFFSET
    log_append_time_ms: int = NO_TIMESTAMP
    log_start_offset: int = NO_OFFSET


# --- fetch --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchPartitionData:
    tp: TopicPartition
    fetch_offset: int
    partition_max_bytes: int = 0  # <= 0: up to the request's max_bytes
    current_leader_epoch: int | None = None
    log_start_offset: int = NO_OFFSET  # followers only
    last_fetched_epoch: int | None = None  # followers only
    # Followers only: the follower's high watermark; the leader then leaves the partition out
    # of its answer when it has nothing new for it (`FetchHandler`).
    known_high_watermark: int | None = None


@dataclass(frozen=True, slots=True)
class FetchParams:
    """`replica_id` is None for consumers and a follower's node id otherwise."""

    partitions: list[FetchPartitionData]
    max_wait_ms: int = 0
    min_bytes: int = 0
    max_bytes: int = 0  # <= 0: the node's fetch.max.bytes
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    replica_id: int | None = None
    correlation_id: int = 0
    rack_id: str = ""
    """A consumer's client.rack: set, a follower may serve the fetch (decision 0038)."""


@dataclass(slots=True)
class FetchPartitionResult(_Result):
    tp: TopicPartition
    error: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    high_watermark: int = NO_OFFSET
    last_stable_offset: int = NO_OFFSET
    log_start_offset: int = NO_OFFSET
    log_end_offset: int = NO_OFFSET
    records: StoredRecords | None = None
    # read_committed: (producer id, first offset) of the aborted transactions that meet the
    # records, ordered by first offset (Kafka's FetchResponse.AbortedTransactions).
    aborted_transactions: list[tuple[int, int]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return self.records.size if self.records is not None else 0


@dataclass(slots=True)
class FollowerFetchResult(_Result):
    """One partition of a fetch answer as a follower receives it: the records as bytes."""

    tp: TopicPartition
    error: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    high_watermark: int = NO_OFFSET
    log_start_offset: int = NO_OFFSET
    log_end_offset: int = NO_OFFSET
    # The zero-copy channel hands a slice of the bytes received after the header (no copy).
    records: bytes | memoryview = b""


# --- list offsets and delete records -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListOffsetsPartitionData:
    tp: TopicPartition
    spec: OffsetSpec
    timestamp_ms: int = NO_TIMESTAMP
    current_leader_epoch: int | None = None
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED


@dataclass(slots=True)
class ListOffsetsPartitionResult(_Result):
    tp: TopicPartition
    error: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    timestamp_ms: int = NO_TIMESTAMP
    offset: int = NO_OFFSET
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class DeleteRecordsPartitionData:
    tp: TopicPartition
    offset: int  # the new log start offset; -1: the high watermark


@dataclass(slots=True)
class DeleteRecordsPartitionResult(_Result):
    tp: TopicPartition
    error: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    low_watermark: int = NO_OFFSET


# --- offsets for leader epoch ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EpochEndOffsetData:
    tp: TopicPartition
    leader_epoch: int
    current_leader_epoch: int | None = None


@dataclass(slots=True)
class EpochEndOffsetResult(_Result):
    tp: TopicPartition
    error: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    leader_epoch: int = -1
    end_offset: int = NO_OFFSET


# --- describe log dirs --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """One replica's log as DescribeLogDirs reports it: `size_bytes` on local disk,
    `remote_size_bytes` in the remote tier (finished copies; 0 when not tiered)."""

    tp: TopicPartition
    size_bytes: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    segment_count: int
    remote_size_bytes: int = 0
    local_log_start_offset: int = 0


@dataclass(slots=True)
class LogDirDescription:
    path: str
    error: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    partitions: list[ReplicaDescription] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(p.size_bytes for p in self.partitions)
