"""AlterPartition's checks, as a pure function: a partition leader asks the controller to change
its ISR, and the controller accepts only a request based on the state it holds.

The order of the checks is Kafka's (`ReplicationControlManager.validateAlterPartitionData`):

1. the topic and partition exist (UNKNOWN_TOPIC_OR_PARTITION);
2. the request's leader epoch is the partition's (FENCED_LEADER_EPOCH when older, as for a
   leader deposed by an election it has not heard of yet; UNKNOWN_LEADER_EPOCH when newer);
3. the sender leads the partition (NOT_LEADER_OR_FOLLOWER);
4. the request's partition epoch is the partition's (INVALID_UPDATE_VERSION: a concurrent
   change, say a controller election, got there first; the leader re-reads and retries);
5. the new ISR is a non-empty subset of the replicas that includes the leader
   (INVALID_REQUEST);
6. every member is a live registered storage node whose replica is not on a log dir it
   reported offline (INELIGIBLE_REPLICA; decision 0022).

A request that changes nothing is answered with the current state and no write.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from riverlog.common.cluster.image import PartitionInfo, TopicInfo
from riverlog.common.errors import ErrorCode, RiverlogError

from .partition_change import OfflineReplicas, PartitionChangeBuilder, eligible_nodes


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    """One partition of an AlterPartition request."""

    topic: str
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class AlterPartitionOutcome:
    """The answer for one item: `after` is the state to write (None: no write needed);
    `state` is what to answer (the new state, or the current one on most errors)."""

    item: AlterPartitionItem
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    state: PartitionInfo | None = None
    after: PartitionInfo | None = None


def _fail(
    item: AlterPartitionItem, code: ErrorCode, message: str, state: PartitionInfo | None = None
) -> AlterPartitionOutcome:
    return AlterPartitionOutcome(item, code, message, state)


def check_alter_partition(
    item: AlterPartitionItem,
    sender: int,
    topics: Mapping[str, TopicInfo],
    live: Collection[int],
    offline: OfflineReplicas | None = None,
) -> AlterPartitionOutcome:
    """Validate one item against the image; the outcome carries the change to write."""
    name = f"{item.topic}-{item.partition}"
    live = eligible_nodes(live, offline or {}, item.topic, item.partition)
    topic = topics.get(item.topic)
    current = (
        next((p for p in topic.partitions if p.partition == item.partition), None)
        if topic is not None
        else None
    )
    if current is None:
        return _fail(
            item,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"This server does not host this topic-partition: {name}",
        )
    if item.leader_epoch < current.leader_epoch:
        return _fail(
            item,
            ErrorCode.FENCED_LEADER_EPOCH,
            f"{name}: leader epoch {item.leader_epoch} is older than {current.leader_epoch}",
            current,
        )
    if item.leader_epoch > current.leader_epoch:
        return _fail(
            item,
            ErrorCode.UNKNOWN_LEADER_EPOCH,
            f"{name}: leader epoch {item.leader_epoch} is newer than {current.leader_epoch}",
            current,
        )
    if current.leader != sender:
        return _fail(
            item,
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"{name}: node {sender} is not the leader (the leader is {current.leader})",
            current,
        )
    if item.partition_epoch != current.partition_epoch:
        return _fail(
            item,
            ErrorCode.INVALID_UPDATE_VERSION,
            f"{name}: partition epoch {item.partition_epoch} is not the current "
            f"{current.partition_epoch}",
            current,
        )
    problem = _isr_problem(item.new_isr, current, sender)
    if problem is not None:
        return _fail(item, ErrorCode.INVALID_REQUEST, f"{name}: {problem}", current)
    dead = [r for r in item.new_isr if r not in live]
    if dead:
        return _fail(
            item,
            ErrorCode.INELIGIBLE_REPLICA,
            f"{name}: replicas {dead} of the new ISR are not live storage nodes "
            "(or their log dir is offline)",
            current,
        )
    try:
        change = PartitionChangeBuilder(current, live).set_target_isr(item.new_isr).build()
    except RiverlogError as exc:
        return _fail(item, exc.code, f"{name}: {exc.message}", current)
    if change is None:
        return AlterPartitionOutcome(item, state=current)
    return AlterPartitionOutcome(item, state=change.partition, after=change.partition)


def _isr_problem(isr: Sequence[int], current: PartitionInfo, leader: int) -> str | None:
    if not isr:
        return "the new ISR is empty"
    if len(set(isr)) != len(isr):
        return f"the new ISR {list(isr)} has duplicates"
    outside = [r for r in isr if r not in current.replicas]
    if outside:
        return f"the new ISR has {outside}, which are not replicas {list(current.replicas)}"
    if leader not in isr:
        return f"the new ISR {list(isr)} does not include the leader {leader}"
    return None
