"""Follower pull replication: a fetcher task per leader node pulls the partitions this node
follows from it, in one fetch request per round (Kafka's ReplicaFetcherManager and
ReplicaFetcherThread / AbstractFetcherThread); the partitions of internal topics
(`__consumer_offsets`, `__transaction_state`...) have a second fetcher per leader node, on its
own connection, as Kafka spreads partitions over `num.replica.fetchers`: a busy user
partition's rounds then name only the user partitions instead of every idle internal one as
well, which cost the leader and the follower more per round than the busy partition (a
request, a follower fetch state and a read per named partition; decision 0010, issue 10).
Each partition is in exactly one fetcher, so nothing about truncation, the high watermark or
the ISR changes: the leader keeps one fetch state per (partition, follower) either way.

A partition enters a fetcher *truncating*: before it fetches at a new leader epoch (it just
became a follower, its leader changed, or the node restarted) it asks the leader, with
OffsetsForLeaderEpoch, where its own latest epoch ended in the leader's log, and truncates to
min(that end offset, its log end offset) — never to its high watermark (KIP-101; the
multi-round refinement of KIP-279 when the leader answers with an older epoch). Then it fetches
from its log end offset with `replica_id` = this node, appends the batches unchanged and takes
the leader's high watermark (capped by its own log end offset); it tells its own high
watermark in every fetch, so the leader leaves out of its answer the partitions it has nothing
new for (decision 0010). Errors are per partition:
FENCED_LEADER_EPOCH waits for a newer image, UNKNOWN_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER back
off and retry, OFFSET_OUT_OF_RANGE resets the log to the leader's bounds,
OFFSET_MOVED_TO_TIERED_STORAGE restarts it at the leader's local log start with the producer
state and leader epochs below it taken from the remote tier (`remote_aux`).

Replication throttle (decision 0024): a partition listed in its topic's
`follower.replication.throttled.replicas` for this node is left out of the round while this
node is not in its ISR and the node's `follower.replication.throttled.rate` is exceeded (Kafka's
shouldFollowerThrottle); the bytes such partitions append are recorded against the rate.

The transport is a `LeaderEndpoint` (in `peers/`: the zero-copy channel for fetches, gRPC for
OffsetsForLeaderEpoch), so this module stays free of gRPC and protobufs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from riverlog.common.cluster.image import NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records.header import InvalidBatchError, parse_header
from riverlog.common.types import TopicPartition

from ..log import UNDEFINED_EPOCH_OFFSET
from ..producer.snapshot import CorruptSnapshotError
from ..remote.aux_state import RemoteLogAuxState
from .partition import Partition, Role
from .replica_manager import ReplicaManager
from .requests import (
    EpochEndOffsetData,
    EpochEndOffsetResult,
    FetchParams,
    FetchPartitionData,
    FollowerFetchResult,
)
from .throttle import ReplicationQuota, should_throttle

log = logging.getLogger(__name__)


class LeaderEndpoint(Protocol):
    """How a follower reaches one leader node."""

    async def fetch(self, params: FetchParams) -> list[FollowerFetchResult]: ...

    async def offsets_for_leader_epoch(
        self, replica_id: int, partitions: list[EpochEndOffsetData]
    ) -> list[EpochEndOffsetResult]: ...

    async def close(self) -> None: ...


EndpointFactory = Callable[[NodeInfo], LeaderEndpoint]
# Tiered storage: the remote tier's state below a leader's local log start (None: nothing
# tiered there); `remote/aux_state.py`.
RemoteAuxSource = Callable[[TopicPartition, int], Awaitable[RemoteLogAuxState | None]]


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    """Kafka's replica.fetch.* broker settings."""

    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 1_048_576  # per partition (replica.fetch.max.bytes)
    response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    backoff_ms: int = 1_000


@dataclass(slots=True)
class FetchState:
    """One followed partition inside a fetcher."""

    leader_epoch: int
    truncating: bool = True
    fenced: bool = False  # FENCED_LEADER_EPOCH: wait for a newer image
    delayed_until: float = 0.0  # loop time before which it is not fetched


FetcherKey = tuple[int, bool]
"""(leader node id, whether it carries internal topics): which fetcher follows a partition."""


@dataclass(slots=True)
class LeaderFetcher:
    """A fetcher of one leader node (its user partitions, or its internal ones): a task on
    the event loop. `wake` is set whenever its partitions change, so an idle fetcher sleeps on
    it."""

    leader: NodeInfo
    endpoint: LeaderEndpoint
    states: dict[TopicPartition, FetchState] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    rounds: int = 0
    # Set when the manager lets go of this fetcher. The task also checks it, since a
    # cancellation can be swallowed on its way through an await (Python 3.11's wait_for
    # returns the inner result when it completed in the same loop step as the cancel).
    stopped: bool = False


class ReplicaFetcherManager:
    """Starts, moves and stops the fetchers as the image changes (`update()`, called by the
    ReplicaManager after every image). Lifecycle: `update()` any time on the event loop,
    `await close()` at shutdown. A partition whose log dir is offline (`is_offline`) is not
    fetched (Kafka's removeFetcherForPartitions): it could not append what it got."""

    def __init__(
        self,
        node_id: int,
        replicas: ReplicaManager,
        endpoint_factory: EndpointFactory,
        settings: FetcherSettings | None = None,
        is_offline: Callable[[TopicPartition], bool] | None = None,
        quota: ReplicationQuota | None = None,
        remote_aux: RemoteAuxSource | None = None,
    ) -> None:
        self.node_id = node_id
        self.quota = quota
        self.remote_aux = remote_aux
        self._replicas = replicas
        self._is_offline = is_offline or (lambda _tp: False)
        self._factory = endpoint_factory
        self.settings = settings or FetcherSettings()
        self.fetchers: dict[FetcherKey, LeaderFetcher] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    def leaders(self) -> set[int]:
        """The leader nodes fetched from now."""
        return {leader_id for leader_id, _internal in self.fetchers}

    def fetcher(self, leader_id: int, internal: bool = False) -> LeaderFetcher | None:
        return self.fetchers.get((leader_id, internal))

    def update(self) -> None:
        """Follow the replica manager's partitions: each followed partition in the fetcher of
        its leader (the internal or the user one), at its leader epoch."""
        if self._closed:
            return
        image = self._replicas.image
        wanted: dict[FetcherKey, dict[TopicPartition, Partition]] = {}
        for partition in self._replicas.partitions.values():
            if partition.role is Role.FOLLOWER and not self._is_offline(partition.tp):
                topic = image.topics.get(partition.tp.topic)
                key = (partition.leader_id, topic is not None and topic.internal)
                wanted.setdefault(key, {})[partition.tp] = partition
        for key, fetcher in list(self.fetchers.items()):
            node = image.storage_node(key[0])
            if key not in wanted or node is None or node != fetcher.leader:
                self._stop(key)
        for key, partitions in wanted.items():
            node = image.storage_node(key[0])
            if node is None:
                continue  # the leader is not registered: nothing to fetch from until it is
            fetcher = self.fetchers.get(key) or self._start(key, node)
            for tp in list(fetcher.states):
                if tp not in partitions:
                    del fetcher.states[tp]
            for tp, partition in partitions.items():
                state = fetcher.states.get(tp)
                if state is None or state.leader_epoch != partition.leader_epoch:
                    fetcher.states[tp] = FetchState(partition.leader_epoch)
            fetcher.wake.set()

    def _start(self, key: FetcherKey, node: NodeInfo) -> LeaderFetcher:
        fetcher = LeaderFetcher(node, self._factory(node))  # its own connection
        suffix = "-internal" if key[1] else ""
        fetcher.task = asyncio.get_running_loop().create_task(
            self._run(fetcher), name=f"replica-fetcher-{node.node_id}{suffix}"
        )
        self.fetchers[key] = fetcher
        return fetcher

    def _stop(self, key: FetcherKey) -> None:
        fetcher = self.fetchers.pop(key)
        fetcher.stopped = True
        fetcher.states.clear()
        if fetcher.task is not None:
            fetcher.task.cancel()
        closing = asyncio.get_running_loop().create_task(fetcher.endpoint.close())
        self._closing.add(closing)  # a reference, so the task is not collected mid-way
        closing.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        self._closed = True
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        for fetcher in fetchers:
            fetcher.stopped = True
            if fetcher.task is not None:
                fetcher.task.cancel()
        for fetcher in fetchers:
            if fetcher.task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await fetcher.task
            with contextlib.suppress(Exception):
                await fetcher.endpoint.close()

    # --- one fetcher ---------------------------------------------------------------------------

    async def _run(self, fetcher: LeaderFetcher) -> None:
        """Rounds until stopped. Every round awaits something (a request, or the wake event
        with the backoff as timeout): a round that asked nothing must not loop again at once,
        or the event loop never runs anything else again."""
        loop = asyncio.get_running_loop()
        backoff = self.settings.backoff_ms / 1000.0
        while not fetcher.stopped:
            fetcher.wake.clear()
            try:
                now = loop.time()
                truncating = [
                    tp for tp, s in fetcher.states.items() if s.truncating and _due(s, now)
                ]
                if truncating:
                    await self._truncate(fetcher, truncating)
                now = loop.time()
                ready = [
                    tp for tp, s in fetcher.states.items() if not s.truncating and _due(s, now)
                ]
                if self.quota is not None and self.quota.active:
                    ready = [tp for tp in ready if not self._throttled(tp)]
                if not ready or not await self._fetch(fetcher, ready):
                    await _wait_for_wake(fetcher, backoff)
                    continue
                fetcher.rounds += 1
            except RiverlogError as exc:
                log.info("fetch from node %d failed: %s", fetcher.leader.node_id, exc)
                await _wait_for_wake(fetcher, backoff)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher for node %d failed", fetcher.leader.node_id)
                await asyncio.sleep(backoff)

    def _throttled(self, tp: TopicPartition) -> bool:
        """Whether to leave `tp` out of this round (the follower throttle)."""
        partition = self._replicas.partitions.get(tp)
        if partition is None or self.quota is None:
            return False
        if should_throttle(self.quota, tp, self.node_id in partition.isr):
            self.quota.throttled_count += 1
            return True
        return False

    def _record_throttled(self, partition: Partition, size: int) -> None:
        quota = self.quota
        if quota is not None and quota.active and quota.is_throttled(partition.tp):
            if self.node_id not in partition.isr:
                quota.record(size)

    def _current(self, fetcher: LeaderFetcher, tp: TopicPartition) -> Partition | None:
        """The partition if it is still followed by this fetcher at the state's epoch."""
        state = fetcher.states.get(tp)
        partition = self._replicas.partitions.get(tp)
        if state is None or partition is None or partition.role is not Role.FOLLOWER:
            return None
        if partition.leader_epoch != state.leader_epoch:
            return None
        return partition

    async def _truncate(self, fetcher: LeaderFetcher, tps: list[TopicPartition]) -> None:
        asked: list[EpochEndOffsetData] = []
        for tp in tps:
            partition = self._current(fetcher, tp)
            if partition is None:
                continue
            latest = partition.log.leader_epoch_cache.latest_epoch
            if latest < 0 or partition.log_end_offset <= partition.log_start_offset:
                fetcher.states[tp].truncating = False  # nothing that could have diverged
                continue
            asked.append(EpochEndOffsetData(tp, latest, partition.leader_epoch))
        if not asked:
            return
        epochs = {a.tp: a.current_leader_epoch for a in asked}
        results = await fetcher.endpoint.offsets_for_leader_epoch(self.node_id, asked)
        for result in results:
            partition = self._current(fetcher, result.tp)
            if partition is None or epochs.get(result.tp) != partition.leader_epoch:
                continue  # moved on to another epoch while the request was out
            self._apply_epoch_end(fetcher, partition, result)

    def _apply_epoch_end(
        self, fetcher: LeaderFetcher, partition: Partition, result: EpochEndOffsetResult
    ) -> None:
        state = fetcher.states[partition.tp]
        if not result.ok:
            self._on_error(fetcher, partition.tp, state, result.error, result.error_message)
            return
        if result.end_offset == UNDEFINED_EPOCH_OFFSET:
            # The leader has no epoch at or below ours: it is behind the image. Ask again.
            state.delayed_until = asyncio.get_running_loop().time() + self._backoff_s
            return
        target, done = truncation_target(partition, result.leader_epoch, result.end_offset)
        partition.truncate_to(target)
        state.truncating = not done

    def _fetch_params(self, fetcher: LeaderFetcher, tps: list[TopicPartition]) -> FetchParams:
        parts: list[FetchPartitionData] = []
        for tp in tps:
            partition = self._current(fetcher, tp)
            if partition is None:
                continue
            latest = partition.log.leader_epoch_cache.latest_epoch
            parts.append(
                FetchPartitionData(
                    tp,
                    partition.log_end_offset,
                    self.settings.max_bytes,
                    partition.leader_epoch,
                    partition.log_start_offset,
                    latest if latest >= 0 else None,
                    partition.high_watermark,
                )
            )
        return FetchParams(
            partitions=parts,
            max_wait_ms=self.settings.max_wait_ms,
            min_bytes=self.settings.min_bytes,
            max_bytes=self.settings.response_max_bytes,
            replica_id=self.node_id,
        )

    async def _fetch(self, fetcher: LeaderFetcher, tps: list[TopicPartition]) -> bool:
        """One fetch of `tps`; False when none of them was still this fetcher's to ask."""
        params = self._fetch_params(fetcher, tps)
        if not params.partitions:
            return False
        asked = {p.tp: (p.fetch_offset, p.current_leader_epoch) for p in params.partitions}
        results = await fetcher.endpoint.fetch(params)
        for result in results:
            partition = self._current(fetcher, result.tp)
            if partition is None or asked.get(result.tp) != (
                partition.log_end_offset,
                partition.leader_epoch,
            ):
                continue  # moved on (new epoch, truncated) while the fetch was out
            if (
                not result.records
                and result.ok
                and result.high_watermark <= partition.high_watermark
                and result.log_start_offset == partition.log_start_offset
            ):
                continue  # nothing new (most partitions of most rounds): nothing to apply
            state = fetcher.states[result.tp]
            if not result.ok:
                self._on_error(fetcher, result.tp, state, result.error, result.error_message)
                if result.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    reset_out_of_range(partition, result)
                elif result.error == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
                    await self._start_at_leader_local_start(fetcher, partition, result)
                continue
            try:
                records = strip_below(partition, result.records)
                partition.append_as_follower(records, result.high_watermark)
                self._record_throttled(partition, len(records))
                # DeleteRecords and retention on the leader move our log start too (Kafka's
                # maybeIncrementLogStartOffset), never past what we hold as committed.
                new_start = min(result.log_start_offset, partition.high_watermark)
                if new_start > partition.log_start_offset:
                    partition.log.delete_records(new_start)
                elif new_start < partition.log_start_offset:
                    partition.log.lower_tiered_log_start(new_start)  # a no-op unless tiered
            except (RiverlogError, OSError) as exc:
                # Bytes that do not continue our log: resolve the divergence by epoch again.
                log.error("%s: cannot append what the leader sent: %s", result.tp, exc)
                self._replicas.storage_error(result.tp, exc)  # a failed disk: dir offline
                state.truncating = True
                state.delayed_until = asyncio.get_running_loop().time() + self._backoff_s
        return True

    async def _start_at_leader_local_start(
        self, fetcher: LeaderFetcher, partition: Partition, result: FollowerFetchResult
    ) -> None:
        """OFFSET_MOVED_TO_TIERED_STORAGE: restart the log at the leader's local log start,
        with the producer state and leader epochs below it read from the remote tier first
        (`remote/aux_state.py`) when this node tiers. A store that fails leaves the log as it
        is: the partition backs off and the next fetch gets the same error and tries again.
        Awaited inside the round, as Kafka's fetcher thread does: one small read per replica
        that starts over, not per fetch."""
        leader_local_start = result.log_start_offset
        if partition.log_end_offset >= leader_local_start:
            return
        if self.remote_aux is None or not partition.log.remote_storage_enabled:
            start_at_leader_local_start(partition, result)
            return
        before = (partition.log_end_offset, partition.leader_epoch)
        try:
            aux = await self.remote_aux(partition.tp, leader_local_start)
        except RiverlogError as exc:
            log.warning("%s: reading the remote tier's state failed: %s", partition.tp, exc)
            return
        if self._current(fetcher, partition.tp) is not partition or before != (
            partition.log_end_offset,
            partition.leader_epoch,
        ):
            return  # moved on while the store was read
        if aux is None:
            start_at_leader_local_start(partition, result)
            return
        start_from_remote_aux(partition, aux)
        fetcher.states[partition.tp].delayed_until = 0.0

    @property
    def _backoff_s(self) -> float:
        return self.settings.backoff_ms / 1000.0

    def _on_error(
        self,
        fetcher: LeaderFetcher,
        tp: TopicPartition,
        state: FetchState,
        error: ErrorCode,
        message: str,
    ) -> None:
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            log.info("%s: fenced by the leader (%s); waiting for a newer image", tp, message)
            state.fenced = True
            return
        log.info("%s: fetch from node %d: %s (%s)", tp, fetcher.leader.node_id, error.name, message)
        state.delayed_until = asyncio.get_running_loop().time() + self._backoff_s


async def _wait_for_wake(fetcher: LeaderFetcher, timeout_s: float) -> None:
    """Until the fetcher's partitions change or `timeout_s` passes. `asyncio.timeout`, not
    `wait_for`: it never turns a cancellation of the fetcher into a normal return."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await fetcher.wake.wait()


def _due(state: FetchState, now: float) -> bool:
    """Not fenced (waiting for an image) and not backing off."""
    return not state.fenced and state.delayed_until <= now


def reset_out_of_range(partition: Partition, result: FollowerFetchResult) -> None:
    """Kafka's handleOutOfRangeError with the leader's bounds from the error: a follower ahead
    of the leader's log end truncates to it (what the leader never had cannot be committed); a
    follower behind the leader's log start starts empty there."""
    leo = partition.log_end_offset
    if 0 <= result.log_end_offset < leo:
        partition.truncate_to(result.log_end_offset)
    elif leo < result.log_start_offset:
        partition.truncate_fully_and_start_at(result.log_start_offset)
        partition.producer_state.truncate_fully_and_start_at(result.log_start_offset)


def start_at_leader_local_start(partition: Partition, result: FollowerFetchResult) -> None:
    """Tiered storage (Kafka's OFFSET_MOVED_TO_TIERED_STORAGE path): a follower behind the
    leader's local log start (a new replica, or one far behind) copies only the local tail: it
    starts empty at the leader's local start, which the error carries as its log start offset;
    what lies below is in the remote store."""
    if partition.log_end_offset < result.log_start_offset:
        partition.truncate_fully_and_start_at(result.log_start_offset)
        partition.producer_state.truncate_fully_and_start_at(result.log_start_offset)


def start_from_remote_aux(partition: Partition, aux: RemoteLogAuxState) -> None:
    """Start the log empty at `aux.next_offset` with the leader epochs and the producer state
    below it that the remote tier holds (a corrupt snapshot is logged and leaves no producer
    known, as before tiering knew better)."""
    partition.truncate_fully_and_start_at(aux.next_offset)
    cache = partition.log.leader_epoch_cache
    for epoch, start in aux.epochs:
        cache.assign(epoch, start)
    if aux.producer_snapshot is not None:
        try:
            partition.producer_state.install_snapshot(aux.next_offset, aux.producer_snapshot)
        except CorruptSnapshotError as exc:
            log.error("%s: the remote producer snapshot is corrupt: %s", partition.tp, exc)
    log.info(
        "%s: started at %d with %d producer(s) and epochs %s from the remote tier",
        partition.tp,
        aux.next_offset,
        len(partition.producer_state.producers),
        list(aux.epochs),
    )


def truncation_target(
    partition: Partition, leader_epoch: int, leader_end_offset: int
) -> tuple[int, bool]:
    """Where a follower truncates given the leader's answer (epoch, end offset) to
    OffsetsForLeaderEpoch for the follower's latest epoch, and whether that is final (Kafka's
    getOffsetTruncationState, KIP-279). When the follower also has the leader's epoch the
    answer is final: min(leader end, follower end of that epoch). When it does not (the leader
    answered with an older epoch the follower never had), truncate to the follower's own end
    of its largest epoch below it and ask again."""
    cache = partition.log.leader_epoch_cache
    leo = partition.log_end_offset
    follower_epoch, follower_end = cache.end_offset_for(leader_epoch, leo)
    if follower_end == UNDEFINED_EPOCH_OFFSET:
        return min(leader_end_offset, leo), True
    if follower_epoch != leader_epoch:
        return min(follower_end, leo), False
    return min(leader_end_offset, follower_end, leo), True


def strip_below(partition: Partition, records: bytes | memoryview) -> bytes | memoryview:
    """Drop whole batches that end below our log end offset (a fetch answers with whole
    stored batches starting at or before the fetch offset)."""
    leo = partition.log_end_offset
    pos = 0
    while pos < len(records):
        try:
            header = parse_header(records, pos)
        except InvalidBatchError:
            break  # the log's validation reports it
        if header.next_offset > leo:
            break
        pos += header.size
    return records[pos:] if pos else records
