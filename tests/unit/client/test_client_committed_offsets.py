"""The group member's OffsetFetch retries (OffsetCommitter.fetch_committed): the pause between
attempts grows as Kafka's fetchCommittedOffsets and the consumer's offset resets do
(retry.backoff.ms doubling up to retry.backoff.max.ms), and never ends past the call's timeout.
A ManualClock and a recording sleep stand in for time, so nothing here waits."""

from __future__ import annotations

import pytest
from group_fakes import FakeGroupCoordinator

from riverlog.client.consumer.group.api import GroupMember
from riverlog.client.consumer.group.offsets import OffsetCommitter
from riverlog.client.errors import ClientTimeoutError
from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode
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
