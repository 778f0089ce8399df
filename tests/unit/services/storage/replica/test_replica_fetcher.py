"""The follower fetcher against a leader in the same process (its FetchHandler and
OffsetsHandler behind a LeaderEndpoint): replication of appends and the high watermark, and
truncation by leader epoch in both cases of KIP-101 — a follower whose high watermark lags must
not lose a committed record (data loss), and a follower holding an uncommitted record the new
leader never had must drop it (divergence) — plus KIP-279's multi-round answer."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType

import pytest
from storage_replica_testkit import Node, make_batch, make_node, topic

from riverlog.common.clock import ManualClock
from riverlog.common.cluster import ClusterImage, NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.services.storage.log import EpochEntry
from riverlog.services.storage.producer.entry import BatchMetadata, ProducerStateEntry
from riverlog.services.storage.producer.snapshot import encode
from riverlog.services.storage.remote.aux_state import RemoteLogAuxState
from riverlog.services.storage.remote.storage import RemoteStorageError
from riverlog.services.storage.replica.fetch import close_results
from riverlog.services.storage.replica.fetcher import (
    FetcherSettings,
    ReplicaFetcherManager,
    reset_out_of_range,
    strip_below,
    truncation_target,
)
from riverlog.services.storage.replica.requests import (
    EpochEndOffsetData,
    EpochEndOffsetResult,
    FetchParams,
    FollowerFetchResult,
)

T0 = TopicPartition("t", 0)
A, B = 1, 2


class LocalEndpoint:
    """A LeaderEndpoint calling another in-process node's handlers."""

    def __init__(self, leader: Node) -> None:
        self.leader = leader
        self.epoch_requests: list[list[EpochEndOffsetData]] = []

    async def fetch(self, params: FetchParams) -> list[FollowerFetchResult]:
        results = await self.leader.fetch.fetch(params)
        try:
            return [
                FollowerFetchResult(
                    r.tp,
                    r.error,
                    r.error_message,
                    r.high_watermark,
                    r.log_start_offset,
                    r.log_end_offset,
                    r.records.to_bytes() if r.records is not None else b"",
                )
                for r in results
            ]
        finally:
            close_results(results)

    async def offsets_for_leader_epoch(
        self, replica_id: int, partitions: list[EpochEndOffsetData]
    ) -> list[EpochEndOffsetResult]:
        self.epoch_requests.append(partitions)
        return self.leader.offsets.offsets_for_leader_epoch(partitions)

    async def close(self) -> None:
        pass


def _image(leader: int, epoch: int, version: int, isr: tuple[int, ...] = (A, B)) -> ClusterImage:
    nodes = {("storage", n): NodeInfo("storage", n, "127.0.0.1", 1000 + n) for n in (A, B)}
    info = topic("t", leaders=[leader], epoch=epoch, replicas=[[A, B]], isr=[list(isr)])
    return ClusterImage(
        version=version,
        nodes=MappingProxyType(nodes),
        topics=MappingProxyType({"t": info}),
    )


def _node(root: Path, node_id: int) -> Node:
    return make_node(root / f"n{node_id}", ManualClock(), node_id=node_id)


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _fetcher(follower: Node, leader: Node) -> tuple[ReplicaFetcherManager, LocalEndpoint]:
    endpoint = LocalEndpoint(leader)
    manager = ReplicaFetcherManager(
        follower.replicas.node_id,
        follower.replicas,
        lambda _node: endpoint,
        FetcherSettings(max_wait_ms=20, backoff_ms=10),
    )
    follower.replicas.on_partitions_changed.append(manager.update)
    return manager, endpoint


def _log_bytes(node: Node) -> bytes:
    partition_log = node.replicas.partitions[T0].log
    return b"".join(s.log.path.read_bytes() for s in partition_log.segments)


async def test_follower_replicates_appends_and_learns_the_high_watermark(tmp_path: Path) -> None:
    leader, follower = _node(tmp_path, A), _node(tmp_path, B)
    leader.replicas.apply_image(_image(A, 0, 1))
    manager, _ = _fetcher(follower, leader)
    try:
        follower.replicas.apply_image(_image(A, 0, 1))
        for i in range(3):
            leader.replicas.partitions[T0].append_as_leader(make_batch(4, tag=i))
        lp, fp = leader.replicas.partitions[T0], follower.replicas.partitions[T0]
        await _until(lambda: fp.high_watermark == 12, "the follower's high watermark")
        assert lp.high_watermark == 12
        assert _log_bytes(follower) == _log_bytes(leader)
        assert fp.log.leader_epoch_cache.entries == (EpochEntry(0, 0),)
    finally:
        await manager.close()
        leader.close()
        follower.close()


async def test_kip101_data_loss_case_a_restarted_follower_keeps_committed_records(
    tmp_path: Path,
) -> None:
    # A leads epoch 0 with offsets 0..1 committed (HW 2). B has both records but, as the HW
    # reaches followers a fetch later, its own high watermark is only 1.
    leader, follower = _node(tmp_path, A), _node(tmp_path, B)
    leader.replicas.apply_image(_image(A, 0, 1))
    lp = leader.replicas.partitions[T0]
    lp.append_as_leader(make_batch(1, tag=0))
    lp.append_as_leader(make_batch(1, tag=1))
    follower.replicas.apply_image(_image(A, 0, 1))
    fp = follower.replicas.partitions[T0]
    fp.append_as_follower(_read_raw(leader, 0), leader_high_watermark=1)
    lp.replication.update_follower_fetch_state(B, 2)
    assert (lp.high_watermark, fp.log_end_offset, fp.high_watermark) == (2, 2, 1)
    # B restarts: its logs reopen from disk and it follows A again.
    follower.close()
    follower = _node(tmp_path, B)
    manager, endpoint = _fetcher(follower, leader)
    try:
        follower.replicas.apply_image(_image(A, 0, 2))
        fp = follower.replicas.partitions[T0]
        await _until(lambda: bool(endpoint.epoch_requests), "OffsetsForLeaderEpoch")
        await _until(lambda: fp.high_watermark == 2, "the follower to catch up")
        assert fp.log_end_offset == 2  # truncating to its HW (1) would have lost offset 1
        # A dies; B leads epoch 1 and still serves the committed record at offset 1.
        await manager.close()
        follower.replicas.apply_image(_image(B, 1, 3, isr=(B,)))
        read = fp.read(1, 1 << 20, True)
        assert read.records is not None and read.records.size > 0
        read.records.close()
    finally:
        await manager.close()
        leader.close()
        follower.close()


async def test_kip101_divergence_case_the_old_leader_drops_its_uncommitted_tail(
    tmp_path: Path,
) -> None:
    # A led epoch 0: offset 0 (replicated to B) and offset 1 (never replicated, uncommitted).
    a, b = _node(tmp_path, A), _node(tmp_path, B)
    a.replicas.apply_image(_image(A, 0, 1))
    ap = a.replicas.partitions[T0]
    ap.append_as_leader(make_batch(1, tag=0))
    b.replicas.apply_image(_image(A, 0, 1))
    bp = b.replicas.partitions[T0]
    bp.append_as_follower(_read_raw(a, 0), leader_high_watermark=0)
    ap.append_as_leader(make_batch(1, tag=1))  # only on A
    ap.replication.update_follower_fetch_state(B, 1)
    ap.log.update_high_watermark(2)  # as if A had wrongly advanced its HW: irrelevant to epochs
    # Both crash; B comes back first, leads epoch 1 and writes a different record at offset 1.
    b.replicas.apply_image(_image(B, 1, 2, isr=(B,)))
    bp.append_as_leader(make_batch(1, tag=7))
    # A comes back as B's follower.
    manager, endpoint = _fetcher(a, b)
    try:
        a.replicas.apply_image(_image(B, 1, 3, isr=(B,)))
        await _until(lambda: ap.log_end_offset == 2 and bool(endpoint.epoch_requests), "A")
        await _until(lambda: _log_bytes(a) == _log_bytes(b), "identical logs")
        assert endpoint.epoch_requests[0][0].leader_epoch == 0
        assert ap.log.leader_epoch_cache.entries == (EpochEntry(0, 0), EpochEntry(1, 1))
    finally:
        await manager.close()
        a.close()
        b.close()


def test_truncation_target_follows_kip279(tmp_path: Path) -> None:
    node = _node(tmp_path, B)
    try:
        node.replicas.apply_image(_image(A, 5, 1))
        partition = node.replicas.partitions[T0]
        cache = partition.log.leader_epoch_cache
        partition.log.append_as_leader(make_batch(10), leader_epoch=1)  # 0..9 at epoch 1
        partition.log.append_as_leader(make_batch(10), leader_epoch=3)  # 10..19 at epoch 3
        assert cache.entries[-2:] == (EpochEntry(1, 0), EpochEntry(3, 10))
        # The leader has epoch 3 and it ended at 15: final, truncate to 15.
        assert truncation_target(partition, 3, 15) == (15, True)
        # The leader's end for epoch 3 is past ours: keep all we have.
        assert truncation_target(partition, 3, 40) == (20, True)
        # The leader answers epoch 2 (it never had 3): we never had 2 either; cut to where
        # our epoch 1 ended (10) and ask again.
        assert truncation_target(partition, 2, 12) == (10, False)
    finally:
        node.close()


def _read_raw(node: Node, offset: int) -> bytes:
    read = node.replicas.partitions[T0].read(offset, 1 << 20, True, up_to_high_watermark=False)
    assert read.records is not None
    try:
        return read.records.to_bytes()
    finally:
        read.records.close()


async def test_fetchers_follow_leadership_changes(tmp_path: Path) -> None:
    a, b = _node(tmp_path, A), _node(tmp_path, B)
    endpoints = {A: LocalEndpoint(a), B: LocalEndpoint(b)}
    managers = []
    for node in (a, b):
        manager = ReplicaFetcherManager(
            node.replicas.node_id,
            node.replicas,
            lambda info: endpoints[info.node_id],
            FetcherSettings(max_wait_ms=20, backoff_ms=10),
        )
        node.replicas.on_partitions_changed.append(manager.update)
        managers.append(manager)
    try:
        for node in (a, b):
            node.replicas.apply_image(_image(A, 0, 1))
        assert (managers[0].leaders(), managers[1].leaders()) == (set(), {A})
        a.replicas.partitions[T0].append_as_leader(make_batch(3, tag=0))
        await _until(lambda: b.replicas.partitions[T0].high_watermark == 3, "B to replicate")
        for node in (a, b):
            node.replicas.apply_image(_image(B, 1, 2))
        assert (managers[0].leaders(), managers[1].leaders()) == ({B}, set())
        b.replicas.partitions[T0].append_as_leader(make_batch(2, tag=1))
        await _until(lambda: a.replicas.partitions[T0].high_watermark == 5, "A to replicate")
        assert _log_bytes(a) == _log_bytes(b)
        cache = a.replicas.partitions[T0].log.leader_epoch_cache
        assert cache.entries == (EpochEntry(0, 0), EpochEntry(1, 3))
    finally:
        for manager in managers:
            await manager.close()
        a.close()
        b.close()


class NamingEndpoint(LocalEndpoint):
    """A LocalEndpoint that records the partitions each fetch names."""

    def __init__(self, leader: Node) -> None:
        super().__init__(leader)
        self.named: list[set[TopicPartition]] = []

    async def fetch(self, params: FetchParams) -> list[FollowerFetchResult]:
        self.named.append({p.tp for p in params.partitions})
        return await super().fetch(params)


async def test_internal_topics_have_a_fetcher_of_their_own(tmp_path: Path) -> None:
    """A user partition's rounds do not name the leader's internal partitions (issue 10): the
    internal ones are fetched by a second fetcher of the same leader, on its own endpoint,
    and both replicate."""
    leader, follower = _node(tmp_path, A), _node(tmp_path, B)
    internal = dataclasses.replace(
        topic("__consumer_offsets", leaders=[A], replicas=[[A, B]], isr=[[A, B]]), internal=True
    )
    offsets = TopicPartition("__consumer_offsets", 0)
    base = _image(A, 0, 1)
    image = dataclasses.replace(
        base, topics=MappingProxyType({**base.topics, internal.name: internal})
    )
    leader.replicas.apply_image(image)
    endpoints: list[NamingEndpoint] = []

    def factory(_node: NodeInfo) -> NamingEndpoint:
        endpoints.append(NamingEndpoint(leader))
        return endpoints[-1]

    manager = ReplicaFetcherManager(
        B, follower.replicas, factory, FetcherSettings(max_wait_ms=20, backoff_ms=10)
    )
    follower.replicas.on_partitions_changed.append(manager.update)
    try:
        follower.replicas.apply_image(image)
        assert manager.leaders() == {A} and set(manager.fetchers) == {(A, False), (A, True)}
        assert set(manager.fetchers[(A, False)].states) == {T0}
        assert set(manager.fetchers[(A, True)].states) == {offsets}
        assert len(endpoints) == 2  # one connection each: a long poll never holds up the other
        leader.replicas.partitions[T0].append_as_leader(make_batch(3, tag=0))
        leader.replicas.partitions[offsets].append_as_leader(make_batch(2, tag=1))
        fp, fo = follower.replicas.partitions[T0], follower.replicas.partitions[offsets]
        await _until(lambda: (fp.high_watermark, fo.high_watermark) == (3, 2), "both replicated")
        assert all(named == {T0} or named == {offsets} for e in endpoints for named in e.named)
        assert {frozenset(n) for e in endpoints for n in e.named} == {
            frozenset({T0}),
            frozenset({offsets}),
        }
    finally:
        await manager.close()
        leader.close()
        follower.close()


async def test_a_follower_below_the_leaders_log_start_restarts_there(tmp_path: Path) -> None:
    leader, follower = _node(tmp_path, A), _node(tmp_path, B)
    leader.replicas.apply_image(_image(A, 0, 1, isr=(A,)))
    lp = leader.replicas.partitions[T0]
    for i in range(5):
        lp.append_as_leader(make_batch(2, tag=i))
    lp.log.roll()
    assert lp.delete_records(6) == 6
    manager, _ = _fetcher(follower, leader)
    try:
        follower.replicas.apply_image(_image(A, 0, 1, isr=(A,)))
        fp = follower.replicas.partitions[T0]
        await _until(lambda: fp.log_end_offset == 10, "the follower to catch up")
        assert (fp.log_start_offset, fp.high_watermark) == (6, 10)
    finally:
        await manager.close()
        leader.close()
        follower.close()


def test_out_of_range_resets_and_batches_below_the_log_end_are_skipped(tmp_path: Path) -> None:
    leader, follower = _node(tmp_path, A), _node(tmp_path, B)
    try:
        leader.replicas.apply_image(_image(A, 0, 1))
        follower.replicas.apply_image(_image(A, 0, 1))
        lp, fp = leader.replicas.partitions[T0], follower.replicas.partitions[T0]
        lp.append_as_leader(make_batch(3, tag=0))
        lp.append_as_leader(make_batch(3, tag=1))
        everything = _read_raw(leader, 0)
        fp.append_as_follower(_read_raw(leader, 0)[: len(everything) // 2], 0)
        assert fp.log_end_offset == 3
        # A fetch answers whole batches from the one holding the fetch offset: the ones
        # wholly below our log end are dropped before appending.
        assert strip_below(fp, everything) == everything[len(everything) // 2 :]
        # Ahead of the leader's log end (the leader lost a tail): truncate to it.
        fp.append_as_follower(strip_below(fp, everything), 0)
        reset_out_of_range(fp, FollowerFetchResult(T0, log_start_offset=0, log_end_offset=3))
        assert fp.log_end_offset == 3
        # Behind the leader's log start: start afresh there.
        reset_out_of_range(fp, FollowerFetchResult(T0, log_start_offset=20, log_end_offset=30))
        assert (fp.log_start_offset, fp.log_end_offset) == (20, 20)
    finally:
        leader.close()
        follower.close()


class SwallowingEndpoint:
    """A leader that never answers, and whose transport turns a cancellation of the caller
    into an ordinary failure (as Python 3.11's wait_for does when the inner call ended in the
    same loop step as the cancel): the fetcher is not told it was stopped."""

    def __init__(self) -> None:
        self.fetching = asyncio.Event()
        self.swallowed = 0

    async def fetch(self, params: FetchParams) -> list[FollowerFetchResult]:
        self.fetching.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.swallowed += 1
            raise RiverlogError("connection failed", ErrorCode.NETWORK_EXCEPTION) from None
        return []

    async def offsets_for_leader_epoch(
        self, replica_id: int, partitions: list[EpochEndOffsetData]
    ) -> list[EpochEndOffsetResult]:
        return []

    async def close(self) -> None:
        pass


class StallGuard:
    """A thread that sets `stalled` if `loop` runs no callback for 3 s, then calls
    `unblock()` so the test can report the stall instead of hanging. `stop()` ends it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, unblock: Callable[[], None]) -> None:
        self.stalled = threading.Event()
        self._done = threading.Event()
        self._loop = loop
        self._unblock = unblock
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.1):
            ran = threading.Event()
            self._loop.call_soon_threadsafe(ran.set)
            if not ran.wait(3.0):
                self.stalled.set()
                self._unblock()
                return

    def stop(self) -> None:
        self._done.set()
        self._thread.join(5)


@pytest.mark.timeout(30)
async def test_a_stopped_fetcher_whose_cancel_was_swallowed_neither_spins_nor_lingers(
    tmp_path: Path,
) -> None:
    # The storage leader that went silent (issue 12): its fetcher for a dead leader was
    # stopped as it became leader itself, the cancel was lost in the transport, and the
    # surviving task looped on its stale partition without ever awaiting, which blocked the
    # event loop (heartbeats, requests, logging) for good.
    follower = _node(tmp_path, B)
    endpoint = SwallowingEndpoint()
    manager = ReplicaFetcherManager(
        B, follower.replicas, lambda _node: endpoint, FetcherSettings(backoff_ms=10)
    )
    follower.replicas.on_partitions_changed.append(manager.update)
    try:
        follower.replicas.apply_image(_image(A, 0, 1))
        await asyncio.wait_for(endpoint.fetching.wait(), 5)
        fetcher = manager.fetcher(A)
        assert fetcher is not None
        task = fetcher.task
        assert task is not None
        guard = StallGuard(asyncio.get_running_loop(), fetcher.states.clear)
        try:
            follower.replicas.apply_image(_image(B, 1, 2))  # B leads now: A's fetcher stops
            assert A not in manager.leaders()
            await asyncio.wait({task}, timeout=5)
        finally:
            guard.stop()
        assert not guard.stalled.is_set(), "the event loop stopped (a task never awaited)"
        assert endpoint.swallowed == 1
        assert task.done() and not task.cancelled()  # it ended on its own, not by the cancel
    finally:
        await manager.close()
        follower.close()


async def test_a_partition_on_an_offline_log_dir_is_not_fetched(tmp_path: Path) -> None:
    """Its appends would fail (decision 0022): the manager leaves it out, at the next update."""
    leader, follower = _node(tmp_path, A), _node(tmp_path, B)
    offline: set[TopicPartition] = set()
    manager = ReplicaFetcherManager(
        follower.replicas.node_id,
        follower.replicas,
        lambda _node: LocalEndpoint(leader),
        FetcherSettings(max_wait_ms=20, backoff_ms=10),
        is_offline=offline.__contains__,
    )
    follower.replicas.on_partitions_changed.append(manager.update)
    try:
        leader.replicas.apply_image(_image(A, 0, 1))
        follower.replicas.apply_image(_image(A, 0, 1))
        assert set(manager.fetchers[(A, False)].states) == {T0}
        offline.add(T0)
        manager.update()  # what the storage node does when the dir goes offline
        assert A not in manager.leaders()
    finally:
        await manager.close()
        leader.close()
        follower.close()


class TieredEndpoint(LocalEndpoint):
    """The leader as if it had tiered [0, local_start): a fetch below answers
    OFFSET_MOVED_TO_TIERED_STORAGE with its local start."""

    def __init__(self, leader: Node, local_start: int) -> None:
        super().__init__(leader)
        self.local_start = local_start

    async def fetch(self, params: FetchParams) -> list[FollowerFetchResult]:
        [part] = params.partitions
        if part.fetch_offset < self.local_start:
            moved = ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE
            return [FollowerFetchResult(part.tp, moved, "", 0, self.local_start, 0, b"")]
        return await super().fetch(params)


async def test_a_follower_below_the_leaders_local_start_takes_the_remote_state(
    tmp_path: Path,
) -> None:
    """OFFSET_MOVED_TO_TIERED_STORAGE with the remote aux-state hook: while the store fails the
    follower's log is left alone and it asks again; then it starts at the remote segment's next
    offset with the producers and leader epochs from the remote tier, and fetches on."""
    leader, follower = _node(tmp_path, A), _node(tmp_path, B)
    follower.replicas.remote_storage_system_enable = True
    tiered = {"remote.storage.enable": "true"}

    def image() -> ClusterImage:
        base = _image(A, 2, 1)
        info = topic("t", leaders=[A], epoch=2, replicas=[[A, B]], isr=[[A, B]], configs=tiered)
        return dataclasses.replace(base, topics=MappingProxyType({"t": info}))

    leader.replicas.apply_image(image())
    lp = leader.replicas.partitions[T0]
    for i in range(5):
        lp.append_as_leader(make_batch(2, tag=i))
    producer = ProducerStateEntry(77, 3)
    producer.batches.append(BatchMetadata(0, 9, 0, 5, 1000))
    aux = RemoteLogAuxState(6, ((1, 0), (2, 4)), encode([producer]))
    calls: list[tuple[TopicPartition, int]] = []

    async def remote_aux(tp: TopicPartition, local_start: int) -> RemoteLogAuxState | None:
        calls.append((tp, local_start))
        if len(calls) == 1:
            raise RemoteStorageError("the store is down")
        return aux

    endpoint = TieredEndpoint(leader, 6)
    manager = ReplicaFetcherManager(
        B,
        follower.replicas,
        lambda _node: endpoint,
        FetcherSettings(max_wait_ms=20, backoff_ms=10),
        remote_aux=remote_aux,
    )
    follower.replicas.on_partitions_changed.append(manager.update)
    try:
        follower.replicas.apply_image(image())
        fp = follower.replicas.partitions[T0]
        await _until(lambda: fp.log_end_offset == 10, "the follower to catch up")
        assert calls == [(T0, 6), (T0, 6)]  # asked again after the store failed
        assert fp.log.local_log_start_offset == 6
        assert fp.log.leader_epoch_cache.entries[:2] == (EpochEntry(1, 0), EpochEntry(2, 4))
        entry = fp.producer_state.last_entry(77)
        assert entry is not None and entry.producer_epoch == 3 and entry.last_seq == 9
    finally:
        await manager.close()
        leader.close()
        follower.close()
