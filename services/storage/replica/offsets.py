"""ListOffsets, DeleteRecords, OffsetsForLeaderEpoch and DescribeLogDirs: the small requests
about where a partition's log starts and ends and what it takes on disk.

ListOffsets answers Kafka's special timestamps (latest, earliest, max timestamp, earliest
local) and lookups by
timestamp through the log's time index, never past what a consumer may read (the high
watermark). DeleteRecords moves the log start offset up on the leader, at most to the high
watermark. OffsetsForLeaderEpoch answers, on the leader, where an epoch ended in its log (from
the leader epoch cache): what a follower truncates to. DescribeLogDirs reports every log on
disk, per configured directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import IsolationLevel, OffsetSpec, TopicPartition

from .replica_manager import ReplicaManager
from .requests import (
    NO_OFFSET,
    NO_TIMESTAMP,
    DeleteRecordsPartitionData,
    DeleteRecordsPartitionResult,
    EpochEndOffsetData,
    EpochEndOffsetResult,
    ListOffsetsPartitionData,
    ListOffsetsPartitionResult,
    LogDirDescription,
    ReplicaDescription,
)

# Kafka's special timestamps, for clients that pass them with OFFSET_SPEC_TIMESTAMP.
_SPECIAL_TIMESTAMPS = {
    -1: OffsetSpec.LATEST,
    -2: OffsetSpec.EARLIEST,
    -3: OffsetSpec.MAX_TIMESTAMP,
    -4: OffsetSpec.EARLIEST_LOCAL,
}


class RemoteTimestamps(Protocol):
    """ListOffsets by timestamp over the remote tier (tiered storage: remote/reader.py)."""

    async def offset_for_timestamp(
        self, tp: TopicPartition, timestamp: int, start_offset: int
    ) -> tuple[int, int] | None: ...


class OffsetsHandler:
    """Event-loop thread only."""

    def __init__(
        self,
        replicas: ReplicaManager,
        log_dirs: Sequence[Path],
        remote: RemoteTimestamps | None = None,
    ) -> None:
        self._replicas = replicas
        self._log_dirs = list(log_dirs)
        self.remote = remote

    @property
    def replicas(self) -> ReplicaManager:
        return self._replicas

    def list_offsets(
        self, partitions: Iterable[ListOffsetsPartitionData]
    ) -> list[ListOffsetsPartitionResult]:
        results: list[ListOffsetsPartitionResult] = []
        for data in partitions:
            result = ListOffsetsPartitionResult(data.tp)
            results.append(result)
            try:
                self._list_offset(data, result)
            except RiverlogError as exc:
                result.fail(exc)
        return results

    async def list_offsets_with_remote(
        self, partitions: Sequence[ListOffsetsPartitionData]
    ) -> list[ListOffsetsPartitionResult]:
        """`list_offsets`, then the lookups by timestamp of tiered logs searched in the remote
        tier first (Kafka's order: its records are older than the local ones)."""
        results = self.list_offsets(partitions)
        if self.remote is None:
            return results
        for data, result in zip(partitions, results, strict=True):
            partition = self._replicas.partitions.get(data.tp)
            if (
                not result.ok
                or data.spec is not OffsetSpec.TIMESTAMP
                or data.timestamp_ms < 0
                or partition is None
                or partition.log.local_log_start_offset <= partition.log_start_offset
            ):
                continue
            try:
                found = await self.remote.offset_for_timestamp(
                    data.tp, data.timestamp_ms, partition.log_start_offset
                )
            except RiverlogError as exc:
                result.fail(exc)
                continue
            if found is not None and found[0] < partition.high_watermark:
                result.offset, result.timestamp_ms = found
        return results

    def _list_offset(
        self, data: ListOffsetsPartitionData, result: ListOffsetsPartitionResult
    ) -> None:
        partition = self._replicas.get_partition(data.tp, data.current_leader_epoch)
        result.leader_epoch = partition.leader_epoch
        spec = data.spec
        if spec is OffsetSpec.TIMESTAMP and data.timestamp_ms < 0:
            special = _SPECIAL_TIMESTAMPS.get(data.timestamp_ms)
            if special is None:
                raise RiverlogError(
                    f"{data.tp}: timestamp {data.timestamp_ms} is negative",
                    ErrorCode.INVALID_REQUEST,
                )
            spec = special
        # Kafka's lastFetchableOffset: what a consumer of this isolation level may read.
        if data.isolation is IsolationLevel.READ_COMMITTED:
            last_fetchable = partition.last_stable_offset
        else:
            last_fetchable = partition.high_watermark
        if (
            spec not in (OffsetSpec.EARLIEST, OffsetSpec.EARLIEST_LOCAL)
            and partition.replication.leader_epoch_start_offset > partition.high_watermark
        ):
            # A new leader whose high watermark has not yet reached its epoch's start: an
            # answer now could go backwards from what the old leader said (Kafka, KIP-207).
            raise RiverlogError(
                f"{data.tp}: the new leader's high watermark {partition.high_watermark} has not "
                "caught up "
                f"with its epoch start {partition.replication.leader_epoch_start_offset}",
                ErrorCode.OFFSET_NOT_AVAILABLE,
            )
        if spec is OffsetSpec.LATEST:
            result.offset = last_fetchable
        elif spec is OffsetSpec.EARLIEST:
            result.offset = partition.log_start_offset
        elif spec is OffsetSpec.EARLIEST_LOCAL:
            # Tiered storage (KIP-405): the first offset held locally; the log start otherwise.
            result.offset = partition.log.local_log_start_offset
        else:
            timestamp = data.timestamp_ms
            if spec is OffsetSpec.MAX_TIMESTAMP:
                # The first record carrying the largest timestamp: the segments know the
                # largest, the time index finds its first record.
                timestamp = max((s.max_timestamp for s in partition.log.segments), default=-1)
            found = None if timestamp < 0 else partition.log.offset_for_timestamp(timestamp)
            if found is not None and found[0] < last_fetchable:
                result.offset, result.timestamp_ms = found
            else:
                result.offset, result.timestamp_ms = NO_OFFSET, NO_TIMESTAMP

    def delete_records(
        self, partitions: Iterable[DeleteRecordsPartitionData]
    ) -> list[DeleteRecordsPartitionResult]:
        results: list[DeleteRecordsPartitionResult] = []
        seen = set()
        for data in partitions:
            result = DeleteRecordsPartitionResult(data.tp)
            results.append(result)
            try:
                if data.tp in seen:
                    raise RiverlogError(
                        f"{data.tp} appears twice in the request", ErrorCode.INVALID_REQUEST
                    )
                seen.add(data.tp)
                if data.offset < -1:
                    raise RiverlogError(
                        f"{data.tp}: offset {data.offset} is negative (-1: the high watermark)",
                        ErrorCode.OFFSET_OUT_OF_RANGE,
                    )
                partition = self._replicas.get_partition(data.tp, None)
                result.low_watermark = partition.delete_records(data.offset)
            except RiverlogError as exc:
                result.fail(exc)
        return results

    def offsets_for_leader_epoch(
        self, partitions: Iterable[EpochEndOffsetData]
    ) -> list[EpochEndOffsetResult]:
        results: list[EpochEndOffsetResult] = []
        for data in partitions:
            result = EpochEndOffsetResult(data.tp)
            results.append(result)
            try:
                partition = self._replicas.get_partition(data.tp, data.current_leader_epoch)
                cache = partition.log.leader_epoch_cache
                result.leader_epoch, result.end_offset = cache.end_offset_for(
                    data.leader_epoch, partition.log_end_offset
                )
            except RiverlogError as exc:
                result.fail(exc)
        return results

    def describe_log_dirs(self) -> list[LogDirDescription]:
        """Every configured dir with the replicas in it; a dir that failed a write (taken
        offline) or that this process cannot use answers KAFKA_STORAGE_ERROR and, as Kafka's,
        no replicas (theirs are offline: the controller moved their leadership away)."""
        manager = self._replicas.log_manager
        by_dir = {str(d): LogDirDescription(str(d)) for d in self._log_dirs}
        for d in self._log_dirs:
            if d in manager.offline_dirs:
                by_dir[str(d)].error = ErrorCode.KAFKA_STORAGE_ERROR
                by_dir[str(d)].error_message = f"log dir {d} is offline after an I/O error"
            elif not os.access(d, os.R_OK | os.W_OK | os.X_OK):
                by_dir[str(d)].error = ErrorCode.KAFKA_STORAGE_ERROR
                by_dir[str(d)].error_message = f"log dir {d} is not accessible"
        for partition_log in manager.all_logs():
            description = by_dir.get(str(partition_log.dir.parent))
            if description is None or description.error != ErrorCode.NONE:
                continue
            description.partitions.append(
                ReplicaDescription(
                    tp=partition_log.tp,
                    size_bytes=partition_log.size_bytes,
                    log_start_offset=partition_log.log_start_offset,
                    log_end_offset=partition_log.log_end_offset,
                    high_watermark=partition_log.high_watermark,
                    segment_count=partition_log.segment_count,
                    remote_size_bytes=partition_log.remote_size_bytes,
                    local_log_start_offset=partition_log.local_log_start_offset,
                )
            )
        for description in by_dir.values():
            description.partitions.sort(key=lambda p: p.tp)
        return list(by_dir.values())
