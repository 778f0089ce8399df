"""Ownership of `__consumer_offsets` partitions by one instance (issue 10): which shards start
and stop for an image, that a stopping instance declines the partitions the controller hands
it while others leave, that `stop()` cancels loads in progress, and that stopping a shard
never swallows the cancellation of the task that stops it (the metadata watcher's, at
shutdown)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import MappingProxyType

import pytest
from coord_harness import OFFSETS, new_groups

from riverlog.common.clock import SYSTEM_CLOCK
from riverlog.common.cluster import ClusterImage
from riverlog.common.cluster.image import (
    CoordinatorAssignment,
    PartitionInfo,
    TopicInfo,
)
from riverlog.services.coordinator.config import CoordinatorConfig
from riverlog.services.coordinator.coordinator import GroupCoordinator
from riverlog.services.coordinator.ownership import (
    Ownership,
    OwnershipChange,
    groups_kind,
    plan_ownership,
    transactions_kind,
)
from riverlog.services.coordinator.records import CoordinatorRecord, LogRecord
from riverlog.services.coordinator.shard import Shard

NODE = 2
Listener = Callable[[ClusterImage, ClusterImage], Awaitable[None]]


def test_plan_starts_new_partitions_and_stops_moved_or_re_epoched_ones() -> None:
    change = plan_ownership({0: 1, 1: 1, 2: 4}, {1: 1, 2: 5, 3: 2}, stopping=False)
    assert change == OwnershipChange(stop=(0, 2), start={2: 5, 3: 2})


def test_plan_of_a_stopping_instance_declines_every_new_partition() -> None:
    change = plan_ownership({0: 1, 1: 1}, {0: 1, 2: 3, 3: 3}, stopping=True)
    assert change.start == {}
    assert change.declined == (2, 3)
    assert change.stop == (1,)  # what moved away still stops
    assert plan_ownership({0: 1}, {0: 1}, stopping=True) == OwnershipChange()


class BlockingStorage:
    """A storage whose reads and appends never finish, and whose calls, when cancelled, take
    a moment to unwind (as a gRPC call does): every shard stays loading."""

    def __init__(self) -> None:
        self.calls = 0
        self.cancelled = 0

    async def _block(self) -> None:
        self.calls += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            await asyncio.sleep(0.01)
            raise

    async def append(
        self,
        partition: int,
        records: Sequence[CoordinatorRecord],
        producer_epoch: int,
        base_sequence: int,
        timestamp_ms: int,
        timeout_ms: int,
        producer: object = None,
        txn_records: Sequence[CoordinatorRecord] = (),
    ) -> int:
        await self._block()
        return 0

    async def read(self, partition: int) -> AsyncIterator[LogRecord]:
        await self._block()
        yield LogRecord(0, None, None)


class FakeWatcher:
    def __init__(self) -> None:
        self.image = ClusterImage.empty()
        self.listeners: list[Listener] = []

    def add_listener(self, callback: Listener) -> None:
        self.listeners.append(callback)

    def remove_listener(self, callback: Listener) -> None:
        self.listeners.remove(callback)

    async def publish(self, image: ClusterImage) -> None:
        old, self.image = self.image, image
        for listener in list(self.listeners):
            await listener(old, image)


def image(owners: dict[int, tuple[int, int]]) -> ClusterImage:
    """partition → (coordinator id, epoch)."""
    assignments = {p: CoordinatorAssignment(p, c, e) for p, (c, e) in owners.items()}
    return ClusterImage(version=1, coordinators=MappingProxyType(assignments))


def ownership(storage: BlockingStorage, watcher: FakeWatcher) -> Ownership[GroupCoordinator]:
    kind = groups_kind(lambda _notify: new_groups())
    return Ownership(NODE, CoordinatorConfig(), SYSTEM_CLOCK, watcher, storage, kind)


async def _until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(5):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_a_stopping_instance_takes_no_partition_and_stops_its_loads() -> None:
    storage, watcher = BlockingStorage(), FakeWatcher()
    owned = ownership(storage, watcher)
    watcher.image = image({0: (NODE, 1), 1: (NODE, 1), 2: (1, 1), 3: (1, 1)})
    await owned.attach()
    assert sorted(owned.shards) == [0, 1]
    await _until(lambda: storage.calls == 2)  # both shards are loading (writing their marker)

    owned.begin_stop()
    # the other instance unregisters: the controller hands its partitions to this one
    await watcher.publish(image({p: (NODE, 2 if p >= 2 else 1) for p in range(4)}))
    assert sorted(owned.shards) == [0, 1]
    assert storage.calls == 2  # nothing new started loading

    await owned.stop()
    assert owned.shards == {}
    assert storage.cancelled == 2
    assert watcher.listeners == []


async def test_shard_stop_does_not_swallow_the_cancellation_of_its_caller() -> None:
    storage = BlockingStorage()
    shard = Shard(OFFSETS, 0, 1, CoordinatorConfig(), SYSTEM_CLOCK, storage, new_groups)
    shard.start()
    await _until(lambda: storage.calls == 1)
    stopper = asyncio.create_task(shard.stop())
    await _until(lambda: storage.cancelled == 1)  # the shard's task is unwinding
    stopper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopper
    assert stopper.cancelled()


async def test_a_watcher_cancelled_while_stopping_a_moved_shard_ends() -> None:
    storage, watcher = BlockingStorage(), FakeWatcher()
    owned = ownership(storage, watcher)
    watcher.image = image({0: (NODE, 1)})
    await owned.attach()
    await _until(lambda: storage.calls == 1)
    # the image moves the partition away; the watcher task is cancelled during the stop
    follower = asyncio.create_task(watcher.publish(image({0: (1, 2)})))
    await _until(lambda: storage.cancelled == 1)
    follower.cancel()
    with pytest.raises(asyncio.CancelledError):
        await follower
    assert owned.shards == {}


def test_transaction_partitions_go_with_the_offsets_partition_they_map_onto() -> None:
    def topic(name: str, count: int) -> TopicInfo:
        return TopicInfo(
            name, name, tuple(PartitionInfo(p, 1, 0, (1,), (1,)) for p in range(count))
        )

    owners = {0: CoordinatorAssignment(0, NODE, 4), 1: CoordinatorAssignment(1, NODE + 1, 2)}
    owners[2] = CoordinatorAssignment(2, NODE, 9)
    snapshot = ClusterImage(
        version=1,
        topics=MappingProxyType(
            {
                "__consumer_offsets": topic("__consumer_offsets", 3),
                "__transaction_state": topic("__transaction_state", 7),
            }
        ),
        coordinators=MappingProxyType(owners),
    )
    kind = transactions_kind(lambda _notify: new_groups())
    txn = Ownership(NODE, CoordinatorConfig(), SYSTEM_CLOCK, FakeWatcher(), BlockingStorage(), kind)
    assert txn.assigned(snapshot) == {0: 4, 3: 4, 6: 4, 2: 9, 5: 9}
