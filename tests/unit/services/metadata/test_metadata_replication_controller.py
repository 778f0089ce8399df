"""ReplicationController on fakes of the election and the image (no etcd): a node's death is
written in transactions of at most PARTITIONS_PER_TXN partitions, each guarded by the
partition keys' revisions under the controller fence; a raced chunk is decided again; a
restart (new incarnation) is told from a return; standbys write nothing; AlterPartition from
a node that is not registered is refused."""

from __future__ import annotations

import asyncio
from types import MappingProxyType

import pytest

from riverlog.common.cluster.image import ClusterImage, NodeInfo, PartitionInfo, TopicInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.metadata.config import MetadataConfig
from riverlog.services.metadata.controller.alter_partition import AlterPartitionItem
from riverlog.services.metadata.controller.replication import (
    PARTITIONS_PER_TXN,
    ReplicationController,
    decode_incarnations,
)
from riverlog.services.metadata.records import partition_decode
from riverlog.services.metadata.store import Entry, Keys


class FakeElection:
    def __init__(self) -> None:
        self.is_controller = True
        self.writes: list[tuple[list, list]] = []
        self.refuse: set[int] = set()  # indexes of writes whose compares "fail"
        self.image: FakeImage | None = None

    async def write(self, compares, ops):
        index = len(self.writes)
        self.writes.append((list(compares), list(ops)))
        if index in self.refuse:
            return None
        assert self.image is not None
        self.image.apply(ops)
        return index + 1


class FakeImage:
    def __init__(self, topics: list[TopicInfo], nodes: dict[int, int]) -> None:
        self.keys = Keys("/t/")
        self.incarnations_record: bytes | None = None
        self.revisions: dict[str, int] = {}
        self.listeners: list = []
        self.set(topics, nodes)

    def set(self, topics: list[TopicInfo], nodes: dict[int, int]) -> None:
        node_infos = {
            ("storage", n): NodeInfo("storage", n, "h", 1000 + n, incarnation=inc)
            for n, inc in nodes.items()
        }
        self.cluster = ClusterImage(
            version=1,
            nodes=MappingProxyType(node_infos),
            topics=MappingProxyType({t.name: t for t in topics}),
        )
        for t in topics:
            for p in t.partitions:
                self.revisions.setdefault(self.keys.partition(t.name, p.partition), 7)

    def add_listener(self, callback) -> None:
        self.listeners.append(callback)

    def apply(self, ops) -> None:
        topics = dict(self.cluster.topics)
        for op in ops:
            if op.key == self.keys.storage_incarnations:
                self.incarnations_record = op.value
                continue
            topic, _, number = (
                self.keys.relative(op.key).removeprefix("partitions/").rpartition("/")
            )
            new = partition_decode(int(number), op.value)
            t = topics[topic]
            parts = tuple(new if p.partition == new.partition else p for p in t.partitions)
            topics[topic] = TopicInfo(t.name, t.topic_id, parts, t.configs)
            self.revisions[op.key] += 1
        self.set(
            list(topics.values()), {n.node_id: n.incarnation for n in self.cluster.nodes.values()}
        )


def image_record(image: FakeImage) -> dict[int, int] | None:
    assert image.incarnations_record is not None
    return decode_incarnations(image.incarnations_record)


def topic(n: int, leader: int = 1) -> TopicInfo:
    parts = tuple(PartitionInfo(p, leader, 0, (1, 2), (1, 2), 0) for p in range(n))
    return TopicInfo("t", "id", parts)


def controller(image: FakeImage) -> tuple[ReplicationController, FakeElection]:
    election = FakeElection()
    election.image = image
    rc = ReplicationController(election, image, MetadataConfig(instance_id=1))  # type: ignore[arg-type]
    rc._incarnations = {1: 1, 2: 1}
    return rc, election


def test_a_death_is_written_in_fenced_revision_checked_chunks():
    n = 2 * PARTITIONS_PER_TXN + 50
    image = FakeImage([topic(n)], {2: 1})  # node 1 is gone
    rc, election = controller(image)
    written = asyncio.run(rc.reconcile_once())
    assert len(written) == n
    *partition_writes, (_, [record]) = election.writes
    assert [len(ops) for _, ops in partition_writes] == [PARTITIONS_PER_TXN] * 2 + [50]
    # then what the controller acted on, for a successor to tell restarts from returns
    assert decode_incarnations(record.value) == {2: 1} == image_record(image)
    for compares, ops in partition_writes:
        assert [c.key for c in compares] == [o.key for o in ops]
        assert all(c.mod_revision == 7 for c in compares)
        assert len(compares) + 1 <= 128 and len(ops) <= 128  # + the controller fence
    assert all(p.leader == 2 and p.leader_epoch == 1 for p in image.cluster.topics["t"].partitions)
    assert rc.leader_elections == n and rc._incarnations == {2: 1}
    writes = len(election.writes)
    assert asyncio.run(rc.reconcile_once()) == []  # settled
    assert len(election.writes) == writes  # nothing written, not even the record again


def test_a_raced_chunk_is_decided_again():
    image = FakeImage([topic(PARTITIONS_PER_TXN + 1)], {2: 1})
    rc, election = controller(image)
    election.refuse = {0}

    async def twice():
        first = await rc.reconcile_once()
        assert rc._wake.is_set()  # asked to decide again
        second = await rc.reconcile_once()
        return first, second

    first, second = asyncio.run(twice())
    assert len(first) == 1 and len(second) == PARTITIONS_PER_TXN


def test_a_restart_moves_leadership_a_return_does_not():
    image = FakeImage([topic(2)], {1: 2, 2: 1})  # node 1 has a new incarnation
    rc, _ = controller(image)
    written = asyncio.run(rc.reconcile_once())
    assert {p.leader for p in image.cluster.topics["t"].partitions} == {2}
    assert all(u.after.isr == (2,) for u in written)


def test_standby_and_unknown_senders_are_refused():
    image = FakeImage([topic(1)], {1: 1, 2: 1})
    rc, election = controller(image)
    item = AlterPartitionItem("t", 0, 0, (1,), 0)
    with pytest.raises(RiverlogError) as err:
        asyncio.run(rc.alter_partition(3, 1, [item]))
    assert err.value.code == ErrorCode.STALE_BROKER_EPOCH
    with pytest.raises(RiverlogError) as err:
        asyncio.run(rc.alter_partition(1, 9, [item]))
    assert err.value.code == ErrorCode.STALE_BROKER_EPOCH
    [outcome] = asyncio.run(rc.alter_partition(1, 1, [item]))
    assert outcome.error_code == ErrorCode.NONE and outcome.state.isr == (1,)
    election.is_controller = False
    with pytest.raises(RiverlogError) as err:
        asyncio.run(rc.elect_leaders(True, None))
    assert err.value.code == ErrorCode.NOT_CONTROLLER


def test_a_successor_tells_a_restart_during_the_gap_from_the_record():
    image = FakeImage([topic(2)], {1: 5, 2: 1})  # node 1 restarted while nobody controlled
    image.store = FakeStore({image.keys.storage_incarnations: b'{"1": 4, "2": 1}'})
    rc, _ = controller(image)
    rc._incarnations = {}

    async def take_over():
        await rc._load_incarnations()
        return await rc.reconcile_once()

    written = asyncio.run(take_over())
    assert {u.after.leader for u in written} == {2}
    assert all(u.after.leader_epoch == 1 for u in written)
    assert image_record(image) == {1: 5, 2: 1}


class FakeStore:
    def __init__(self, values: dict[str, bytes]) -> None:
        self.values = values

    async def get(self, key: str):
        value = self.values.get(key)
        return None if value is None else Entry(value, 1, 0)
