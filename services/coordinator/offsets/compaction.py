"""`__consumer_offsets` is a compacted topic (decision 0008), as in Kafka: the storage node's
log cleaner (decision 0014) keeps the latest record of each key — each group's metadata, each
committed offset — and drops tombstones (deleted groups, expired offsets) after
`delete.retention.ms`, so a new owner's load reads the live state, not the whole history.

Clusters created before compaction existed have the topic with `cleanup.policy=delete` (and
`retention.ms=-1`, so nothing was ever deleted), and the controller may still create it so.
Each coordinator therefore checks the topic once it appears in its image after start-up, and
switches the policy to `compact` through the metadata service when it is not compacted. The
switch loses nothing: every record the coordinator wrote is keyed, and the cleaner keeps the
latest per key, which is what loading already kept. An operator's later change of the policy is
left alone until the next start-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from riverlog.common.cluster.image import OFFSETS_TOPIC, ClusterImage, ImageFeed
from riverlog.common.errors import ErrorCode, RiverlogError

log = logging.getLogger(__name__)

CLEANUP_POLICY = "cleanup.policy"
COMPACT = "compact"
_WAIT_S = 60.0
_RETRY_START_S = 0.5
_RETRY_MAX_S = 10.0

SetConfigs = Callable[[str, Mapping[str, str]], Awaitable[None]]


def compaction_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """Pure: the configs to set so a topic with these overrides is compacted; empty when its
    `cleanup.policy` already includes `compact` (`compact,delete` is left as the operator set
    it). No override means the storage node's default (`delete` unless configured), so the
    policy is set explicitly then."""
    policies = {p.strip() for p in configs.get(CLEANUP_POLICY, "").split(",")}
    return {} if COMPACT in policies else {CLEANUP_POLICY: COMPACT}


def _has_offsets_topic(image: ClusterImage) -> bool:
    return OFFSETS_TOPIC in image.topics


class OffsetsTopicCompaction:
    """One task per coordinator process that ends once the topic is compacted (or found so).
    Lifecycle: `start()` once the watcher follows the cluster, `await stop()` at shutdown
    (cancels a pending attempt; start-up and serving never wait for it)."""

    def __init__(self, watcher: ImageFeed, set_configs: SetConfigs) -> None:
        self.watcher = watcher
        self.set_configs = set_configs
        self.done = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="offsets-topic-compaction")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])

    async def _run(self) -> None:
        delay = _RETRY_START_S
        while True:
            try:
                image = await self.watcher.wait_for(_has_offsets_topic, timeout_s=_WAIT_S)
                wanted = compaction_configs(image.topics[OFFSETS_TOPIC].configs)
                if wanted:
                    await self.set_configs(OFFSETS_TOPIC, wanted)
                    log.info("%s switched to %s", OFFSETS_TOPIC, wanted)
                self.done = True
                return
            except RiverlogError as exc:
                if exc.code != ErrorCode.REQUEST_TIMED_OUT:
                    log.warning("cannot switch %s to compaction yet: %s", OFFSETS_TOPIC, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX_S)
