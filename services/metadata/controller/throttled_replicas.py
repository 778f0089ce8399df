"""The topic configs `leader.replication.throttled.replicas` and
`follower.replication.throttled.replicas` of moving partitions, as pure functions over their
Kafka format (`partition:node,...`), so the balancer marks and unmarks moves as
kafka-reassign-partitions --throttle does: the leader side names the replicas a partition has
now, the follower side the replicas being added; the node-level throttled rates then apply to
that catch-up traffic only.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Final

from riverlog.common.replication_throttle import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
)

LEADER_KEY: Final = LEADER_THROTTLED_REPLICAS
FOLLOWER_KEY: Final = FOLLOWER_THROTTLED_REPLICAS
KEYS: Final = (LEADER_KEY, FOLLOWER_KEY)


def parse(value: str | None) -> list[tuple[int, int]]:
    """`partition:node` entries of a config value; anything else (Kafka's `*`) is dropped."""
    out: list[tuple[int, int]] = []
    for item in (value or "").split(","):
        p, sep, n = item.strip().partition(":")
        if sep and p.isdigit() and n.isdigit():
            out.append((int(p), int(n)))
    return out


def render(entries: Iterable[tuple[int, int]]) -> str:
    return ",".join(f"{p}:{n}" for p, n in sorted(set(entries)))


def for_move(
    partition: int, current: Sequence[int], target: Sequence[int]
) -> dict[str, list[tuple[int, int]]]:
    """The entries of one move: leader side = current replicas, follower side = adding ones."""
    adding = [r for r in target if r not in current]
    return {
        LEADER_KEY: [(partition, r) for r in current],
        FOLLOWER_KEY: [(partition, r) for r in adding],
    }


def with_entries(value: str | None, entries: Iterable[tuple[int, int]]) -> str:
    """`value` with `entries` added (kept sorted and unique)."""
    return render([*parse(value), *entries])


def without_partitions(value: str | None, partitions: Collection[int]) -> str | None:
    """`value` without the entries of `partitions`; None when nothing is left (delete it)."""
    left = [(p, n) for p, n in parse(value) if p not in partitions]
    return render(left) if left else None


def throttled_partitions(value: str | None) -> set[int]:
    return {p for p, _ in parse(value)}
