"""Fetch on the leader: whole stored batches from each partition's fetch offset, within the
request's byte budget, up to the high watermark (read_uncommitted) or the last stable offset
(read_committed, with the aborted transactions that meet the records), with Kafka's long poll.

Budget (Kafka's rules): partitions are read in request order, each up to
min(partition_max_bytes, what is left of max_bytes); the first partition that has data may
return one whole batch even past the limits (so a batch larger than the limits still makes
progress), later ones only what fits. Long poll: when fewer than `min_bytes` are available the
fetch waits in the purgatory (a DelayedFetch) until appends bring enough, a partition turns to
an error, or `max_wait_ms` passes, and is then read again. Bytes are never copied or decoded
here: results hold `FetchSlice`s (file ranges) that the transport turns into bytes or sends
with `os.sendfile`; the caller must `close_results()` once they are sent.

A follower's fetch (`replica_id` set) reads up to the log end offset, and first tells each
partition the follower's log end offset (its fetch offset): that is how the leader learns what
the followers hold, moves the high watermark and keeps the ISR (Kafka's
`updateFollowerFetchState`). A follower names every partition it follows from this leader
in every fetch, with its own high watermark: its long poll is decided from offsets (no read
per check), and its answer leaves out the partitions with nothing new for it (decision 0010).

Fetch from a follower (KIP-392, decision 0038): a consumer's fetch that carries its rack
(`rack_id`) is served by a follower too, up to the follower's own high watermark (learned from
the leader's fetch responses) or last stable offset, so it returns only committed records. A
fetch offset above that high watermark (the consumer already read further on the leader)
answers OFFSET_NOT_AVAILABLE, and the gateway reads that partition from the leader instead.
`consumer_fetches` counts the partitions answered to consumers, as leader and as follower.

Replication throttle (decision 0024): a follower fetch of a partition listed in the topic's
`leader.replication.throttled.replicas` for this node, from a follower not in the ISR, gets no
records while the node's `leader.replication.throttled.rate` is exceeded (Kafka's
shouldLeaderThrottle), and the bytes sent to such followers are recorded against the rate.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from typing import Protocol

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import IsolationLevel, TopicPartition

from ..log.txn_index import AbortedTxn
from .partition import Partition
from .purgatory import DelayedFetch, Purgatory
from .replica_manager import ReplicaManager
from .requests import FetchParams, FetchPartitionData, FetchPartitionResult, StoredRecords
from .role import Role
from .throttle import ReplicationQuota, should_throttle

log = logging.getLogger(__name__)


class RemoteStoredRecords(StoredRecords, Protocol):
    @property
    def next_offset(self) -> int: ...


class RemoteReads(Protocol):
    """Reads below the local log start (tiered storage: remote/reader.py)."""

    async def read(
        self, tp: TopicPartition, fetch_offset: int, max_bytes: int, max_offset: int, min_one: bool
    ) -> RemoteStoredRecords: ...

    async def collect_aborted_txns(
        self, tp: TopicPartition, start_offset: int, upper_bound_offset: int
    ) -> tuple[list[AbortedTxn], bool]: ...


def _without_unchanged(
    params: FetchParams, results: list[FetchPartitionResult]
) -> list[FetchPartitionResult]:
    """A follower's answer without the partitions it named with its high watermark that have
    nothing new: no records, no error, that high watermark and its log start offset. The
    follower would apply nothing from them, and building and parsing one answer per followed
    partition at every fetch cost both sides more than the partition that had records
    (issue 10). Consumers' answers are whole."""
    if params.replica_id is None:
        return results
    kept: list[FetchPartitionResult] = []
    for data, result in zip(params.partitions, results, strict=True):
        known = data.known_high_watermark
        if (
            known is None
            or result.records is not None
            or result.error != ErrorCode.NONE
            or result.high_watermark != known
            or result.log_start_offset != data.log_start_offset
        ):
            kept.append(result)
    return kept


def close_results(results: Iterable[FetchPartitionResult]) -> None:
    """Release the file ranges the results pin (after the bytes were sent or copied)."""
    for result in results:
        records = result.records
        if records is not None:
            result.records = None
            records.close()


class FetchHandler:
    """Serves fetches from the hosted partitions. Event-loop thread only."""

    def __init__(
        self,
        replicas: ReplicaManager,
        purgatory: Purgatory[TopicPartition],
        fetch_max_bytes: int,
        leader_quota: ReplicationQuota | None = None,
        remote: RemoteReads | None = None,
    ) -> None:
        self.remote = remote
        self._replicas = replicas
        self._purgatory = purgatory
        self._fetch_max_bytes = fetch_max_bytes
        self.leader_quota = leader_quota
        self.consumer_fetches: Counter[tuple[TopicPartition, bool]] = Counter()
        """Partitions answered without error to consumers, by (partition, served as leader)."""

    def validate(self, params: FetchParams) -> None:
        """Whole-request checks; raises INVALID_REQUEST (the interceptor maps it)."""
        if params.max_bytes < 0:
            raise RiverlogError(
                f"max_bytes {params.max_bytes} is negative", ErrorCode.INVALID_REQUEST
            )
        if params.min_bytes < 0:
            raise RiverlogError(
                f"min_bytes {params.min_bytes} is negative", ErrorCode.INVALID_REQUEST
            )
        if params.max_wait_ms < 0:
            raise RiverlogError(
                f"max_wait_ms {params.max_wait_ms} is negative", ErrorCode.INVALID_REQUEST
            )

    def max_bytes(self, params: FetchParams) -> int:
        """The request's budget: its max_bytes, capped by the node's fetch.max.bytes (0: the
        node's)."""
        if params.max_bytes <= 0:
            return self._fetch_max_bytes
        return min(params.max_bytes, self._fetch_max_bytes)

    async def fetch(self, params: FetchParams) -> list[FetchPartitionResult]:
        """Read now; wait (long poll) when there is less than min_bytes and no error."""
        results = self.fetch_now(params)
        if results is not None:
            return results
        return await self.fetch_later(params)

    def fetch_now(self, params: FetchParams) -> list[FetchPartitionResult] | None:
        """The answer when it is ready at once (enough bytes, an error, or no wait asked for),
        else None: then `fetch_later(params)` waits and answers. Validates the request and
        records a follower's fetch state either way, so a transport can answer a fetch that
        needs no waiting without a task (the zero-copy channel watches for the client going
        away only while a fetch waits)."""
        self.validate(params)
        if params.replica_id is not None:
            self._record_follower_fetch(params.replica_id, params)
        may_wait = params.max_wait_ms > 0 and bool(params.partitions)
        if may_wait and self._quiet_follower(params):
            return None
        results = self.read_all(params)
        if self.remote is not None and params.replica_id is None:
            if any(r.error == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE for r in results):
                close_results(results)
                return None  # the remote tier is read by `fetch_later`
        if not may_wait or self._satisfied(params, results):
            self._record_throttled(params, results)
            self._count_consumer_fetch(params, results)
            return _without_unchanged(params, results)
        close_results(results)
        return None

    async def fetch_later(self, params: FetchParams) -> list[FetchPartitionResult]:
        """After `fetch_now` answered None: read (the remote tier too), and wait in the
        purgatory when that is still not enough."""
        by_offsets = params.replica_id is not None and self._decided_by_offsets(params)
        may_wait = params.max_wait_ms > 0 and bool(params.partitions)
        if not (may_wait and self._quiet_follower(params)):
            results = self.read_all(params)
            await self._read_remote(params, results)
            if not may_wait or self._satisfied(params, results):
                self._record_throttled(params, results)
                self._count_consumer_fetch(params, results)
                return _without_unchanged(params, results)
            close_results(results)

        def available() -> tuple[int, bool]:
            probe = self.read_all(params)
            try:
                return sum(r.size for r in probe), any(not r.ok for r in probe)
            finally:
                close_results(probe)

        def has_news() -> tuple[int, bool]:
            return (1, False) if self._follower_has_news(params) else (0, False)

        keys = [p.tp for p in params.partitions]
        await DelayedFetch(
            self._purgatory,
            keys,
            params.min_bytes,
            params.max_wait_ms,
            has_news if by_offsets else available,
        ).wait()
        results = self.read_all(params)
        await self._read_remote(params, results)
        self._record_throttled(params, results)
        self._count_consumer_fetch(params, results)
        return _without_unchanged(params, results)

    def _quiet_follower(self, params: FetchParams) -> bool:
        """A follower fetch decided by offsets, with nothing to answer yet."""
        return (
            params.replica_id is not None
            and self._decided_by_offsets(params)
            and not self._follower_has_news(params)
        )

    def _count_consumer_fetch(
        self, params: FetchParams, results: list[FetchPartitionResult]
    ) -> None:
        if params.replica_id is not None:
            return
        partitions = self._replicas.partitions
        for result in results:
            partition = partitions.get(result.tp)
            if result.ok and partition is not None:
                self.consumer_fetches[(result.tp, partition.is_leader)] += 1
                if not partition.is_leader:
                    log.debug(
                        "%s: served a consumer fetch as follower (rack %s)",
                        result.tp,
                        params.rack_id,
                    )

    async def _read_remote(self, params: FetchParams, results: list[FetchPartitionResult]) -> None:
        """Serve the consumers' partitions that answered OFFSET_MOVED_TO_TIERED_STORAGE from the
        remote store (tiered storage), within what is left of the request's budget. Awaits the
        store: other requests, and the tail, are served meanwhile."""
        if self.remote is None or params.replica_id is not None:
            return
        for data, result in zip(params.partitions, results, strict=True):
            if result.error != ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
                continue
            partition = self._replicas.partitions.get(data.tp)
            if partition is None:
                continue
            others = sum(r.size for r in results)
            limit = max(0, self.max_bytes(params) - others)
            if data.partition_max_bytes > 0:
                limit = min(limit, data.partition_max_bytes)
            committed = params.isolation is IsolationLevel.READ_COMMITTED
            bound = partition.last_stable_offset if committed else partition.high_watermark
            try:
                records = await self.remote.read(
                    data.tp, data.fetch_offset, limit, bound, others == 0
                )
                aborted: list[AbortedTxn] = []
                upper = records.next_offset
                if committed and records.size and upper > data.fetch_offset:
                    aborted, complete = await self.remote.collect_aborted_txns(
                        data.tp, data.fetch_offset, upper
                    )
                    if not complete:
                        local = partition.log.local_log_start_offset
                        aborted += partition.log.collect_aborted_txns(local, upper)
            except RiverlogError as exc:
                result.fail(exc)
                continue
            result.error, result.error_message = ErrorCode.NONE, ""
            result.records = records if records.size else None
            result.high_watermark = partition.high_watermark
            result.last_stable_offset = partition.last_stable_offset
            result.log_start_offset = partition.log_start_offset
            result.log_end_offset = partition.log_end_offset
            result.aborted_transactions = sorted(
                {(a.producer_id, a.first_offset) for a in aborted}, key=lambda a: a[1]
            )

    def _record_throttled(self, params: FetchParams, results: list[FetchPartitionResult]) -> None:
        """Count the bytes sent to out-of-sync followers of throttled partitions."""
        quota = self.leader_quota
        replica_id = params.replica_id
        if quota is None or not quota.active or replica_id is None:
            return
        partitions = self._replicas.partitions
        for result in results:
            if result.size and quota.is_throttled(result.tp):
                partition = partitions.get(result.tp)
                if partition is not None and replica_id not in partition.isr:
                    quota.record(result.size)

    def _throttled(self, params: FetchParams, tp: TopicPartition, isr: tuple[int, ...]) -> bool:
        quota = self.leader_quota
        if quota is None or not quota.active or params.replica_id is None:
            return False
        if should_throttle(quota, tp, params.replica_id in isr):
            quota.throttled_count += 1
            return True
        return False

    def _decided_by_offsets(self, params: FetchParams) -> bool:
        """Whether a follower fetch's long poll can be decided from offsets alone, without
        reading: with min_bytes at most 1 any batch past a fetch offset is enough, and with
        no leader throttle active every such batch is returned (issue 10: a follower's fetch
        names every partition it follows from this leader, and reading each of them at every
        append cost more than the one partition with news)."""
        if params.min_bytes > 1:
            return False
        quota = self.leader_quota
        return quota is None or not quota.active

    def _follower_has_news(self, params: FetchParams) -> bool:
        """True when a read of this follower fetch would return records or an error: some
        partition is gone, not led here, at another epoch, or has a log end offset other than
        the fetch offset (records after it, or an offset out of range). Exactly when `read_all`
        would answer something other than every partition empty (given `_decided_by_offsets`),
        so the wait neither misses news nor wakes for none."""
        partitions = self._replicas.partitions
        for data in params.partitions:
            partition = partitions.get(data.tp)
            if partition is None or partition.role is not Role.LEADER:
                return True
            epoch = data.current_leader_epoch
            if epoch is not None and epoch >= 0 and epoch != partition.leader_epoch:
                return True
            if data.fetch_offset != partition.log_end_offset:
                return True
        return False

    def _record_follower_fetch(self, replica_id: int, params: FetchParams) -> None:
        for data in params.partitions:
            partition = self._replicas.partitions.get(data.tp)
            if partition is None or data.fetch_offset < 0:
                continue
            try:
                partition.require_leader(data.current_leader_epoch)
            except RiverlogError:
                continue  # the read reports the error
            partition.replication.update_follower_fetch_state(replica_id, data.fetch_offset)

    @staticmethod
    def _check_follower_read(partition: Partition, data: FetchPartitionData) -> None:
        """A follower serves a consumer only while it follows, and only below its high
        watermark (Kafka answers a position it cannot serve yet with OFFSET_NOT_AVAILABLE)."""
        if partition.role is not Role.FOLLOWER:
            raise RiverlogError(
                f"{data.tp}: this node neither leads nor follows it now",
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
            )
        hw = partition.high_watermark
        if data.fetch_offset > hw:
            raise RiverlogError(
                f"{data.tp}: fetch offset {data.fetch_offset} is above this follower's high "
                f"watermark {hw}; read from the leader",
                ErrorCode.OFFSET_NOT_AVAILABLE,
            )

    @staticmethod
    def _satisfied(params: FetchParams, results: list[FetchPartitionResult]) -> bool:
        if any(not r.ok for r in results):
            return True
        return sum(r.size for r in results) >= max(params.min_bytes, 1)

    def read_all(self, params: FetchParams) -> list[FetchPartitionResult]:
        remaining = self.max_bytes(params)
        min_one_message = True
        results: list[FetchPartitionResult] = []
        for data in params.partitions:
            result = self._read_partition(params, data, remaining, min_one_message)
            results.append(result)
            if result.size:
                min_one_message = False
                remaining = max(0, remaining - result.size)
        return results

    def _read_partition(
        self, params: FetchParams, data: FetchPartitionData, remaining: int, min_one: bool
    ) -> FetchPartitionResult:
        result = FetchPartitionResult(data.tp)
        partition = None
        try:
            if data.partition_max_bytes < 0:
                raise RiverlogError(
                    f"{data.tp}: partition_max_bytes {data.partition_max_bytes} is negative",
                    ErrorCode.INVALID_FETCH_SIZE,
                )
            is_consumer = params.replica_id is None
            from_follower = is_consumer and bool(params.rack_id)
            partition = self._replicas.get_partition(
                data.tp, data.current_leader_epoch, require_leader=not from_follower
            )
            if from_follower and not partition.is_leader:
                self._check_follower_read(partition, data)
            limit = remaining
            if data.partition_max_bytes > 0:
                limit = min(limit, data.partition_max_bytes)
            if data.fetch_offset < 0:
                raise RiverlogError(
                    f"{data.tp}: fetch offset {data.fetch_offset} is negative",
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                )
            if self._throttled(params, data.tp, partition.isr):
                limit = 0  # no records now (Kafka answers the throttled partition empty)
                min_one = False
            read = partition.read(
                data.fetch_offset,
                max(limit, 0),
                min_one,
                up_to_high_watermark=is_consumer,
                isolation=params.isolation,
            )
        except RiverlogError as exc:
            result.fail(exc)
            if partition is not None and exc.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                # A follower out of range needs the leader's bounds to reset its log.
                result.log_start_offset = partition.log_start_offset
                result.log_end_offset = partition.log_end_offset
                result.high_watermark = partition.high_watermark
            elif partition is not None and exc.code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
                # Tiered storage: a follower starts at the leader's local log start (Kafka's
                # EARLIEST_LOCAL), which this error carries as its log start offset.
                result.log_start_offset = partition.log.local_log_start_offset
                result.log_end_offset = partition.log_end_offset
                result.high_watermark = partition.high_watermark
            return result
        result.records = read.records if read.records is not None and read.records.size else None
        if read.records is not None and result.records is None:
            read.records.close()
        result.high_watermark = read.high_watermark
        result.last_stable_offset = read.last_stable_offset
        if read.aborted and result.records is not None:
            result.aborted_transactions = sorted(
                ((a.producer_id, a.first_offset) for a in read.aborted), key=lambda a: a[1]
            )
        result.log_start_offset = read.log_start_offset
        result.log_end_offset = read.log_end_offset
        return result
