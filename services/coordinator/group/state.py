"""The classic group state machine (Kafka's `ClassicGroupState`): five states, the moves each
allows, and one `transition_to` that refuses anything else.

A group's state says which requests it may serve: JoinGroup at any time (it may start a
rebalance), SyncGroup only once every member has rejoined, Heartbeat answers
REBALANCE_IN_PROGRESS while members must rejoin. Keeping the table next to the states makes an
illegal move (a bug) an immediate exception rather than a silently stuck group.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final


class GroupState(enum.Enum):
    """The state of a classic group. The value is Kafka's display name (ListGroups, tools)."""

    EMPTY = "Empty"
    """Group has no more members, but lingers until all offsets have expired. Also the state of
    groups used only for offset commits (simple consumers).

    action: respond to joins with a new member id and a rebalance; respond to syncs, heartbeats
            and member commits with UNKNOWN_MEMBER_ID; accept simple (generation -1) commits.
    transition: a member joins => PREPARING_REBALANCE;
                all offsets expire or the group is deleted => DEAD."""

    PREPARING_REBALANCE = "PreparingRebalance"
    """Group is preparing to rebalance.

    action: respond to heartbeats with REBALANCE_IN_PROGRESS, to syncs with
            REBALANCE_IN_PROGRESS; park join responses until every member rejoined or the
            rebalance timeout passed; accept commits of the current generation (members
            commit what they processed before rejoining).
    transition: some members rejoined by the timeout => COMPLETING_REBALANCE;
                all members left => EMPTY; group deleted => DEAD."""

    COMPLETING_REBALANCE = "CompletingRebalance"
    """Group is awaiting the state assignment from the leader.

    action: respond to heartbeats normally; park sync responses of followers until the leader's
            SyncGroup (or the server-side assignment) arrives; refuse commits with
            REBALANCE_IN_PROGRESS.
    transition: the assignment is written => STABLE;
                join of a new member or a changed one, leave, member expiry => PREPARING_REBALANCE;
                group deleted => DEAD."""

    STABLE = "Stable"
    """Group is stable.

    action: respond to heartbeats, syncs (with the member's assignment) and commits normally;
            a join from the leader or with changed metadata starts a rebalance, another join
            gets the current generation.
    transition: member expiry, leave, join of a new or changed member, partition-count change of
                a subscribed topic => PREPARING_REBALANCE; group deleted => DEAD."""

    DEAD = "Dead"
    """Group has no more members and its metadata is being removed.

    action: respond to joins with UNKNOWN_MEMBER_ID (or COORDINATOR_NOT_AVAILABLE) and to
            everything else as for an unknown group.
    transition: none (Dead is final)."""

    def __str__(self) -> str:
        return self.value


VALID_PREVIOUS_STATES: Final[Mapping[GroupState, frozenset[GroupState]]] = MappingProxyType(
    {
        GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
        GroupState.PREPARING_REBALANCE: frozenset(
            {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
        ),
        GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
        GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
        GroupState.DEAD: frozenset(
            {
                GroupState.STABLE,
                GroupState.PREPARING_REBALANCE,
                GroupState.COMPLETING_REBALANCE,
                GroupState.EMPTY,
                GroupState.DEAD,
            }
        ),
    }
)
"""Kafka's `validPreviousStates`: the states each state may be entered from."""


class IllegalStateTransition(RuntimeError):
    """A move the table does not allow: a coordinator bug, never a client error."""


class StateMachine:
    """The current state of one group and when it was entered. Owned by the group's shard
    task; not thread-safe."""

    __slots__ = ("entered_ms", "previous", "state")

    def __init__(self, state: GroupState = GroupState.EMPTY, now_ms: int = 0) -> None:
        self.state = state
        self.previous = state
        self.entered_ms = now_ms

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        """Move to `target`; raises IllegalStateTransition when `target` may not follow the
        current state."""
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalStateTransition(
                f"group cannot move from {self.state} to {target}"
                f" (allowed from {sorted(s.value for s in VALID_PREVIOUS_STATES[target])})"
            )
        self.previous = self.state
        self.state = target
        self.entered_ms = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states
