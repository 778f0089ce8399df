"""The switch of `__consumer_offsets` to `cleanup.policy=compact` at start-up (decision 0008):
what is set for which configs, that it waits for the topic, retries a refused change, and
leaves a compacted topic alone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from types import MappingProxyType

import pytest

import riverlog.services.coordinator.offsets.compaction as compaction
from riverlog.common.cluster import ClusterImage
from riverlog.common.cluster.image import OFFSETS_TOPIC, TopicInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.coordinator.offsets.compaction import (
    OffsetsTopicCompaction,
    compaction_configs,
)


def test_compaction_configs() -> None:
    want = {"cleanup.policy": "compact"}
    assert compaction_configs({}) == want  # the node default applies: set it explicitly
    assert compaction_configs({"cleanup.policy": "delete", "retention.ms": "-1"}) == want
    assert compaction_configs({"cleanup.policy": "compact"}) == {}
    assert compaction_configs({"cleanup.policy": "delete, compact"}) == {}


class FakeWatcher:
    def __init__(self) -> None:
        self.image = ClusterImage.empty()
        self.changed = asyncio.Event()

    def publish(self, configs: Mapping[str, str]) -> None:
        topic = TopicInfo(OFFSETS_TOPIC, "id", (), MappingProxyType(dict(configs)))
        self.image = ClusterImage(version=1, topics=MappingProxyType({OFFSETS_TOPIC: topic}))
        self.changed.set()

    async def wait_for(
        self, predicate: Callable[[ClusterImage], bool], timeout_s: float
    ) -> ClusterImage:
        while not predicate(self.image):
            self.changed.clear()
            await self.changed.wait()
        return self.image


class FakeMetadata:
    def __init__(self, refusals: int = 0) -> None:
        self.refusals = refusals
        self.calls: list[tuple[str, dict[str, str]]] = []

    async def set(self, topic: str, configs: Mapping[str, str]) -> None:
        self.calls.append((topic, dict(configs)))
        if self.refusals:
            self.refusals -= 1
            raise RiverlogError("not the controller", ErrorCode.NOT_CONTROLLER)


async def _finished(switch: OffsetsTopicCompaction) -> None:
    async with asyncio.timeout(10):
        while not switch.done:
            await asyncio.sleep(0.01)


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction, "_RETRY_START_S", 0.01)


async def test_a_delete_policy_topic_is_switched_once_it_appears_even_after_a_refusal() -> None:
    watcher, metadata = FakeWatcher(), FakeMetadata(refusals=1)
    switch = OffsetsTopicCompaction(watcher, metadata.set)  # type: ignore[arg-type]
    switch.start()
    try:
        await asyncio.sleep(0.05)
        assert metadata.calls == []  # no topic yet: nothing to change
        watcher.publish({"cleanup.policy": "delete", "retention.ms": "-1"})
        await _finished(switch)
        assert metadata.calls == [(OFFSETS_TOPIC, {"cleanup.policy": "compact"})] * 2
    finally:
        await switch.stop()


async def test_a_compacted_topic_is_left_alone() -> None:
    watcher, metadata = FakeWatcher(), FakeMetadata()
    watcher.publish({"cleanup.policy": "compact"})
    switch = OffsetsTopicCompaction(watcher, metadata.set)  # type: ignore[arg-type]
    switch.start()
    try:
        await _finished(switch)
        assert metadata.calls == []
    finally:
        await switch.stop()
