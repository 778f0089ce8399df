"""Kafka's range assignor ("range"), the default of Kafka's consumer.

Range works topic by topic: the members subscribed to a topic are ordered (static members first
by `group.instance.id`, then dynamic members by member id), the topic's partitions are cut into
contiguous ranges, and the first `partitions % members` members get one extra partition. Because
every topic is cut the same way, members with the same rank get the same partition numbers of
co-partitioned topics, which joins and other per-key work rely on; the price is imbalance when a
group subscribes to many topics with few partitions (the first members get the extras of every
topic).

Example: members C0 and C1, topics t0 and t1 with 3 partitions each:
C0 gets [t0-0, t0-1, t1-0, t1-1] and C1 gets [t0-2, t1-2].

Kafka 3.5 added a rack-aware variant that needs each partition's replica racks. `assign()` takes
partition counts only, and with no partition racks Kafka's range assignor runs exactly the logic
below, so the rack-aware branch is not ported.
"""

from __future__ import annotations

from collections.abc import Mapping

from riverlog.common.types import TopicPartition

from .abstract import AbstractPartitionAssignor, Subscription, sorted_members


class RangeAssignor(AbstractPartitionAssignor):
    """Stateless; safe to share between groups and threads."""

    name = "range"

    def _assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        ranked = sorted_members(subscriptions)
        for topic, num_partitions in partitions_per_topic.items():
            # a member listing a topic twice still counts once (Kafka dedups into a LinkedHashMap)
            members = [m for m in ranked if topic in subscriptions[m].topics]
            if not members:
                continue
            per_member, with_extra = divmod(num_partitions, len(members))
            for i, member in enumerate(members):
                start = per_member * i + min(i, with_extra)
                length = per_member + (1 if i < with_extra else 0)
                assignment[member].extend(
                    TopicPartition(topic, p) for p in range(start, start + length)
                )
        return assignment
