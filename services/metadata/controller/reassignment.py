"""Partition reassignment (KIP-455) as pure steps: state in, change out, no etcd, so every rule
is unit-tested alone, as `partition_change.PartitionChangeBuilder` is for leaders and ISRs.

A reassignment lives in the partition's own state (`adding_replicas`, `removing_replicas`, as in
Kafka's PartitionRecord), so it is as durable and as fenced as any partition change and a new
controller resumes it by reading the partition. The states and transitions:

- *idle* (adding and removing empty) --`start(target)`--> *reassigning*: replicas become
  target + (current - target) (Kafka's `PartitionReassignmentReplicas` order), adding =
  target - current, removing = current - target. The new replicas follow the leader and join the
  ISR through the ordinary AlterPartition expansion.
- *reassigning* --`complete`--> *idle*, once every target replica is in the ISR: replicas :=
  target, ISR := ISR ∩ target, adding/removing cleared; the leader moves to the first live target
  replica in the ISR when it is leaving. A target already in sync (a replication factor
  decrease, a reorder) completes in the same change as it starts.
- *reassigning* --`cancel`--> *idle*: replicas := replicas - adding, ISR := ISR - adding, the
  leader moves back into the original set if it was an adding replica.

Leader and partition epochs follow `PartitionChangeBuilder`: a new leader bumps the leader
epoch, every change bumps the partition epoch. Storage nodes that leave the replicas (removing
replicas at completion, adding replicas at cancel) stop the replica and delete its files.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from riverlog.common.cluster.image import PartitionInfo, TopicInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.topic_config import TOPIC_CONFIGS

from .partition_change import PartitionChangeBuilder

MIN_ISR_KEY = "min.insync.replicas"


@dataclass(frozen=True, slots=True)
class PartitionReassignmentReplicas:
    """Kafka's `PartitionReassignmentReplicas`: the replica sets of a move from `current` to
    `target`. `replicas` lists the target first, then the leaving replicas."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @classmethod
    def of(cls, current: Sequence[int], target: Sequence[int]) -> PartitionReassignmentReplicas:
        removing = tuple(r for r in current if r not in target)
        adding = tuple(r for r in target if r not in current)
        return cls((*target, *removing), adding, removing)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)


def is_reassigning(p: PartitionInfo) -> bool:
    return bool(p.adding_replicas or p.removing_replicas)


def replicas_of(p: PartitionInfo) -> PartitionReassignmentReplicas:
    return PartitionReassignmentReplicas(p.replicas, p.adding_replicas, p.removing_replicas)


def min_insync_replicas(topic: TopicInfo) -> int:
    """The topic's min.insync.replicas (explicit config, else Kafka's default of 1)."""
    raw = topic.configs.get(MIN_ISR_KEY)
    if raw is None:
        return 1
    try:
        value = TOPIC_CONFIGS[MIN_ISR_KEY].parse(raw)
    except Exception:
        return 1
    return value if isinstance(value, int) else 1


def find_partition(
    topics: Mapping[str, TopicInfo], topic: str, partition: int
) -> tuple[TopicInfo, PartitionInfo]:
    """The topic and partition, or UNKNOWN_TOPIC_OR_PARTITION."""
    info = topics.get(topic)
    found = (
        next((p for p in info.partitions if p.partition == partition), None)
        if info is not None
        else None
    )
    if info is None or found is None:
        raise RiverlogError(
            f"{topic}-{partition}: no such topic or partition", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
    return info, found


def validate_target(
    topic: TopicInfo, partition: int, target: Sequence[int], live: Collection[int]
) -> None:
    """Kafka's checks of a manual assignment; raises with its error code, changes nothing."""
    name = f"{topic.name}-{partition}"
    if not target:
        raise RiverlogError(
            f"{name}: the target replica list is empty", ErrorCode.INVALID_REPLICA_ASSIGNMENT
        )
    if len(set(target)) != len(target):
        raise RiverlogError(
            f"{name}: duplicate replicas in {list(target)}", ErrorCode.INVALID_REPLICA_ASSIGNMENT
        )
    dead = sorted(set(target) - set(live))
    if dead:
        raise RiverlogError(
            f"{name}: target replicas {dead} are not live registered storage nodes",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )
    wanted = min_insync_replicas(topic)
    if len(target) < wanted:
        raise RiverlogError(
            f"{name}: {len(target)} replicas is below the topic's min.insync.replicas {wanted}",
            ErrorCode.INVALID_REPLICATION_FACTOR,
        )


def validate_not_draining(
    topic: TopicInfo,
    current: PartitionInfo,
    partition: int,
    target: Sequence[int],
    draining: Collection[int],
) -> None:
    """A move may keep a replica on a node being drained, never add one there."""
    joining = sorted((set(target) - set(current.replicas)) & set(draining))
    if joining:
        raise RiverlogError(
            f"{topic.name}-{partition}: target replicas {joining} are being drained",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )


def _with_sets(
    base: PartitionInfo,
    after: PartitionInfo | None,
    adding: tuple[int, ...],
    removing: tuple[int, ...],
) -> PartitionInfo | None:
    """`after` (a builder's result, None when it saw no change) with the reassignment sets;
    None when nothing at all changes."""
    if after is None:
        if (adding, removing) == (base.adding_replicas, base.removing_replicas):
            return None
        after = replace(base, partition_epoch=base.partition_epoch + 1)
    return replace(after, adding_replicas=adding, removing_replicas=removing)


def start(
    current: PartitionInfo, target: Sequence[int], live: Collection[int]
) -> PartitionInfo | None:
    """Begin moving `current` to `target` (already validated); a reassignment in progress is
    replaced (its replicas count as current, as in Kafka). Completes at once when the target is
    already in sync. None when nothing changes."""
    sets = PartitionReassignmentReplicas.of(current.replicas, tuple(target))
    change = PartitionChangeBuilder(current, live).set_target_replicas(sets.replicas).build()
    started = _with_sets(current, change.partition if change else None, sets.adding, sets.removing)
    done = complete(started or current, live)
    if done is not None:  # one change: one partition epoch
        return replace(done, partition_epoch=current.partition_epoch + 1)
    return started


def complete(current: PartitionInfo, live: Collection[int]) -> PartitionInfo | None:
    """Finish the reassignment when every target replica is in the ISR; None while it cannot
    (or when none is in progress)."""
    if not is_reassigning(current):
        return None
    target = replicas_of(current).target
    if not target or any(r not in current.isr for r in target):
        return None
    change = (
        PartitionChangeBuilder(current, live)
        .set_target_replicas(target)
        .set_target_isr([r for r in current.isr if r in target])
        .build()
    )
    return _with_sets(current, change.partition if change else None, (), ())


def cancel(current: PartitionInfo, live: Collection[int]) -> PartitionInfo:
    """Revert to the original replicas; NO_REASSIGNMENT_IN_PROGRESS when idle."""
    if not is_reassigning(current):
        raise RiverlogError("no reassignment in progress", ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
    original = replicas_of(current).original
    isr = [r for r in current.isr if r in original]
    if not isr:
        raise RiverlogError(
            f"no replica of the original set {list(original)} is in sync; cancelling "
            "would lose the partition's data",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )
    change = (
        PartitionChangeBuilder(current, live)
        .set_target_replicas(original)
        .set_target_isr(isr)
        .build()
    )
    after = _with_sets(current, change.partition if change else None, (), ())
    assert after is not None  # the sets were not empty
    return after


def completable(
    topics: Mapping[str, TopicInfo], live: Collection[int]
) -> list[tuple[str, PartitionInfo, PartitionInfo]]:
    """(topic, before, after) of every reassignment that can complete now: run by the
    controller after ISR changes and when it takes over, so a move resumes after failover."""
    out: list[tuple[str, PartitionInfo, PartitionInfo]] = []
    for topic in topics.values():
        for p in topic.partitions:
            done = complete(p, live)
            if done is not None:
                out.append((topic.name, p, done))
    return out
