"""The coordinator's metrics for Prometheus (decision 0033): consumer groups by state (Kafka's
GroupMetadataManager NumGroups*), and per group, topic and partition the committed offset and
the consumer lag (high watermark minus committed offset, never negative).

Lag is computed where the committed offsets are: this instance owns the groups of its
`__consumer_offsets` partitions and reads their offsets from its shards' state. The high
watermarks come from the partition leaders: `LagMonitor` asks each leader once per
`metrics.prometheus.lag.interval.ms` for all the partitions it leads that some group here has
committed (`peers/watermarks.py`, wired by `app.py`). That costs one small request per leader
per interval, however many groups and consumers there are, and nothing on the produce, fetch or
commit paths. A scrape reads the offsets live and the watermarks as of the last refresh; a
watermark older than a commit makes lag 0, never negative. Lifecycle: `start()` after the
process serves, `await stop()` first thing on the way out; event loop only."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Set
from typing import Any

from prometheus_client.core import Metric

from riverlog.common.metrics import endpoint
from riverlog.common.metrics.endpoint import LoopCollector, family
from riverlog.common.metrics.lag import group_lags
from riverlog.common.types import TopicPartition

from .coordinator import GroupCoordinator
from .group.state import GroupState
from .ownership import Ownership

log = logging.getLogger(__name__)

NAMES = (
    "riverlog_consumer_groups",
    "riverlog_consumer_group_committed_offset",
    "riverlog_consumer_group_lag",
)

Committed = dict[str, dict[TopicPartition, int]]
Watermarks = Callable[[Set[TopicPartition]], Awaitable[dict[TopicPartition, int]]]


def committed_offsets(ownership: Ownership[GroupCoordinator]) -> Committed:
    """Every committed offset of the groups this instance coordinates now."""
    out: Committed = {}
    for shard in ownership.ready_shards():
        for group_id, offsets in shard.coord.offsets.offsets.items():
            out.setdefault(group_id, {}).update({tp: v.offset for tp, v in offsets.items()})
    return out


def group_states(ownership: Ownership[GroupCoordinator]) -> dict[str, int]:
    counts = {state.value: 0 for state in GroupState}
    for shard in ownership.ready_shards():
        for group in shard.coord.groups.groups.values():
            counts[group.state.value] += 1
    return counts


class LagMonitor:
    """Keeps the high watermarks of the committed partitions fresh, and serves the families."""

    def __init__(
        self,
        ownership: Ownership[GroupCoordinator],
        fetch_watermarks: Watermarks,
        interval_s: float,
    ) -> None:
        self.ownership = ownership
        self.fetch_watermarks = fetch_watermarks
        self.interval_s = interval_s
        self.watermarks: dict[TopicPartition, int] = {}
        self._task: asyncio.Task[Any] | None = None

    def start(self) -> None:
        """Serve the families and refresh the watermarks (no-op without `/metrics`)."""
        if not endpoint.enabled():
            return
        loop = asyncio.get_running_loop()
        endpoint.register("coordinator", LoopCollector(loop, NAMES, self.snapshot))
        self._task = asyncio.create_task(self._refresh_loop(), name="lag-monitor")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def refresh(self) -> None:
        partitions = {
            tp for offsets in committed_offsets(self.ownership).values() for tp in offsets
        }
        self.watermarks = await self.fetch_watermarks(partitions)

    async def _refresh_loop(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception:
                log.exception("refreshing high watermarks for consumer lag failed")
            await asyncio.sleep(self.interval_s)

    def snapshot(self) -> list[Metric]:
        groups, committed_family, lag_family = (family(n) for n in NAMES)
        for state, count in sorted(group_states(self.ownership).items()):
            groups.add_metric([state], count)
        committed = committed_offsets(self.ownership)
        for group_id, offsets in sorted(committed.items()):
            for tp, offset in sorted(offsets.items()):
                committed_family.add_metric([group_id, tp.topic, str(tp.partition)], offset)
        for (group_id, tp), lag in sorted(group_lags(committed, self.watermarks).items()):
            lag_family.add_metric([group_id, tp.topic, str(tp.partition)], lag)
        return [groups, committed_family, lag_family]
