"""Replica assignment, as Kafka's `AdminUtils.assignReplicasToBrokers`.

Rack-unaware: the first replica of each partition goes round-robin over the storage nodes
(sorted by id) from a random start index; the followers sit at a shift from the first replica
that grows by one every full round, so replicas spread evenly and no two partitions share the
same replica list by accident. Rack-aware (used when every node has a rack): the same walk over
a node list that alternates racks, skipping a node when its rack (or the node itself) already
holds a replica while some other rack (or node) holds none.

Pure and deterministic given `start_index`/`shift` or a seeded `random.Random`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from riverlog.common.errors import ErrorCode, RiverlogError


@dataclass(frozen=True, slots=True)
class NodePlacement:
    """What placement needs of a storage node."""

    node_id: int
    rack: str = ""


def _check(num_partitions: int, replication_factor: int, nodes: Sequence[NodePlacement]) -> None:
    if num_partitions <= 0:
        raise RiverlogError(
            "Number of partitions must be larger than 0.", ErrorCode.INVALID_PARTITIONS
        )
    if replication_factor <= 0:
        raise RiverlogError(
            "Replication factor must be larger than 0.", ErrorCode.INVALID_REPLICATION_FACTOR
        )
    if replication_factor > len(nodes):
        raise RiverlogError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(nodes)}.",
            ErrorCode.INVALID_REPLICATION_FACTOR,
        )


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Node ids interleaved by rack: one from each rack (racks sorted, nodes sorted) in turn."""
    by_rack: dict[str, list[int]] = {}
    for node_id in sorted(racks):
        by_rack.setdefault(racks[node_id], []).append(node_id)
    names = sorted(by_rack)
    cursors = dict.fromkeys(names, 0)
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        rack = names[i]
        if cursors[rack] < len(by_rack[rack]):
            out.append(by_rack[rack][cursors[rack]])
            cursors[rack] += 1
        i = (i + 1) % len(names)
    return out


def assign_rack_unaware(
    num_partitions: int,
    replication_factor: int,
    node_ids: Sequence[int],
    start_index: int,
    shift: int,
    start_partition: int = 0,
) -> dict[int, list[int]]:
    nodes = sorted(node_ids)
    n = len(nodes)
    out: dict[int, list[int]] = {}
    pid = max(0, start_partition)
    for _ in range(num_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start_index) % n
        replicas = [nodes[first]]
        replicas += [
            nodes[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
        ]
        out[pid] = replicas
        pid += 1
    return out


def assign_rack_aware(
    num_partitions: int,
    replication_factor: int,
    racks: Mapping[int, str],
    start_index: int,
    shift: int,
    start_partition: int = 0,
) -> dict[int, list[int]]:
    arranged = rack_alternated(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    out: dict[int, list[int]] = {}
    pid = max(0, start_partition)
    for _ in range(num_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        nodes_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                node = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = racks[node]
                k += 1
                rack_ok = rack not in racks_used or len(racks_used) == num_racks
                node_ok = node not in nodes_used or len(nodes_used) == n
                if rack_ok and node_ok:
                    replicas.append(node)
                    racks_used.add(rack)
                    nodes_used.add(node)
                    break
        out[pid] = replicas
        pid += 1
    return out


def assign_replicas(
    nodes: Sequence[NodePlacement],
    num_partitions: int,
    replication_factor: int,
    *,
    start_index: int = -1,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replica lists for partitions `start_partition ..` (+ `num_partitions`), first replica
    the preferred leader. A fixed `start_index` >= 0 also fixes the follower shift (as Kafka's
    `fixedStartIndex`); otherwise both are drawn from `rng`. Rack-aware when every node has a
    rack. Raises RiverlogError(INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR)."""
    _check(num_partitions, replication_factor, nodes)
    rng = rng or random.Random()
    n = len(nodes)
    start = start_index if start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index >= 0 else rng.randrange(n)
    if all(node.rack for node in nodes):
        racks = {node.node_id: node.rack for node in nodes}
        return assign_rack_aware(
            num_partitions, replication_factor, racks, start, shift, start_partition
        )
    ids = [node.node_id for node in nodes]
    return assign_rack_unaware(
        num_partitions, replication_factor, ids, start, shift, start_partition
    )


def start_index_for_new_partitions(nodes: Sequence[NodePlacement], first_leader: int) -> int:
    """Where CreatePartitions resumes the walk: the index of partition 0's first replica (or
    the next higher id) among the sorted nodes, as Kafka does."""
    ids = sorted(node.node_id for node in nodes)
    return next((i for i, node_id in enumerate(ids) if node_id >= first_leader), 0)
