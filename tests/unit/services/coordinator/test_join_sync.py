"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup with Kafka's classic semantics, on a manual
clock: member ids handed out, protocol vote, leader, generations, server-side assignment,
timeouts."""

from dataclasses import replace

from coord_harness import CONFIG, Harness, consumer_protocol, join_ok, sync_ok

from riverlog.common.assignors import decode_assignment
from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.services.coordinator.group.member import Protocol

E = ErrorCode


def test_first_join_requires_a_member_id() -> None:
    h = Harness()
    box = h.join()
    assert box.value.error_code == E.MEMBER_ID_REQUIRED
    assert box.value.member_id == "c-1"
    assert h.state() == "Empty"
    again = h.join(member_id="c-1")
    response = join_ok(again)
    assert response.generation_id == 1
    assert response.leader == "c-1"
    assert response.protocol_name == "range"
    assert [m.member_id for m in response.members] == ["c-1"]
    assert h.state() == "CompletingRebalance"


def test_three_members_one_generation_and_server_side_assignment() -> None:
    h = Harness()
    first = h.join_new()
    # the first member's join completes its own generation; the others trigger a rebalance
    gen1 = join_ok(first)
    assert gen1.generation_id == 1
    b = h.join()
    c = h.join()
    b2 = h.join(member_id=b.value.member_id)
    c2 = h.join(member_id=c.value.member_id)
    assert h.state() == "PreparingRebalance"
    assert b2.value is None and c2.value is None  # parked until the leader rejoins
    leader_join = h.join(member_id=gen1.member_id)
    responses = [join_ok(x) for x in (leader_join, b2, c2)]
    assert {r.generation_id for r in responses} == {2}
    assert responses[0].leader == gen1.member_id
    assert len(responses[0].members) == 3 and not responses[1].members
    syncs = [h.sync(r.member_id, 2) for r in responses[1:]]
    assert all(s.value is None for s in syncs)  # followers wait for the leader
    leader_sync = h.sync(gen1.member_id, 2)  # no assignment: the coordinator computes it
    owned: list[TopicPartition] = []
    for box in [leader_sync, *syncs]:
        owned += decode_assignment(sync_ok(box).assignment).partitions
    assert sorted(owned) == [TopicPartition("t", p) for p in range(12)]
    assert h.state() == "Stable"
    assert h.coord.group_of("g").server_assigned  # type: ignore[union-attr]


def test_leader_assignment_is_distributed() -> None:
    h = Harness()
    a = join_ok(h.join_new())
    s = h.sync(a.member_id, 1, assignments={a.member_id: b"mine"})
    assert sync_ok(s).assignment == b"mine"
    hb = h.coord.groups.heartbeat("g", a.member_id, None, 1)
    assert hb == E.NONE


def test_protocol_chosen_by_vote() -> None:
    h = Harness()
    both = (Protocol("roundrobin", b""), Protocol("range", b""))
    range_first = (Protocol("range", b""), Protocol("roundrobin", b""))
    a = join_ok(h.join_new(protocols=both))
    b = h.join(protocols=range_first)
    c = h.join(protocols=range_first)
    h.join(member_id=b.value.member_id, protocols=range_first)
    h.join(member_id=c.value.member_id, protocols=range_first)
    final = join_ok(h.join(member_id=a.member_id, protocols=both))
    assert final.protocol_name == "range"  # two votes against one
    inconsistent = h.join(protocols=(Protocol("sticky", b""),))
    assert inconsistent.value.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_heartbeat_tells_members_to_rejoin_and_old_generation_is_refused() -> None:
    h = Harness()
    a = join_ok(h.join_new())
    sync_ok(h.sync(a.member_id, 1))
    h.join()  # a new member id only: no rebalance yet
    assert h.coord.groups.heartbeat("g", a.member_id, None, 1) == E.NONE
    b = h.join()
    h.join(member_id=b.value.member_id)
    assert h.coord.groups.heartbeat("g", a.member_id, None, 1) == E.REBALANCE_IN_PROGRESS
    rejoin = h.join(member_id=a.member_id)
    assert rejoin.value is None  # the first handed-out id still owes its join
    h.advance(1_001)  # ... until its session runs out
    join_ok(rejoin)
    assert h.coord.groups.heartbeat("g", a.member_id, None, 1) == E.ILLEGAL_GENERATION
    assert h.coord.groups.heartbeat("g", "nobody", None, 2) == E.UNKNOWN_MEMBER_ID
    stale = h.sync(a.member_id, 1)
    assert stale.value.error_code == E.ILLEGAL_GENERATION


def test_session_expiry_rebalances_without_the_dead_member() -> None:
    h = Harness()
    a = join_ok(h.join_new(session_ms=100))
    b = h.join(session_ms=500)
    b2 = h.join(member_id=b.value.member_id, session_ms=500)
    join_ok(h.join(member_id=a.member_id, session_ms=100))
    b_id = join_ok(b2).member_id
    sync_ok_a = h.sync(a.member_id, 2)
    sync_b = h.sync(b_id, 2)
    sync_ok(sync_ok_a), sync_ok(sync_b)
    for _ in range(4):  # b heartbeats, a does not
        h.advance(60)
        assert h.coord.groups.heartbeat("g", b_id, None, 2) in (E.NONE, E.REBALANCE_IN_PROGRESS)
    assert not h.coord.group_of("g").has_member(a.member_id)  # type: ignore[union-attr]
    assert h.state() == "PreparingRebalance"
    rejoin = join_ok(h.join(member_id=b_id, session_ms=500))
    assert rejoin.generation_id == 3 and rejoin.leader == b_id


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    a = join_ok(h.join_new(session_ms=5_000, rebalance_ms=300))
    b = h.join(session_ms=5_000, rebalance_ms=300)
    parked = h.join(member_id=b.value.member_id, session_ms=5_000, rebalance_ms=300)
    assert parked.value is None
    h.advance(301)  # a never rejoins
    response = join_ok(parked)
    assert response.generation_id == 2
    assert [m.member_id for m in response.members] == [b.value.member_id]
    assert not h.coord.group_of("g").has_member(a.member_id)  # type: ignore[union-attr]


def test_leave_rebalances_and_last_leave_empties_the_group() -> None:
    h = Harness()
    a = join_ok(h.join_new())
    sync_ok(h.sync(a.member_id, 1))
    assert h.coord.groups.leave("g", a.member_id, None, "bye") == E.NONE
    assert h.state() == "Empty"
    assert h.coord.group_of("g").generation_id == 2  # type: ignore[union-attr]
    assert h.coord.groups.leave("g", a.member_id, None, "") == E.UNKNOWN_MEMBER_ID
    assert h.log and h.log[-1].value is not None  # the empty group is written


def test_subscription_change_rebalances() -> None:
    h = Harness(counts={"t": 4, "u": 2})
    a = join_ok(h.join_new())
    sync_ok(h.sync(a.member_id, 1))
    changed = join_ok(h.join(member_id=a.member_id, topics=["t", "u"]))
    assert changed.generation_id == 2
    got = decode_assignment(sync_ok(h.sync(a.member_id, 2)).assignment).partitions
    assert TopicPartition("u", 1) in got and len(got) == 6


def test_partition_count_change_rebalances_server_assigned_groups() -> None:
    h = Harness(counts={"t": 4})
    a = join_ok(h.join_new())
    sync_ok(h.sync(a.member_id, 1))
    h.coord.groups.on_partition_counts()
    assert h.state() == "Stable"
    h.counts["t"] = 6
    h.coord.groups.on_partition_counts()
    assert h.state() == "PreparingRebalance"
    assert h.coord.groups.heartbeat("g", a.member_id, None, 1) == E.REBALANCE_IN_PROGRESS


def test_failed_assignment_write_sends_members_back_to_join() -> None:
    h = Harness()
    a = join_ok(h.join_new())
    h.fail_writes = E.NOT_ENOUGH_REPLICAS
    box = h.sync(a.member_id, 1)
    assert box.value.error_code == E.NOT_ENOUGH_REPLICAS
    assert h.state() == "PreparingRebalance"


def test_invalid_requests() -> None:
    h = Harness()
    assert h.join(group="").value.error_code == E.INVALID_GROUP_ID
    assert h.join(session_ms=1).value.error_code == E.INVALID_SESSION_TIMEOUT
    assert h.join(member_id="ghost").value.error_code == E.UNKNOWN_MEMBER_ID
    bad = h.join(protocols=(*consumer_protocol(["t"]), Protocol("range", b"x")))
    assert bad.value.error_code == E.MEMBER_ID_REQUIRED  # protocols are the member's business


def test_initial_rebalance_delay_waits_while_members_keep_arriving() -> None:
    config = replace(CONFIG, group_initial_rebalance_delay_ms=100)
    h = Harness(config=config)
    a = h.join_new(rebalance_ms=1_000)
    assert a.value is None and h.state() == "PreparingRebalance"
    h.advance(60)
    b = h.join_new(rebalance_ms=1_000)  # arrives during the delay: another delay follows
    h.advance(50)
    assert a.value is None and b.value is None
    h.advance(100)
    assert join_ok(a).generation_id == join_ok(b).generation_id == 1
    assert len(join_ok(a).members) + len(join_ok(b).members) == 2
