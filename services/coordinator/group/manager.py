"""The classic group protocol for the groups of one `__consumer_offsets` partition (Kafka's
`GroupMetadataManager`, classic part): JoinGroup, SyncGroup, Heartbeat, LeaveGroup, session
and rebalance timeouts, static membership, and the server-side assignment.

Every handler takes the request and a reply callable and returns an `Outcome` (records to write
and a continuation); timers push theirs on `outbox`. The rebalance engine (`rebalance.py`) is a
member, `rebalancer`, not a base class. Group metadata records are written when a
generation's assignment is settled (SyncGroup), when a group empties, and when a static member
takes a new member id, so a new owner replays the groups as they were last stable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from riverlog.common.assignors import ConsumerProtocolError
from riverlog.common.clock import Clock
from riverlog.common.errors import ErrorCode

from ..config import CoordinatorConfig
from . import assignment
from .group import ClassicGroup
from .member import (
    JoinReply,
    JoinRequest,
    JoinResponse,
    Member,
    SyncReply,
    SyncRequest,
    SyncResponse,
)
from .outcome import NOTHING, Outbox, Outcome
from .rebalance import Rebalancer, default_member_id, session_key
from .state import GroupState
from .timer import Timer

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState


class GroupManager:
    """The request handlers of the classic protocol (JoinGroup, SyncGroup, Heartbeat,
    LeaveGroup) over the rebalance engine it owns (`rebalancer`: the groups, their timers and
    `outbox`). Used from one shard task (or a test)."""

    def __init__(
        self,
        config: CoordinatorConfig,
        clock: Clock,
        timer: Timer,
        counts: assignment.PartitionCounts,
        new_member_id: Callable[[str], str] = default_member_id,
    ) -> None:
        self.config = config
        self.rebalancer = Rebalancer(config, clock, timer, counts, new_member_id)

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        """The shard's groups by id (the rebalancer's)."""
        return self.rebalancer.groups

    @property
    def outbox(self) -> Outbox:
        """What timers left to write (the rebalancer's)."""
        return self.rebalancer.outbox

    @property
    def counts(self) -> assignment.PartitionCounts:
        return self.rebalancer.counts

    def get_or_create(self, group_id: str) -> ClassicGroup:
        return self.rebalancer.get_or_create(group_id)

    def schedule_session(self, group: ClassicGroup, member: Member) -> None:
        self.rebalancer.schedule_session(group, member)

    def on_partition_counts(self) -> None:
        self.rebalancer.on_partition_counts()

    # --- JoinGroup --------------------------------------------------------------------------

    def join(self, req: JoinRequest, reply: JoinReply) -> Outcome:
        def fail(code: E, message: str = "") -> Outcome:
            reply(JoinResponse(code, message, member_id=req.member_id))
            return NOTHING

        if not req.group_id:
            return fail(E.INVALID_GROUP_ID, "the group id is empty")
        lo, hi = self.config.group_min_session_timeout_ms, self.config.group_max_session_timeout_ms
        if not lo <= req.session_timeout_ms <= hi:
            return fail(E.INVALID_SESSION_TIMEOUT, f"session.timeout.ms must be in [{lo}, {hi}]")
        if req.rebalance_timeout_ms <= 0:
            req = _with_rebalance_timeout(req, req.session_timeout_ms)
        group = self.rebalancer.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return fail(E.UNKNOWN_MEMBER_ID, f"group {req.group_id} does not exist")
            group = self.rebalancer.get_or_create(req.group_id)
        if group.is_in(S.DEAD):
            return fail(E.COORDINATOR_NOT_AVAILABLE, f"group {req.group_id} is being deleted")
        if not group.supports(req.protocol_type, req.protocols):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        new_member = not req.member_id or req.member_id in group.pending_members
        static_known = group.static_member_id(req.group_instance_id) is not None
        size = len(group.members) + len(group.pending_members)
        if new_member and not static_known and size >= self.config.group_max_size:
            return fail(E.GROUP_MAX_SIZE_REACHED, f"group.max.size is {self.config.group_max_size}")
        if not req.member_id:
            return self._join_unknown(group, req, reply)
        return self._join_known(group, req, reply)

    def _join_unknown(self, group: ClassicGroup, req: JoinRequest, reply: JoinReply) -> Outcome:
        member_id = self.rebalancer.new_member_id(req.client_id)
        if req.group_instance_id is not None:
            if group.static_member_id(req.group_instance_id) is not None:
                return self._replace_static(group, req, member_id, reply)
            return self._add_and_rebalance(group, req, member_id, reply)
        # Kafka >= 2.2: a dynamic member first gets its id, then joins with it.
        group.pending_members.add(member_id)
        self.rebalancer.timer.schedule(
            session_key(group, member_id),
            req.session_timeout_ms,
            lambda: self.rebalancer.expire_pending(group, member_id),
        )
        reply(JoinResponse(E.MEMBER_ID_REQUIRED, member_id=member_id))
        return NOTHING

    def _join_known(self, group: ClassicGroup, req: JoinRequest, reply: JoinReply) -> Outcome:
        if group.is_static_fenced(req.member_id, req.group_instance_id):
            reply(JoinResponse(E.FENCED_INSTANCE_ID, member_id=req.member_id))
            return NOTHING
        if req.member_id in group.pending_members:
            self.rebalancer.timer.cancel(session_key(group, req.member_id))
            return self._add_and_rebalance(group, req, req.member_id, reply)
        if not group.has_member(req.member_id) or group.is_in(S.EMPTY, S.DEAD):
            reply(JoinResponse(E.UNKNOWN_MEMBER_ID, member_id=req.member_id))
            return NOTHING
        member = group.member(req.member_id)
        if group.is_in(S.PREPARING_REBALANCE):
            return self._update_and_rebalance(group, member, req, reply, "member rejoined")
        if group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                reply(self.rebalancer.join_response(group, member))
                return NOTHING
            return self._update_and_rebalance(group, member, req, reply, "metadata changed")
        if member.member_id == group.leader_id or not member.matches(req.protocols):
            why = "the leader rejoined" if member.matches(req.protocols) else "metadata changed"
            return self._update_and_rebalance(group, member, req, reply, why)
        reply(self.rebalancer.join_response(group, member))
        return NOTHING

    def _new_member(self, req: JoinRequest, member_id: str) -> Member:
        return Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            is_new=True,
        )

    def _add_and_rebalance(
        self, group: ClassicGroup, req: JoinRequest, member_id: str, reply: JoinReply
    ) -> Outcome:
        member = self._new_member(req, member_id)
        member.join_reply = reply
        group.add(member)
        if group.is_in(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        self.rebalancer.maybe_prepare_rebalance(group, f"member {member_id} joined")
        self.rebalancer.check_join_complete(group)
        return NOTHING

    def _update_and_rebalance(
        self, group: ClassicGroup, member: Member, req: JoinRequest, reply: JoinReply, why: str
    ) -> Outcome:
        member.update(req)
        if member.join_reply is not None:
            member.reply_join(JoinResponse(E.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.join_reply = reply
        self.rebalancer.timer.cancel(session_key(group, member.member_id))
        self.rebalancer.maybe_prepare_rebalance(group, why)
        self.rebalancer.check_join_complete(group)
        return NOTHING

    def _replace_static(
        self, group: ClassicGroup, req: JoinRequest, new_id: str, reply: JoinReply
    ) -> Outcome:
        """A static member rejoining with no member id (a restart) takes over its instance id:
        the old member id is fenced, and in a stable group with unchanged metadata the member
        gets the current generation back with no rebalance."""
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        old = group.member(old_id)
        unchanged = old.matches(req.protocols)
        old.reply_join(JoinResponse(E.FENCED_INSTANCE_ID, member_id=old_id))
        old.reply_sync(SyncResponse(E.FENCED_INSTANCE_ID))
        self.rebalancer.timer.cancel(session_key(group, old_id))
        member = group.replace_static(req.group_instance_id, new_id)
        member.update(req)
        log.info(
            "group %s: static member %s replaced member id %s with %s",
            group.group_id,
            req.group_instance_id,
            old_id,
            new_id,
        )
        if group.is_in(S.STABLE) and unchanged:
            self.rebalancer.schedule_session(group, member)
            generation = group.generation_id
            is_leader = member.member_id == group.leader_id

            def after(error: E) -> None:
                if error != E.NONE:
                    reply(JoinResponse(error, member_id=new_id))
                    return
                response = self.rebalancer.join_response(group, member, skip_assignment=is_leader)
                if generation != group.generation_id:
                    response = JoinResponse(E.REBALANCE_IN_PROGRESS, member_id=new_id)
                reply(response)

            return Outcome([self.rebalancer.group_record(group)], after)
        return self._update_and_rebalance(group, member, req, reply, "static member rejoined")

    # --- SyncGroup --------------------------------------------------------------------------

    def sync(self, req: SyncRequest, reply: SyncReply) -> Outcome:
        group = self.rebalancer.groups.get(req.group_id)
        error = self._validate_member(
            group, req.member_id, req.group_instance_id, req.generation_id
        )
        if error == E.NONE and group is not None:
            if (req.protocol_type and req.protocol_type != group.protocol_type) or (
                req.protocol_name and req.protocol_name != group.protocol_name
            ):
                error = E.INCONSISTENT_GROUP_PROTOCOL
            elif group.is_in(S.PREPARING_REBALANCE):
                error = E.REBALANCE_IN_PROGRESS
        if error != E.NONE or group is None:
            reply(SyncResponse(error))
            return NOTHING
        member = group.member(req.member_id)
        self.rebalancer.schedule_session(group, member)
        if group.is_in(S.STABLE):
            reply(self._sync_response(group, member))
            return NOTHING
        group.pending_sync.discard(member.member_id)
        if member.sync_reply is not None:
            member.reply_sync(SyncResponse(E.REBALANCE_IN_PROGRESS))
        member.sync_reply = reply
        if member.member_id != group.leader_id:
            return NOTHING
        return self._settle_assignment(group, dict(req.assignments))

    def _settle_assignment(self, group: ClassicGroup, given: dict[str, bytes]) -> Outcome:
        server_side = False
        counts: dict[str, int] = {}
        if not given and assignment.can_assign(group):
            try:
                given, counts = assignment.assign(group, self.rebalancer.counts)
                server_side = True
            except ConsumerProtocolError as exc:
                log.warning("group %s: cannot assign server-side: %s", group.group_id, exc)
        assignments = {m: given.get(m, b"") for m in group.members}
        generation = group.generation_id
        record = self.rebalancer.group_record(group, assignments, counts if server_side else None)

        def after(error: E) -> None:
            if not group.is_in(S.COMPLETING_REBALANCE) or group.generation_id != generation:
                return
            if error != E.NONE:
                for member in group.members.values():
                    member.reply_sync(SyncResponse(error))
                self.rebalancer.prepare_rebalance(
                    group, f"the assignment could not be written ({error.name})"
                )
                return
            for member_id, data in assignments.items():
                group.members[member_id].assignment = data
            group.server_assigned = server_side
            group.assigned_counts = counts
            group.transition_to(S.STABLE, self.rebalancer.now_ms)
            for member in group.members.values():
                member.reply_sync(self._sync_response(group, member))

        return Outcome([record], after)

    def _sync_response(self, group: ClassicGroup, member: Member) -> SyncResponse:
        return SyncResponse(
            protocol_type=group.protocol_type or "",
            protocol_name=group.protocol_name or "",
            assignment=member.assignment,
        )

    # --- Heartbeat, LeaveGroup, expiry ----------------------------------------------------

    def _validate_member(
        self, group: ClassicGroup | None, member_id: str, instance_id: str | None, generation: int
    ) -> E:
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_in(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if instance_id is not None:  # Kafka's validateMember
            holder = group.static_member_id(instance_id)
            if holder is None:
                return E.UNKNOWN_MEMBER_ID
            if holder != member_id:
                return E.FENCED_INSTANCE_ID
        if not group.has_member(member_id) or group.is_in(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        if generation != group.generation_id:
            return E.ILLEGAL_GENERATION
        return E.NONE

    def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> E:
        group = self.rebalancer.groups.get(group_id)
        error = self._validate_member(group, member_id, instance_id, generation)
        if error != E.NONE or group is None:
            return error
        self.rebalancer.schedule_session(group, group.member(member_id))
        if group.is_in(S.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def leave(self, group_id: str, member_id: str, instance_id: str | None, reason: str) -> E:
        """One member of a LeaveGroup: by member id, or by instance id for static members."""
        group = self.rebalancer.groups.get(group_id)
        if group is None or group.is_in(S.DEAD):
            return E.UNKNOWN_MEMBER_ID
        if instance_id is not None:
            holder = group.static_member_id(instance_id)
            if holder is None:
                return E.UNKNOWN_MEMBER_ID
            if member_id and holder != member_id:
                return E.FENCED_INSTANCE_ID
            member_id = holder
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.rebalancer.timer.cancel(session_key(group, member_id))
            self.rebalancer.check_join_complete(group)
            return E.NONE
        if not group.has_member(member_id):
            return E.UNKNOWN_MEMBER_ID
        self.rebalancer.remove_member(group, member_id, f"member left ({reason or 'no reason'})")
        return E.NONE


def _with_rebalance_timeout(req: JoinRequest, timeout_ms: int) -> JoinRequest:
    return replace(req, rebalance_timeout_ms=timeout_ms)
