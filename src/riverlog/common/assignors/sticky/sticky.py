"""Kafka's sticky assignor ("sticky"), for the eager rebalance protocol.

Balanced like round robin, but it keeps as many partitions as possible where they were. With the
eager protocol a member revokes all its partitions before rejoining, so its subscription's owned
partitions are empty; the assignor itself remembers the member's last assignment and generation
(`on_assignment`) and sends them as subscription user data, which the leader reads back as the
member's previous assignment (see `userdata.py` for the bytes).

Example (Kafka's): C0, C1, C2 on t0..t3 with 2 partitions each get
C0 [t0-0, t1-1, t3-0], C1 [t0-1, t2-0, t3-1], C2 [t1-0, t2-1]; when C1 leaves, round robin
would reshuffle everything, sticky gives C0 [t0-0, t1-1, t3-0, t2-0] and C2 [t1-0, t2-1, t0-1,
t3-1].
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from riverlog.common.types import TopicPartition

from ..abstract import DEFAULT_GENERATION, Assignment, Subscription
from .base import AbstractStickyAssignor, MemberData
from .userdata import decode_sticky_user_data, encode_sticky_user_data


class StickyAssignor(AbstractStickyAssignor):
    """One instance per consumer: it remembers that member's last assignment."""

    name = "sticky"

    def __init__(self) -> None:
        super().__init__()
        self._member_assignment: list[TopicPartition] | None = None
        self._generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._member_assignment = list(assignment.partitions)
        self._generation = generation

    def subscription_user_data(
        self, topics: Collection[str], owned: Sequence[TopicPartition]
    ) -> bytes | None:
        """The last assignment and its generation; None before the first assignment. `owned`
        is not used: under the eager protocol it is empty at rejoin time."""
        if self._member_assignment is None:
            return None
        return encode_sticky_user_data(self._member_assignment, self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        """Always from the user data, never the subscription's owned partitions."""
        if not subscription.user_data:
            return MemberData([], None)
        partitions, generation = decode_sticky_user_data(subscription.user_data)
        return MemberData(partitions, generation)
