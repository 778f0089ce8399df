"""Server-side assignment: when a group's leader sends SyncGroup with no assignment and the
chosen protocol is a built-in assignor (range, roundrobin, sticky, cooperative-sticky), the
coordinator computes it, so a client in any language can be a group member with no assignor.

Member metadata is decoded as Kafka's ConsumerProtocol Subscription and the result encoded as
its Assignment, with the same shared assignors the SDK uses client-side: for the same members,
subscriptions and partition counts both sides compute Kafka's exact assignment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from riverlog.common.assignors import (
    ASSIGNORS,
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    Subscription,
    assignor_for,
    decode_subscription,
    encode_assignment,
)

from .group import ClassicGroup

log = logging.getLogger(__name__)

PartitionCounts = Callable[[str], int]
"""A topic's partition count in the current cluster image (0 when it does not exist)."""


def can_assign(group: ClassicGroup) -> bool:
    return group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.protocol_name in ASSIGNORS


def subscriptions(group: ClassicGroup) -> dict[str, Subscription]:
    """Every member's decoded subscription for the chosen protocol; raises
    ConsumerProtocolError when one does not decode."""
    assert group.protocol_name is not None
    out: dict[str, Subscription] = {}
    for member in group.members.values():
        sub = decode_subscription(member.metadata_for(group.protocol_name))
        out[member.member_id] = Subscription(
            topics=sub.topics,
            user_data=sub.user_data,
            owned_partitions=sub.owned_partitions,
            generation_id=sub.generation_id,
            rack_id=sub.rack_id,
            group_instance_id=member.group_instance_id,
        )
    return out


def subscribed_counts(group: ClassicGroup, counts: PartitionCounts) -> dict[str, int]:
    """Partition counts of every topic a member subscribes to (0: absent); {} when the
    metadata does not decode."""
    try:
        subs = subscriptions(group)
    except (ConsumerProtocolError, KeyError):
        return {}
    return {topic: counts(topic) for s in subs.values() for topic in s.topics}


def assign(group: ClassicGroup, counts: PartitionCounts) -> tuple[dict[str, bytes], dict[str, int]]:
    """The encoded assignment of every member and the partition counts it was computed with.
    Raises ConsumerProtocolError for undecodable metadata."""
    assert group.protocol_name is not None
    subs = subscriptions(group)
    topic_counts = {topic: counts(topic) for s in subs.values() for topic in s.topics}
    result = assignor_for(group.protocol_name).assign(topic_counts, subs)
    encoded = {member: encode_assignment(a) for member, a in result.items()}
    log.info(
        "group %s generation %d: server-side %s assignment of %d partitions to %d members",
        group.group_id,
        group.generation_id,
        group.protocol_name,
        sum(len(a.partitions) for a in result.values()),
        len(result),
    )
    return encoded, topic_counts


def counts_changed(group: ClassicGroup, counts: PartitionCounts) -> bool:
    """True when a topic the coordinator assigned has another partition count now (grown,
    created, deleted): the trigger for a server-side rebalance."""
    if not group.server_assigned:
        return False
    return any(counts(t) != n for t, n in group.assigned_counts.items())


def all_counts(mapping: Mapping[str, int]) -> PartitionCounts:
    """A `PartitionCounts` over a fixed mapping (tests)."""
    return lambda topic: mapping.get(topic, 0)
