"""The replica balancer's planner (decision 0025): the cluster's assignment in, target replica
lists out, no I/O, so every rule is unit-tested on fixtures of skewed clusters.

Goals, in priority order; a later goal never undoes an earlier one:

1. *Rack awareness* (hard): no two replicas of a partition on one rack when the live racks
   allow it (every live node has a rack and there are at least as many racks as replicas);
   violations are fixed first. No move of a later goal puts two replicas on one rack more than
   the partition already has.
2. *Replica distribution*: replica counts of the live nodes within one of each other; a replica
   moves from the fullest node to the emptiest, the partition that copies the fewest bytes
   first.
3. *Disk distribution* (only when sizes are known): bytes moved from the fullest node to the
   emptiest while the replica-count spread does not grow.
4. *Leader distribution*: preferred leaders (the first replica of each target list) within one
   of each other, by reordering replicas; a reorder copies nothing.

A node being drained (`draining`, decision 0025's addendum) is not a live node to the planner:
no replica or leadership goes to it, its counts are left out of the spread, and a partition
with a replica on it belongs to the drain, not to the balancer.

Only partitions that are fully in sync, led, not moving and whose replicas are all on live
nodes are touched (an under-replicated partition or one on a dead node is left to the ISR and
to the operator). A move never changes a replication factor. Moves in progress count at their
target replicas, and count against `max_moves`: at most `max_moves` partitions copy data at a
time; reorders copy nothing and are not limited.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BalancerNode:
    """A live storage node; `disk_bytes` None when it reports none; `draining`: being
    emptied, so it takes nothing."""

    node_id: int
    rack: str = ""
    disk_bytes: int | None = None
    draining: bool = False


@dataclass(frozen=True, slots=True)
class BalancerPartition:
    """A partition as the planner sees it. `replicas` of a partition in progress are its
    target; `size_bytes` None when unknown."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    isr: tuple[int, ...] = ()
    size_bytes: int | None = None
    moving: bool = False

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class BalanceMove:
    """One reassignment of the plan: `bytes_to_copy` is the size times the adding replicas
    (0 for a reorder or an unknown size)."""

    topic: str
    partition: int
    current: tuple[int, ...]
    target: tuple[int, ...]
    bytes_to_copy: int = 0

    @property
    def copies_data(self) -> bool:
        return set(self.current) != set(self.target)


@dataclass(frozen=True, slots=True)
class Spread:
    """Per live node: replicas, preferred leaders, and bytes (None when unknown)."""

    replicas: Mapping[int, int]
    leaders: Mapping[int, int]
    disk_bytes: Mapping[int, int] | None = None
    rack_violations: int = 0

    @property
    def replica_spread(self) -> int:
        return _spread(self.replicas)

    @property
    def leader_spread(self) -> int:
        return _spread(self.leaders)

    @property
    def disk_spread(self) -> int | None:
        return None if self.disk_bytes is None else _spread(self.disk_bytes)


@dataclass(frozen=True, slots=True)
class BalancePlan:
    moves: tuple[BalanceMove, ...]
    before: Spread
    after: Spread
    in_progress: int = 0
    notes: tuple[str, ...] = field(default=())


def _spread(values: Mapping[int, int]) -> int:
    return max(values.values()) - min(values.values()) if values else 0


class _State:
    """The assignment being planned: targets by partition, loads by node."""

    def __init__(self, nodes: Sequence[BalancerNode], partitions: Sequence[BalancerPartition]):
        self._racks = {n.node_id: n.rack for n in nodes}  # draining nodes' too
        nodes = [n for n in nodes if not n.draining]
        self.live = sorted(n.node_id for n in nodes)
        self.rack_aware = bool(nodes) and all(n.rack for n in nodes)
        self.num_racks = len({n.rack for n in nodes}) if self.rack_aware else 0
        self.parts = {p.key: p for p in partitions}
        self.target = {p.key: p.replicas for p in partitions}
        self.size = {p.key: p.size_bytes or 0 for p in partitions}
        sizes_known = bool(partitions) and all(p.size_bytes is not None for p in partitions)
        reported = [n.disk_bytes for n in nodes]
        self.bytes_known = sizes_known or (bool(nodes) and None not in reported)
        self.base_bytes = {
            n.node_id: n.disk_bytes if n.disk_bytes is not None and not sizes_known else 0
            for n in nodes
        }

    def movable(self, p: BalancerPartition) -> bool:
        live = set(self.live)
        return (
            not p.moving
            and p.leader in p.replicas
            and all(r in live for r in p.replicas)
            and set(p.isr) >= set(p.replicas)
        )

    def counts(self) -> Counter[int]:
        c: Counter[int] = Counter(dict.fromkeys(self.live, 0))
        for replicas in self.target.values():
            c.update(r for r in replicas if r in c)
        return c

    def leaders(self) -> Counter[int]:
        c: Counter[int] = Counter(dict.fromkeys(self.live, 0))
        for replicas in self.target.values():
            if replicas and replicas[0] in c:
                c[replicas[0]] += 1
        return c

    def disk(self) -> dict[int, int] | None:
        if not self.bytes_known:
            return None
        out = dict(self.base_bytes)
        for key, replicas in self.target.items():
            for r in replicas:
                if r in out:
                    out[r] += self.size[key]
        return out

    def violation(self, replicas: Iterable[int]) -> int:
        """Replicas beyond one per rack, less what the racks cannot avoid."""
        if not self.rack_aware:
            return 0
        rs = list(replicas)
        return max(0, len(rs) - len({self.rack(r) for r in rs}) - max(0, len(rs) - self.num_racks))

    def rack(self, node: int) -> str:
        """The node's rack; a node that is not live and has none (a dead one) counts as a rack
        of its own, so a partition left on it is judged on its other replicas."""
        return self._racks.get(node) or f"node-{node}"

    def spread(self) -> Spread:
        violations = sum(1 for t in self.target.values() if self.violation(t) > 0)
        return Spread(dict(self.counts()), dict(self.leaders()), self.disk(), violations)


def _replace(replicas: tuple[int, ...], old: int, new: int) -> tuple[int, ...]:
    return tuple(new if r == old else r for r in replicas)


class _Budget:
    """Which partitions the plan copies data for, capped at the free move slots."""

    def __init__(self, state: _State, slots: int) -> None:
        self.state = state
        self.slots = slots
        self.planned: set[tuple[str, int]] = set()

    def allows(self, key: tuple[str, int]) -> bool:
        return key in self.planned or len(self.planned) < self.slots

    def move(self, key: tuple[str, int], old: int, new: int) -> None:
        self.state.target[key] = _replace(self.state.target[key], old, new)
        self.planned.add(key)


def spread_of(nodes: Sequence[BalancerNode], partitions: Sequence[BalancerPartition]) -> Spread:
    """The spread of the assignment as it is (cheap: no planning)."""
    return _State(nodes, partitions).spread()


def start_reason(spread: Spread, threshold: int) -> str | None:
    """Why the balancer should start by itself on this spread (decision 0025); None: it should
    not. A run that then finds nothing to copy ends at once."""
    empty = sorted(n for n, c in spread.replicas.items() if c == 0)
    if empty and spread.replica_spread > 1:
        return f"storage nodes {empty} hold no replica"
    if spread.rack_violations:
        return f"{spread.rack_violations} partitions have two replicas on one rack"
    if spread.replica_spread > threshold:
        return (
            f"replica-count spread {spread.replica_spread} exceeds "
            f"balancer.imbalance.threshold {threshold}"
        )
    return None


def plan_balance(
    nodes: Sequence[BalancerNode],
    partitions: Sequence[BalancerPartition],
    max_moves: int,
) -> BalancePlan:
    """The reassignments that even out the live `nodes`, goals in the module's order."""
    state = _State(nodes, partitions)
    before = state.spread()
    in_progress = sum(1 for p in partitions if p.moving)
    movable = sorted(
        (p for p in partitions if state.movable(p)),
        key=lambda p: (state.size[p.key], p.topic, p.partition),
    )
    budget = _Budget(state, max(0, max_moves - in_progress))
    _fix_racks(state, movable, budget)
    _even_replicas(state, movable, budget)
    _even_disk(state, movable, budget)
    _even_leaders(state, movable)

    moves = tuple(
        BalanceMove(
            p.topic,
            p.partition,
            p.replicas,
            state.target[p.key],
            state.size[p.key] * len(set(state.target[p.key]) - set(p.replicas)),
        )
        for p in sorted(partitions, key=lambda p: p.key)
        if state.target[p.key] != p.replicas
    )
    notes = []
    draining = sorted(n.node_id for n in nodes if n.draining)
    if draining:
        notes.append(f"storage nodes {draining} are being drained: nothing goes to them")
    if budget.slots == 0 and in_progress:
        notes.append(f"{in_progress} moves in progress fill balancer.max.concurrent.moves")
    if not state.bytes_known:
        notes.append("sizes unknown: balanced by replica and leader counts only")
    return BalancePlan(moves, before, state.spread(), in_progress, tuple(notes))


def _fix_racks(state: _State, movable: Sequence[BalancerPartition], budget: _Budget) -> None:
    """Goal 1: a replica on a crowded rack moves to the least loaded node of an unused rack."""
    for p in movable:
        while state.violation(state.target[p.key]) > 0 and budget.allows(p.key):
            replicas = state.target[p.key]
            counts = state.counts()
            per_rack = Counter(state.rack(r) for r in replicas)
            crowded = [r for r in replicas if per_rack[state.rack(r)] > 1]
            free = [n for n in state.live if state.rack(n) not in per_rack]
            if not crowded or not free:
                break
            old = max(crowded, key=lambda r: (counts[r], r))
            new = min(free, key=lambda n: (counts[n], n))
            budget.move(p.key, old, new)


def _candidates(
    state: _State, movable: Sequence[BalancerPartition], budget: _Budget, old: int, new: int
) -> list[BalancerPartition]:
    """Partitions that may move a replica from `old` to `new` without crowding a rack more."""
    out = []
    for p in movable:
        replicas = state.target[p.key]
        if old not in replicas or new in replicas or not budget.allows(p.key):
            continue
        if state.violation(_replace(replicas, old, new)) > state.violation(replicas):
            continue
        out.append(p)
    return out


def _pairs(loads: Mapping[int, int], gap: int) -> list[tuple[int, int]]:
    """(from, to) node pairs whose loads differ by more than `gap`, widest first."""
    nodes = sorted(loads, key=lambda n: (loads[n], n))
    pairs = [(h, low) for h in reversed(nodes) for low in nodes if loads[h] - loads[low] > gap]
    return sorted(pairs, key=lambda hl: loads[hl[1]] - loads[hl[0]])


def _movable_replica(
    state: _State, movable: Sequence[BalancerPartition], budget: _Budget, old: int, new: int
) -> BalancerPartition | None:
    """The smallest partition that may move a replica from `old` to `new`; one already in the
    plan wins a tie (it takes no new slot). `movable` is sorted by size, so the first fit is
    the smallest and only the (few) planned ones need a second look."""

    def fits(p: BalancerPartition) -> bool:
        replicas = state.target[p.key]
        return (
            old in replicas
            and new not in replicas
            and budget.allows(p.key)
            and state.violation(_replace(replicas, old, new)) <= state.violation(replicas)
        )

    best = next((p for p in movable if fits(p)), None)
    if best is None or best.key in budget.planned:
        return best
    planned = [
        state.parts[k]
        for k in budget.planned
        if state.size[k] <= state.size[best.key] and fits(state.parts[k])
    ]
    return min(planned, key=lambda p: (state.size[p.key], p.key), default=best)


def _even_replicas(state: _State, movable: Sequence[BalancerPartition], budget: _Budget) -> None:
    """Goal 2: replica counts within one, a replica at a time from a fuller node to an emptier
    one (the widest pair first)."""
    counts = state.counts()
    while True:
        for old, new in _pairs(counts, 1):
            p = _movable_replica(state, movable, budget, old, new)
            if p is not None:
                budget.move(p.key, old, new)
                counts[old] -= 1
                counts[new] += 1
                break
        else:
            return


def _even_disk(state: _State, movable: Sequence[BalancerPartition], budget: _Budget) -> None:
    """Goal 3: bytes from the fullest node to the emptiest without widening the count spread:
    one replica moves when the counts allow it, else two are swapped (a bigger one out, a
    smaller one back). The move closest to half the gap wins, and only a move that narrows
    the gap counts, so this ends."""
    while state.bytes_known:
        disk = state.disk()
        assert disk is not None
        counts = state.counts()
        spread = _spread(counts)
        for old, new in _pairs(disk, 0):
            gap = disk[old] - disk[new]
            after = dict(counts)
            after[old] -= 1
            after[new] += 1
            out = _candidates(state, movable, budget, old, new)
            if _spread(after) <= max(spread, 1):
                single = [p for p in out if 0 < state.size[p.key] < gap]
                if single:
                    p = min(single, key=lambda p: (abs(gap / 2 - state.size[p.key]), p.key))
                    budget.move(p.key, old, new)
                    break
            back = _candidates(state, movable, budget, new, old)
            swaps = [
                (p, q)
                for p in out
                for q in back
                if p.key != q.key
                and 0 < state.size[p.key] - state.size[q.key] < gap
                and (len(budget.planned | {p.key, q.key}) <= budget.slots)
            ]
            if swaps:
                p, q = min(
                    swaps,
                    key=lambda pq: (
                        abs(gap / 2 - state.size[pq[0].key] + state.size[pq[1].key]),
                        pq[0].key,
                        pq[1].key,
                    ),
                )
                budget.move(p.key, old, new)
                budget.move(q.key, new, old)
                break
        else:
            return


class _LeaderIndex:
    """Movable partitions by (preferred leader, replica), kept current as reorders happen, so
    each step of the leader goal looks up candidates instead of scanning every partition."""

    def __init__(self, state: _State, movable: Sequence[BalancerPartition]) -> None:
        self.state = state
        self.by: dict[tuple[int, int], set[tuple[str, int]]] = {}
        for p in movable:
            self._index(p.key, add=True)

    def _index(self, key: tuple[str, int], add: bool) -> None:
        replicas = self.state.target[key]
        for r in replicas[1:]:
            keys = self.by.setdefault((replicas[0], r), set())
            if add:
                keys.add(key)
            else:
                keys.discard(key)

    def led(self, by: int, having: int) -> tuple[str, int] | None:
        """The lowest partition led by `by` with a replica on `having`, if any."""
        keys = self.by.get((by, having))
        return min(keys) if keys else None

    def lead(self, key: tuple[str, int], node: int) -> None:
        """Make `node` (a replica of `key`) its preferred leader."""
        self._index(key, add=False)
        rest = tuple(r for r in self.state.target[key] if r != node)
        self.state.target[key] = (node, *rest)
        self._index(key, add=True)


def _even_leaders(state: _State, movable: Sequence[BalancerPartition]) -> None:
    """Goal 4: preferred leaders within one, by putting a replica on a node with fewer of them
    first in a target list (no data moves). When no partition led by the fullest node has a
    replica on the emptiest, leadership goes through a middle node (two reorders)."""
    index = _LeaderIndex(state, movable)
    leaders = state.leaders()
    while True:
        for old, new in _pairs(leaders, 1):
            direct = index.led(old, new)
            if direct is not None:
                index.lead(direct, new)
                break
            chain = next(
                (
                    (first, second, middle)
                    for middle in state.live
                    if middle not in (old, new)
                    and (first := index.led(old, middle)) is not None
                    and (second := index.led(middle, new)) is not None
                ),
                None,
            )
            if chain is not None:  # first and second differ: their leaders differ
                first, second, middle = chain
                index.lead(second, new)
                index.lead(first, middle)
                break
        else:
            return
        leaders[old] -= 1
        leaders[new] += 1
