"""Kafka's consumer partition assignors, in pure Python, giving Kafka's exact assignments.

Shared by the SDK consumer (the group leader assigns client-side) and the group coordinator
(which assigns for members that bring no assignor), so both compute what Kafka's own
`RangeAssignor`, `RoundRobinAssignor`, `StickyAssignor` and `CooperativeStickyAssignor` compute
for the same members, subscriptions and partition counts. `protocol` encodes the member metadata
and assignments in Kafka's ConsumerProtocol layout.

Assignors may keep per-member state between rebalances (the sticky ones do), so
`assignor_for(name)` builds a new instance each call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from .abstract import (
    DEFAULT_GENERATION,
    AbstractPartitionAssignor,
    Assignment,
    PartitionAssignor,
    RebalanceProtocol,
    Subscription,
)
from .protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from .range import RangeAssignor
from .roundrobin import RoundRobinAssignor
from .sticky import CooperativeStickyAssignor, StickyAssignor

ASSIGNORS: Mapping[str, Callable[[], PartitionAssignor]] = MappingProxyType(
    {
        RangeAssignor.name: RangeAssignor,
        RoundRobinAssignor.name: RoundRobinAssignor,
        StickyAssignor.name: StickyAssignor,
        CooperativeStickyAssignor.name: CooperativeStickyAssignor,
    }
)
"""Assignor factories by Kafka protocol name ("range", "roundrobin", "sticky",
"cooperative-sticky")."""


def assignor_for(name: str) -> PartitionAssignor:
    """A new assignor for a `partition.assignment.strategy` / JoinGroup protocol name."""
    factory = ASSIGNORS.get(name)
    if factory is None:
        known = ", ".join(sorted(ASSIGNORS))
        raise ValueError(f"unknown partition assignor {name!r} (known: {known})")
    return factory()


__all__ = [
    "ASSIGNORS",
    "CONSUMER_PROTOCOL_TYPE",
    "DEFAULT_GENERATION",
    "AbstractPartitionAssignor",
    "Assignment",
    "ConsumerProtocolError",
    "CooperativeStickyAssignor",
    "PartitionAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "assignor_for",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]
