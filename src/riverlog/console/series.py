"""Bounded time series the console samples in its own process: a consumer group's lag and a
topic's log end offsets (turned into records per second), as Kafka UI and Burrow keep them.
Pure: the sampler feeds values with their times; nothing here reads a clock or the network.

Lag is Kafka's: per partition, the log end offset (high watermark) minus the group's committed
offset, never negative (the end offset is read after the committed one, so a commit can land
between the two); a partition with no committed offset has no lag (None), as
kafka-consumer-groups.sh prints "-". A series keeps at most `capacity` points, dropping the
oldest, so memory stays bounded however long the console runs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from riverlog.common.types import TopicPartition

DEFAULT_CAPACITY: Final = 360  # an hour at the default 10 s interval


def partition_lag(committed: int | None, end: int) -> int | None:
    """Records the group has not consumed on one partition; None when nothing is committed."""
    if committed is None or committed < 0:
        return None
    return max(end - committed, 0)


def group_lag(
    committed: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int | None]:
    """Lag of every partition that has an end offset or a committed offset, sorted; a
    committed partition whose end offset is unknown (the topic was deleted) is left out."""
    out: dict[TopicPartition, int | None] = {}
    for tp in sorted(set(committed) | set(ends)):
        if tp in ends:
            out[tp] = partition_lag(committed.get(tp), ends[tp])
    return out


def total_lag(lags: Iterable[int | None]) -> int:
    """The group's lag: the sum over partitions that have one."""
    return sum(lag for lag in lags if lag is not None)


@dataclass(frozen=True, slots=True)
class Point:
    t: float  # seconds since the epoch
    value: float


class Series:
    """At most `capacity` (time, value) points, oldest first."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 2:
            raise ValueError(f"a series needs room for two points, not {capacity}")
        self._points: deque[Point] = deque(maxlen=capacity)

    def add(self, t: float, value: float) -> None:
        """Append a point; one older than the last is refused (ValueError), since every
        reader assumes time order."""
        if self._points and t < self._points[-1].t:
            raise ValueError(f"point at {t} is older than the last one at {self._points[-1].t}")
        self._points.append(Point(t, value))

    def points(self) -> list[Point]:
        return list(self._points)

    @property
    def last(self) -> Point | None:
        return self._points[-1] if self._points else None

    def __len__(self) -> int:
        return len(self._points)


def rates(points: Iterable[Point]) -> list[Point]:
    """Per-second rates between consecutive samples of a growing counter (a topic's summed
    end offsets), stamped with the later time. A counter that went down (the topic deleted and
    created again, or records deleted and partitions shrunk) starts afresh: no negative rate,
    no point for that step; neither for two samples at the same time."""
    out: list[Point] = []
    previous: Point | None = None
    for point in points:
        if previous is not None and point.t > previous.t and point.value >= previous.value:
            out.append(Point(point.t, (point.value - previous.value) / (point.t - previous.t)))
        previous = point
    return out
