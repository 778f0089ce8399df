"""The shard's run-time contract with a fake storage: it loads before answering
(COORDINATOR_LOAD_IN_PROGRESS until then), writes with its ownership epoch as producer epoch
and sequences from 0, replays only what was written, and a write refused for an older epoch
fences it (NOT_COORDINATOR)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

import pytest
from coord_harness import OFFSETS, new_groups

from riverlog.common.clock import SYSTEM_CLOCK
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.services.coordinator.config import CoordinatorConfig
from riverlog.services.coordinator.coordinator import GroupCoordinator
from riverlog.services.coordinator.offsets.store import (
    CommitItem,
    CommitRequest,
    TxnCommitRequest,
)
from riverlog.services.coordinator.records import (
    CoordinatorRecord,
    LogRecord,
    OffsetValue,
    TxnProducer,
    offset_record,
)
from riverlog.services.coordinator.shard import Shard, write_error

TP = TopicPartition("t", 0)


class FakeStorage:
    """A partition log in memory; `gone` offsets are those the log cleaner removed.
    Transactional batches and markers are kept with their producer, as storage has them."""

    def __init__(self, log: list[CoordinatorRecord], gone: frozenset[int] = frozenset()) -> None:
        self.log: list[LogRecord] = [LogRecord(-1, r.key, r.value) for r in log]
        self.gone = gone
        self.appends: list[tuple[int, int, int]] = []
        self.txn_appends: list[TxnProducer] = []
        self.markers: list[tuple[int, int, bool]] = []
        self.refuse: ErrorCode | None = None
        self.refuse_markers: ErrorCode | None = None
        self.refuse_txn: ErrorCode | None = None
        self.loading = asyncio.Event()

    async def read(self, partition: int) -> AsyncIterator[LogRecord]:
        await self.loading.wait()
        for offset, r in enumerate(self.log):
            if offset not in self.gone:
                yield replace(r, offset=offset)

    async def append(
        self,
        partition: int,
        records: Sequence[CoordinatorRecord],
        producer_epoch: int,
        base_sequence: int,
        timestamp_ms: int,
        timeout_ms: int,
        producer: TxnProducer | None = None,
        txn_records: Sequence[CoordinatorRecord] = (),
    ) -> int:
        if self.refuse is not None:
            raise RiverlogError(code=self.refuse)
        if producer is not None and self.refuse_txn is not None:
            raise RiverlogError(code=self.refuse_txn)  # the whole payload, as storage
        self.appends.append((partition, producer_epoch, base_sequence))
        self.log.extend(LogRecord(-1, r.key, r.value) for r in records)
        if producer is not None:
            self.txn_appends.append(producer)
            last = producer.base_sequence + len(txn_records) - 1
            pid, epoch = producer.producer_id, producer.producer_epoch
            self.log.extend(
                LogRecord(-1, r.key, r.value, pid, epoch, last, transactional=True)
                for r in txn_records
            )
        return len(self.log) - 1

    async def write_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        timeout_ms: int,
    ) -> None:
        if self.refuse_markers is not None:
            raise RiverlogError(code=self.refuse_markers)
        self.markers.append((producer_id, producer_epoch, committed))
        self.log.append(LogRecord(-1, None, None, producer_id, producer_epoch, -1, True, committed))


def commit(group: str, offset: int) -> object:
    req = CommitRequest(group, -1, "", None, [CommitItem(TP, offset)])
    return lambda coord, reply: coord.offsets.commit(req, reply)


def fetch(group: str) -> object:
    def handler(coord: GroupCoordinator, reply: object) -> object:
        from riverlog.services.coordinator.group.outcome import NOTHING

        reply(coord.offsets.fetch(group, [TP])[0].offset)  # type: ignore[operator]
        return NOTHING

    return handler


async def _until_ready(shard: Shard) -> None:
    async with asyncio.timeout(5):
        while not shard.ready:
            await asyncio.sleep(0.01)


async def test_loads_then_serves_and_writes_with_its_epoch() -> None:
    previous = [offset_record("g", TP, OffsetValue(17, -1, "", 0))]
    storage = FakeStorage(previous)
    shard = Shard(OFFSETS, 3, 7, CoordinatorConfig(), SYSTEM_CLOCK, storage, new_groups)
    shard.start()
    try:
        with pytest.raises(RiverlogError) as loading:
            await shard.submit(fetch("g"))
        assert loading.value.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        storage.loading.set()
        await _until_ready(shard)
        assert await shard.submit(fetch("g")) == 17
        assert await shard.submit(commit("g", 20)) == [(TP, ErrorCode.NONE)]
        assert await shard.submit(commit("h", 1)) == [(TP, ErrorCode.NONE)]
        # the owner marker (the fence) first, then each write: epoch 7, sequences from 0
        assert storage.appends == [(3, 7, 0), (3, 7, 1), (3, 7, 2)]
        assert storage.log[1].key == b'{"c":-1,"e":7,"v":3}'
        assert await shard.submit(fetch("g")) == 20
    finally:
        await shard.stop()


async def test_a_write_refused_for_an_older_epoch_fences_the_shard() -> None:
    storage = FakeStorage([])
    storage.loading.set()
    shard = Shard(OFFSETS, 0, 1, CoordinatorConfig(), SYSTEM_CLOCK, storage, new_groups)
    shard.start()
    try:
        await _until_ready(shard)
        storage.refuse = ErrorCode.INVALID_PRODUCER_EPOCH
        assert await shard.submit(commit("g", 5)) == [(TP, ErrorCode.NOT_COORDINATOR)]
        assert shard.fenced
        storage.refuse = None
        assert await shard.submit(fetch("g")) == -1  # never replayed
    finally:
        await shard.stop()


async def test_parked_requests_learn_not_coordinator_when_the_shard_stops() -> None:
    from riverlog.services.coordinator.group.member import JoinRequest, Protocol

    storage = FakeStorage([])
    storage.loading.set()
    config = CoordinatorConfig(group_min_session_timeout_ms=10)
    shard = Shard(
        OFFSETS,
        0,
        1,
        config,
        SYSTEM_CLOCK,
        storage,
        lambda: GroupCoordinator(config, SYSTEM_CLOCK, lambda t: 1),
    )
    shard.start()
    await _until_ready(shard)
    protocols = (Protocol("range", b""),)
    first = JoinRequest("g", "", "consumer", protocols, 60_000, 60_000, group_instance_id="a")
    second = JoinRequest("g", "", "consumer", protocols, 60_000, 60_000, group_instance_id="b")
    joined = await shard.submit(lambda c, r: c.groups.join(first, r))
    assert joined.error_code == ErrorCode.NONE and joined.generation_id == 1
    # the second member starts a rebalance that waits for the first to rejoin: parked
    parked = asyncio.create_task(shard.submit(lambda c, r: c.groups.join(second, r)))
    await asyncio.sleep(0.05)
    assert not parked.done()
    await shard.stop()
    with pytest.raises(RiverlogError) as moved:
        await parked
    assert moved.value.code == ErrorCode.NOT_COORDINATOR


def test_write_errors_map_as_kafka() -> None:
    assert write_error(ErrorCode.NOT_ENOUGH_REPLICAS) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert write_error(ErrorCode.NOT_LEADER_OR_FOLLOWER) == ErrorCode.NOT_COORDINATOR
    assert write_error(ErrorCode.INVALID_PRODUCER_EPOCH) == ErrorCode.NOT_COORDINATOR
    assert write_error(ErrorCode.MESSAGE_TOO_LARGE) == ErrorCode.UNKNOWN_SERVER_ERROR


async def test_a_compacted_log_with_gaps_and_tombstones_loads_the_live_state() -> None:
    """What the log cleaner leaves: the latest record of each key at its original offset, and
    tombstones (until delete.retention.ms). Loading it gives what loading the whole history
    gave."""
    other = TopicPartition("t", 1)
    history = [
        offset_record("g", TP, OffsetValue(1, -1, "", 0)),  # 0: replaced by 3
        offset_record("g", other, OffsetValue(5, -1, "", 0)),  # 1: deleted by 4
        offset_record("gone", TP, OffsetValue(8, -1, "", 0)),  # 2: deleted by 5 (group deleted)
        offset_record("g", TP, OffsetValue(2, -1, "", 0)),  # 3
        offset_record("g", other, None),  # 4: tombstone, kept
        offset_record("gone", TP, None),  # 5: tombstone, kept
        offset_record("h", TP, OffsetValue(4, -1, "", 0)),  # 6
    ]
    whole = FakeStorage(history)
    compacted = FakeStorage(history, gone=frozenset({0, 1, 2}))
    loaded: list[dict[str, dict[TopicPartition, int]]] = []
    for storage in (whole, compacted):
        storage.loading.set()
        shard = Shard(OFFSETS, 0, 2, CoordinatorConfig(), SYSTEM_CLOCK, storage, new_groups)
        shard.start()
        try:
            await _until_ready(shard)
            offsets = shard.coord.offsets.offsets
            loaded.append({g: {tp: v.offset for tp, v in o.items()} for g, o in offsets.items()})
        finally:
            await shard.stop()
    assert loaded[0] == loaded[1] == {"g": {TP: 2}, "h": {TP: 4}}


def txn_commit(group: str, offset: int, epoch: int = 0) -> object:
    req = TxnCommitRequest("tx", group, 900, epoch, -1, "", None, [CommitItem(TP, offset)])
    return lambda coord, reply: coord.offsets.txn_commit(req, reply)


def end_txn(committed: bool, epoch: int = 1) -> object:
    return lambda coord, reply: coord.end_transaction(900, epoch, committed, 0, reply)


async def test_txn_offsets_are_the_producers_batch_and_count_once_the_marker_is_written() -> None:
    storage = FakeStorage([offset_record("g", TP, OffsetValue(3, -1, "", 0))])
    storage.loading.set()
    shard = Shard(OFFSETS, 2, 5, CoordinatorConfig(), SYSTEM_CLOCK, storage, new_groups)
    shard.start()
    try:
        await _until_ready(shard)
        assert await shard.submit(txn_commit("g", 10)) == [(TP, ErrorCode.NONE)]
        assert await shard.submit(txn_commit("g", 11)) == [(TP, ErrorCode.NONE)]
        # the producer's own id, epoch and sequences, each behind a batch of the owner
        assert storage.txn_appends == [
            TxnProducer(900, 0, 0, "tx"),
            TxnProducer(900, 0, 1, "tx"),
        ]
        assert storage.appends == [(2, 5, 0), (2, 5, 1), (2, 5, 2)]
        assert await shard.submit(fetch("g")) == 3
        assert await shard.submit(end_txn(True)) == ErrorCode.NONE
        assert storage.markers == [(900, 1, True)]
        assert storage.appends[-1] == (2, 5, 3)  # the fence check after the marker
        assert await shard.submit(fetch("g")) == 11
    finally:
        await shard.stop()
    # a new owner loads the same: committed
    again = Shard(OFFSETS, 2, 6, CoordinatorConfig(), SYSTEM_CLOCK, storage, new_groups)
    again.start()
    try:
        await _until_ready(again)
        assert await again.submit(fetch("g")) == 11
    finally:
        await again.stop()


async def test_a_zombie_owner_refused_after_the_marker_does_not_apply_it() -> None:
    storage = FakeStorage([])
    storage.loading.set()
    shard = Shard(OFFSETS, 0, 1, CoordinatorConfig(), SYSTEM_CLOCK, storage, new_groups)
    shard.start()
    try:
        await _until_ready(shard)
        await shard.submit(txn_commit("g", 10))
        storage.refuse = ErrorCode.INVALID_PRODUCER_EPOCH  # a newer owner wrote its marker
        assert await shard.submit(end_txn(True)) == ErrorCode.NOT_COORDINATOR
        assert shard.fenced
        storage.refuse = None
        assert await shard.submit(fetch("g")) == -1  # not applied: the new owner will
    finally:
        await shard.stop()


async def test_a_refused_marker_answers_the_storage_code_and_changes_nothing() -> None:
    storage = FakeStorage([])
    storage.loading.set()
    shard = Shard(OFFSETS, 0, 1, CoordinatorConfig(), SYSTEM_CLOCK, storage, new_groups)
    shard.start()
    try:
        await _until_ready(shard)
        await shard.submit(txn_commit("g", 10))
        storage.refuse_markers = ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert await shard.submit(end_txn(True)) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert not shard.fenced
        storage.refuse_markers = None
        assert await shard.submit(fetch("g")) == -1
        assert await shard.submit(end_txn(True)) == ErrorCode.NONE  # the retry
        assert await shard.submit(fetch("g")) == 10
    finally:
        await shard.stop()


async def test_a_txn_write_refused_for_its_epoch_fences_the_producer_not_the_owner() -> None:
    storage = FakeStorage([])
    storage.loading.set()
    shard = Shard(OFFSETS, 0, 1, CoordinatorConfig(), SYSTEM_CLOCK, storage, new_groups)
    shard.start()
    try:
        await _until_ready(shard)
        storage.refuse_txn = ErrorCode.INVALID_PRODUCER_EPOCH
        assert await shard.submit(txn_commit("g", 10)) == [(TP, ErrorCode.PRODUCER_FENCED)]
        assert not shard.fenced
        assert storage.txn_appends == []
    finally:
        await shard.stop()


async def test_a_zombie_owner_writes_no_transactional_offsets() -> None:
    """Its batch goes in front of the producer's, in the same payload: refused for its epoch,
    neither is written, and it answers NOT_COORDINATOR (the gateway retries at the new owner,
    which then holds the offsets pending)."""
    storage = FakeStorage([])
    storage.loading.set()
    shard = Shard(OFFSETS, 0, 1, CoordinatorConfig(), SYSTEM_CLOCK, storage, new_groups)
    shard.start()
    try:
        await _until_ready(shard)
        storage.refuse = ErrorCode.INVALID_PRODUCER_EPOCH
        assert await shard.submit(txn_commit("g", 10)) == [(TP, ErrorCode.NOT_COORDINATOR)]
        assert shard.fenced
        assert storage.txn_appends == []
    finally:
        await shard.stop()
