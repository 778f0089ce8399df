"""One classic group (Kafka's `ClassicGroup`): its members, state, generation, chosen protocol
and leader, the static-member index and the members still owing a join or a sync.

The group is bookkeeping only: it never schedules timers or writes records (the manager does),
so every rule about who may join, which protocol wins and who leads reads in one place and is
tested without a clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from .member import JoinMember, Member, Protocol
from .state import GroupState, StateMachine


class ClassicGroup:
    """Lifecycle: created on the first join or simple commit (EMPTY) or by replay when its
    partition loads; removed when DEAD. Owned by one shard task."""

    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.fsm = StateMachine(state, now_ms)
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        """group.instance.id → the member id currently holding it."""
        self.pending_members: set[str] = set()
        """Member ids handed out with MEMBER_ID_REQUIRED, not yet joined with them."""
        self.pending_sync: set[str] = set()
        """Members that have not sent SyncGroup for the current generation yet."""
        self.server_assigned = False
        """The current generation's assignment was computed by the coordinator."""
        self.assigned_counts: dict[str, int] = {}
        """Partition counts of the subscribed topics when the coordinator assigned."""
        self.initial_delay_until_ms = 0
        self.new_member_added = False
        """A member joined a new group (generation 0) during its initial delay."""
        self.empty_since_ms = 0
        """Wall-clock time the group last became empty (offsets retention counts from it)."""

    # --- state ------------------------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        return self.fsm.state

    def is_in(self, *states: GroupState) -> bool:
        return self.fsm.is_in(*states)

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        self.fsm.transition_to(target, now_ms)

    @property
    def is_empty(self) -> bool:
        return not self.members and not self.pending_members

    # --- members ----------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> Member:
        return self.members[member_id]

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        if member is None:
            return None
        if member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static(self, instance_id: str, new_member_id: str) -> Member:
        """Give the static member holding `instance_id` a new member id (a restart); returns
        the member, now under its new id. Its old id is no longer known."""
        old_id = self.static_members[instance_id]
        member = self.members.pop(old_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_id:
            self.leader_id = new_member_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_member_id)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """Kafka's `isStaticMemberFenced`: the instance id is held by another member id."""
        holder = self.static_member_id(instance_id)
        return holder is not None and holder != member_id

    @property
    def all_joined(self) -> bool:
        """Every member has a parked join and no handed-out id is still owed a join."""
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocol ---------------------------------------------------------------------------

    def candidates(self) -> frozenset[str]:
        """Protocols every member supports."""
        sets = [m.supported_names for m in self.members.values()]
        return frozenset.intersection(*sets) if sets else frozenset()

    def supports(self, protocol_type: str, protocols: Iterable[Protocol]) -> bool:
        """Kafka's `supportsProtocols`: an empty group takes any non-empty protocol list, else
        the type must match and one protocol must be supported by every member."""
        names = {p.name for p in protocols}
        if not protocol_type or not names:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool(names & self.candidates())

    def select_protocol(self) -> str:
        """Every member votes for its preferred candidate; the most votes win (ties: the first
        candidate reached in member order, a deterministic stand-in for Kafka's map order)."""
        candidates = self.candidates()
        if not candidates:
            raise ValueError(f"group {self.group_id}: no protocol all members support")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        return next(name for name, count in votes.items() if count == best)

    def join_members(self) -> tuple[JoinMember, ...]:
        """The member list sent to the leader: each member's metadata for the chosen protocol."""
        assert self.protocol_name is not None
        return tuple(
            JoinMember(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
            for m in self.members.values()
        )

    def init_next_generation(self, now_ms: int) -> None:
        """Kafka's `initNextGeneration`: a new generation, the protocol chosen anew, and
        COMPLETING_REBALANCE (or EMPTY when no member is left)."""
        self.generation_id += 1
        self.server_assigned = False
        self.assigned_counts = {}
        if self.members:
            self.protocol_name = self.select_protocol()
            self.pending_sync = set(self.members)
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.pending_sync = set()
            self.transition_to(GroupState.EMPTY, now_ms)

    def assignments(self) -> Mapping[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}
