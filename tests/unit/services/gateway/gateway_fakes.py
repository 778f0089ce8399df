"""In-test fakes for the gateway's unit tests: a pushable metadata source, and a storage peer
whose answers each test scripts. No network, no processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import MappingProxyType

from riverlog.common.clock import SYSTEM_CLOCK, Clock
from riverlog.common.cluster import ClusterImage, NodeInfo, PartitionInfo, TopicInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.gateway.config import GatewayConfig
from riverlog.services.gateway.context import Deadline, RequestContext
from riverlog.services.gateway.fetch import Fetcher, FetchPartResult
from riverlog.services.gateway.offsets import (
    DeleteRecordsPartResult,
    ListOffsetsPartResult,
    Offsets,
)
from riverlog.services.gateway.produce import ProducePartResult, Producer
from riverlog.services.gateway.routing.metadata_cache import MetadataCache
from riverlog.services.gateway.routing.router import Router


def make_image(
    version: int,
    topics: dict[str, list[int]],
    storage: tuple[int, ...] = (1, 2, 3),
    internal: frozenset[str] = frozenset(),
    extra_nodes: tuple[NodeInfo, ...] = (),
) -> ClusterImage:
    """An image where topic -> leader of each partition (-1: none); storage nodes live."""
    nodes = {("storage", n): NodeInfo("storage", n, "127.0.0.1", 9000 + n) for n in storage}
    for node in extra_nodes:
        nodes[node.key] = node
    infos = {
        name: TopicInfo(
            name,
            f"id-{name}-{version}",
            tuple(
                PartitionInfo(p, leader, 1 if leader >= 0 else 0, tuple(storage), tuple(storage))
                for p, leader in enumerate(leaders)
            ),
            internal=name in internal,
        )
        for name, leaders in topics.items()
    }
    return ClusterImage(
        version=version,
        cluster_id="test-cluster",
        controller_id=0,
        controller_epoch=1,
        nodes=MappingProxyType(nodes),
        topics=MappingProxyType(infos),
    )


class FakeSource:
    """A MetadataWatcher stand-in: `publish()` pushes a new image to waiters and listeners."""

    def __init__(self, image: ClusterImage) -> None:
        self.image = image
        self._listeners: list[Callable[[ClusterImage, ClusterImage], object]] = []
        self._changed = asyncio.Condition()

    def add_listener(self, callback: Callable[[ClusterImage, ClusterImage], object]) -> None:
        self._listeners.append(callback)

    async def wait_for(
        self, predicate: Callable[[ClusterImage], bool], timeout_s: float = 30.0
    ) -> ClusterImage:
        deadline = time.monotonic() + timeout_s
        async with self._changed:
            while not predicate(self.image):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RiverlogError("timed out", ErrorCode.REQUEST_TIMED_OUT)
                try:
                    await asyncio.wait_for(self._changed.wait(), remaining)
                except TimeoutError:
                    pass
            return self.image

    async def publish(self, image: ClusterImage) -> None:
        old, self.image = self.image, image
        for listener in self._listeners:
            listener(old, image)
        async with self._changed:
            self._changed.notify_all()


Answer = Callable[[int, object], object]
"""(node id, item) -> a result object, or a RiverlogError to fail the whole call."""


class FakeStorage:
    """A storage peer: records every call and answers by `answer(node_id, item)`; a
    RiverlogError returned for any item fails the whole call with it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, list[object], object]] = []
        self.answer: Answer = lambda node_id, item: None
        self.gate: asyncio.Event | None = None
        self.in_flight = 0
        self.max_in_flight = 0

    async def _run(self, method: str, node: NodeInfo, options: object, items: list, default):
        self.calls.append((method, node.node_id, list(items), options))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                await asyncio.wait_for(self.gate.wait(), 5)
            out = []
            for item in items:
                result = self.answer(node.node_id, item)
                if isinstance(result, RiverlogError):
                    raise result
                out.append(result if result is not None else default(node.node_id, item))
            return out
        finally:
            self.in_flight -= 1

    def nodes_called(self, method: str) -> list[int]:
        return [node for m, node, _, _ in self.calls if m == method]

    async def produce(self, node, options, parts, deadline):
        return await self._run(
            "produce",
            node,
            options,
            parts,
            lambda n, p: ProducePartResult(p.tp, base_offset=100 * n, last_offset=100 * n),
        )

    async def fetch(self, node, options, parts, deadline):
        return await self._run(
            "fetch", node, options, parts, lambda n, p: FetchPartResult(p.tp, high_watermark=n)
        )

    async def list_offsets(self, node, isolation_level, parts, deadline):
        return await self._run(
            "list_offsets",
            node,
            isolation_level,
            parts,
            lambda n, p: ListOffsetsPartResult(p.tp, offset=n),
        )

    async def delete_records(self, node, timeout_ms, parts, deadline):
        return await self._run(
            "delete_records",
            node,
            timeout_ms,
            parts,
            lambda n, p: DeleteRecordsPartResult(p.tp, low_watermark=p.offset),
        )


class Harness:
    def __init__(
        self, image: ClusterImage, config: GatewayConfig, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.clock = clock
        self.source = FakeSource(image)
        self.cache = MetadataCache(self.source)
        self.config = config
        self.router = Router(self.cache, config)
        self.storage = FakeStorage()
        self.producer = Producer(self.router, self.storage, config)
        self.fetcher = Fetcher(self.router, self.storage, config, clock)
        self.offsets = Offsets(self.router, self.storage, config)

    async def send(self, node, batch, deadline):
        """A router SendFn over the fake storage's produce."""
        return await self.storage.produce(node, None, batch, deadline)

    def ctx(self, seconds: float = 5.0) -> RequestContext:
        return RequestContext("Test", Deadline.after(seconds, self.clock), client_id="unit")


FAST = GatewayConfig(
    request_timeout_ms=5_000, retry_backoff_ms=10, retry_backoff_max_ms=50, max_block_ms=300
)
