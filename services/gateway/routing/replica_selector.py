"""Which replica serves a consumer's fetch: Kafka's `ReplicaSelector` (KIP-392), pure.

`leader` (Kafka's LeaderSelector, the default) always answers the leader. `rack-aware` (Kafka's
RackAwareReplicaSelector) answers a replica in the client's rack when there is one, the leader
if it is in that rack, and the leader otherwise (no rack sent, no replica there). Only live
in-sync replicas are candidates: they hold every record up to the high watermark the consumer
may already have seen from the leader (a follower out of the ISR may be arbitrarily far behind).
Kafka breaks ties between same-rack followers by log end offset and last caught-up time, which
the gateway does not see; it picks the lowest node id, so a rack's consumers share one follower
and its page cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica of a partition as the selector sees it."""

    node_id: int
    rack: str
    in_sync: bool
    """In the ISR and live (registered) in the gateway's metadata."""


class ReplicaSelector(Protocol):
    def select(self, client_rack: str, leader: int, replicas: Sequence[ReplicaView]) -> int:
        """The node id to fetch from (the leader when no other replica fits)."""
        ...


class LeaderSelector:
    """Kafka's LeaderSelector: every fetch goes to the leader."""

    def select(self, client_rack: str, leader: int, replicas: Sequence[ReplicaView]) -> int:
        return leader


class RackAwareReplicaSelector:
    """Kafka's RackAwareReplicaSelector: an in-sync replica in the client's rack, else the
    leader."""

    def select(self, client_rack: str, leader: int, replicas: Sequence[ReplicaView]) -> int:
        if not client_rack:
            return leader
        local = sorted(r.node_id for r in replicas if r.in_sync and r.rack == client_rack)
        if not local or leader in local:
            return leader
        return local[0]


SELECTORS: Final[dict[str, type[LeaderSelector] | type[RackAwareReplicaSelector]]] = {
    "leader": LeaderSelector,
    "rack-aware": RackAwareReplicaSelector,
}


def selector_named(name: str) -> ReplicaSelector:
    """The selector of gateway config `replica.selector.class` (checked at start-up)."""
    return SELECTORS[name]()
