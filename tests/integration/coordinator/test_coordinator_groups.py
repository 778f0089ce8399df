"""Consumer groups on real processes (etcd, metadata, storage, two coordinators, a gateway),
with members that speak the raw gRPC API: server-side assignment of 12 partitions, a member
that stops heartbeating, a commit from an old generation, a static member restarting, and a
coordinator killed with SIGKILL whose partition another instance takes over."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from group_client import RawMember, describe, stub_for, wait_until

from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder
from riverlog.common.rpc.channel import sync_channel
from riverlog.common.types import TopicPartition
from riverlog.v1 import admin_pb2, common_pb2, data_pb2, storage_pb2_grpc
from riverlog.v1 import coordinator_pb2 as pb

E = ErrorCode
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def groups_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        Path(tmp_path_factory.mktemp("groups")),
        storage_nodes=1,
        metadata_nodes=1,
        gateways=1,
        coordinators=2,
        extra_config={
            "metadata": {
                "broker.session.timeout.ms": "2000",
                "broker.heartbeat.interval.ms": "300",
                "offsets.topic.num.partitions": "4",
            },
            "coordinator": {
                "group.min.session.timeout.ms": "500",
                "group.initial.rebalance.delay.ms": "0",
            },
        },
    ) as local:
        yield local


def _stable(address: str, group: str, members: list[RawMember]) -> pb.DescribedGroup | None:
    d = describe(address, group)
    if d.group_state != "Stable" or len(d.members) != len(members):
        return None
    if any(m.history.get(d.generation_id) is None for m in members):
        return None
    return d


def _assert_no_partition_owned_twice(members: list[RawMember]) -> None:
    generations = {g for m in members for g in m.history}
    for generation in generations:
        owned = [tp for m in members for tp in m.history.get(generation, [])]
        assert len(owned) == len(set(owned)), f"generation {generation}: {owned}"


def test_members_share_partitions_and_rebalance_after_a_silent_member(
    groups_cluster: LocalCluster,
) -> None:
    gateway = groups_cluster.gateway_address
    topic = unique_topic_name("grp")
    groups_cluster.create_topic(topic, partitions=12)
    group = unique_topic_name("group")
    members = [RawMember(gateway, group, [topic], session_ms=2_000) for _ in range(3)]
    for member in members:
        member.start()
    try:
        d = wait_until(lambda: _stable(gateway, group, members), 90, "a stable group of 3")
        generation = d.generation_id
        owned = sorted(tp for m in members for tp in m.history[generation])
        assert owned == [TopicPartition(topic, p) for p in range(12)]
        assert d.protocol_data == "range"
        assert {m.client_id for m in d.members} == {"raw-member"}

        # one member stops heartbeating (no LeaveGroup): the rest rebalance after its session
        silent = members.pop()
        silent.stop(leave=False)
        d2 = wait_until(lambda: _stable(gateway, group, members), 90, "a stable group of 2")
        assert d2.generation_id > generation
        owned = sorted(tp for m in members for tp in m.history[d2.generation_id])
        assert owned == [TopicPartition(topic, p) for p in range(12)]
        _assert_no_partition_owned_twice([*members, silent])

        # a commit from an old generation is refused; the current one is accepted
        survivor = members[0]
        tp = survivor.history[d2.generation_id][0]
        assert survivor.commit({tp: 5}, generation=generation) == [E.ILLEGAL_GENERATION]
        assert wait_until(
            lambda: survivor.commit({tp: 5}) == [E.NONE], 30, "a current-generation commit"
        )
        assert all(m.error is None for m in members), [m.error for m in members]
    finally:
        for member in members:
            member.stop()


def test_static_member_restart_keeps_its_partitions_without_rebalance(
    groups_cluster: LocalCluster,
) -> None:
    gateway = groups_cluster.gateway_address
    topic = unique_topic_name("static")
    groups_cluster.create_topic(topic, partitions=6)
    group = unique_topic_name("static-group")
    a = RawMember(gateway, group, [topic], instance_id="a", session_ms=20_000)
    b = RawMember(gateway, group, [topic], instance_id="b", session_ms=20_000)
    a.start(), b.start()
    restarted: RawMember | None = None
    try:
        d = wait_until(lambda: _stable(gateway, group, [a, b]), 90, "a stable static group")
        generation = d.generation_id
        before = b.history[generation]
        b.stop(leave=False)  # the process "dies" ...
        restarted = RawMember(gateway, group, [topic], instance_id="b", session_ms=20_000)
        response = restarted.join()  # ... and comes back with no member id, same instance id
        assert response.generation_id == generation
        assert restarted.member_id != b.member_id
        assert restarted.sync() == E.NONE
        assert restarted.assignment == before
        after = describe(gateway, group)
        assert (after.group_state, after.generation_id) == ("Stable", generation)
        assert a.heartbeat() == E.NONE
        assert b.heartbeat() == E.FENCED_INSTANCE_ID  # the old incarnation is fenced
    finally:
        a.stop()
        if restarted is not None:
            restarted.stop()


def _zombie_append(cluster: LocalCluster, partition: int, epoch: int) -> ErrorCode:
    """Append to __consumer_offsets-`partition` as its coordinator with `epoch` would."""
    builder = BatchBuilder(producer_id=(1 << 62) + partition, producer_epoch=epoch, base_sequence=0)
    builder.append(0, b'{"g":"zombie","v":2}', None)
    request = data_pb2.ProduceRequest(
        acks=common_pb2.ACKS_ALL,
        timeout_ms=5_000,
        partitions=[
            data_pb2.ProducePartition(
                topic="__consumer_offsets", partition=partition, records=builder.build()
            )
        ],
    )
    stub = storage_pb2_grpc.StorageServiceStub(sync_channel(cluster.storage_addresses[0]))  # type: ignore[no-untyped-call]
    return E(stub.Produce(request, timeout=10).partitions[0].error_code)


def test_killed_coordinator_is_replaced_and_offsets_survive(groups_cluster: LocalCluster) -> None:
    gateway = groups_cluster.gateway_address
    topic = unique_topic_name("failover")
    groups_cluster.create_topic(topic, partitions=4)
    group = unique_topic_name("failover-group")
    member = RawMember(gateway, group, [topic], session_ms=10_000)
    member.start()
    stub = stub_for(gateway)
    try:
        wait_until(lambda: _stable(gateway, group, [member]), 90, "a stable group")
        offsets = {TopicPartition(topic, 0): 42, TopicPartition(topic, 3): 7}
        assert wait_until(lambda: member.commit(offsets) == [E.NONE, E.NONE], 30, "a commit")
        find = pb.FindCoordinatorRequest(keys=[group])
        owner = stub.FindCoordinator(find, timeout=10).coordinators[0]
        assert owner.error_code == E.NONE
        victim = groups_cluster.coordinator(owner.node_id)
        victim.kill()  # SIGKILL: its lease lapses, the controller moves its partitions

        def moved() -> bool:
            found = stub.FindCoordinator(find, timeout=10).coordinators[0]
            return found.error_code == E.NONE and found.node_id != owner.node_id

        wait_until(moved, 60, "another coordinator owning the group")
        fetch = pb.OffsetFetchRequest(group_id=group, all_topics=True)

        def fetched() -> dict[int, int] | None:
            response = stub.OffsetFetch(fetch, timeout=30)
            if response.error_code != E.NONE:
                return None
            return {p.partition: p.committed_offset for t in response.topics for p in t.partitions}

        assert wait_until(fetched, 60, "the offsets from the new owner") == {0: 42, 3: 7}
        # the member keeps (or regains) its membership with the new owner
        wait_until(lambda: _stable(gateway, group, [member]), 90, "a stable group after failover")
        assert member.error is None, member.error
        assert wait_until(lambda: member.commit({TopicPartition(topic, 1): 9}) == [E.NONE], 30)

        # the zombie's fence: a write with an older ownership epoch is refused by storage
        zombie = _zombie_append(groups_cluster, owner.partition, epoch=1)
        assert zombie == E.INVALID_PRODUCER_EPOCH

        # the killed instance comes back under the same id: it takes a share again, under new
        # epochs, and the group's offsets stay intact wherever the group lands
        victim.restart()
        assert wait_until(lambda: member.commit({TopicPartition(topic, 2): 11}) == [E.NONE], 60)
        expected = {0: 42, 1: 9, 2: 11, 3: 7}
        assert wait_until(lambda: fetched() == expected, 60, "offsets after the restart")
    finally:
        member.stop()


def test_coordinator_restarted_at_once_serves_under_a_new_epoch(
    groups_cluster: LocalCluster,
) -> None:
    """A coordinator killed and restarted before its lease lapses keeps its partitions; the
    controller gives them a new epoch for the new incarnation, so its writes are accepted."""
    gateway = groups_cluster.gateway_address
    stub = stub_for(gateway)
    topic = unique_topic_name("restart")
    groups_cluster.create_topic(topic, partitions=2)
    group = unique_topic_name("restart-group")
    member = RawMember(gateway, group, [topic], session_ms=10_000)
    tp = TopicPartition(topic, 0)
    fetch = pb.OffsetFetchRequest(group_id=group, all_topics=True)

    def committed() -> int:
        response = stub.OffsetFetch(fetch, timeout=30)
        return next((p.committed_offset for t in response.topics for p in t.partitions), -1)

    member.start()
    try:
        wait_until(lambda: _stable(gateway, group, [member]), 90, "a stable group")
        assert wait_until(lambda: member.commit({tp: 3}) == [E.NONE], 30, "a commit")
        owner = stub.FindCoordinator(pb.FindCoordinatorRequest(keys=[group]), timeout=10)
        process = groups_cluster.coordinator(owner.coordinators[0].node_id)
        process.kill()
        process.restart()
        assert wait_until(lambda: member.commit({tp: 4}) == [E.NONE], 60, "a commit after restart")
        assert wait_until(lambda: committed() == 4, 60, "the offset after the restart")
    finally:
        member.stop()


def test_server_assigned_group_rebalances_when_a_topic_grows_and_can_be_deleted(
    groups_cluster: LocalCluster,
) -> None:
    gateway = groups_cluster.gateway_address
    stub = stub_for(gateway)
    topic = unique_topic_name("grow")
    groups_cluster.create_topic(topic, partitions=2)
    group = unique_topic_name("grow-group")
    member = RawMember(gateway, group, [topic], session_ms=10_000)
    member.start()
    try:
        first = wait_until(lambda: _stable(gateway, group, [member]), 90, "a stable group")
        assert len(member.history[first.generation_id]) == 2
        grow = admin_pb2.CreatePartitionsRequest(
            topics=[admin_pb2.CreatePartitionsRequest.Topic(name=topic, count=5)]
        )
        assert all(t.error_code == E.NONE for t in stub.CreatePartitions(grow, timeout=30).topics)
        # the coordinator assigned this group: it rebalances on its own, no rejoin asked for
        wait_until(lambda: len(member.assignment) == 5, 60, "the grown topic assigned")
        assert max(member.history) > first.generation_id
    finally:
        member.stop()
    deleted = stub.DeleteGroups(pb.DeleteGroupsRequest(groups=[group, "no-such-group"]), timeout=30)
    codes = {r.group_id: E(r.error_code) for r in deleted.results}
    assert codes == {group: E.NONE, "no-such-group": E.GROUP_ID_NOT_FOUND}
    assert describe(gateway, group).group_state == "Dead"
