"""A group member's own state as the consumer sees it: where it is in the join cycle
(`MemberState`), the generation it last joined (`Generation`), and the rebalance listener the
application hands to `subscribe()`.

Kafka's AbstractCoordinator keeps the same three: `MemberState` (UNJOINED, PREPARING_REBALANCE,
COMPLETING_REBALANCE, STABLE), an immutable `Generation` swapped as a whole so the heartbeat
thread always reads a consistent (generation id, member id, protocol), and the
ConsumerRebalanceListener, whose callbacks run on the consumer's thread only, inside poll(),
unsubscribe() and close().
"""

from __future__ import annotations

import enum
from collections.abc import Set
from dataclasses import dataclass

from riverlog.common.types import TopicPartition

from .api import NO_GENERATION, UNKNOWN_MEMBER_ID


class MemberState(enum.Enum):
    """Where the member is in the join cycle."""

    UNJOINED = "unjoined"
    """action: none (not in the group, or left it). transition: PREPARING_REBALANCE on poll()."""
    PREPARING_REBALANCE = "preparing-rebalance"
    """action: JoinGroup in flight. transition: COMPLETING_REBALANCE on its answer, UNJOINED on
    a fatal error."""
    COMPLETING_REBALANCE = "completing-rebalance"
    """action: SyncGroup in flight (the leader computed the assignment first). transition:
    STABLE with the assignment, PREPARING_REBALANCE when the group moved on."""
    STABLE = "stable"
    """action: heartbeats, commits with this generation. transition: PREPARING_REBALANCE when
    a rejoin is needed, UNJOINED on leave."""


_VALID_PREVIOUS: dict[MemberState, frozenset[MemberState]] = {
    MemberState.UNJOINED: frozenset(MemberState),
    MemberState.PREPARING_REBALANCE: frozenset(MemberState),
    MemberState.COMPLETING_REBALANCE: frozenset({MemberState.PREPARING_REBALANCE}),
    MemberState.STABLE: frozenset({MemberState.COMPLETING_REBALANCE}),
}


def check_transition(current: MemberState, target: MemberState) -> None:
    """Raise on a move the join cycle does not allow (a bug, never a remote condition)."""
    if current not in _VALID_PREVIOUS[target]:
        raise RuntimeError(f"illegal member state transition {current.name} → {target.name}")


@dataclass(frozen=True, slots=True)
class Generation:
    """The generation the member last joined; replaced whole, read without a lock."""

    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    protocol_name: str = ""

    @property
    def valid(self) -> bool:
        return self.generation_id != NO_GENERATION

    @property
    def has_member_id(self) -> bool:
        return self.member_id != UNKNOWN_MEMBER_ID


NO_GENERATION_STATE = Generation()


class ConsumerRebalanceListener:
    """Called around rebalances, on the consumer's thread, from inside poll() (and from
    unsubscribe() and close()). Subclass it and override what you need (Kafka's interface).

    - `on_partitions_revoked(partitions)`: before a rebalance takes partitions away; commit
      what you processed of them here. With the eager protocol it is called before every
      rebalance with every owned partition (maybe none); with the cooperative one only with the
      partitions that move, and only when there are some.
    - `on_partitions_assigned(partitions)`: after a rebalance, with the partitions added
      (eager: the whole new assignment). Always called, maybe with none.
    - `on_partitions_lost(partitions)`: the partitions were already given to others (this
      member fell out of the group: session timeout, poll timeout, fenced generation); do not
      commit them. By default it calls `on_partitions_revoked`, as Kafka's does.

    An exception from a callback does not stop the rebalance; poll() raises it afterwards.
    """

    def on_partitions_revoked(self, partitions: Set[TopicPartition]) -> None:
        return None

    def on_partitions_assigned(self, partitions: Set[TopicPartition]) -> None:
        return None

    def on_partitions_lost(self, partitions: Set[TopicPartition]) -> None:
        self.on_partitions_revoked(partitions)
