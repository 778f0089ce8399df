"""Loading a partition: replaying what the previous owner wrote rebuilds groups and offsets,
and a loaded stable group keeps serving its members at the same generation."""

from coord_harness import Box, Harness, join_ok, sync_ok

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.services.coordinator.coordinator import GroupCoordinator
from riverlog.services.coordinator.offsets.store import CommitItem, CommitRequest

E = ErrorCode


def test_a_new_owner_rebuilds_groups_and_offsets_from_the_log() -> None:
    h = Harness()
    a = join_ok(h.join_new())
    b = h.join()
    b2 = h.join(member_id=b.value.member_id)
    join_ok(h.join(member_id=a.member_id))
    b_id = join_ok(b2).member_id
    follower = h.sync(b_id, 2)
    assignment = sync_ok(h.sync(a.member_id, 2)).assignment
    sync_ok(follower)
    box = Box()
    items = [CommitItem(TopicPartition("t", 1), 100, 0, "m")]
    h.apply(h.coord.offsets.commit(CommitRequest("g", 2, a.member_id, None, items), box))
    h.apply(h.coord.offsets.commit(CommitRequest("s", -1, "", None, items), box))

    clock = ManualClock()
    loaded = GroupCoordinator(h.config, clock, lambda t: 12)
    for record in h.log:
        loaded.replay(record.key, record.value)
    loaded.replay(b"garbage", b"{")
    loaded.loaded()
    group = loaded.group_of("g")
    assert group is not None
    assert group.state.value == "Stable"
    assert group.generation_id == 2
    assert group.leader_id == a.member_id
    assert group.member(a.member_id).assignment == assignment
    assert loaded.groups.heartbeat("g", b_id, None, 2) == E.NONE
    [fetched] = loaded.offsets.fetch("g", None)
    assert (fetched.offset, fetched.metadata) == (100, "m")
    assert loaded.offsets.fetch("s", None)[0].offset == 100
    # members that never come back expire after their session on the new owner
    clock.advance(1_001)
    loaded.timer.expire()
    assert group.state.value == "Empty"
    assert group.generation_id == 3


def test_tombstones_remove_on_replay() -> None:
    h = Harness()
    box = Box()
    items = [CommitItem(TopicPartition("t", 0), 1)]
    h.apply(h.coord.offsets.commit(CommitRequest("s", -1, "", None, items), box))
    h.apply(h.coord.delete_group("s", box))
    loaded = GroupCoordinator(h.config, ManualClock(), lambda t: 1)
    for record in h.log:
        loaded.replay(record.key, record.value)
    loaded.loaded()
    assert loaded.list_groups() == []


def test_a_server_assigned_group_still_rebalances_on_growth_after_a_failover() -> None:
    h = Harness(counts={"t": 4})
    a = join_ok(h.join_new())
    sync_ok(h.sync(a.member_id, 1))
    counts = {"t": 4}
    loaded = GroupCoordinator(h.config, ManualClock(), lambda t: counts.get(t, 0))
    for record in h.log:
        loaded.replay(record.key, record.value)
    loaded.loaded()
    group = loaded.group_of("g")
    assert group is not None and group.server_assigned
    loaded.groups.on_partition_counts()
    assert group.state.value == "Stable"
    counts["t"] = 8
    loaded.groups.on_partition_counts()
    assert group.state.value == "PreparingRebalance"
