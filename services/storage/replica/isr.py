"""The leader's view of its followers and of the in-sync replica set (Kafka's `ReplicaState` and
`PartitionState` in Partition.scala), as pure state with the clock passed in.

Each follower's fetches tell the leader its log end offset; a follower counts as caught up at a
fetch that reached the leader's log end offset, or at the previous fetch when this one reached
the log end offset the leader had then (Kafka's `lastCaughtUpTimeMs` rule, so a follower that
keeps up with a steady stream of appends is never "behind" merely because appends keep coming).

The ISR has a committed value (from the controller: the image, or an AlterPartition answer)
and at most one change in flight. While a change is pending the high watermark is computed over
the *maximal* ISR, the union of both, so an expansion cannot move it past what the joining
follower has and a shrink does not move it before the controller agrees; `min.insync.replicas`
and acks=all decisions use the committed ISR (Kafka's `isr` vs `maximalIsr`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from riverlog.common.types import TopicPartition


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower, from its fetches (-1: no fetch yet)."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0

    def update(self, fetch_offset: int, now_ms: int, leader_log_end_offset: int) -> None:
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_leo = leader_log_end_offset
        self.last_fetch_ms = now_ms

    def lagging(self, now_ms: int, leader_log_end_offset: int, lag_max_ms: int) -> bool:
        """Not caught up within `lag_max_ms` (Kafka's `isCaughtUp` negated)."""
        if self.log_end_offset >= leader_log_end_offset:
            return False
        return now_ms - self.last_caught_up_ms > lag_max_ms


@dataclass(frozen=True, slots=True)
class AlterIsrRequest:
    """One ISR change for the controller, guarded by the epochs it is based on."""

    tp: TopicPartition
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


class IsrState:
    """The committed ISR with its partition epoch, and the change in flight (if any). One per
    led partition; the Partition that owns it is the only caller."""

    def __init__(self, isr: Iterable[int], partition_epoch: int) -> None:
        self.committed: tuple[int, ...] = tuple(isr)
        self.partition_epoch = partition_epoch
        self.pending: AlterIsrRequest | None = None

    @property
    def isr(self) -> tuple[int, ...]:
        return self.committed

    @property
    def maximal(self) -> tuple[int, ...]:
        if self.pending is None:
            return self.committed
        extra = [r for r in self.pending.new_isr if r not in self.committed]
        return (*self.committed, *extra)

    @property
    def in_flight(self) -> bool:
        return self.pending is not None

    def commit(self, isr: Iterable[int], partition_epoch: int) -> bool:
        """Take a committed state (an AlterPartition answer or the image) unless it is older
        than the one held; clears the change in flight. Returns whether it was taken."""
        if partition_epoch < self.partition_epoch:
            return False
        self.committed = tuple(isr)
        self.partition_epoch = partition_epoch
        self.pending = None
        return True


def out_of_sync_replicas(
    isr: Iterable[int],
    leader_id: int,
    followers: dict[int, FollowerState],
    now_ms: int,
    leader_log_end_offset: int,
    lag_max_ms: int,
) -> list[int]:
    """ISR members (not the leader) that have not caught up within `lag_max_ms`."""
    out: list[int] = []
    for replica in isr:
        if replica == leader_id:
            continue
        state = followers.get(replica)
        if state is None or state.lagging(now_ms, leader_log_end_offset, lag_max_ms):
            out.append(replica)
    return out


def may_join_isr(state: FollowerState, high_watermark: int, leader_epoch_start_offset: int) -> bool:
    """Kafka's `isFollowerInSync`: the follower has everything committed and has reached the
    start of the current leader epoch (so it holds nothing of an older leader's divergent
    tail past that point)."""
    return (
        state.log_end_offset >= high_watermark and state.log_end_offset >= leader_epoch_start_offset
    )


def high_watermark_candidate(
    maximal_isr: Iterable[int],
    leader_id: int,
    leader_log_end_offset: int,
    followers: dict[int, FollowerState],
) -> int:
    """The minimum log end offset over the maximal ISR (-1 for a member not heard from)."""
    candidate = leader_log_end_offset
    for replica in maximal_isr:
        if replica == leader_id:
            continue
        state = followers.get(replica)
        candidate = min(candidate, state.log_end_offset if state is not None else -1)
    return candidate
