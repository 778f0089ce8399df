"""Bookkeeping for the general sticky algorithm: partition movements and members by load.

`PartitionMovements` is Kafka's class of the same name. While the general algorithm rebalances,
it records every partition that changed owner; when a partition is about to move from A to B and
some partition of the same topic already moved from B to A during this rebalance, it moves that
one back instead, so no topic ends up with partitions crossing between two members in both
directions (what `is_sticky()` checks). Which partition goes back is the first of a Java
`HashSet`, replayed with `JavaHashSet` to pick the same one Kafka picks.

`MembersByLoad` stands in for Kafka's `TreeSet<String>` ordered by (number of partitions, member
id): it answers "least loaded member", "most loaded member" and iterates from least loaded. As
in Kafka, a member must be removed before its partition count changes and added back after.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence

from riverlog.common.types import TopicPartition

from ..javaorder import JavaHashSet, java_str_key, topic_partition_hash

ConsumerPair = tuple[str, str]
"""(source member, destination member) of a partition movement."""


class PartitionMovements:
    """Movements made during one general assignment; created per assignment, single-threaded."""

    __slots__ = ("_by_topic", "_moves")

    def __init__(self) -> None:
        self._moves: dict[TopicPartition, ConsumerPair] = {}
        self._by_topic: dict[str, dict[ConsumerPair, JavaHashSet[TopicPartition]]] = {}

    def _remove_record(self, partition: TopicPartition) -> ConsumerPair:
        pair = self._moves.pop(partition)
        for_topic = self._by_topic[partition.topic]
        for_topic[pair].discard(partition)
        if not for_topic[pair]:
            del for_topic[pair]
        if not for_topic:
            del self._by_topic[partition.topic]
        return pair

    def _add_record(self, partition: TopicPartition, pair: ConsumerPair) -> None:
        self._moves[partition] = pair
        for_topic = self._by_topic.setdefault(partition.topic, {})
        if pair not in for_topic:
            for_topic[pair] = JavaHashSet(topic_partition_hash)
        for_topic[pair].add(partition)

    def move_partition(self, partition: TopicPartition, old: str, new: str) -> None:
        """Record that `partition` moves from `old` to `new` (collapsing A->B->A to nothing)."""
        if partition in self._moves:
            source, _ = self._remove_record(partition)
            if source != new:
                self._add_record(partition, (source, new))
        else:
            self._add_record(partition, (old, new))

    def partition_to_move(self, partition: TopicPartition, old: str, new: str) -> TopicPartition:
        """The partition to move from `old` to `new` in place of `partition`: one of the same
        topic that already moved from `new` to `old`, if any, else `partition` itself."""
        for_topic = self._by_topic.get(partition.topic)
        if for_topic is None:
            return partition
        if partition in self._moves:
            old = self._moves[partition][0]
        reverse = for_topic.get((new, old))
        if reverse is None:
            return partition
        return reverse.first()

    def is_sticky(self) -> bool:
        """False when some topic had partitions move both A->B and B->A (Kafka only flags
        these two-member cycles)."""
        for pairs in self._by_topic.values():
            if any((dst, src) in pairs for src, dst in pairs):
                return False
        return True


class MembersByLoad:
    """Members ordered by (partition count, Java string order of the id); see module doc."""

    __slots__ = ("_assignment", "_entries", "_keys", "_sorted")

    def __init__(self, assignment: Mapping[str, Sequence[TopicPartition]]) -> None:
        self._assignment = assignment
        self._sorted: list[tuple[int, bytes, str]] = []
        self._entries: dict[str, tuple[int, bytes, str]] = {}
        self._keys: dict[str, bytes] = {}

    def add(self, member: str) -> None:
        if member in self._entries:
            return
        key = self._keys.get(member)
        if key is None:
            key = self._keys[member] = java_str_key(member)
        entry = (len(self._assignment[member]), key, member)
        self._entries[member] = entry
        bisect.insort(self._sorted, entry)

    def remove(self, member: str) -> None:
        entry = self._entries.pop(member, None)
        if entry is not None:
            del self._sorted[bisect.bisect_left(self._sorted, entry)]

    def first(self) -> str:
        return self._sorted[0][2]

    def last(self) -> str:
        return self._sorted[-1][2]

    def __iter__(self) -> Iterator[str]:
        return (entry[2] for entry in self._sorted)

    def __len__(self) -> int:
        return len(self._sorted)
