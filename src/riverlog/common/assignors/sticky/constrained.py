"""The sticky assignors' fast path for a group whose members share one subscription.

Kafka's `ConstrainedAssignmentBuilder` (without its rack-aware pass, which needs replica racks
that `assign()` does not receive). With P partitions and N members, everyone ends with
`minQuota = P // N` or `maxQuota = ceil(P / N)` partitions, and exactly `P % N` members get
`maxQuota`:

1. Members keep what they owned, capped: a member that owned at least `maxQuota` keeps
   `maxQuota` while fewer than `P % N` members have done so, otherwise it keeps `minQuota`; the
   excess is revoked. What is kept is the lowest (partition, topic) first, so every member keeps
   a share of each topic (Kafka 3.8's KAFKA-16277). Members are visited in the leader's
   `HashMap` order, so that order decides who keeps `maxQuota`.
2. The unowned partitions, sorted by topic then partition, are dealt round-robin to the members
   below `minQuota` (sorted by id), then one each to members at exactly `minQuota` until `P % N`
   members have `maxQuota`.

A partition cut from one member in step 1 and handed to another member in step 2, or one that
two members claimed in the same generation, is "transferring ownership": the cooperative
assignor withholds it until its owner has revoked it. (A cut partition that step 2 hands back to
its owner is not transferring; that is Kafka 3.8's KAFKA-15170.)
"""

from __future__ import annotations

from riverlog.common.types import TopicPartition

from ..javaorder import java_str_key


class ConstrainedAssignmentBuilder:
    """Single-use: construct, then `build()` once."""

    def __init__(
        self,
        partitions_per_topic: dict[str, int],
        consumer_to_owned: dict[str, list[TopicPartition]],
        multiply_claimed: set[TopicPartition],
        transferring: dict[TopicPartition, str],
    ) -> None:
        self._partitions_per_topic = partitions_per_topic
        self._owned = consumer_to_owned  # iteration order = the leader's HashMap order
        self._multiply_claimed = multiply_claimed
        self._transferring = transferring
        total = sum(partitions_per_topic.values())
        members = len(consumer_to_owned)
        self._min_quota = total // members
        self._max_quota = -(-total // members)
        self._expected_over_min = total % members  # members that end with maxQuota
        self._current_over_min = 0
        self._maybe_revoked: dict[TopicPartition, str] = {}  # cut by the quota -> its owner
        self._under_min: list[str] = []  # members still short of minQuota
        self._exactly_min: list[str] = []  # members at minQuota that may still get one more
        self._assignment: dict[str, list[TopicPartition]] = {c: [] for c in consumer_to_owned}
        self._assigned: list[TopicPartition] = []

    def build(self) -> dict[str, list[TopicPartition]]:
        self._assign_owned_partitions()
        unassigned = self._unassigned_partitions()
        self._under_min.sort(key=java_str_key)
        self._exactly_min.sort(key=java_str_key)
        self._assign_round_robin(unassigned)
        self._verify_unfilled_members()
        return self._assignment

    def _assign_owned_partitions(self) -> None:
        for consumer, claimed in self._owned.items():
            owned = sorted(claimed, key=lambda tp: (tp.partition, java_str_key(tp.topic)))
            owned = [tp for tp in owned if tp not in self._multiply_claimed]
            keep = self._assignment[consumer]
            if len(owned) < self._min_quota:
                keep.extend(owned)
                self._under_min.append(consumer)
            elif len(owned) >= self._max_quota and self._current_over_min < self._expected_over_min:
                self._current_over_min += 1
                if self._current_over_min == self._expected_over_min:
                    self._exactly_min.clear()
                keep.extend(owned[: self._max_quota])
                self._maybe_revoked.update(dict.fromkeys(owned[self._max_quota :], consumer))
            else:
                keep.extend(owned[: self._min_quota])
                self._maybe_revoked.update(dict.fromkeys(owned[self._min_quota :], consumer))
                if self._current_over_min < self._expected_over_min:
                    self._exactly_min.append(consumer)
            self._assigned.extend(keep)

    def _unassigned_partitions(self) -> list[TopicPartition]:
        """All partitions minus the kept ones, sorted by topic then partition. Kafka walks the
        two sorted lists in step; a kept partition it cannot match (a partition number past the
        topic's count) stops the matching, and that walk is reproduced as is."""
        topics = sorted(self._partitions_per_topic, key=java_str_key)
        if not self._assigned:
            return [
                TopicPartition(t, p) for t in topics for p in range(self._partitions_per_topic[t])
            ]
        kept = iter(sorted(self._assigned, key=lambda tp: (java_str_key(tp.topic), tp.partition)))
        next_kept: TopicPartition | None = next(kept)
        unassigned: list[TopicPartition] = []
        for topic in topics:
            for p in range(self._partitions_per_topic[topic]):
                if next_kept is None or next_kept != TopicPartition(topic, p):
                    unassigned.append(TopicPartition(topic, p))
                else:
                    next_kept = next(kept, None)
        return unassigned

    def _assign_round_robin(self, unassigned: list[TopicPartition]) -> None:
        under = self._under_min
        cursor = 0  # Kafka's iterator over `under`: index of the next member it returns
        for tp in unassigned:
            if cursor < len(under):
                consumer = under[cursor]
                cursor += 1
            elif not under and not self._exactly_min:
                raise RuntimeError(f"no more unfilled consumers to assign {tp} to")
            elif not under:
                consumer = self._exactly_min.pop(0)
            else:
                consumer, cursor = under[0], 1
            count = self._assign_new_partition(tp, consumer)
            if count == self._min_quota:
                cursor -= 1
                del under[cursor]
                self._exactly_min.append(consumer)
            elif count == self._max_quota:
                self._current_over_min += 1

    def _assign_new_partition(self, tp: TopicPartition, consumer: str) -> int:
        consumer_assignment = self._assignment[consumer]
        consumer_assignment.append(tp)
        previous_owner = self._maybe_revoked.get(tp)
        if (previous_owner is not None and previous_owner != consumer) or (
            tp in self._multiply_claimed
        ):
            self._transferring[tp] = consumer
        return len(consumer_assignment)

    def _verify_unfilled_members(self) -> None:
        if not self._under_min:
            return
        if self._current_over_min != self._expected_over_min:
            raise RuntimeError(
                f"only {self._current_over_min} of {self._expected_over_min} members reached "
                f"maxQuota, and nothing is left for {self._under_min}"
            )
        for member in self._under_min:
            if len(self._assignment[member]) != self._min_quota:
                raise RuntimeError(f"member {member} did not reach minQuota {self._min_quota}")
