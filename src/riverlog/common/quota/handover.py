"""The windows a quota instance hands to an entity's next owner when the instances change.

An entity's cluster-wide window lives on one quota instance: `owner_of` (entity.py) over the
live quota instances, the function the gateways split their reports by (`UsageReport.split`).
When that set changes most entities change owner (modulo sharding), so every instance hands the
windows it holds but no longer owns to their new owner, and a leaving instance hands all of
them before it unregisters. Usage crosses as samples aged before the sender's now and a hold as
its remaining time, since monotonic clocks are per process. The receiver adds the usage to its
own (the two windows counted disjoint reports, so the sum is the cluster's) and keeps the later
hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .entity import MetricEntity, QuotaType, owner_of
from .window import SampleState

Key = tuple[QuotaType, MetricEntity]


def moves(keys: Iterable[Key], node_id: int, owners: Sequence[int]) -> dict[int, list[Key]]:
    """The keys instance `node_id` holds but does not own among `owners`, by their owner.
    Nothing moves when there is no owner at all (the last instance keeps its windows)."""
    if not owners:
        return {}
    out: dict[int, list[Key]] = {}
    for key in keys:
        owner = owner_of(key[1], owners)
        if owner != node_id:
            out.setdefault(owner, []).append(key)
    return out


@dataclass(frozen=True, slots=True)
class EntityWindow:
    """One entity's window of one quota kind, as its previous owner hands it over."""

    quota_type: QuotaType
    entity: MetricEntity
    samples: tuple[SampleState, ...]
    throttle_ms: int

    @property
    def key(self) -> Key:
        return (self.quota_type, self.entity)


@dataclass(frozen=True, slots=True)
class WindowHandover:
    """What one quota instance sends another. `leaving` says the sender is about to
    unregister: the receiver stops counting it among the owners at once, so it does not hand
    the same entities back before it hears of the departure from the metadata service."""

    from_node_id: int
    windows: tuple[EntityWindow, ...]
    leaving: bool = False
    from_incarnation: int = 0
    """The sender's registration: a restarted instance with the same id is another one."""
