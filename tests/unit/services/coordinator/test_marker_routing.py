"""The marker channel (decision 0031): a `__consumer_offsets` partition's marker goes to the
coordinator owning that partition (which also commits or drops the pending offsets), every
other partition's to its storage leader; each is retried until written (the owner moving or
loading) and given up only on Kafka's answers; `done` runs once all are in."""

from __future__ import annotations

import asyncio

import pytest

from riverlog.common.cluster import ClusterImage
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.services.coordinator.peers.markers import StorageMarkerChannel
from riverlog.services.coordinator.txn.metadata import TransactionMetadata
from riverlog.services.coordinator.txn.state import TransactionState

pytestmark = pytest.mark.timeout(30)

DATA, OFFSETS = TopicPartition("orders", 0), TopicPartition("__consumer_offsets", 2)


class Storage:
    def __init__(self) -> None:
        self.calls: list[tuple[TopicPartition, int, int, bool]] = []

    async def write_txn_marker(
        self, tp: TopicPartition, pid: int, epoch: int, committed: bool, ce: int, timeout: int
    ) -> None:
        self.calls.append((tp, pid, epoch, committed))


class Owners:
    """The owning coordinator: refuses with each of `refusals` in turn, then takes it."""

    def __init__(self, *refusals: ErrorCode) -> None:
        self.refusals = list(refusals)
        self.calls: list[tuple[int, int, int, bool]] = []

    async def write_marker(
        self, partition: int, pid: int, epoch: int, committed: bool, ce: int, timeout: int
    ) -> None:
        self.calls.append((partition, pid, epoch, committed))
        if self.refusals:
            raise RiverlogError(code=self.refusals.pop(0))


async def ended(owners: Owners, storage: Storage, state: TransactionState) -> None:
    channel = StorageMarkerChannel(storage, ClusterImage.empty, owners)  # type: ignore[arg-type]
    meta = TransactionMetadata("t", 7, 4, 60_000, state, frozenset({DATA, OFFSETS}))
    done = asyncio.Event()
    channel.send(meta, done.set)
    try:
        async with asyncio.timeout(10):
            await done.wait()
    finally:
        await channel.close()


async def test_the_offsets_partitions_marker_goes_to_its_owner_until_it_takes_it() -> None:
    owners = Owners(ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    storage = Storage()
    await ended(owners, storage, TransactionState.PREPARE_COMMIT)
    assert storage.calls == [(DATA, 7, 4, True)]  # the data partition: its leader
    assert owners.calls == [(2, 7, 4, True)] * 3  # retried until the current owner had it


async def test_kafkas_give_ups_end_the_retries() -> None:
    owners = Owners(ErrorCode.INVALID_PRODUCER_EPOCH)
    storage = Storage()
    await ended(owners, storage, TransactionState.PREPARE_ABORT)
    assert owners.calls == [(2, 7, 4, False)]
    assert storage.calls == [(DATA, 7, 4, False)]
