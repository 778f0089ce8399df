"""OffsetCommit validation (generation, member, simple consumers), OffsetFetch, retention of
empty groups' offsets, DeleteGroups."""

from coord_harness import Box, Harness, join_ok, sync_ok

from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.services.coordinator.offsets.store import CommitItem, CommitRequest

E = ErrorCode
TP = TopicPartition("t", 0)


def commit(
    h: Harness, member: str, generation: int, offset: int = 5, metadata: str = "", group: str = "g"
) -> ErrorCode:
    box = Box()
    req = CommitRequest(group, generation, member, None, [CommitItem(TP, offset, 3, metadata)])
    h.apply(h.coord.offsets.commit(req, box))
    [(tp, code)] = box.value
    assert tp == TP
    return code


def fetched(h: Harness, group: str = "g") -> int:
    [one] = h.coord.offsets.fetch(group, [TP])
    return one.offset


def test_member_commit_checked_against_generation_and_member() -> None:
    h = Harness()
    a = join_ok(h.join_new())
    assert commit(h, a.member_id, 1) == E.REBALANCE_IN_PROGRESS
    sync_ok(h.sync(a.member_id, 1))
    assert commit(h, a.member_id, 1, 42, "meta") == E.NONE
    assert fetched(h) == 42
    assert commit(h, a.member_id, 0) == E.ILLEGAL_GENERATION
    assert commit(h, "stranger", 1) == E.UNKNOWN_MEMBER_ID
    # a member may commit what it processed while the group prepares a rebalance
    h.join()
    b = h.join()
    h.join(member_id=b.value.member_id)
    assert h.state() == "PreparingRebalance"
    assert commit(h, a.member_id, 1, 43) == E.NONE
    assert fetched(h) == 43
    assert commit(h, a.member_id, 1, 42, "meta") == E.NONE
    assert commit(h, "", -1) == E.UNKNOWN_MEMBER_ID  # the group has members
    assert commit(h, a.member_id, 1, metadata="x" * 5000) == E.OFFSET_METADATA_TOO_LARGE
    [one] = h.coord.offsets.fetch("g", None)
    assert (one.offset, one.leader_epoch, one.metadata) == (42, 3, "meta")


def test_simple_consumer_commits_without_a_generation() -> None:
    h = Harness()
    assert commit(h, "", -1, 7, group="simple") == E.NONE
    assert fetched(h, "simple") == 7
    assert commit(h, "", 3, group="unknown") == E.ILLEGAL_GENERATION
    assert fetched(h, "never") == -1
    assert ("simple", "", "Empty") in h.coord.list_groups()


def test_failed_write_leaves_the_offset_uncommitted() -> None:
    h = Harness()
    h.fail_writes = E.NOT_ENOUGH_REPLICAS
    assert commit(h, "", -1, 9) == E.NOT_ENOUGH_REPLICAS
    assert fetched(h) == -1


def test_offsets_of_empty_groups_expire_after_retention() -> None:
    h = Harness()
    a = join_ok(h.join_new())
    sync_ok(h.sync(a.member_id, 1))
    assert commit(h, a.member_id, 1, 11) == E.NONE
    h.advance(70_000)
    # still a member (it heartbeats): its offsets are kept
    assert h.coord.groups.heartbeat("g", a.member_id, None, 1) in (E.NONE, E.UNKNOWN_MEMBER_ID)
    h2 = Harness()
    assert commit(h2, "", -1, 11) == E.NONE
    h2.advance(30_000)
    assert fetched(h2) == 11
    h2.advance(31_000)
    assert fetched(h2) == -1
    assert h2.log[-1].value is None  # a tombstone


def test_delete_groups() -> None:
    h = Harness()
    a = join_ok(h.join_new())
    sync_ok(h.sync(a.member_id, 1))
    commit(h, a.member_id, 1)
    box = Box()
    h.apply(h.coord.delete_group("g", box))
    assert box.value == E.NON_EMPTY_GROUP
    h.apply(h.coord.delete_group("nope", box))
    assert box.value == E.GROUP_ID_NOT_FOUND
    assert h.leave(a.member_id) == E.NONE
    h.apply(h.coord.delete_group("g", box))
    assert box.value == E.NONE
    assert fetched(h) == -1
    assert h.coord.describe("g").state == "Dead"
    assert h.coord.list_groups() == []
