"""Which partitions change leader or ISR, and how, as pure functions of the cluster image: the
controller's reactions to storage nodes dying, restarting and returning, and the preferred and
unclean elections of ElectLeaders and of the automatic leader rebalance.

Every function takes the topics and the live storage node ids and returns `PartitionUpdate`s,
each built by `PartitionChangeBuilder`, so the rules of Kafka's `ReplicationControlManager`
(`handleBrokerFenced`, `handleBrokerUnfenced`, `electLeaders`, `maybeBalancePartitionLeaders`)
are tested without etcd or a clock. `reconcile` is idempotent: run on a settled image it
returns nothing, which is what lets a newly elected controller simply run it once to finish
whatever its predecessor left undone.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from riverlog.common.cluster.image import PartitionInfo, TopicInfo
from riverlog.common.errors import ErrorCode
from riverlog.common.topic_config import TOPIC_CONFIGS
from riverlog.common.types import NO_LEADER

from .partition_change import OfflineReplicas, PartitionChangeBuilder, eligible_nodes

UNCLEAN_KEY = "unclean.leader.election.enable"


@dataclass(frozen=True, slots=True)
class PartitionUpdate:
    """A partition's new state; `elected` when its leader moved (a leader election)."""

    topic: str
    before: PartitionInfo
    after: PartitionInfo

    @property
    def elected(self) -> bool:
        return self.after.leader_epoch != self.before.leader_epoch

    @property
    def offline(self) -> bool:
        return self.after.leader == NO_LEADER


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """One partition's answer to ElectLeaders."""

    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    leader: int = NO_LEADER
    leader_epoch: int = 0


def unclean_enabled(topic: TopicInfo) -> bool:
    """The topic's unclean.leader.election.enable (default false)."""
    raw = topic.configs.get(UNCLEAN_KEY)
    if raw is None:
        return False
    try:
        return bool(TOPIC_CONFIGS[UNCLEAN_KEY].parse(raw))
    except Exception:
        return False


def reconcile(
    topics: Iterable[TopicInfo],
    live: Collection[int],
    restarted: Collection[int] = (),
    offline: OfflineReplicas | None = None,
) -> list[PartitionUpdate]:
    """Bring every partition in line with the live storage nodes, in one batch:

    - a replica that is not live leaves the ISR (unless that would empty it: then the ISR is
      left as it is and the partition goes offline, as Kafka leaves it);
    - a partition whose leader is not live gets the first live ISR member in replica order,
      leader epoch + 1; with none, the first live replica when the topic allows unclean
      election (the ISR becomes just it), else leader -1;
    - an offline partition whose ISR member is live again gets it as leader;
    - a `restarted` node (same id, new incarnation) lost what it had not flushed: it leaves
      the ISR and gives up leadership as if it had died, then may be elected again like a
      returning node, always under a new leader epoch;
    - a replica in `offline` (on a log dir its node reported offline) is treated as dead for
      its partition: it leaves the ISR, gives up leadership and is never elected.
    """
    live_set = frozenset(live)
    gone = frozenset(restarted)
    offline = offline or {}
    updates: list[PartitionUpdate] = []
    for topic in topics:
        unclean = unclean_enabled(topic)
        for current in topic.partitions:
            eligible = eligible_nodes(live_set, offline, topic.name, current.partition)
            after = _reconcile_one(current, eligible, gone, unclean)
            if after is not None:
                updates.append(PartitionUpdate(topic.name, current, after))
    return updates


def _reconcile_one(
    current: PartitionInfo, live: frozenset[int], restarted: frozenset[int], unclean: bool
) -> PartitionInfo | None:
    state = current
    touched = restarted.intersection(current.replicas)
    if touched:
        # First as if the restarted nodes had died...
        without = live - touched
        change = (
            PartitionChangeBuilder(state, without, unclean)
            .set_target_isr([r for r in state.isr if r in without])
            .build()
        )
        if change is not None:
            state = change.partition
    change = (
        PartitionChangeBuilder(state, live, unclean)
        .set_target_isr([r for r in state.isr if r in live])
        .build()
    )
    if change is not None:
        state = change.partition
    if state == current:
        return None
    # ...then back: however many steps it took, one change, one epoch bump each.
    leader_moved = state.leader != current.leader or current.leader in touched
    return replace(
        state,
        leader_epoch=current.leader_epoch + (1 if leader_moved else 0),
        partition_epoch=current.partition_epoch + 1,
    )


def _select(
    topics: Mapping[str, TopicInfo], wanted: Sequence[tuple[str, int]] | None
) -> tuple[list[tuple[TopicInfo, PartitionInfo]], list[ElectionResult]]:
    """The partitions named (all when `wanted` is None) and results for unknown ones."""
    if wanted is None:
        found = [(t, p) for t in topics.values() for p in t.partitions]
        return found, []
    chosen: list[tuple[TopicInfo, PartitionInfo]] = []
    unknown: list[ElectionResult] = []
    for name, number in dict.fromkeys(wanted):
        topic = topics.get(name)
        part = next((p for p in topic.partitions if p.partition == number), None) if topic else None
        if topic is None or part is None:
            unknown.append(
                ElectionResult(
                    name,
                    number,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"The partition {name}-{number} does not exist.",
                )
            )
        else:
            chosen.append((topic, part))
    return chosen, unknown


def elect_preferred(
    topics: Mapping[str, TopicInfo],
    live: Collection[int],
    wanted: Sequence[tuple[str, int]] | None = None,
    offline: OfflineReplicas | None = None,
) -> tuple[list[PartitionUpdate], list[ElectionResult]]:
    """ElectLeaders PREFERRED: move leadership to the first replica where it is live (and not
    on an offline log dir) and in the ISR. ELECTION_NOT_NEEDED where it already leads,
    PREFERRED_LEADER_NOT_AVAILABLE where it cannot."""
    chosen, results = _select(topics, wanted)
    updates: list[PartitionUpdate] = []
    for topic, current in chosen:
        preferred = current.replicas[0]
        if current.leader == preferred:
            results.append(_result(topic.name, current, ErrorCode.ELECTION_NOT_NEEDED))
            continue
        eligible = eligible_nodes(live, offline or {}, topic.name, current.partition)
        change = PartitionChangeBuilder(current, eligible).elect_preferred_leader().build()
        if change is None or change.partition.leader != preferred:
            why = f"Failed to elect leader for partition {topic.name}-{current.partition}: "
            why += f"preferred replica {preferred} is not live or not in the ISR."
            results.append(
                _result(topic.name, current, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, why)
            )
            continue
        updates.append(PartitionUpdate(topic.name, current, change.partition))
        results.append(_result(topic.name, change.partition))
    return updates, results


def elect_unclean(
    topics: Mapping[str, TopicInfo],
    live: Collection[int],
    wanted: Sequence[tuple[str, int]] | None = None,
    offline: OfflineReplicas | None = None,
) -> tuple[list[PartitionUpdate], list[ElectionResult]]:
    """ElectLeaders UNCLEAN: a partition with no live leader gets one from its ISR, else any
    live replica (whatever the topic's setting: the operator asked; never one on an offline
    log dir). ELECTION_NOT_NEEDED where a live leader exists, ELIGIBLE_LEADERS_NOT_AVAILABLE
    where no replica is live."""
    chosen, results = _select(topics, wanted)
    updates: list[PartitionUpdate] = []
    for topic, current in chosen:
        live_set = eligible_nodes(live, offline or {}, topic.name, current.partition)
        if current.leader != NO_LEADER and current.leader in live_set:
            results.append(_result(topic.name, current, ErrorCode.ELECTION_NOT_NEEDED))
            continue
        change = (
            PartitionChangeBuilder(current, live_set, unclean_leader_election=True)
            .set_target_isr([r for r in current.isr if r in live_set])
            .build()
        )
        if change is None or change.partition.leader == NO_LEADER:
            why = f"No live replica of {topic.name}-{current.partition} can lead."
            results.append(
                _result(topic.name, current, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, why)
            )
            continue
        updates.append(PartitionUpdate(topic.name, current, change.partition))
        results.append(_result(topic.name, change.partition))
    return updates, results


def imbalanced(
    topics: Iterable[TopicInfo], live: Collection[int], percentage: int
) -> list[tuple[str, int]]:
    """The partitions the automatic rebalance moves back to their preferred leader: those of
    every node whose share of preferred partitions led by another node exceeds
    `leader.imbalance.per.broker.percentage`, where the preferred replica is live and in the
    ISR (Kafka's `checkAndTriggerAutoLeaderRebalance`)."""
    live_set = frozenset(live)
    preferred_of: dict[int, list[tuple[str, PartitionInfo]]] = {}
    for topic in topics:
        for p in topic.partitions:
            if p.replicas:
                preferred_of.setdefault(p.replicas[0], []).append((topic.name, p))
    moves: list[tuple[str, int]] = []
    for node, parts in sorted(preferred_of.items()):
        if node not in live_set:
            continue
        not_led = [(name, p) for name, p in parts if p.leader != node]
        if not not_led or len(not_led) * 100 <= percentage * len(parts):
            continue
        moves.extend((name, p.partition) for name, p in not_led if node in p.isr)
    return moves


def _result(
    topic: str, p: PartitionInfo, code: ErrorCode = ErrorCode.NONE, message: str = ""
) -> ElectionResult:
    return ElectionResult(topic, p.partition, code, message, p.leader, p.leader_epoch)
