"""Which reassignments empty a storage node before `riverlog cluster remove storage N` stops it,
as a pure function of the current assignment, so the plan is unit-tested without a cluster.

Every partition with a replica on the leaving node keeps its replication factor: the leaving
replica is dropped and a live node not yet holding the partition is appended, the one with the
fewest replicas so far (ties: the lowest id), counting the plan's own moves as it goes, so a
drain spreads the node's replicas instead of piling them on one neighbour. With `racks`, a
node on a rack the partition's other replicas do not use comes first (Kafka's rack-aware
placement: no two replicas on one rack when racks allow). A node that is itself being drained
(another drain running) is never a target. Appending (rather
than replacing in place) makes the next replica, already in sync, the preferred leader when
the leaving node was it. When the other live nodes are fewer than a partition's replication
factor the whole drain is refused, before anything moves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

from riverlog.common.types import TopicPartition

from .reassign_plan import Plan


class DrainError(ValueError):
    """The other live nodes cannot hold every partition of the leaving node."""


def drain_plan(
    current: Mapping[TopicPartition, Sequence[int]],
    leaving: int,
    live: Collection[int],
    racks: Mapping[int, str] | None = None,
    draining: Collection[int] = (),
) -> Plan:
    """The target replicas of every partition of `current` that has a replica on `leaving`,
    using only `live` nodes other than it and other than the `draining` ones; DrainError
    naming the partitions that cannot move. `racks`: node → rack ("" or absent: none)."""
    rack_of = dict(racks or {})
    targets = sorted(set(live) - {leaving} - set(draining))
    load = Counter(dict.fromkeys(targets, 0))
    for replicas in current.values():
        load.update(r for r in replicas if r in load)
    plan: Plan = {}
    short: list[str] = []
    for tp in sorted(current, key=lambda t: (t.topic, t.partition)):
        replicas = tuple(current[tp])
        if leaving not in replicas:
            continue
        kept = tuple(r for r in replicas if r != leaving)
        free = [n for n in targets if n not in kept]
        if not free:
            short.append(f"{tp.topic}-{tp.partition} (replicas {list(replicas)})")
            continue
        used = {rack_of.get(r) for r in kept} - {None, ""}
        chosen = min(free, key=lambda n: (rack_of.get(n) in used, load[n], n))
        load[chosen] += 1
        plan[tp] = (*kept, chosen)
    if short:
        raise DrainError(
            f"cannot drain node {leaving}: the other live storage nodes not being drained "
            f"{targets} cannot keep "
            f"the replication factor of {', '.join(short)}"
        )
    return plan
