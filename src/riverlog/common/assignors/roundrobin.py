"""Kafka's round-robin assignor ("roundrobin").

All partitions of all subscribed topics are laid out sorted by topic then partition, the members
are ordered (static members first by `group.instance.id`, then by member id), and partitions are
dealt one at a time around the circle of members, skipping a member that is not subscribed to
the partition's topic. With identical subscriptions the counts differ by at most one; with
different subscriptions the skipping can leave the assignment unbalanced, which is what the
sticky assignors fix.

Example: members C0, C1, topics t0 and t1 with 3 partitions each:
C0 gets [t0-0, t0-2, t1-1] and C1 gets [t0-1, t1-0, t1-2].
With C0 on t0, C1 on t0+t1, C2 on t0+t1+t2 (1, 2, 3 partitions):
C0 gets [t0-0], C1 gets [t1-0], C2 gets [t1-1, t2-0, t2-1, t2-2].
"""

from __future__ import annotations

from collections.abc import Mapping

from riverlog.common.types import TopicPartition

from .abstract import AbstractPartitionAssignor, Subscription, sorted_members, topic_partitions
from .javaorder import java_str_key


class RoundRobinAssignor(AbstractPartitionAssignor):
    """Stateless; safe to share between groups and threads."""

    name = "roundrobin"

    def _assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        circle = sorted_members(subscriptions)
        topics = {topic for s in subscriptions.values() for topic in s.topics}
        position = 0  # Kafka's CircularIterator: the member `peek()` would return
        for topic in sorted(topics, key=java_str_key):
            for partition in topic_partitions(topic, partitions_per_topic.get(topic, 0)):
                # ends: the topic is subscribed by someone, or it would not be in the layout
                while topic not in subscriptions[circle[position]].topics:
                    position = (position + 1) % len(circle)
                assignment[circle[position]].append(partition)
                position = (position + 1) % len(circle)
        return assignment
