"""The coordinator's lag families: committed offsets read from the ready shards' state, the
high watermarks asked for exactly the committed partitions, lag only where a watermark is
known and never negative, groups counted by state."""

from __future__ import annotations

import asyncio
from collections.abc import Set
from types import SimpleNamespace

from coord_harness import new_groups

from riverlog.common.types import TopicPartition
from riverlog.services.coordinator.group.group import ClassicGroup
from riverlog.services.coordinator.group.state import GroupState
from riverlog.services.coordinator.prometheus import LagMonitor
from riverlog.services.coordinator.records import OffsetValue

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


class Shards:
    def __init__(self, *coords: object) -> None:
        self.shards = [SimpleNamespace(coord=c) for c in coords]

    def ready_shards(self) -> list[SimpleNamespace]:
        return self.shards


def samples(monitor: LagMonitor) -> dict[str, dict[tuple[str, ...], float]]:
    return {
        m.name: {tuple(s.labels.values()): s.value for s in m.samples} for m in monitor.snapshot()
    }


def test_lag_from_committed_offsets_and_fetched_watermarks() -> None:
    first, second = new_groups(), new_groups()
    first.groups.groups["g"] = ClassicGroup("g", 0, GroupState.EMPTY)
    first.offsets.replay("g", T0, OffsetValue(3, -1, "", 0))
    first.offsets.replay("g", T1, OffsetValue(5, -1, "", 0))
    second.groups.groups["h"] = ClassicGroup("h", 0, GroupState.EMPTY)
    second.offsets.replay("h", T0, OffsetValue(12, -1, "", 0))  # past the watermark read
    asked: list[Set[TopicPartition]] = []

    async def watermarks(tps: Set[TopicPartition]) -> dict[TopicPartition, int]:
        asked.append(set(tps))
        return {T0: 10}  # T1's leader did not answer

    monitor = LagMonitor(Shards(first, second), watermarks, interval_s=1.0)
    asyncio.run(monitor.refresh())
    assert asked == [{T0, T1}]
    found = samples(monitor)
    assert found["riverlog_consumer_group_lag"] == {("g", "t", "0"): 7, ("h", "t", "0"): 0}
    assert found["riverlog_consumer_group_committed_offset"] == {
        ("g", "t", "0"): 3,
        ("g", "t", "1"): 5,
        ("h", "t", "0"): 12,
    }
    groups = found["riverlog_consumer_groups"]
    assert groups[("Empty",)] == 2 and groups[("Stable",)] == 0
    assert set(groups) == {(s.value,) for s in GroupState}


def test_no_watermarks_yet_means_no_lag_samples() -> None:
    coord = new_groups()
    coord.offsets.replay("g", T0, OffsetValue(3, -1, "", 0))

    async def never(tps: Set[TopicPartition]) -> dict[TopicPartition, int]:
        raise AssertionError("not refreshed in this test")

    monitor = LagMonitor(Shards(coord), never, interval_s=1.0)
    assert samples(monitor)["riverlog_consumer_group_lag"] == {}
