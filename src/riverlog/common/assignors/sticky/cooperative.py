"""Kafka's cooperative sticky assignor ("cooperative-sticky"), the one to prefer.

Same sticky algorithm as "sticky", but for the cooperative rebalance protocol: members keep
their partitions while the group rebalances and report them as the subscription's owned
partitions (with the generation in ConsumerProtocol v2+, or in the user data for v1 members).
A partition may not go to a new owner in the same rebalance its old owner gives it up, so every
partition that changes owner is removed from the new owner's assignment: the old owner sees it
missing and revokes it, which triggers a follow-up rebalance in which it is free and assigned.
The group converges in at most two rebalances while untouched partitions keep being consumed.

After the constrained algorithm the moving partitions are the ones it reports; after the general
algorithm they are computed as Kafka does: partitions newly assigned to one member that some
other member owned and no longer has.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from riverlog.common.types import TopicPartition

from ..abstract import DEFAULT_GENERATION, Assignment, RebalanceProtocol, Subscription
from .base import AbstractStickyAssignor, MemberData
from .userdata import decode_cooperative_generation, encode_cooperative_user_data


class CooperativeStickyAssignor(AbstractStickyAssignor):
    """One instance per consumer: it remembers that member's generation."""

    name = "cooperative-sticky"
    supported_protocols: tuple[RebalanceProtocol, ...] = (
        RebalanceProtocol.COOPERATIVE,
        RebalanceProtocol.EAGER,
    )

    def __init__(self) -> None:
        super().__init__()
        self._generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._generation = generation

    def subscription_user_data(
        self, topics: Collection[str], owned: Sequence[TopicPartition]
    ) -> bytes | None:
        """The generation of the last assignment (owned partitions travel in the subscription)."""
        return encode_cooperative_user_data(self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        if subscription.generation_id >= 0:  # ConsumerProtocol v2+
            return MemberData(list(subscription.owned_partitions), subscription.generation_id)
        if subscription.user_data is None:
            return MemberData(list(subscription.owned_partitions), None)
        generation = decode_cooperative_generation(subscription.user_data)
        return MemberData(list(subscription.owned_partitions), generation)

    def _assign_partitions(
        self, partitions_per_topic: dict[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        assignments = super()._assign_partitions(partitions_per_topic, subscriptions)
        transferring = self.partitions_transferring_ownership
        if transferring is None:
            transferring = _partitions_changing_owner(subscriptions, assignments)
        for tp, new_owner in transferring.items():
            partitions = assignments[new_owner]
            if tp in partitions:
                partitions.remove(tp)
        return assignments


def _partitions_changing_owner(
    subscriptions: Mapping[str, Subscription], assignments: Mapping[str, list[TopicPartition]]
) -> dict[TopicPartition, str]:
    """Partitions assigned to a member that did not own them and that some member owned and
    is not assigned any more (Kafka's `computePartitionsTransferringOwnership`)."""
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for consumer, assigned in assignments.items():
        owned = subscriptions[consumer].owned_partitions
        owned_set = set(owned)
        added.update((tp, consumer) for tp in assigned if tp not in owned_set)
        assigned_set = set(assigned)
        revoked.update(tp for tp in owned if tp not in assigned_set)
    return {tp: consumer for tp, consumer in added.items() if tp in revoked}
