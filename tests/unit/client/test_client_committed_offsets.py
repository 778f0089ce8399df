"""The group member's OffsetFetch and synchronous OffsetCommit retries
(OffsetCommitter.fetch_committed, commit_sync): the pause between attempts grows as Kafka's
fetchCommittedOffsets, commitOffsetsSync and the consumer's offset resets do (retry.backoff.ms
doubling up to retry.backoff.max.ms), and never ends past the call's timeout. A refused topic is
raised to the caller (Kafka's TopicAuthorizationException), not read as "nothing committed".
A ManualClock and a recording sleep stand in for time, so nothing here waits."""

from __future__ import annotations

import pytest
from group_fakes import FakeGroupCoordinator

from riverlog.client.consumer.group.api import GroupMember, OffsetAndMetadata
from riverlog.client.consumer.group.offsets import OffsetCommitter
from riverlog.client.errors import ClientTimeoutError
from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

pytestmark = pytest.mark.timeout(10)

TP = TopicPartition("t", 0)


def committer(
    group: FakeGroupCoordinator, clock: ManualClock, pauses: list[float]
) -> OffsetCommitter:
    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        clock.advance(round(seconds * 1000))

    return OffsetCommitter(
        group,
        "g",
        clock=clock,
        auto_commit=False,
        auto_commit_interval_ms=5000,
        request_timeout_ms=1000,
        retry_backoff_ms=100,
        retry_backoff_max_ms=1000,
        member=lambda: GroupMember("g"),
        on_error=lambda code: None,
        sleep=sleep,
    )


def test_the_pause_between_attempts_doubles_up_to_the_max() -> None:
    group = FakeGroupCoordinator(offsets={TP: (42, "m")})
    group.fetch_errors.extend([ErrorCode.COORDINATOR_LOAD_IN_PROGRESS] * 6)
    pauses: list[float] = []
    found = committer(group, ManualClock(), pauses).fetch_committed([TP], timeout_s=30)
    assert found[TP].offset == 42
    assert pauses == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert group.count("fetch") == 7


def test_no_pause_ends_past_the_timeout() -> None:
    group = FakeGroupCoordinator()
    group.fetch_errors.extend([ErrorCode.UNSTABLE_OFFSET_COMMIT] * 100)
    clock = ManualClock()
    pauses: list[float] = []
    started = clock.monotonic_ms()
    with pytest.raises(ClientTimeoutError, match="not found in time"):
        committer(group, clock, pauses).fetch_committed([TP], timeout_s=1.0)
    # 100 + 200 + 400 ms; the next pause (800 ms) would end past the second.
    assert pauses == [0.1, 0.2, 0.4]
    assert clock.monotonic_ms() - started == 700
    assert group.count("fetch") == 4


def test_commit_sync_pauses_double_up_to_the_max() -> None:
    """Kafka's commitOffsetsSync: `timer.sleep(retryBackoff.backoff(attempts++))`."""
    group = FakeGroupCoordinator()
    group.commit_errors.extend([ErrorCode.COORDINATOR_LOAD_IN_PROGRESS] * 6)
    pauses: list[float] = []
    committer(group, ManualClock(), pauses).commit_sync({TP: OffsetAndMetadata(5)}, timeout_s=30)
    assert pauses == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert group.count("commit") == 7
    assert group.offsets[TP] == (5, "")


def test_commit_sync_takes_no_pause_past_its_timeout() -> None:
    group = FakeGroupCoordinator()
    group.commit_errors.extend([ErrorCode.NOT_COORDINATOR] * 100)
    clock = ManualClock()
    pauses: list[float] = []
    started = clock.monotonic_ms()
    with pytest.raises(ClientTimeoutError, match="did not succeed within 1000 ms"):
        committer(group, clock, pauses).commit_sync({TP: OffsetAndMetadata(5)}, timeout_s=1.0)
    assert pauses == [0.1, 0.2, 0.4]  # the next pause (800 ms) would end past the second
    assert clock.monotonic_ms() - started == 700
    assert group.count("commit") == 4
    assert TP not in group.offsets


def test_a_refused_topic_is_raised_not_read_as_nothing_committed() -> None:
    """The gateway answers a topic the principal may not DESCRIBE with
    TOPIC_AUTHORIZATION_FAILED per partition (offset -1): the look-up raises one error naming
    every refused topic, at once (not retriable), rather than hand back -1 for a reset."""
    group = FakeGroupCoordinator(offsets={TP: (42, "")})
    group.fetch_errors.append(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    pauses: list[float] = []
    partitions = [TopicPartition("secret-b", 0), TopicPartition("secret-a", 1)]
    with pytest.raises(RiverlogError, match="topics: secret-a, secret-b") as info:
        committer(group, ManualClock(), pauses).fetch_committed(partitions, timeout_s=30)
    assert info.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert pauses == [] and group.count("fetch") == 1
    group.fetch_errors.append(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    with pytest.raises(RiverlogError) as info:
        committer(group, ManualClock(), pauses).fetch_committed([TP], timeout_s=30)
    assert info.value.code == ErrorCode.GROUP_AUTHORIZATION_FAILED
