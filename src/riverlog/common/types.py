"""Distinct types for distinct numbers, so an offset is never passed where an epoch belongs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NewType

Offset = NewType("Offset", int)
LeaderEpoch = NewType("LeaderEpoch", int)
NodeId = NewType("NodeId", int)
PartitionId = NewType("PartitionId", int)
ControllerEpoch = NewType("ControllerEpoch", int)

NO_LEADER = NodeId(-1)
UNKNOWN_OFFSET = Offset(-1)


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
