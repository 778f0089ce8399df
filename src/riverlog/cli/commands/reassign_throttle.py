"""The replication throttle of `riverlog partitions reassign`, as kafka-reassign-partitions
sets and clears it (decision 0024).

`--execute --throttle R` first sets, on every node the plan's moves involve (current and target
replicas), `leader.replication.throttled.rate` and `follower.replication.throttled.rate` to R,
and on every topic with a partition that copies data the throttled-replica lists
(`throttled_replicas_for_moves`: leader list = the current replicas, follower list = the
replicas being added); then it starts the moves. Run again on a plan in progress it updates the
rate (the lists are recomputed from the original replicas, so they do not change). `--verify`,
once every move of the plan completed, removes the lists from the plan's topics and the rates
from every node that has one set, as Kafka's tool does; the cluster-wide default entity is the
operator's and is left alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from riverlog.client import AdminClient
from riverlog.common.node_config import THROTTLED_RATES, nodes_with_rates, rate_configs
from riverlog.common.replication_throttle import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    nodes_of_moves,
    throttled_replicas_for_moves,
)
from riverlog.common.types import TopicPartition

RATES = THROTTLED_RATES
LISTS = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)


def planned_moves(
    admin: AdminClient, plan: Mapping[TopicPartition, Sequence[int]]
) -> dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...]]]:
    """{partition: (original replicas, target)} for the plan's existing partitions; a move in
    progress counts from its original replicas (its replicas less the adding ones)."""
    described = admin.describe_topics(sorted({tp.topic for tp in plan}))
    out: dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for tp, target in plan.items():
        topic = described.get(tp.topic)
        info = (
            next((p for p in topic.partitions if p.partition == tp.partition), None)
            if topic
            else None
        )
        if info is None:
            continue
        original = tuple(r for r in info.replicas if r not in info.adding_replicas)
        out[tp] = (original, tuple(target))
    return out


def apply_throttle(
    admin: AdminClient, plan: Mapping[TopicPartition, Sequence[int]], rate: int
) -> list[str]:
    """Set the rates on the plan's nodes and the lists on its topics; lines to tell the user."""
    moves = planned_moves(admin, plan)
    nodes = sorted(nodes_of_moves(moves))
    admin.alter_node_configs(dict(rate_configs(nodes, rate).items()))
    lists = throttled_replicas_for_moves(moves)
    if lists:
        admin.alter_configs({topic: throttles.configs() for topic, throttles in lists.items()})
    return [
        f"The inter-broker throttle limit was set to {rate} B/s on nodes "
        f"{','.join(map(str, nodes))}; throttled topics: {','.join(lists) or '(none)'}",
        "Warning: run --verify periodically until the reassignment completes: it removes the"
        " throttle.",
    ]


def clear_throttles(admin: AdminClient, topics: Sequence[str]) -> list[str]:
    """Remove the lists from `topics` and the rates from every node that has one set."""
    lines: list[str] = []
    entities = admin.describe_node_configs(all_nodes=True)
    throttled = nodes_with_rates(
        {
            node: {k for k, entry in entries.items() if not entry.is_default}
            for node, entries in entities.items()
            if node is not None
        }
    )
    if throttled:
        admin.alter_node_configs(dict(rate_configs(throttled, None).items()))
        lines.append(f"Throttle was removed from nodes {','.join(map(str, throttled))}.")
    configs = admin.describe_configs(sorted(set(topics)))
    listed = sorted(
        topic for topic, entries in configs.items() if any(not entries[k].is_default for k in LISTS)
    )
    if listed:
        admin.alter_configs({topic: dict.fromkeys(LISTS) for topic in listed})
        lines.append(f"Throttled replica lists were removed from topics {','.join(listed)}.")
    return lines
