"""Replication on real processes: three storage nodes, replication factor 3.

acks=all round trips whose followers' logs end byte-identical to the leader's (over plaintext,
and over TLS on the shared `tls_cluster`, every channel encrypted); a killed follower
leaving the ISR (acks=all carries on without it) and rejoining after its restart;
min.insync.replicas=2 refusing acks=all with NOT_ENOUGH_REPLICAS when both followers are dead;
consumers never reading above the high watermark while followers are paused; a leader kill -9
losing nothing acknowledged; and KIP-101's divergence case, an old leader's uncommitted tail
truncated by epoch when it comes back as a follower.
"""

from __future__ import annotations

import time

import pytest
from replication_harness import ReplicationHarness, make_batch, wait_until

from riverlog.common.errors import ErrorCode
from riverlog.v1 import common_pb2

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

ALL = {1, 2, 3}


def _followers(harness: ReplicationHarness, topic: str) -> tuple[int, list[int]]:
    state = harness.state(topic)
    return state.leader, [r for r in state.replicas if r != state.leader]


def test_acks_all_round_trip_leaves_byte_identical_replicas(
    any_harness: ReplicationHarness,
) -> None:
    harness = any_harness
    topic = harness.create_topic("rf3-round-trip")
    harness.wait_isr(topic, ALL)
    leader, followers = _followers(harness, topic)
    offsets = []
    for i in range(20):
        result = harness.produce(leader, topic, make_batch(5, tag=i))
        assert result.error_code == ErrorCode.NONE, result.error_message
        offsets.append(result.base_offset)
    assert offsets == list(range(0, 100, 5))
    # acks=all answered: the leader's high watermark covers every record.
    assert harness.log_end_offsets(topic)[leader] == (100, 100)
    assert harness.wait_converged(topic, ALL) == 100
    leader_bytes = harness.log_bytes(leader, topic)
    for follower in followers:
        assert harness.log_bytes(follower, topic) == leader_bytes
    assert [o for o, _ in harness.read_all(leader, topic)] == offsets


def test_killed_follower_leaves_the_isr_and_rejoins_after_restart(
    harness: ReplicationHarness,
) -> None:
    topic = harness.create_topic("follower-kill")
    harness.wait_isr(topic, ALL)
    leader, followers = _followers(harness, topic)
    victim = followers[0]
    assert harness.produce(leader, topic, make_batch(5, tag=0)).error_code == ErrorCode.NONE
    harness.cluster.storage(victim).kill()
    try:
        harness.wait_isr(topic, ALL - {victim})
        result = harness.produce(leader, topic, make_batch(5, tag=1))
        assert result.error_code == ErrorCode.NONE, result.error_message
        assert harness.describe_node(leader).under_replicated_partitions >= 1
    finally:
        harness.cluster.storage(victim).restart()
    harness.wait_isr(topic, ALL)
    assert harness.produce(leader, topic, make_batch(5, tag=2)).error_code == ErrorCode.NONE
    harness.wait_converged(topic, ALL)
    assert harness.log_bytes(victim, topic) == harness.log_bytes(leader, topic)


def test_min_insync_replicas_refuses_acks_all_with_two_followers_dead(
    harness: ReplicationHarness,
) -> None:
    topic = harness.create_topic("min-isr", {"min.insync.replicas": "2"})
    harness.wait_isr(topic, ALL)
    leader, followers = _followers(harness, topic)
    assert harness.produce(leader, topic, make_batch(3, tag=0)).error_code == ErrorCode.NONE
    for follower in followers:
        harness.cluster.storage(follower).kill()
    try:
        harness.wait_isr(topic, {leader})
        refused = harness.produce(leader, topic, make_batch(3, tag=1))
        assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS, refused.error_message
        # Nothing was written by the refused produce; acks=1 still works.
        accepted = harness.produce(leader, topic, make_batch(3, tag=2), acks=common_pb2.ACKS_LEADER)
        assert (accepted.error_code, accepted.base_offset) == (ErrorCode.NONE, 3)
    finally:
        for follower in followers:
            harness.cluster.storage(follower).restart()
    harness.wait_isr(topic, ALL)
    assert harness.produce(leader, topic, make_batch(3, tag=3)).error_code == ErrorCode.NONE


def test_consumers_never_read_above_the_high_watermark(harness: ReplicationHarness) -> None:
    topic = harness.create_topic("hw-bound")
    harness.wait_isr(topic, ALL)
    leader, followers = _followers(harness, topic)
    assert harness.produce(leader, topic, make_batch(5, tag=0)).error_code == ErrorCode.NONE
    harness.wait_converged(topic, ALL)
    for follower in followers:
        harness.cluster.storage(follower).pause()
    try:
        # acks=1: the leader has the records, the paused followers do not.
        for i in range(1, 4):
            result = harness.produce(
                leader, topic, make_batch(5, tag=i), acks=common_pb2.ACKS_LEADER
            )
            assert result.error_code == ErrorCode.NONE
        leo, hw = harness.log_end_offsets(topic, {leader})[leader]
        assert leo == 20
        fetched = harness.read_all(leader, topic)  # asserts every batch is below the HW seen
        assert fetched[-1][0] < max(hw, 5)
    finally:
        for follower in followers:
            harness.cluster.storage(follower).resume()
    harness.wait_isr(topic, ALL)
    harness.wait_converged(topic, ALL)
    assert [o for o, _ in harness.read_all(leader, topic)] == [0, 5, 10, 15]


def test_leader_kill_loses_nothing_acknowledged(harness: ReplicationHarness) -> None:
    topic = harness.create_topic("leader-kill")
    harness.wait_isr(topic, ALL)
    leader, _ = _followers(harness, topic)
    acknowledged: dict[int, bytes] = {}
    for i in range(10):
        batch = make_batch(5, tag=i)
        result = harness.produce(leader, topic, batch)
        assert result.error_code == ErrorCode.NONE
        acknowledged[result.base_offset] = batch
    old_epoch = harness.state(topic).leader_epoch
    harness.cluster.storage(leader).kill()
    try:
        state = wait_until(
            lambda: (s := harness.state(topic)).leader not in (-1, leader) and s,
            60,
            "a new leader",
        )
        assert state.leader_epoch > old_epoch
        result = harness.produce_to_leader(topic, make_batch(5, tag=99))
        assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 50)
        read = dict(harness.read_all(harness.state(topic).leader, topic))
        for offset in acknowledged:
            assert offset in read
    finally:
        harness.cluster.storage(leader).restart()
    harness.wait_isr(topic, ALL)
    harness.wait_converged(topic, ALL)
    new_leader = harness.state(topic).leader
    for node in ALL:
        assert harness.log_bytes(node, topic) == harness.log_bytes(new_leader, topic)


def test_kip101_divergence_an_old_leaders_uncommitted_tail_is_truncated(
    harness: ReplicationHarness,
) -> None:
    topic = harness.create_topic("divergence")
    harness.wait_isr(topic, ALL)
    old_leader, followers = _followers(harness, topic)
    committed = harness.produce(old_leader, topic, make_batch(5, tag=0))
    assert committed.error_code == ErrorCode.NONE
    harness.wait_converged(topic, ALL)
    # Followers silent for a moment (well within lease and lag time): records written with
    # acks=1 now reach the leader only and stay uncommitted.
    for follower in followers:
        harness.cluster.storage(follower).pause()
    try:
        # Let the followers' outstanding long polls (200 ms) answer into their paused sockets,
        # so no fetch of theirs is waiting at the leader when the records arrive.
        time.sleep(1.0)
        doomed = harness.produce(
            old_leader, topic, make_batch(5, tag=1), acks=common_pb2.ACKS_LEADER
        )
        assert (doomed.error_code, doomed.base_offset) == (ErrorCode.NONE, 5)
        assert harness.log_end_offsets(topic, {old_leader})[old_leader] == (10, 5)
        harness.cluster.storage(old_leader).kill()
    finally:
        for follower in followers:
            harness.cluster.storage(follower).resume()
    try:
        wait_until(lambda: harness.state(topic).leader in followers, 60, "a new leader")
        # The new leader writes different records at the offsets the old one's tail held.
        replacement = harness.produce_to_leader(topic, make_batch(5, tag=2))
        assert (replacement.error_code, replacement.base_offset) == (ErrorCode.NONE, 5)
    finally:
        harness.cluster.storage(old_leader).restart()
    harness.wait_isr(topic, ALL)
    harness.wait_converged(topic, ALL)
    leader = harness.state(topic).leader
    for node in ALL:
        assert harness.log_bytes(node, topic) == harness.log_bytes(leader, topic)
    read = harness.read_all(leader, topic)
    assert [o for o, _ in read] == [0, 5]
    assert read[1][1][61:] == make_batch(5, tag=2)[61:]  # the new leader's records
