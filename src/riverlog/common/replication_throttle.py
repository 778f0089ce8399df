"""Kafka's throttled-replica lists: the topic configs `leader.replication.throttled.replicas`
and `follower.replication.throttled.replicas`, their format, and the pure builder of the lists
for a set of partition moves.

Format (Kafka's `ThrottledReplicaListValidator`): empty (nothing throttled), `*` (every replica
of the topic), or `partition:node` pairs separated by commas. As in Kafka, a pair names the node
that applies the throttle: a node throttles partition p as a leader when `p:<itself>` is in the
leader list (it serves p to out-of-sync followers at `leader.replication.throttled.rate`), and
as a follower when `p:<itself>` is in the follower list. So kafka-reassign-partitions puts every
current replica of a moving partition (any may lead it) in the leader list, and the replicas
being added (the ones that fetch the copy) in the follower list; `throttled_replicas_for_moves`
does exactly that, for the CLI today and the controller's replica balancer later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

LEADER_THROTTLED_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS: Final = "follower.replication.throttled.replicas"
ALL_REPLICAS: Final = "*"

ThrottledSet = frozenset[tuple[int, int]] | None
"""Parsed list: (partition, node) pairs, or None for `*` (every replica)."""


def parse_throttled_replicas(name: str, raw: str) -> ThrottledSet:
    """The pairs of a list value; None for `*`; RiverlogError(INVALID_CONFIG) naming the key,
    the value and the expected format otherwise."""
    text = raw.strip()
    if text == ALL_REPLICAS:
        return None
    if not text:
        return frozenset()
    pairs: set[tuple[int, int]] = set()
    for item in text.split(","):
        partition, sep, node = item.strip().partition(":")
        if not sep or not partition.strip().isdigit() or not node.strip().isdigit():
            raise RiverlogError(
                f"invalid value {raw!r} for {name}: must be '*' or a list of partition:node"
                " pairs such as 0:101,0:102,1:101 (both non-negative integers)",
                ErrorCode.INVALID_CONFIG,
            )
        pairs.add((int(partition), int(node)))
    return frozenset(pairs)


def partitions_throttled_on(name: str, raw: str, node_id: int) -> frozenset[int] | None:
    """The partitions `node_id` throttles under list `raw` (Kafka's parseThrottledPartitions:
    the pairs naming this node); None means every partition (`*`). A malformed value throttles
    nothing (the metadata service never stores one)."""
    try:
        pairs = parse_throttled_replicas(name, raw)
    except RiverlogError:
        return frozenset()
    if pairs is None:
        return None
    return frozenset(p for p, n in pairs if n == node_id)


def render_pairs(pairs: Iterable[tuple[int, int]]) -> str:
    """Pairs in Kafka's order (by partition, then node) and format."""
    return ",".join(f"{p}:{n}" for p, n in sorted(set(pairs)))


@dataclass(frozen=True, slots=True)
class TopicThrottles:
    """The two list values of one topic for a set of moves."""

    leader: str
    follower: str

    def configs(self) -> dict[str, str]:
        return {LEADER_THROTTLED_REPLICAS: self.leader, FOLLOWER_THROTTLED_REPLICAS: self.follower}


def throttled_replicas_for_moves(
    moves: Mapping[TopicPartition, tuple[Sequence[int], Sequence[int]]],
) -> dict[str, TopicThrottles]:
    """Per topic, the throttled-replica lists for moves {partition: (current replicas, target
    replicas)}, as kafka-reassign-partitions computes them: leader list = every current
    replica of a moving partition, follower list = the target replicas not among the current
    ones. A partition whose target adds no replica moves no data and is left out; a topic with
    nothing to copy gets no entry."""
    leaders: dict[str, set[tuple[int, int]]] = {}
    followers: dict[str, set[tuple[int, int]]] = {}
    for tp, (current, target) in moves.items():
        adding = [r for r in target if r not in current]
        if not adding:
            continue
        leaders.setdefault(tp.topic, set()).update((tp.partition, r) for r in current)
        followers.setdefault(tp.topic, set()).update((tp.partition, r) for r in adding)
    return {
        topic: TopicThrottles(render_pairs(leaders[topic]), render_pairs(followers[topic]))
        for topic in sorted(leaders)
    }


def nodes_of_moves(moves: Mapping[TopicPartition, tuple[Sequence[int], Sequence[int]]]) -> set[int]:
    """Every node a set of moves involves (current and target replicas): where the throttle
    rates go."""
    return {r for current, target in moves.values() for r in (*current, *target)}
