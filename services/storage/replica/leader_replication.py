"""The leader side of replication for a hosted partition (Kafka's `Partition` leader half): what
the followers' fetches say, the in-sync replica set kept in step with them through AlterPartition,
and the high watermark that follows the ISR's log end offsets.

A member of `Partition` (`partition.replication`), so the partition module holds the replica's
state, its leadership and its data path, and this one the followers and the ISR the leader keeps
on top of them. The rules
themselves (who is caught up, who may join, where the high watermark may go) are pure functions
in `isr.py`; this module applies them to one partition's state and asks the controller, through
`alter_isr`, for the changes they call for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from riverlog.common.clock import Clock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from ..log import PartitionLog
from .isr import (
    AlterIsrRequest,
    FollowerState,
    IsrState,
    high_watermark_candidate,
    may_join_isr,
    out_of_sync_replicas,
)
from .role import Role

# The partition's logger: ISR changes are logged under the same name as the rest of its life.
log = logging.getLogger("riverlog.services.storage.replica.partition")


class Replica(Protocol):
    """What leader replication reads of its partition (and the partition epoch it moves when
    the controller commits an ISR change)."""

    tp: TopicPartition
    log: PartitionLog
    node_id: int
    role: Role
    leader_epoch: int
    replicas: tuple[int, ...]
    partition_epoch: int


class LeaderReplication:
    """The leader's follower tracking, ISR changes and high watermark of one partition.

    Owned by its `Partition` (made in its constructor, never shared), whose leadership code
    resets it at each new epoch (`on_new_epoch`) and commits the ISRs the image brings
    (`on_image_isr`). Event-loop thread only, like the Partition it is part of.
    """

    def __init__(
        self,
        replica: Replica,
        on_change: Callable[[TopicPartition], None],
        *,
        clock: Clock,
        replica_lag_time_max_ms: int,
        alter_isr: Callable[[AlterIsrRequest], None] | None = None,
        may_lead: Callable[[], bool] | None = None,
    ) -> None:
        self._replica = replica
        self._on_change = on_change
        self.clock = clock
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._alter_isr = alter_isr
        self._may_lead = may_lead
        self.isr_state = IsrState((), -1)
        # Follower node id -> what its fetches told (leader only).
        self.followers: dict[int, FollowerState] = {}
        # Where this node's leadership epoch starts in its log (leader only).
        self.leader_epoch_start_offset = -1
        self.isr_shrinks = 0
        self.isr_expands = 0

    @property
    def isr(self) -> tuple[int, ...]:
        """The committed ISR."""
        return self.isr_state.isr

    def on_new_epoch(self, isr: tuple[int, ...], partition_epoch: int) -> None:
        """Kafka's makeLeader / makeFollower: take the image's ISR; a leader records where its
        epoch starts and resets what it knows of the followers (those in the ISR count as caught
        up now). (A follower's fetcher sees the new epoch and truncates by it before fetching
        again.)"""
        p = self._replica
        self.isr_state = IsrState(isr, partition_epoch)
        self.followers.clear()
        if p.role is Role.LEADER:
            # A leader restarted within its epoch keeps the epoch's recorded start.
            cache = p.log.leader_epoch_cache
            start = cache.start_offset_of(p.leader_epoch)
            if start is None:
                start = p.log.log_end_offset
                cache.assign(p.leader_epoch, start)
            self.leader_epoch_start_offset = start
            now = self.clock.monotonic_ms()
            for replica in p.replicas:
                if replica != p.node_id:
                    caught_up = now if replica in self.isr_state.isr else 0
                    self.followers[replica] = FollowerState(last_caught_up_ms=caught_up)
        else:
            self.leader_epoch_start_offset = -1

    def on_image_isr(self, isr: tuple[int, ...], partition_epoch: int) -> None:
        """A newer ISR from the image within the same epoch."""
        self.isr_state.commit(isr, partition_epoch)

    def check_min_isr(self) -> None:
        """acks=all needs min.insync.replicas in the (committed) ISR before appending."""
        in_sync = len(self.isr)
        if in_sync < self._replica.log.config.min_insync_replicas:
            raise RiverlogError(
                f"{self._replica.tp}: {in_sync} in-sync replicas, min.insync.replicas is "
                f"{self._replica.log.config.min_insync_replicas}",
                ErrorCode.NOT_ENOUGH_REPLICAS,
            )

    def update_follower_fetch_state(self, follower_id: int, fetch_offset: int) -> None:
        """A follower fetched from `fetch_offset`: it holds everything below it. May move the
        high watermark and ask to take the follower back into the ISR."""
        if self._replica.role is not Role.LEADER or follower_id not in self._replica.replicas:
            return
        state = self.followers.setdefault(follower_id, FollowerState())
        state.update(fetch_offset, self.clock.monotonic_ms(), self._replica.log.log_end_offset)
        self._maybe_expand_isr(follower_id, state)
        self.maybe_increment_high_watermark()

    def _maybe_expand_isr(self, follower_id: int, state: FollowerState) -> None:
        isr = self.isr_state
        if isr.in_flight or follower_id in isr.maximal:
            return
        if may_join_isr(state, self._replica.log.high_watermark, self.leader_epoch_start_offset):
            new_isr = tuple(r for r in self._replica.replicas if r in isr.isr or r == follower_id)
            log.info(
                "%s: expanding the ISR %s -> %s", self._replica.tp, list(isr.isr), list(new_isr)
            )
            self.isr_expands += 1
            self._request_isr(new_isr)

    def maybe_shrink_isr(self) -> bool:
        """Ask to drop the ISR members that lagged past replica.lag.time.max.ms; called
        periodically (Kafka: every lag-time/2). Returns whether a change was sent."""
        if self._replica.role is not Role.LEADER or self.isr_state.in_flight:
            return False
        if self._may_lead is not None and not self._may_lead():
            return False
        lagging = out_of_sync_replicas(
            self.isr_state.isr,
            self._replica.node_id,
            self.followers,
            self.clock.monotonic_ms(),
            self._replica.log.log_end_offset,
            self.replica_lag_time_max_ms,
        )
        if not lagging:
            return False
        new_isr = tuple(r for r in self.isr_state.isr if r not in lagging)
        log.info(
            "%s: shrinking the ISR %s -> %s (lagging: %s)",
            self._replica.tp,
            list(self.isr_state.isr),
            list(new_isr),
            lagging,
        )
        self.isr_shrinks += 1
        self._request_isr(new_isr)
        # The high watermark may move now that the lagging replicas' offsets matter less.
        self.maybe_increment_high_watermark()
        return True

    def _request_isr(self, new_isr: tuple[int, ...]) -> None:
        request = AlterIsrRequest(
            self._replica.tp, self._replica.leader_epoch, new_isr, self.isr_state.partition_epoch
        )
        self.isr_state.pending = request
        if self._alter_isr is not None:
            self._alter_isr(request)

    def on_alter_isr_result(
        self, request: AlterIsrRequest, isr: tuple[int, ...] | None, partition_epoch: int
    ) -> None:
        """The controller's answer to `request`: the committed ISR and partition epoch, or
        None when the change failed for good (the pending change is dropped; a retriable
        failure is retried by the sender, an epoch mismatch waits for the image)."""
        if (
            self.isr_state.pending is not request
            or self._replica.leader_epoch != request.leader_epoch
        ):
            return  # superseded by an image or a new epoch
        if isr is None:
            self.isr_state.pending = None
        else:
            self.isr_state.commit(isr, partition_epoch)
            self._replica.partition_epoch = max(self._replica.partition_epoch, partition_epoch)
            log.info(
                "%s: ISR is now %s (partition epoch %d)",
                self._replica.tp,
                list(isr),
                partition_epoch,
            )
        self.maybe_increment_high_watermark()
        self._on_change(self._replica.tp)

    @property
    def under_replicated(self) -> bool:
        return self._replica.role is Role.LEADER and len(self.isr) < len(self._replica.replicas)

    def enough_replicas_after_append(self) -> bool:
        """Kafka's checkEnoughReplicasReachOffset second half: the committed ISR still has
        min.insync.replicas members."""
        return len(self.isr) >= self._replica.log.config.min_insync_replicas

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark up to the maximal ISR's minimum log end offset; returns
        whether it moved (waiters on the partition are then woken)."""
        if self._replica.role is not Role.LEADER:
            return False
        new_hw = high_watermark_candidate(
            self.isr_state.maximal,
            self._replica.node_id,
            self._replica.log.log_end_offset,
            self.followers,
        )
        if new_hw <= self._replica.log.high_watermark:
            return False
        self._replica.log.high_watermark = new_hw
        self._on_change(self._replica.tp)
        return True
