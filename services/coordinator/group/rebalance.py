"""The rebalance engine of the classic protocol (Kafka's `prepareRebalance`,
`onCompleteJoin`, the delayed and initial-delayed joins, heartbeat and pending-sync expiry):
how a group moves from PreparingRebalance to a new generation, and who is dropped on the way.

`GroupManager` (the request handlers) owns one as its `rebalancer` and calls into it; timers
fire here and push what they need written on `outbox`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from riverlog.common.clock import Clock
from riverlog.common.errors import ErrorCode

from ..config import CoordinatorConfig
from ..records import CoordinatorRecord, GroupValue, MemberValue, group_record
from . import assignment
from .group import ClassicGroup
from .member import JoinResponse, Member, SyncResponse
from .outcome import Outbox, Outcome
from .state import GroupState
from .timer import Timer

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState


def default_member_id(client_id: str) -> str:
    return f"{client_id or 'member'}-{uuid.uuid4()}"


class Rebalancer:
    """The groups of one shard and their rebalances. Lifecycle: built by the shard's
    `GroupManager` when it loads its partition; used only from that shard's task (or a test) —
    no locks."""

    def __init__(
        self,
        config: CoordinatorConfig,
        clock: Clock,
        timer: Timer,
        counts: assignment.PartitionCounts,
        new_member_id: Callable[[str], str] = default_member_id,
    ) -> None:
        self.config = config
        self.clock = clock
        self.timer = timer
        self.counts = counts
        self.new_member_id = new_member_id
        self.groups: dict[str, ClassicGroup] = {}
        self.outbox = Outbox()

    @property
    def now_ms(self) -> int:
        return self.clock.monotonic_ms()

    def get_or_create(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, self.now_ms)
        return group

    def join_response(
        self, group: ClassicGroup, member: Member, skip_assignment: bool = False
    ) -> JoinResponse:
        is_leader = member.member_id == group.leader_id
        return JoinResponse(
            generation_id=group.generation_id,
            protocol_type=group.protocol_type or "",
            protocol_name=group.protocol_name or "",
            leader=group.leader_id or "",
            member_id=member.member_id,
            members=group.join_members() if is_leader else (),
            skip_assignment=skip_assignment,
        )

    # --- rebalance --------------------------------------------------------------------------

    def maybe_prepare_rebalance(self, group: ClassicGroup, why: str) -> None:
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self.prepare_rebalance(group, why)

    def prepare_rebalance(self, group: ClassicGroup, why: str) -> None:
        """Kafka's `prepareRebalance`: parked syncs learn REBALANCE_IN_PROGRESS, and the join
        phase waits for every member (or the rebalance timeout, or the initial delay)."""
        if group.is_in(S.COMPLETING_REBALANCE):
            for member in group.members.values():
                member.assignment = b""
                member.reply_sync(SyncResponse(E.REBALANCE_IN_PROGRESS))
        self.timer.cancel(sync_key(group))
        was_empty = group.is_in(S.EMPTY)
        group.transition_to(S.PREPARING_REBALANCE, self.now_ms)
        log.info(
            "group %s: preparing to rebalance (generation %d): %s",
            group.group_id,
            group.generation_id,
            why,
        )
        delay = self.config.group_initial_rebalance_delay_ms
        if was_empty and delay > 0:
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._delay_initial_join(group, delay, remaining)
            return
        self.timer.schedule(
            join_key(group), group.rebalance_timeout_ms(), lambda: self._complete_join(group)
        )

    def _delay_initial_join(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        """Kafka's `InitialDelayedJoin`: the first rebalance of a new group waits
        group.initial.rebalance.delay.ms, again while members keep arriving, at most the
        rebalance timeout in all."""
        group.initial_delay_until_ms = self.now_ms + delay
        self.timer.schedule(
            join_key(group), delay, lambda: self._initial_delay_done(group, remaining)
        )

    def _initial_delay_done(self, group: ClassicGroup, remaining: int) -> None:
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            self._delay_initial_join(group, delay, remaining - delay)
            return
        group.initial_delay_until_ms = 0
        self._complete_join(group)

    def check_join_complete(self, group: ClassicGroup) -> None:
        if not group.is_in(S.PREPARING_REBALANCE) or not group.all_joined:
            return
        if group.initial_delay_until_ms > self.now_ms:
            return
        self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """Kafka's `onCompleteJoin`: members that did not rejoin leave, the next generation
        starts, and every parked join gets its answer (the leader with the member list)."""
        self.timer.cancel(join_key(group))
        if not group.is_in(S.PREPARING_REBALANCE):
            return
        for member in group.not_rejoined():
            log.info("group %s: member %s did not rejoin in time", group.group_id, member.member_id)
            self.timer.cancel(session_key(group, member.member_id))
            group.remove(member.member_id)
        group.init_next_generation(self.now_ms)
        if group.is_in(S.EMPTY):
            group.empty_since_ms = self.clock.time_ms()
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            self.outbox.push(Outcome([self.group_record(group)]))
            return
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        for member in group.members.values():
            member.is_new = False
            member.reply_join(self.join_response(group, member))
            self.schedule_session(group, member)
        generation = group.generation_id
        self.timer.schedule(
            sync_key(group),
            group.rebalance_timeout_ms(),
            lambda: self._sync_timeout(group, generation),
        )

    def _sync_timeout(self, group: ClassicGroup, generation: int) -> None:
        if not group.is_in(S.COMPLETING_REBALANCE) or group.generation_id != generation:
            return
        for member_id in sorted(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                log.info("group %s: member %s never synced", group.group_id, member_id)
                self.timer.cancel(session_key(group, member_id))
                group.remove(member_id)
        self.prepare_rebalance(group, "members did not sync in time")
        self.check_join_complete(group)

    def remove_member(self, group: ClassicGroup, member_id: str, why: str) -> None:
        member = group.remove(member_id)
        self.timer.cancel(session_key(group, member_id))
        if member is not None:
            member.reply_join(JoinResponse(E.UNKNOWN_MEMBER_ID, member_id=member_id))
            member.reply_sync(SyncResponse(E.UNKNOWN_MEMBER_ID))
        log.info("group %s: member %s removed: %s", group.group_id, member_id, why)
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, why)
        self.check_join_complete(group)

    def schedule_session(self, group: ClassicGroup, member: Member) -> None:
        self.timer.schedule(
            session_key(group, member.member_id),
            member.session_timeout_ms,
            lambda: self._session_expired(group, member.member_id),
        )

    def _session_expired(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None or self.groups.get(group.group_id) is not group:
            return
        if member.awaiting_join or member.awaiting_sync:
            self.schedule_session(group, member)
            return
        self.remove_member(group, member_id, "session timeout expired")

    def expire_pending(self, group: ClassicGroup, member_id: str) -> None:
        if member_id in group.pending_members:
            log.info("group %s: pending member %s never joined", group.group_id, member_id)
            group.pending_members.discard(member_id)
            self.check_join_complete(group)

    def on_partition_counts(self) -> None:
        """After a metadata change: rebalance the groups whose server-side assignment was
        computed on partition counts that changed (a topic grew, appeared or vanished)."""
        for group in list(self.groups.values()):
            if group.is_in(S.STABLE) and assignment.counts_changed(group, self.counts):
                self.prepare_rebalance(group, "partition count of a subscribed topic changed")

    # --- records ----------------------------------------------------------------------------

    def group_record(
        self,
        group: ClassicGroup,
        assignments: dict[str, bytes] | None = None,
        server_counts: dict[str, int] | None = None,
    ) -> CoordinatorRecord:
        """The group as a record; `assignments` and `server_counts` override what the group
        holds (a SyncGroup writes them before applying them)."""
        if assignments is None and group.server_assigned:
            server_counts = group.assigned_counts
        members = [
            MemberValue(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata_for(group.protocol_name) if group.protocol_name else b"",
                assignment=(assignments or {}).get(m.member_id, m.assignment),
            )
            for m in group.members.values()
        ]
        value = GroupValue(
            protocol_type=group.protocol_type or "",
            generation_id=group.generation_id,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id,
            current_state_timestamp_ms=self.clock.time_ms(),
            members=members,
            server_assigned_counts=server_counts,
        )
        return group_record(group.group_id, value)


def session_key(group: ClassicGroup, member_id: str) -> str:
    return f"session:{group.group_id}:{member_id}"


def join_key(group: ClassicGroup) -> str:
    return f"join:{group.group_id}"


def sync_key(group: ClassicGroup) -> str:
    return f"sync:{group.group_id}"
