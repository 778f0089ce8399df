"""Helpers shared by the assignor tests: Kafka's test utilities (`verifyValidityAndBalance`,
`isFullyBalanced`, the cooperative follow-up-rebalance loop, `buildSubscriptionV*`) ported."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping

from riverlog.common.assignors import (
    AbstractPartitionAssignor,
    CooperativeStickyAssignor,
    StickyAssignor,
    Subscription,
)
from riverlog.common.assignors.sticky import AbstractStickyAssignor
from riverlog.common.assignors.sticky.userdata import (
    encode_cooperative_user_data,
    encode_sticky_user_data,
)
from riverlog.common.types import TopicPartition

DEFAULT_GENERATION = -1

Lists = dict[str, list[TopicPartition]]


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def tps(text: str) -> list[TopicPartition]:
    """`"t1-0, t1-3"` → partitions (the string form Kafka's rack tests use)."""
    return [TopicPartition.parse(part) for part in text.split(", ")] if text else []


def sub(
    topics: Iterable[str],
    owned: Iterable[TopicPartition] = (),
    generation: int = DEFAULT_GENERATION,
    *,
    user_data: bytes | None = None,
    instance: str | None = None,
) -> Subscription:
    return Subscription(
        list(topics),
        user_data=user_data,
        owned_partitions=list(owned),
        generation_id=generation,
        group_instance_id=instance,
    )


def sub_v0(assignor: AbstractStickyAssignor, topics, owned, generation) -> Subscription | None:
    """ConsumerProtocol v0: only topics and user data (cooperative-sticky needs v1+)."""
    if isinstance(assignor, CooperativeStickyAssignor):
        return None
    return sub(topics, user_data=encode_sticky_user_data(list(owned), generation))


def sub_v1(assignor: AbstractStickyAssignor, topics, owned, generation) -> Subscription:
    """ConsumerProtocol v1: owned partitions but no generation field."""
    if isinstance(assignor, CooperativeStickyAssignor):
        data = encode_cooperative_user_data(generation)
    else:
        data = encode_sticky_user_data(list(owned), generation)
    return sub(topics, owned, user_data=data)


def sub_v2(assignor: AbstractStickyAssignor, topics, owned, generation) -> Subscription:
    """ConsumerProtocol v2+: owned partitions and generation in the subscription itself."""
    if isinstance(assignor, CooperativeStickyAssignor):
        data = encode_cooperative_user_data(DEFAULT_GENERATION)
    else:
        data = encode_sticky_user_data(list(owned), generation)
    return sub(topics, owned, generation, user_data=data)


def assign(
    assignor: AbstractPartitionAssignor,
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
) -> Lists:
    result = assignor.assign(partitions_per_topic, subscriptions)
    return {member: list(a.partitions) for member, a in result.items()}


def is_fully_balanced(assignment: Mapping[str, list[TopicPartition]]) -> bool:
    sizes = [len(parts) for parts in assignment.values()]
    return not sizes or max(sizes) - min(sizes) <= 1


def check_valid_and_balanced(
    subscriptions: Mapping[str, Subscription], assignment: Mapping[str, list[TopicPartition]]
) -> None:
    """Kafka's `verifyValidityAndBalance` for one assignment: partitions only go to members
    subscribed to their topic, no partition twice, and two members whose counts differ by more
    than one share no topic (else a partition could have moved to balance them)."""
    assert set(assignment) == set(subscriptions)
    members = sorted(assignment)
    for i, member in enumerate(members):
        partitions = assignment[member]
        for p in partitions:
            assert p.topic in subscriptions[member].topics, f"{p} given to {member}"
        for other in members[i + 1 :]:
            other_partitions = assignment[other]
            common = set(partitions) & set(other_partitions)
            assert not common, f"{member} and {other} both have {common}"
            if abs(len(partitions) - len(other_partitions)) <= 1:
                continue
            shared = {p.topic for p in partitions} & {p.topic for p in other_partitions}
            assert not shared, f"{member}/{other} unbalanced yet share topics {shared}"


def verify(
    assignor: AbstractPartitionAssignor,
    partitions_per_topic: Mapping[str, int],
    subscriptions: MutableMapping[str, Subscription],
    assignment: Lists,
    generation: int = 1,
) -> Lists:
    """Kafka's `verifyValidityAndBalance` as each assignor's test overrides it. For
    cooperative-sticky: while partitions are being revoked, check none is also assigned in the
    same rebalance, then rebalance again with the members owning what they were given (updating
    `subscriptions`, as Kafka's test does); at most 4 follow-ups. Returns the final assignment."""
    if isinstance(assignor, CooperativeStickyAssignor):
        for _ in range(5):
            if not _revokes_partitions(subscriptions, assignment):
                break
            for member, partitions in assignment.items():
                old = subscriptions[member]
                subscriptions[member] = sub_v2(assignor, old.topics, partitions, generation)
            assignment = assign(assignor, partitions_per_topic, subscriptions)
        else:
            raise AssertionError("cooperative assignment did not settle in 4 follow-ups")
    check_valid_and_balanced(subscriptions, assignment)
    return assignment


def _revokes_partitions(
    subscriptions: Mapping[str, Subscription], assignment: Mapping[str, list[TopicPartition]]
) -> bool:
    added: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    for member, assigned in assignment.items():
        owned = set(subscriptions[member].owned_partitions)
        revoked |= owned - set(assigned)
        added |= set(assigned) - owned
    assert not added & revoked, f"assigned while still being revoked: {added & revoked}"
    return bool(revoked)


def new_sticky(kind: str) -> AbstractStickyAssignor:
    return StickyAssignor() if kind == "sticky" else CooperativeStickyAssignor()


def topic_name(i: int, max_num: int) -> str:
    return f"t{i:0{len(str(max_num))}d}"


def consumer_name(i: int, max_num: int) -> str:
    return f"c{i:0{len(str(max_num))}d}"
