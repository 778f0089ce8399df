"""The sticky assignors' general algorithm, for members with different subscriptions.

Kafka's `GeneralAssignmentBuilder` (without its rack-aware passes, which need replica racks that
`assign()` does not receive):

1. Keep every claimed partition whose owner is still subscribed to its topic (a claim on a topic
   the owner dropped is removed and marks the rebalance as needing revocation).
2. Give each unassigned partition to the least-loaded member subscribed to it; partitions are
   taken in order of their topic's number of possible owners (fewest first), then topic name.
3. Leave aside partitions only one member can own and members that cannot change, then move
   partitions from members with at least two more than a candidate owner until no move helps:
   first (unless revocation is already needed) only among newly assigned partitions, then among
   all. A partition goes back to its owner from an older generation when that owner has two
   fewer, and `PartitionMovements` turns a move B->A into undoing an earlier A->B of the same
   topic, so partitions never cross between two members in both directions.
4. If moves were made on top of kept claims but did not improve the balance score (the sum of
   load differences over all member pairs), return to the assignment before step 3.
"""

from __future__ import annotations

from collections.abc import Mapping

from riverlog.common.types import TopicPartition

from ..abstract import Subscription
from ..javaorder import java_str_key
from .movements import MembersByLoad, PartitionMovements


class GeneralAssignmentBuilder:
    """Single-use: construct, then `build()` once. `current` (the claims) is mutated into the
    result; `movements` records the moves for `is_sticky()`."""

    def __init__(
        self,
        partitions_per_topic: dict[str, int],
        current: dict[str, list[TopicPartition]],
        subscriptions: Mapping[str, Subscription],
        order: list[str],
        previous_owners: dict[TopicPartition, tuple[str, int]],
        movements: PartitionMovements,
    ) -> None:
        self._partitions_per_topic = partitions_per_topic
        self._total = sum(partitions_per_topic.values())
        self._current = current
        self._subscriptions = subscriptions
        self._previous_owners = previous_owners
        self._movements = movements
        self._revocation_required = False

        self._topic_consumers: dict[str, list[str]] = {t: [] for t in partitions_per_topic}
        self._consumer_topics: dict[str, list[str]] = {}
        for consumer in order:
            topics = [t for t in subscriptions[consumer].topics if t in partitions_per_topic]
            self._consumer_topics[consumer] = topics
            for topic in topics:
                self._topic_consumers[topic].append(consumer)
            current.setdefault(consumer, [])

        self._owner: dict[TopicPartition, str] = {
            tp: consumer for consumer, parts in current.items() for tp in parts
        }
        sorted_topics = sorted(
            self._topic_consumers,
            key=lambda t: (len(self._topic_consumers[t]), java_str_key(t)),
        )
        self._sorted_all = [
            TopicPartition(t, p) for t in sorted_topics for p in range(partitions_per_topic[t])
        ]
        self._by_load = MembersByLoad(current)

    def build(self) -> dict[str, list[TopicPartition]]:
        assigned = self._keep_owned_partitions()
        unassigned = self._unassigned_partitions(assigned)
        for consumer in self._current:
            self._by_load.add(consumer)
        self._balance(unassigned)
        return self._current

    def _keep_owned_partitions(self) -> list[TopicPartition]:
        assigned: list[TopicPartition] = []
        for consumer in list(self._current):
            subscription = self._subscriptions.get(consumer)
            if subscription is None:  # a member that left: its partitions are free
                for tp in self._current.pop(consumer):
                    self._owner.pop(tp, None)
                continue
            kept: list[TopicPartition] = []
            for tp in self._current[consumer]:
                if tp.topic not in self._topic_consumers:
                    self._owner.pop(tp, None)
                elif tp.topic not in subscription.topics:
                    self._revocation_required = True
                else:
                    kept.append(tp)
            self._current[consumer][:] = kept
            assigned.extend(kept)
        return assigned

    def _unassigned_partitions(self, assigned: list[TopicPartition]) -> list[TopicPartition]:
        """`sorted_all` minus `assigned`, walked in step as Kafka does; with nothing assigned it
        is `sorted_all` itself (the same list, as in Kafka)."""
        if not assigned:
            return self._sorted_all
        kept = iter(
            sorted(
                assigned,
                key=lambda tp: (
                    len(self._topic_consumers[tp.topic]),
                    java_str_key(tp.topic),
                    tp.partition,
                ),
            )
        )
        next_kept: TopicPartition | None = next(kept)
        unassigned: list[TopicPartition] = []
        for tp in self._sorted_all:
            if next_kept is None or next_kept != tp:
                unassigned.append(tp)
            else:
                next_kept = next(kept, None)
        return unassigned

    def _max_assignment_size(self, topics: list[str]) -> int:
        if len(topics) == len(self._partitions_per_topic):
            return self._total
        return sum(self._partitions_per_topic[t] for t in topics)

    def _is_balanced(self) -> bool:
        """Counts differ by at most one, or no member could take a partition of its topics
        from a member with two more than itself."""
        least = len(self._current[self._by_load.first()])
        most = len(self._current[self._by_load.last()])
        if least >= most - 1:
            return True
        # the most loaded owner of each topic's partitions (among members still in play)
        heaviest: dict[str, int] = {}
        for tp, owner in self._owner.items():
            owner_partitions = self._current.get(owner)
            if owner_partitions is not None and len(owner_partitions) > heaviest.get(tp.topic, -1):
                heaviest[tp.topic] = len(owner_partitions)
        for consumer in self._by_load:
            count = len(self._current[consumer])
            topics = self._consumer_topics[consumer]
            if count == self._max_assignment_size(topics):
                continue
            if any(heaviest.get(topic, -1) > count + 1 for topic in topics):
                return False
        return True

    def _balance_score(self, assignment: dict[str, list[TopicPartition]]) -> int:
        """Sum of |count(a) - count(b)| over all member pairs."""
        sizes = sorted(len(parts) for parts in assignment.values())
        return sum(size * (2 * i - len(sizes) + 1) for i, size in enumerate(sizes))

    def _assign_to_least_loaded(self, tp: TopicPartition) -> None:
        for consumer in self._by_load:
            if tp.topic in self._consumer_topics[consumer]:
                self._by_load.remove(consumer)
                self._current[consumer].append(tp)
                self._owner[tp] = consumer
                self._by_load.add(consumer)
                return

    def _can_topic_move(self, topic: str) -> bool:
        return len(self._topic_consumers[topic]) >= 2

    def _can_consumer_change(self, consumer: str) -> bool:
        partitions = self._current[consumer]
        if len(partitions) < self._max_assignment_size(self._consumer_topics[consumer]):
            return True
        return any(self._can_topic_move(tp.topic) for tp in partitions)

    def _balance(self, unassigned: list[TopicPartition]) -> None:
        initializing = not self._current[self._by_load.last()]
        for tp in unassigned:
            if self._topic_consumers[tp.topic]:
                self._assign_to_least_loaded(tp)

        fixed_partitions = {
            TopicPartition(topic, p)
            for topic in self._topic_consumers
            if not self._can_topic_move(topic)
            for p in range(self._partitions_per_topic[topic])
        }
        self._sorted_all[:] = [tp for tp in self._sorted_all if tp not in fixed_partitions]
        unassigned[:] = [tp for tp in unassigned if tp not in fixed_partitions]

        fixed_assignments: dict[str, list[TopicPartition]] = {}
        for consumer in self._consumer_topics:
            if not self._can_consumer_change(consumer):
                self._by_load.remove(consumer)
                fixed_assignments[consumer] = self._current.pop(consumer)

        before = {consumer: list(parts) for consumer, parts in self._current.items()}
        owners_before = dict(self._owner)
        if not self._revocation_required:
            self._perform_reassignments(unassigned)
        moved = self._perform_reassignments(self._sorted_all)
        if (
            not initializing
            and moved
            and self._balance_score(self._current) >= self._balance_score(before)
        ):
            self._current.clear()
            self._current.update(before)
            self._owner.clear()
            self._owner.update(owners_before)

        for consumer, parts in fixed_assignments.items():
            self._current[consumer] = parts
            self._by_load.add(consumer)

    def _perform_reassignments(self, partitions: list[TopicPartition]) -> bool:
        moved_any = False
        modified = True
        while modified:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                consumer = self._owner[tp]
                previous = self._previous_owners.get(tp)
                # Kafka would fail on a previous owner that is out of play; we skip the rule
                if previous is not None and previous[0] in self._current:
                    if len(self._current[consumer]) > len(self._current[previous[0]]) + 1:
                        self._reassign(tp, previous[0])
                        moved_any = modified = True
                        continue
                for other in self._topic_consumers[tp.topic]:
                    if len(self._current[consumer]) > len(self._current[other]) + 1:
                        self._reassign_to_least_loaded(tp)
                        moved_any = modified = True
                        break
        return moved_any

    def _reassign_to_least_loaded(self, tp: TopicPartition) -> None:
        for consumer in self._by_load:
            if tp.topic in self._consumer_topics[consumer]:
                self._reassign(tp, consumer)
                return

    def _reassign(self, tp: TopicPartition, new_consumer: str) -> None:
        to_move = self._movements.partition_to_move(tp, self._owner[tp], new_consumer)
        old_consumer = self._owner[to_move]
        self._by_load.remove(old_consumer)
        self._by_load.remove(new_consumer)
        self._movements.move_partition(to_move, old_consumer, new_consumer)
        self._current[old_consumer].remove(to_move)
        self._current[new_consumer].append(to_move)
        self._owner[to_move] = new_consumer
        self._by_load.add(new_consumer)
        self._by_load.add(old_consumer)
