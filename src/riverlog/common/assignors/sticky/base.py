"""What Kafka's sticky and cooperative-sticky assignors share (`AbstractStickyAssignor`).

A sticky assignor aims for two things, balance first: (1) partition counts that differ by at
most one, or else no partition that could move to a member with two fewer; (2) as few partitions
changing owner as possible. To be sticky it needs each member's partitions from the previous
generation ("member data"): the eager `StickyAssignor` reads them from its subscription user
data, the `CooperativeStickyAssignor` from the subscription's owned partitions.

Before assigning, the claims are cleaned the way Kafka cleans them: claims on topics that no
longer exist are dropped; when two members claim one partition, the higher generation keeps it,
and on a tie neither does (the partition is then "transferring ownership"). If every member has
the same subscription the fast constrained algorithm runs (`constrained.py`), otherwise the
general one (`general.py`). Members are visited in the order Kafka's leader visits its `HashMap`
of subscriptions, because the constrained algorithm's choice of who keeps `maxQuota` partitions
depends on it.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass

from riverlog.common.types import TopicPartition

from ..abstract import DEFAULT_GENERATION, AbstractPartitionAssignor, Subscription
from ..javaorder import java_hash_order
from .constrained import ConstrainedAssignmentBuilder
from .general import GeneralAssignmentBuilder
from .movements import PartitionMovements


@dataclass(frozen=True, slots=True)
class MemberData:
    """A member's partitions from its last assignment and that assignment's generation
    (None when the member did not say, which Kafka distinguishes from -1)."""

    partitions: list[TopicPartition]
    generation: int | None


def _generation_or_default(generation: int | None) -> int:
    return DEFAULT_GENERATION if generation is None else generation


class AbstractStickyAssignor(AbstractPartitionAssignor):
    """Base of the two sticky assignors. After `assign()` the instance exposes, like Kafka's,
    `partitions_transferring_ownership` (set by the constrained algorithm, None after the
    general one) and `is_sticky()`; `max_generation` is the highest generation seen by this
    instance, kept across calls as Kafka keeps it. Not thread-safe: one instance per group."""

    def __init__(self) -> None:
        self.max_generation = DEFAULT_GENERATION
        self.partitions_transferring_ownership: dict[TopicPartition, str] | None = {}
        self._movements = PartitionMovements()

    @abstractmethod
    def member_data(self, subscription: Subscription) -> MemberData:
        """The member's previously owned partitions and their generation."""

    def is_sticky(self) -> bool:
        """After a general assignment: no topic had partitions cross between two members in
        both directions. Always true after a constrained assignment (Kafka would report the
        last general assignment's movements instead)."""
        return self._movements.is_sticky()

    def _assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        order = java_hash_order(subscriptions)
        consumer_to_owned: dict[str, list[TopicPartition]] = {}
        multiply_claimed: set[TopicPartition] = set()
        equal = self._all_subscriptions_equal(
            set(partitions_per_topic), subscriptions, order, consumer_to_owned, multiply_claimed
        )
        self._movements = PartitionMovements()
        if equal:
            transferring: dict[TopicPartition, str] = {}
            self.partitions_transferring_ownership = transferring
            return ConstrainedAssignmentBuilder(
                partitions_per_topic, consumer_to_owned, multiply_claimed, transferring
            ).build()
        # None tells the cooperative assignor to compute the transfers from scratch
        self.partitions_transferring_ownership = None
        builder = GeneralAssignmentBuilder(
            partitions_per_topic,
            consumer_to_owned,
            subscriptions,
            order,
            self._previous_owners(subscriptions, order),
            self._movements,
        )
        return builder.build()

    def _all_subscriptions_equal(
        self,
        all_topics: set[str],
        subscriptions: Mapping[str, Subscription],
        order: list[str],
        consumer_to_owned: dict[str, list[TopicPartition]],
        multiply_claimed: set[TopicPartition],
    ) -> bool:
        """Kafka's `allSubscriptionsEqual`: also fills each member's still-valid claims and the
        partitions claimed twice in one generation. A claim is judged against the other
        claimant's *subscription* generation, as Kafka does. One Kafka bug is not kept: Kafka
        compares against the first *non-empty* subscription, so a member with no topics seen
        first makes the group look uniform and gets partitions it never subscribed to; here
        the first subscription seen, empty or not, is the reference (decision 0013)."""
        equal = True
        subscribed: set[str] = set()
        reference_taken = False
        claimed_by: dict[TopicPartition, str] = {}
        for consumer in order:
            subscription = subscriptions[consumer]
            if not reference_taken:
                subscribed.update(subscription.topics)
                reference_taken = True
            elif equal and not (
                len(subscription.topics) == len(subscribed)
                and subscribed.issuperset(subscription.topics)
            ):
                equal = False

            data = self.member_data(subscription)
            generation = _generation_or_default(data.generation)
            self.max_generation = max(self.max_generation, generation)

            owned: list[TopicPartition] = []
            consumer_to_owned[consumer] = owned
            for tp in data.partitions:
                if tp.topic not in all_topics:
                    continue
                other = claimed_by.get(tp)
                if other is None:
                    owned.append(tp)
                    claimed_by[tp] = consumer
                    continue
                other_generation = max(subscriptions[other].generation_id, DEFAULT_GENERATION)
                if generation == other_generation:
                    # two owners in one generation: neither keeps it
                    multiply_claimed.add(tp)
                    _remove_first(consumer_to_owned[other], tp)
                    claimed_by[tp] = consumer
                elif generation > other_generation:
                    owned.append(tp)
                    _remove_first(consumer_to_owned[other], tp)
                    claimed_by[tp] = consumer
        return equal

    def _previous_owners(
        self, subscriptions: Mapping[str, Subscription], order: list[str]
    ) -> dict[TopicPartition, tuple[str, int]]:
        """Kafka's `prepopulateCurrentAssignments`: for claims from generations older than the
        newest, the latest older owner of each partition (the general algorithm prefers giving
        a partition back to it)."""
        previous: dict[TopicPartition, tuple[str, int]] = {}
        for consumer in order:
            data = self.member_data(subscriptions[consumer])
            if data.generation is not None and data.generation < self.max_generation:
                generation = data.generation
            elif data.generation is None and self.max_generation > DEFAULT_GENERATION:
                generation = DEFAULT_GENERATION
            else:
                continue
            for tp in data.partitions:
                known = previous.get(tp)
                if known is None or generation > known[1]:
                    previous[tp] = (consumer, generation)
        return previous


def _remove_first(partitions: list[TopicPartition], tp: TopicPartition) -> None:
    """Java's `List.remove(Object)`: drop the first occurrence, if any."""
    try:
        partitions.remove(tp)
    except ValueError:
        pass
