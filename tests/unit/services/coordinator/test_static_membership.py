"""Static membership (group.instance.id): a restart within the session timeout gets the same
assignment with no rebalance; the older holder of an instance id is fenced."""

from coord_harness import Harness, join_ok, sync_ok

from riverlog.common.errors import ErrorCode

E = ErrorCode


def _stable_pair(h: Harness) -> tuple[str, str]:
    a = join_ok(h.join(instance_id="ia", client_id="a"))  # static: no MEMBER_ID_REQUIRED
    b = h.join(instance_id="ib", client_id="b")
    a2 = h.join(member_id=a.member_id, instance_id="ia", client_id="a")
    join_ok(a2), join_ok(b)
    follower = h.sync(b.value.member_id, 2, instance_id="ib")
    sync_ok(h.sync(a.member_id, 2, instance_id="ia"))
    sync_ok(follower)
    return a.member_id, b.value.member_id


def test_static_restart_keeps_the_assignment_without_rebalance() -> None:
    h = Harness()
    a_id, b_id = _stable_pair(h)
    group = h.coord.group_of("g")
    assert group is not None
    before = group.member(b_id).assignment
    assert before
    # b restarts: it joins with no member id but its instance id
    restarted = join_ok(h.join(instance_id="ib", client_id="b"))
    assert restarted.member_id != b_id
    assert restarted.generation_id == 2  # no new generation
    assert h.state() == "Stable"
    assert sync_ok(h.sync(restarted.member_id, 2, instance_id="ib")).assignment == before
    assert h.coord.groups.heartbeat("g", a_id, "ia", 2) == E.NONE


def test_the_older_holder_of_an_instance_id_is_fenced() -> None:
    h = Harness()
    _, b_id = _stable_pair(h)
    newer = join_ok(h.join(instance_id="ib", client_id="b"))
    assert h.coord.groups.heartbeat("g", b_id, "ib", 2) == E.FENCED_INSTANCE_ID
    assert h.sync(b_id, 2, instance_id="ib").value.error_code == E.FENCED_INSTANCE_ID
    assert h.join(member_id=b_id, instance_id="ib").value.error_code == E.FENCED_INSTANCE_ID
    assert h.coord.groups.leave("g", b_id, "ib", "") == E.FENCED_INSTANCE_ID
    assert h.coord.groups.heartbeat("g", newer.member_id, "ib", 2) == E.NONE


def test_static_leader_restart_is_told_to_skip_assignment() -> None:
    h = Harness()
    _a_id, _ = _stable_pair(h)
    restarted = join_ok(h.join(instance_id="ia", client_id="a"))
    assert restarted.leader == restarted.member_id
    assert restarted.skip_assignment
    assert h.state() == "Stable"


def test_static_member_past_its_session_is_removed() -> None:
    h = Harness()
    a_id, b_id = _stable_pair(h)
    for _ in range(3):
        h.advance(400)
        h.coord.groups.heartbeat("g", a_id, "ia", 2)
    assert h.state() == "PreparingRebalance"
    assert h.join(member_id=b_id, instance_id="ib").value.error_code == E.UNKNOWN_MEMBER_ID
