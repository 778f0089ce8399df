"""The consumer's group membership against an in-process fake coordinator (`group_fakes.py`):
the join/sync flow with the MEMBER_ID_REQUIRED round trip, the rebalance listener's calls for
the eager and the cooperative protocol, auto commit timing on a manual clock, leaving on
max.poll.interval.ms, static members closing without a LeaveGroup and coming back to their
assignment, commit and heartbeat errors mapped to rejoins, and pattern subscriptions."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Set

import pytest
from group_fakes import FakeGroupCoordinator

from riverlog.client import CommitFailedError, RebalanceInProgressError, TopicPartition
from riverlog.client.config import ConsumerConfig
from riverlog.client.consumer.group import (
    ConsumerCoordinator,
    ConsumerRebalanceListener,
    MemberState,
    OffsetAndMetadata,
)
from riverlog.client.consumer.subscription import SubscriptionState
from riverlog.common.clock import SYSTEM_CLOCK, Clock, ManualClock
from riverlog.common.errors import ErrorCode

T = [TopicPartition("t", p) for p in range(6)]


class Topics:
    def __init__(self, **counts: int) -> None:
        self.counts = counts

    def partition_counts(self, topics: object) -> dict[str, int]:
        wanted = None if topics is None else set(topics)  # type: ignore[call-overload]
        return {t: c for t, c in self.counts.items() if wanted is None or t in wanted}


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []

    def on_partitions_revoked(self, partitions: Set[TopicPartition]) -> None:
        self.events.append(("revoked", frozenset(partitions)))

    def on_partitions_assigned(self, partitions: Set[TopicPartition]) -> None:
        self.events.append(("assigned", frozenset(partitions)))

    def on_partitions_lost(self, partitions: Set[TopicPartition]) -> None:
        self.events.append(("lost", frozenset(partitions)))


def make(
    group: FakeGroupCoordinator,
    topics: Topics | None = None,
    clock: Clock = SYSTEM_CLOCK,
    heartbeat_thread: bool = False,
    **conf: object,
) -> tuple[ConsumerCoordinator, SubscriptionState, Recorder]:
    config = ConsumerConfig.from_kafka(
        {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "retry.backoff.ms": 10}, **conf
    )
    subs = SubscriptionState(config.auto_offset_reset)
    coordinator = ConsumerCoordinator(
        config,
        group,
        subs,
        topics or Topics(t=6),
        clock=clock,
        heartbeat_thread=heartbeat_thread,
    )
    recorder = Recorder()
    coordinator.subscribe(["t"], False, recorder)
    return coordinator, subs, recorder


def test_join_sync_flow_with_member_id_required() -> None:
    group = FakeGroupCoordinator()
    c, subs, rec = make(group)
    assert c.poll(5.0)
    assert group.calls[:3] == [("join", ""), ("join", "member-1"), ("sync", "member-1")]
    assert c.state == MemberState.STABLE
    assert c.generation.generation_id == 1 and c.generation.protocol_name == "range"
    assert rec.events == [("assigned", frozenset(T))]
    assert set(subs.partitions) == set(T)
    assert subs.initializing() == sorted(T)  # positions come from committed offsets next
    c.close(1.0)
    assert ("leave", "member-1") in group.calls


def _run(c: ConsumerCoordinator, stop: threading.Event, errors: list[BaseException]) -> None:
    try:
        while not stop.is_set():
            c.poll(0.1)
            time.sleep(0.005)
    except BaseException as e:
        errors.append(e)


@pytest.fixture
def threads() -> Iterator[list[tuple[threading.Thread, threading.Event]]]:
    started: list[tuple[threading.Thread, threading.Event]] = []
    yield started
    for thread, stop in started:
        stop.set()
        thread.join(10)


def _start(
    c: ConsumerCoordinator,
    started: list[tuple[threading.Thread, threading.Event]],
    errors: list[BaseException],
) -> None:
    stop = threading.Event()
    thread = threading.Thread(target=_run, args=(c, stop, errors), daemon=True)
    thread.start()
    started.append((thread, stop))


def _wait(condition: object, rounds: int = 400) -> None:
    for _ in range(rounds):
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.025)
    raise AssertionError("condition not reached")


def _stop_all(started: list[tuple[threading.Thread, threading.Event]]) -> None:
    for thread, stop in started:
        stop.set()
        thread.join(10)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_listener_calls_when_a_second_member_joins(
    strategy: str, threads: list[tuple[threading.Thread, threading.Event]]
) -> None:
    group = FakeGroupCoordinator(join_wait_s=5.0)
    conf = {
        "partition.assignment.strategy": strategy,
        "heartbeat.interval.ms": 20,
        "session.timeout.ms": 5000,
    }
    a, subs_a, rec_a = make(group, heartbeat_thread=True, **conf)
    errors: list[BaseException] = []
    _start(a, threads, errors)
    _wait(lambda: a.state == MemberState.STABLE and len(subs_a.partitions) == 6)
    b, subs_b, rec_b = make(group, heartbeat_thread=True, **conf)
    _start(b, threads, errors)
    _wait(
        lambda: (
            a.state == b.state == MemberState.STABLE
            and not a.rejoin_needed
            and not b.rejoin_needed
            and len(subs_a.partitions) == len(subs_b.partitions) == 3
        )
    )
    _stop_all(threads)
    assert not errors
    mine_a, mine_b = set(subs_a.partitions), set(subs_b.partitions)
    assert mine_a | mine_b == set(T) and not mine_a & mine_b
    for generation in group.owners:  # no partition owned by two members in one generation
        owned = [tp for parts in generation.values() for tp in parts]
        assert len(owned) == len(set(owned))
    if strategy == "range":
        # eager: everything revoked before the rejoin, the new share assigned after
        assert rec_a.events == [
            ("assigned", frozenset(T)),
            ("revoked", frozenset(T)),
            ("assigned", frozenset(mine_a)),
        ]
        assert rec_b.events == [("assigned", frozenset(mine_b))]
    else:
        # cooperative: only what moves is revoked; it is assigned in a follow-up rebalance
        revoked = [p for kind, p in rec_a.events if kind == "revoked"]
        assert revoked == [frozenset(mine_b)]
        assert rec_a.events[0] == ("assigned", frozenset(T))
        assert all(p == frozenset() for kind, p in rec_a.events[1:] if kind == "assigned")
        added_b = frozenset().union(*(p for kind, p in rec_b.events if kind == "assigned"))
        assert added_b == mine_b
        assert not any(kind in ("revoked", "lost") for kind, _ in rec_b.events)
        assert len(group.owners) >= 3  # the first join, the rebalance, the follow-up


def test_auto_commit_runs_on_its_interval() -> None:
    group = FakeGroupCoordinator()
    clock = ManualClock()
    c, subs, _ = make(group, clock=clock, auto_commit_interval_ms=5000)
    assert c.poll(5.0)
    subs.partitions[T[0]].seek(7)
    clock.advance(4999)
    c.poll(0)
    c.offsets.wait_pending(5.0)
    assert group.count("commit") == 0
    clock.advance(1)
    c.poll(0)
    c.offsets.wait_pending(5.0)
    assert group.offsets == {T[0]: (7, "")}
    assert group.count("commit") == 1
    subs.partitions[T[0]].seek(9)
    c.close(5.0)  # close commits the positions too
    assert group.offsets[T[0]] == (9, "")


def test_auto_commit_disabled_commits_nothing() -> None:
    group = FakeGroupCoordinator()
    clock = ManualClock()
    c, subs, _ = make(group, clock=clock, enable_auto_commit=False)
    assert c.poll(5.0)
    subs.partitions[T[0]].seek(7)
    clock.advance(60_000)
    c.poll(0)
    c.close(5.0)
    assert group.count("commit") == 0
    assert group.offsets == {}


def test_poll_timeout_leaves_and_the_next_poll_loses_then_rejoins() -> None:
    group = FakeGroupCoordinator()
    clock = ManualClock()
    c, _, rec = make(group, clock=clock, max_poll_interval_ms=1000, enable_auto_commit=False)
    assert c.poll(5.0)
    clock.advance(500)
    c.heartbeat.tick(clock.monotonic_ms())
    assert group.count("leave") == 0
    clock.advance(501)
    c.heartbeat.tick(clock.monotonic_ms())
    assert ("leave", "member-1") in group.calls
    assert c.state == MemberState.UNJOINED and not c.generation.valid
    assert c.poll(5.0)
    assert rec.events == [
        ("assigned", frozenset(T)),
        ("lost", frozenset(T)),
        ("assigned", frozenset(T)),
    ]


def test_static_member_closes_without_leaving_and_comes_back() -> None:
    group = FakeGroupCoordinator()
    c, _, _ = make(group, group_instance_id="i-1")
    assert c.poll(5.0)
    generation = c.generation.generation_id
    c.close(1.0)
    assert group.count("leave") == 0
    assert [m.instance_id for m in group.members.values()] == ["i-1"]
    again, subs, rec2 = make(group, group_instance_id="i-1")
    assert again.poll(5.0)
    assert again.generation.generation_id == generation  # no rebalance
    assert rec2.events == [("assigned", frozenset(T))]
    assert set(subs.partitions) == set(T)
    # the old incarnation is fenced if it shows up again
    assert group.heartbeat(c.member(), 1.0) in (
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
    )


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (ErrorCode.ILLEGAL_GENERATION, CommitFailedError),
        (ErrorCode.UNKNOWN_MEMBER_ID, CommitFailedError),
        (ErrorCode.REBALANCE_IN_PROGRESS, RebalanceInProgressError),
    ],
)
def test_commit_errors_map_to_rejoins(code: ErrorCode, error: type[Exception]) -> None:
    group = FakeGroupCoordinator()
    c, _, rec = make(group, enable_auto_commit=False)
    assert c.poll(5.0)
    group.commit_errors.append(code)
    with pytest.raises(error):
        c.commit_sync({T[0]: OffsetAndMetadata(3)}, 5.0)
    assert c.rejoin_needed
    assert c.poll(5.0)
    lost_or_revoked = "revoked" if code == ErrorCode.REBALANCE_IN_PROGRESS else "lost"
    assert rec.events == [
        ("assigned", frozenset(T)),
        (lost_or_revoked, frozenset(T)),
        ("assigned", frozenset(T)),
    ]
    c.commit_sync({T[0]: OffsetAndMetadata(3)}, 5.0)
    assert group.offsets == {T[0]: (3, "")}


def test_async_commit_error_reaches_the_callback_on_the_next_poll() -> None:
    group = FakeGroupCoordinator()
    c, _, _ = make(group, enable_auto_commit=False)
    assert c.poll(5.0)
    outcomes: list[tuple[dict[TopicPartition, OffsetAndMetadata], Exception | None]] = []
    group.commit_errors.append(ErrorCode.ILLEGAL_GENERATION)
    c.offsets.commit_async({T[1]: OffsetAndMetadata(4)}, lambda o, e: outcomes.append((o, e)))
    c.offsets.wait_pending(5.0)
    assert len(outcomes) == 1 and isinstance(outcomes[0][1], CommitFailedError)
    assert c.rejoin_needed
    c.offsets.commit_async({T[1]: OffsetAndMetadata(4)}, lambda o, e: outcomes.append((o, e)))
    assert c.poll(5.0)  # rejoined; the second commit (old generation) may fail or succeed
    c.offsets.wait_pending(5.0)
    assert len(outcomes) == 2


def test_heartbeat_rebalance_in_progress_rejoins_at_next_poll() -> None:
    group = FakeGroupCoordinator()
    clock = ManualClock()
    c, _, rec = make(group, clock=clock, heartbeat_interval_ms=100, enable_auto_commit=False)
    assert c.poll(5.0)
    group.heartbeat_errors.append(ErrorCode.REBALANCE_IN_PROGRESS)
    clock.advance(100)
    c.heartbeat.tick(clock.monotonic_ms())
    assert group.count("heartbeat") == 1 and c.rejoin_needed
    assert c.poll(5.0)
    assert c.generation.generation_id == 2
    assert [kind for kind, _ in rec.events] == ["assigned", "revoked", "assigned"]


def test_fenced_static_member_fails_poll() -> None:
    group = FakeGroupCoordinator()
    clock = ManualClock()
    c, _, _ = make(group, clock=clock, group_instance_id="i-1", heartbeat_interval_ms=100)
    assert c.poll(5.0)
    group.heartbeat_errors.append(ErrorCode.FENCED_INSTANCE_ID)
    clock.advance(100)
    c.heartbeat.tick(clock.monotonic_ms())
    with pytest.raises(Exception, match="FENCED_INSTANCE_ID"):
        c.poll(1.0)


def test_pattern_subscription_rejoins_for_a_new_matching_topic() -> None:
    group = FakeGroupCoordinator()
    clock = ManualClock()
    topics = Topics(a1=2, b=1, __internal=1)
    config = ConsumerConfig.from_kafka(
        {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "metadata.max.age.ms": 1000}
    )
    subs = SubscriptionState(config.auto_offset_reset)
    c = ConsumerCoordinator(config, group, subs, topics, clock=clock, heartbeat_thread=False)
    import re

    subs.pattern = re.compile(r"a.*|__.*")
    rec = Recorder()
    c.subscribe([], True, rec)
    assert c.poll(5.0)
    assert subs.subscription == {"a1"}
    assert set(subs.partitions) == {TopicPartition("a1", 0), TopicPartition("a1", 1)}
    topics.counts["a2"] = 1
    c.poll(0)
    assert c.generation.generation_id == 1  # not refreshed before metadata.max.age.ms
    clock.advance(1000)
    assert c.poll(5.0)
    assert c.generation.generation_id == 2
    assert TopicPartition("a2", 0) in subs.partitions


def test_leader_rejoins_when_partition_counts_change() -> None:
    group = FakeGroupCoordinator()
    clock = ManualClock()
    topics = Topics(t=6)
    c, subs, _ = make(group, topics, clock=clock, metadata_max_age_ms=1000)
    assert c.poll(5.0)
    topics.counts["t"] = 8
    clock.advance(1000)
    assert c.poll(5.0)
    assert c.generation.generation_id == 2
    assert len(subs.partitions) == 8


def test_listener_error_is_raised_after_the_rebalance_completes() -> None:
    group = FakeGroupCoordinator()

    class Failing(ConsumerRebalanceListener):
        def on_partitions_assigned(self, partitions: Set[TopicPartition]) -> None:
            raise RuntimeError("listener broke")

    c, subs, _ = make(group)
    c.subscribe(["t"], False, Failing())
    with pytest.raises(RuntimeError, match="listener broke"):
        c.poll(5.0)
    assert c.state == MemberState.STABLE and set(subs.partitions) == set(T)
    assert c.poll(0)  # raised once; the member stays in the group


def test_unsubscribe_revokes_and_leaves() -> None:
    group = FakeGroupCoordinator()
    c, subs, rec = make(group)
    assert c.poll(5.0)
    c.unsubscribe()
    assert rec.events[-1] == ("revoked", frozenset(T))
    assert ("leave", "member-1") in group.calls
    assert subs.partitions == {} and not subs.subscribed
    assert c.state == MemberState.UNJOINED


def test_join_errors_retry_or_raise() -> None:
    group = FakeGroupCoordinator()
    c, _, _ = make(group)
    group.join_errors.extend([ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR])
    assert c.poll(5.0)  # retried with back-off
    assert c.generation.generation_id == 1
    other, _, _ = make(FakeGroupCoordinator())
    other.api.join_errors.append(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="INCONSISTENT_GROUP_PROTOCOL"):
        other.poll(5.0)


def test_join_gives_up_at_the_poll_deadline_and_resumes_next_poll() -> None:
    group = FakeGroupCoordinator()
    c, _, _ = make(group)
    group.join_errors.extend([ErrorCode.COORDINATOR_NOT_AVAILABLE] * 3)
    assert not c.poll(0)  # one attempt, no time left
    assert c.poll(5.0)
    assert c.state == MemberState.STABLE


def test_auto_commit_before_a_rebalance_precedes_the_revoke() -> None:
    group = FakeGroupCoordinator()
    clock = ManualClock()
    c, subs, rec = make(group, clock=clock, heartbeat_interval_ms=100)
    assert c.poll(5.0)
    subs.partitions[T[2]].seek(11)
    group.heartbeat_errors.append(ErrorCode.REBALANCE_IN_PROGRESS)
    clock.advance(100)  # well before auto.commit.interval.ms
    c.heartbeat.tick(clock.monotonic_ms())
    calls_before = len(group.calls)
    assert c.poll(5.0)
    after = [name for name, _ in group.calls[calls_before:]]
    assert after[:2] == ["commit", "join"]  # positions committed, then the rejoin
    assert group.offsets[T[2]] == (11, "")
    assert [kind for kind, _ in rec.events] == ["assigned", "revoked", "assigned"]


def test_a_join_answered_between_polls_is_applied_by_the_next_poll() -> None:
    group = FakeGroupCoordinator()
    c, subs, rec = make(group, group_instance_id="i-1")  # joins in one round trip
    c.poll(0)  # sends the join; with no time to wait, returns at once
    _wait(lambda: c.state == MemberState.STABLE)  # the join thread got its answer
    assert c.poll(0)
    assert rec.events == [("assigned", frozenset(T))]
    assert set(subs.partitions) == set(T)
