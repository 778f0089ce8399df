"""The values every service shares: `TopicPartition`, the no-leader id, and the request options
(`Acks`, `IsolationLevel`, `OffsetSpec`), defined once: services and clients use these, and
`riverlog.common.rpc.convert` maps them to and from the wire enums of `riverlog.v1` (which
number acks differently) at the rpc boundary.

Offsets, epochs and node ids are plain ints: NewType aliases for them were never adopted (every
value arrives from protobuf or etcd as an int, so using them would mean a wrapping call at each
boundary for no check mypy does not already get from the field names)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

NO_LEADER: Final = -1
"""The leader id of a partition that has none (Kafka's -1)."""

PRODUCER_BATCH_WINDOW: Final = 40
"""How many batches of one idempotent producer a partition leader remembers (their sequences
and offsets, to answer a retry as a duplicate), and so how many of a partition's batches the
producer may have unresolved at once. Kafka's is 5 (NUM_BATCHES_TO_RETAIN, and at most five
requests in flight). With acks=all each window waits for the followers' fetch round trips, and
five 128 KiB batches kept a replicated partition stop-and-wait: 25 took RF 3 acks=all from 40 %
to 55 % of RF 1's rate at 1 KiB records (decision 0006). 40 is what five requests of 1 MiB
(max.request.size) carry in 128 KiB batches: with 25 the window, not max.in.flight, bounded an
acks=all producer (four requests in flight, decision 0010's addendum of issue 10)."""


class Acks(enum.IntEnum):
    """Kafka's `acks` values, with Kafka's numbers (the wire's `riverlog.v1.Acks` has
    ACKS_LEADER=0, ACKS_NONE=1, ACKS_ALL=2)."""

    NONE = 0
    LEADER = 1
    ALL = -1


class IsolationLevel(enum.IntEnum):
    """What a fetch or ListOffsets may see: up to the high watermark, or up to the last stable
    offset (Kafka's numbers, the same on the wire)."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class OffsetSpec(enum.IntEnum):
    """What ListOffsets looks for: the first offset at or after a timestamp, or one of Kafka's
    special timestamps (-1 latest, -2 earliest, -3 the record with the largest timestamp, -4 the
    earliest offset on the leader's local disk: with tiered storage, the local log start)."""

    TIMESTAMP = 0
    LATEST = 1
    EARLIEST = 2
    MAX_TIMESTAMP = 3
    EARLIEST_LOCAL = 4


@dataclass(frozen=True, order=True, slots=True)
class TopicPartition:
    """A partition of a topic; hashable and ordered, so it keys dicts and sorts stably."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TopicPartition:
        """Parse the directory form `<topic>-<partition>` (topics may contain dashes)."""
        topic, sep, part = text.rpartition("-")
        if not sep or not topic or not part.isdigit():
            raise ValueError(f"not a topic-partition: {text!r}")
        return cls(topic, int(part))
