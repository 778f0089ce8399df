"""`ConsumerCoordinator`: a consumer's side of the classic group protocol (Kafka's
ConsumerCoordinator on top of AbstractCoordinator): it joins the group, computes the assignment
when it is the leader, applies the assignment around the rebalance listener, keeps the member
alive through the heartbeat thread and commits offsets with the generation it belongs to.

Threads: the consumer's thread calls everything public (`poll`, `subscribe`, `unsubscribe`,
commits, `close`), and every listener callback runs on it. The heartbeat thread calls only the
`HeartbeatTarget` methods (`heartbeat_member`, `on_heartbeat_result`, `leave_on_poll_timeout`).
The state both threads share (member state, generation, rejoin flag, a fatal error) changes
under `self.lock`; no RPC is sent while holding it. The join round trips themselves are in
`join.py`; committed offsets in `offsets.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence, Set

from riverlog.common.assignors import (
    Assignment,
    PartitionAssignor,
    RebalanceProtocol,
    assignor_for,
)
from riverlog.common.clock import SYSTEM_CLOCK, Clock
from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.types import TopicPartition

from ...config import ConfigError, ConsumerConfig
from ...errors import ClientTimeoutError, CommitFailedError, RebalanceInProgressError
from ..subscription import SubscriptionState
from .api import GroupApi, GroupMember, OffsetAndMetadata
from .heartbeat import HeartbeatThread
from .join import JoinCycle, TopicSource
from .offsets import OffsetCommitter, Offsets
from .state import ConsumerRebalanceListener, Generation, MemberState

log = logging.getLogger(__name__)


def rebalance_protocol(assignors: Sequence[PartitionAssignor]) -> RebalanceProtocol:
    """The protocol every configured assignor supports, cooperative when possible (Kafka)."""
    common = set(RebalanceProtocol)
    for assignor in assignors:
        common &= set(assignor.supported_protocols)
    if not common:
        names = ", ".join(a.name for a in assignors)
        raise ConfigError(f"partition.assignment.strategy: {names} share no rebalance protocol")
    return max(common)


class ConsumerCoordinator(JoinCycle):
    """One consumer's group membership. Lifecycle: created with the consumer (when group.id is
    set) → subscribe() → poll()... → close(). See the module docstring for threads."""

    def __init__(
        self,
        config: ConsumerConfig,
        api: GroupApi,
        subscriptions: SubscriptionState,
        topics: TopicSource,
        *,
        clock: Clock = SYSTEM_CLOCK,
        heartbeat_thread: bool = True,
    ) -> None:
        assignors = [assignor_for(name) for name in config.partition_assignment_strategy]
        super().__init__(config, api, subscriptions, topics, assignors)
        self.protocol = rebalance_protocol(assignors)
        self._clock = clock
        self._listener = ConsumerRebalanceListener()
        self._listener_error: Exception | None = None
        self._heartbeat_thread = heartbeat_thread
        self._next_metadata_ms = 0
        self._closed = False
        self.heartbeat = HeartbeatThread(
            self,
            api,
            clock,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            max_poll_interval_ms=config.max_poll_interval_ms,
            request_timeout_ms=config.request_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            name=f"riverlog-heartbeat-{config.group_id}",
        )
        self.offsets = OffsetCommitter(
            api,
            config.group_id,
            clock=clock,
            auto_commit=config.enable_auto_commit,
            auto_commit_interval_ms=config.auto_commit_interval_ms,
            request_timeout_ms=config.request_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            member=self._commit_member,
            on_error=self._on_commit_error,
            require_stable=config.isolation_level == "read_committed",
        )

    # ---- subscription --------------------------------------------------------------------

    def subscribe(
        self, topics: Sequence[str], pattern: bool, listener: ConsumerRebalanceListener | None
    ) -> None:
        self._listener = listener or ConsumerRebalanceListener()
        if pattern:
            self._next_metadata_ms = 0  # match the pattern at the next poll
        if self.subs.subscribe(topics):
            self.request_rejoin("the subscription changed")

    def unsubscribe(self) -> None:
        """Give up the assignment (listener called) and leave the group."""
        self._on_leave_prepare()
        self.maybe_leave_group("the consumer unsubscribed")
        self._join_future = None  # abandoned: its answer is never applied
        self.subs.unsubscribe()
        with self.lock:
            self._assignment_snapshot = None
            self._rejoin_needed = True

    # ---- poll ----------------------------------------------------------------------------

    def poll(self, timeout_s: float) -> bool:
        """From Consumer.poll(): run finished commit callbacks, (re)join when needed, refresh
        pattern matches, auto commit. False if the member is not in a stable generation yet
        (the join continues at the next poll)."""
        self.offsets.invoke_completed()
        self.raise_fatal()
        self.heartbeat.poll_called()
        if not self.subs.subscribed:
            self.offsets.maybe_auto_commit(self._consumed)
            return True
        self._maybe_refresh_metadata()
        if self.joining:
            if self._heartbeat_thread:
                self.heartbeat.start()
            joined = self.ensure_active_group(timeout_s)
            self._raise_listener_error()
            if not joined:
                return False
        self.offsets.maybe_auto_commit(self._consumed)
        return True

    def _maybe_refresh_metadata(self) -> None:
        """Every metadata.max.age.ms: re-match a pattern (new topics → rejoin) and, on the
        leader, notice partition counts that changed since it assigned (→ rejoin)."""
        now = self._clock.monotonic_ms()
        if now < self._next_metadata_ms:
            return
        self._next_metadata_ms = now + self.config.metadata_max_age_ms
        pattern = self.subs.pattern
        try:
            if pattern is not None:
                counts = self.topics.partition_counts(None)
                internal = self.config.exclude_internal_topics
                matching = [
                    topic
                    for topic in counts
                    if pattern.fullmatch(topic) and not (internal and topic.startswith("__"))
                ]
                if self.subs.subscribe(matching):
                    self.request_rejoin(f"the pattern {pattern.pattern!r} matches other topics")
            snapshot = self._assignment_snapshot
            if snapshot is not None and not self.rejoin_needed:
                current = self.topics.partition_counts(sorted(snapshot))
                if current != snapshot:
                    self.request_rejoin("partition counts of subscribed topics changed")
        except RiverlogError as e:
            log.warning("metadata refresh for group %s failed: %s", self.group_id, e)

    # ---- rebalance callbacks -------------------------------------------------------------

    def _invoke(
        self, callback: Callable[[Set[TopicPartition]], None], partitions: Set[TopicPartition]
    ) -> None:
        try:
            callback(set(partitions))
        except Exception as e:
            log.exception("rebalance listener %s failed", getattr(callback, "__name__", ""))
            if self._listener_error is None:
                self._listener_error = e

    def _raise_listener_error(self) -> None:
        error, self._listener_error = self._listener_error, None
        if error is not None:
            raise error

    def on_join_prepare(self) -> None:
        """Before JoinGroup: commit positions (auto commit), then give up what must go:
        everything (eager), the partitions of topics no longer subscribed (cooperative), or
        everything as lost when the generation was reset."""
        if self.offsets.auto_commit and self.generation.valid:
            self._commit_consumed_quietly()
        owned = set(self.subs.partitions)
        listener = self._listener
        if not self.generation.valid:
            if owned:
                self._invoke(listener.on_partitions_lost, owned)
                self.subs.assign_from_subscribed([])
        elif self.protocol == RebalanceProtocol.EAGER:
            self._invoke(listener.on_partitions_revoked, owned)
            self.subs.assign_from_subscribed([])
        else:
            revoked = {tp for tp in owned if tp.topic not in self.subs.subscription}
            if revoked:
                self._invoke(listener.on_partitions_revoked, revoked)
                self.subs.assign_from_subscribed(sorted(owned - revoked))

    def on_join_complete(self, generation: Generation, assignment: Assignment) -> None:
        """After SyncGroup: take the assignment. Cooperative: revoke what went elsewhere (and
        rejoin so it can be given out), keep the rest, report only what was added."""
        self.assignor(generation.protocol_name).on_assignment(assignment, generation.generation_id)
        assigned = set(assignment.partitions)
        foreign = {tp for tp in assigned if tp.topic not in self.subs.subscription}
        if foreign:
            self.request_rejoin("assigned partitions of topics this member does not subscribe to")
        self.offsets.reset_auto_commit_timer()
        listener = self._listener
        if self.protocol == RebalanceProtocol.COOPERATIVE:
            owned = set(self.subs.partitions)
            revoked = owned - assigned
            if revoked:
                self._invoke(listener.on_partitions_revoked, revoked)
                self.request_rejoin("partitions were revoked: a follow-up rebalance assigns them")
            self.subs.assign_from_subscribed(sorted(assigned))
            self._invoke(listener.on_partitions_assigned, assigned - owned)
        else:
            self.subs.assign_from_subscribed(sorted(assigned))
            self._invoke(listener.on_partitions_assigned, assigned)

    def _on_leave_prepare(self) -> None:
        owned = set(self.subs.partitions)
        if not self.subs.subscribed or not owned:
            return
        if not self.generation.valid or self.state != MemberState.STABLE:
            self._invoke(self._listener.on_partitions_lost, owned)
        else:
            self._invoke(self._listener.on_partitions_revoked, owned)
        self.subs.assign_from_subscribed([])

    # ---- heartbeat thread ----------------------------------------------------------------

    def heartbeat_member(self) -> GroupMember | None:
        with self.lock:
            if self._closed or self.state != MemberState.STABLE or not self.generation.valid:
                return None
            return self.member()

    def on_heartbeat_result(self, member: GroupMember, code: ErrorCode) -> None:
        with self.lock:
            if member.generation_id != self.generation.generation_id:
                return  # answer to an older generation
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self.request_rejoin("the group is rebalancing (heartbeat)")
            elif code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
                log.info("group %s: heartbeat answered %s: rejoining", self.group_id, code.name)
                self.reset_generation(reset_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID)
            elif code == ErrorCode.FENCED_INSTANCE_ID:
                self.fail(
                    error_for(
                        code,
                        f"group.instance.id {member.group_instance_id!r} is used by a newer member",
                    )
                )

    def leave_on_poll_timeout(self) -> bool:
        with self.lock:
            if self._closed or self.state != MemberState.STABLE:
                return False
        self.maybe_leave_group("consumer poll timeout has expired")
        return True

    # ---- commits -------------------------------------------------------------------------

    def _consumed(self) -> Offsets:
        return {tp: OffsetAndMetadata(pos) for tp, pos in self.subs.consumed().items()}

    def _commit_consumed_quietly(self) -> None:
        try:
            self.offsets.wait_pending(self.config.request_timeout_ms / 1000)
            self.offsets.commit_sync(self._consumed(), self.config.default_api_timeout_ms / 1000)
        except RiverlogError as e:
            log.warning("group %s: committing positions failed: %s", self.group_id, e)

    def _commit_member(self) -> GroupMember:
        """The identity commits carry; raises when this member may not commit now."""
        if not self.subs.subscribed:
            return GroupMember(self.group_id)  # manual assignment: no generation
        with self.lock:
            if self.state == MemberState.STABLE and self.generation.valid:
                return self.member()
            if self.state != MemberState.UNJOINED:
                raise RebalanceInProgressError()
        raise CommitFailedError("this member is not in the group (it rejoins at the next poll())")

    def _on_commit_error(self, code: ErrorCode) -> None:
        if not self.subs.subscribed:
            return
        with self.lock:
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self.request_rejoin("the group is rebalancing (commit)")
            elif code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
                self.reset_generation(reset_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID)
            elif code == ErrorCode.FENCED_INSTANCE_ID:
                self.fail(error_for(code))

    def commit_sync(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None, timeout_s: float
    ) -> None:
        self.offsets.commit_sync(self._consumed() if offsets is None else offsets, timeout_s)

    def refresh_committed_offsets(self, timeout_s: float) -> None:
        """Partitions a rebalance just assigned start at their committed offset, else per
        auto.offset.reset (Kafka's refreshCommittedOffsetsIfNeeded)."""
        waiting = self.subs.initializing()
        if not waiting:
            return
        try:
            found = self.offsets.fetch_committed(waiting, max(timeout_s, 0.0))
        except ClientTimeoutError:
            return  # the coordinator is moving: try again at the next round
        for tp in waiting:
            state = self.subs.partitions.get(tp)
            if state is None or state.position is not None or state.reset is not None:
                continue
            committed = found.get(tp)
            if committed is not None and committed.offset >= 0:
                state.seek(committed.offset)
            else:
                state.request_reset(self.subs.default_reset)

    # ---- close ---------------------------------------------------------------------------

    def close(self, timeout_s: float) -> None:
        """Commit positions (auto commit), revoke the assignment, leave (dynamic members),
        stop the heartbeat thread. Static members do not leave: their assignment waits for
        them to come back within session.timeout.ms."""
        if self._closed:
            return
        try:
            if self.offsets.auto_commit and (not self.subs.subscribed or self.generation.valid):
                self._commit_consumed_quietly()
            self.offsets.wait_pending(timeout_s)
            self._on_leave_prepare()
            self.maybe_leave_group("the consumer is being closed")
            self._join_future = None
        finally:
            with self.lock:
                self._closed = True
            self.heartbeat.stop()
            self.offsets.close(0)
        self._raise_listener_error()

    def _heartbeat_reset(self) -> None:
        self.heartbeat.reset()
        self.heartbeat.wake()
