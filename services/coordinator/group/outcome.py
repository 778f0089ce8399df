"""What a coordinator handler hands back to its shard: the records to write to
`__consumer_offsets` and what to do once they are durable (or refused).

Handlers answer their caller through a reply callable: at once when there is nothing to write,
from `after(error)` when the answer depends on the write, or later when the request is parked
(a JoinGroup waiting for the rebalance). The shard writes `records`, replays each into the
state on success (the same `replay()` that loads a partition), then calls `after`. Timer
callbacks have no caller to return to, so they push their outcomes on the manager's outbox.

Two kinds come from transactions (decision 0031): `producer` makes `records` a transactional
batch of that client producer (TxnOffsetCommit), and `marker` ends a producer's transaction in
the partition: the shard writes the marker at storage first, then `records` (with its own
epoch: a zombie owner is refused there), then replays the marker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from riverlog.common.errors import ErrorCode

from ..records import CoordinatorRecord, TxnProducer

AfterWrite = Callable[[ErrorCode], None]


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A transaction's COMMIT or ABORT marker for this shard's partition."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class Outcome:
    records: Sequence[CoordinatorRecord] = ()
    after: AfterWrite | None = None
    producer: TxnProducer | None = None
    marker: TxnMarker | None = None


NOTHING = Outcome()


@dataclass
class Outbox:
    """Outcomes produced outside a request (timers, metadata changes), drained by the shard
    after each request and each timer tick."""

    items: list[Outcome] = field(default_factory=list)

    def push(self, outcome: Outcome) -> None:
        if outcome.records or outcome.after is not None or outcome.marker is not None:
            self.items.append(outcome)

    def drain(self) -> list[Outcome]:
        items, self.items = self.items, []
        return items
