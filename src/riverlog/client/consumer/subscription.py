"""Which partitions a consumer reads and where it stands in each: the position (the next offset
poll() returns), a pending offset reset, a back-off after a partition error (of a fetch, or of
the reset's look-up: a topic not created yet waits alone), and an epoch that
every seek bumps so answers to fetches sent before the seek are recognised and dropped.

Kafka's SubscriptionState: partitions come from `assign()` (manual assignment) or, after
`subscribe()` to topics or a pattern, from the group's rebalances (`assign_from_subscribed`);
partitions a rebalance adds wait for their committed offset (position and reset both None,
`initializing()`) before auto.offset.reset applies. The fetch
position (where the next fetch starts) is not kept here: it runs ahead of the position while a
fetched chunk waits to be consumed, and the fetcher derives it from its buffer.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterable

from riverlog.common.types import TopicPartition

EARLIEST = "earliest"
LATEST = "latest"
NONE = "none"

# One sequence for every partition state and seek, so an answer to a fetch sent for an earlier
# ownership of a partition never matches a later one.
_epochs = itertools.count(1)


class PartitionState:
    """One assigned partition. `position` None: unknown, to be reset by `reset` (the policy
    to apply: earliest, latest or none)."""

    __slots__ = (
        "backoff_until",
        "epoch",
        "high_watermark",
        "log_start_offset",
        "position",
        "reset",
        "reset_failures",
    )

    def __init__(self, reset: str | None) -> None:
        self.position: int | None = None
        self.reset: str | None = reset
        self.reset_failures = 0  # look-ups failed in a row: the back-off grows with them
        self.epoch = next(_epochs)
        self.backoff_until = 0.0
        self.high_watermark = -1
        self.log_start_offset = -1

    def seek(self, offset: int) -> None:
        self.position = offset
        self.reset = None
        self.reset_failures = 0
        self.epoch = next(_epochs)
        self.backoff_until = 0.0

    def request_reset(self, policy: str) -> None:
        self.position = None
        self.reset = policy
        self.epoch = next(_epochs)


class SubscriptionState:
    """The consumer's assignment. Used only by the thread that uses the Consumer (Kafka's
    consumer is not thread-safe either)."""

    def __init__(self, default_reset: str) -> None:
        self.default_reset = default_reset
        self.partitions: dict[TopicPartition, PartitionState] = {}
        self.subscription: frozenset[str] = frozenset()
        self.pattern: re.Pattern[str] | None = None

    @property
    def subscribed(self) -> bool:
        """True after subscribe() (the group assigns), False for manual assign()."""
        return bool(self.subscription) or self.pattern is not None

    def assign(self, partitions: Iterable[TopicPartition], from_committed: bool = False) -> None:
        """Replace the assignment; partitions kept keep their position. New ones start per
        auto.offset.reset, or `from_committed`: at the group's committed offset first."""
        self._replace(partitions, None if from_committed else self.default_reset)

    def _replace(self, partitions: Iterable[TopicPartition], reset: str | None) -> None:
        wanted = list(dict.fromkeys(partitions))
        for tp in wanted:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"assign() takes TopicPartition objects, not {tp!r}")
        self.partitions = {tp: self.partitions.get(tp) or PartitionState(reset) for tp in wanted}

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Set the subscribed topics (for a pattern: the topics it matches now); True if they
        changed."""
        topics = frozenset(topics)
        changed = topics != self.subscription
        self.subscription = topics
        return changed

    def unsubscribe(self) -> None:
        self.subscription = frozenset()
        self.pattern = None
        self.partitions = {}

    def assign_from_subscribed(self, partitions: Iterable[TopicPartition]) -> None:
        """The group's assignment: partitions kept keep their position, new ones wait for
        their committed offset."""
        self._replace(partitions, None)

    def initializing(self) -> list[TopicPartition]:
        """Partitions waiting for their committed offset (new from a rebalance)."""
        return [
            tp
            for tp, state in self.partitions.items()
            if state.position is None and state.reset is None
        ]

    def consumed(self) -> dict[TopicPartition, int]:
        """Positions of every partition that has one: what a commit of "all consumed"
        sends."""
        return {
            tp: state.position
            for tp, state in self.partitions.items()
            if state.position is not None
        }

    def state(self, tp: TopicPartition) -> PartitionState:
        state = self.partitions.get(tp)
        if state is None:
            raise ValueError(f"{tp} is not assigned to this consumer")
        return state

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"cannot seek {tp} to a negative offset ({offset})")
        self.state(tp).seek(offset)

    def request_reset(self, tps: Iterable[TopicPartition], policy: str) -> None:
        for tp in tps:
            self.state(tp).request_reset(policy)

    def needing_reset(self, now: float | None = None) -> dict[TopicPartition, str]:
        """Partitions whose position must be looked up, with the policy to apply; given `now`,
        only those whose back-off after a failed look-up has run out."""
        return {
            tp: state.reset
            for tp, state in self.partitions.items()
            if state.position is None
            and state.reset is not None
            and (now is None or state.backoff_until <= now)
        }

    def fetchable(self, now: float | None = None) -> list[TopicPartition]:
        """Partitions with a known position and no back-off running."""
        now = time.monotonic() if now is None else now
        return [
            tp
            for tp, state in self.partitions.items()
            if state.position is not None and state.backoff_until <= now
        ]
