"""The partition-assignor contract shared by the SDK consumer and the group coordinator.

A consumer group's leader (or, for members that bring no assignor, the coordinator) turns every
member's `Subscription` plus the partition counts of the subscribed topics into one `Assignment`
per member. Both sides must compute the same thing Kafka's Java assignors compute, so this module
mirrors Kafka's `ConsumerPartitionAssignor` and `AbstractPartitionAssignor`: the same value types,
the same rebalance-protocol ids, the same member ordering (static members first, by
`group.instance.id`, then dynamic members by member id) and the same pre-filtering of topics
(only subscribed topics with at least one partition reach the algorithm).

Assignments list partitions sorted by (topic, partition). Kafka's lists follow `HashMap` order,
which carries no meaning and does not survive the wire (`ConsumerProtocol` regroups by topic).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from riverlog.common.types import TopicPartition

from .javaorder import java_hash_order, java_str_key

DEFAULT_GENERATION = -1
"""The generation of a member that has never completed a rebalance (Kafka's value)."""


class RebalanceProtocol(enum.IntEnum):
    """How partitions change hands during a rebalance (Kafka's ids, sent in JoinGroup)."""

    EAGER = 0
    """Every member revokes everything before rejoining; the assignment may reshuffle freely."""
    COOPERATIVE = 1
    """Members keep what they own; a partition moving owners is only revoked in this rebalance
    and assigned in a follow-up one."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """One member's JoinGroup metadata, as Kafka's `ConsumerPartitionAssignor.Subscription`.

    `generation_id` is -1 when unknown; `group_instance_id` is not on the wire (the coordinator
    fills it from the member's JoinGroup request) but orders static members in range and
    round-robin assignment.
    """

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = DEFAULT_GENERATION
    rack_id: str | None = None
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """One member's share of the group's partitions, plus optional assignor data."""

    partitions: list[TopicPartition]
    user_data: bytes | None = None


class PartitionAssignor(Protocol):
    """What the consumer and the coordinator call; one instance per consumer (it may remember
    the member's last assignment between rebalances, as Kafka's sticky assignor does)."""

    name: str
    supported_protocols: tuple[RebalanceProtocol, ...]

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """One `Assignment` per member of `subscriptions` (keyed by member id)."""
        ...

    def subscription_user_data(
        self, topics: Collection[str], owned: Sequence[TopicPartition]
    ) -> bytes | None:
        """The user data this member sends with its next JoinGroup, or None."""
        ...

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        """Called on the member when it receives its assignment for `generation`."""
        ...


def member_sort_key(member_id: str, group_instance_id: str | None) -> tuple[int, bytes]:
    """Kafka's `MemberInfo` order: static members first by instance id, then by member id."""
    if group_instance_id is not None:
        return (0, java_str_key(group_instance_id))
    return (1, java_str_key(member_id))


def sorted_members(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Member ids in Kafka's `MemberInfo` order. Kafka sorts stably a list built in `HashMap`
    order, so members with equal instance ids tie-break the same way here."""
    return sorted(
        java_hash_order(subscriptions),
        key=lambda m: member_sort_key(m, subscriptions[m].group_instance_id),
    )


class AbstractPartitionAssignor(ABC):
    """Kafka's `AbstractPartitionAssignor`: narrows the metadata to the subscribed topics that
    have partitions, runs `_assign_partitions`, and wraps the lists into `Assignment`s."""

    name: str = ""
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        subscribed = {topic for s in subscriptions.values() for topic in s.topics}
        counts = {
            topic: count
            for topic, count in partitions_per_topic.items()
            if topic in subscribed and count > 0
        }
        if not subscriptions:
            return {}
        raw = self._assign_partitions(counts, subscriptions)
        return {member: Assignment(sorted(raw.get(member, []))) for member in subscriptions}

    @abstractmethod
    def _assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        """The algorithm proper; topics are subscribed and have partitions, members exist."""

    def subscription_user_data(
        self, topics: Collection[str], owned: Sequence[TopicPartition]
    ) -> bytes | None:
        return None

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        return None


def topic_partitions(topic: str, count: int) -> list[TopicPartition]:
    """Partitions 0..count-1 of `topic`, in order."""
    return [TopicPartition(topic, p) for p in range(count)]
