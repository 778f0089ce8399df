"""Connections from the gateway to storage nodes' zero-copy ports: the fast path of fetch and
produce (decision 0018).

A zero-copy connection carries one request at a time, so each node has a small pool: a request
takes an idle connection or opens one, and gives it back when it is done. Long polls hold their
connection for their wait, so the pool grows with the fetches waiting at once; at most
`max_idle` connections per node are kept once the load drops. A connection whose exchange
failed or was cancelled (its framing is lost) closes itself and is dropped, which is why a
fetch that stops waiting for a leader's long poll abandons the call rather than cancelling it
(`fetch._LongPoll`). A node that restarted (a new incarnation) or moved gets fresh
connections; `prune` closes those of nodes that left the cluster image.

Produce takes one `AsyncProduceLane` per node instead: a single connection that pipelines
requests, so they reach the leader in the order the gateway sent them (pooled connections
would race, and an idempotent producer's requests must not overtake each other).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from riverlog.common.cluster import NodeInfo
from riverlog.common.cluster.image import NodeKey
from riverlog.common.zerocopy import AsyncProduceLane, AsyncZeroCopyFetchClient

_T = TypeVar("_T")

DEFAULT_MAX_IDLE = 8


@dataclass(slots=True)
class _NodePool:
    identity: tuple[str, int, int]  # (host, zero-copy port, incarnation)
    idle: list[AsyncZeroCopyFetchClient] = field(default_factory=list)


class ZeroCopyPool:
    """Lifecycle: one per gateway, used from its event loop; `await close()` at stop."""

    def __init__(self, max_idle: int = DEFAULT_MAX_IDLE) -> None:
        self._max_idle = max_idle
        self._pools: dict[NodeKey, _NodePool] = {}
        self._lanes: dict[NodeKey, tuple[tuple[str, int, int], AsyncProduceLane]] = {}

    async def lane(self, node: NodeInfo) -> AsyncProduceLane:
        """`node`'s produce lane (a fresh one after the node restarted or moved)."""
        identity = (node.host, node.zero_copy_port, node.incarnation)
        known = self._lanes.get(node.key)
        if known is not None and known[0] == identity:
            return known[1]
        lane = AsyncProduceLane(node.host, node.zero_copy_port)
        self._lanes[node.key] = (identity, lane)
        if known is not None:
            await known[1].close()
        return lane

    async def call(
        self, node: NodeInfo, exchange: Callable[[AsyncZeroCopyFetchClient], Awaitable[_T]]
    ) -> _T:
        """`exchange(client)` on a connection of `node`'s; failures propagate (RiverlogError
        from the client) after the connection is dropped."""
        pool = await self._pool(node)
        if pool.idle:
            client = pool.idle.pop()
        else:
            client = AsyncZeroCopyFetchClient(node.host, node.zero_copy_port)
        try:
            result = await exchange(client)
        except BaseException:
            await _close_quietly(client)
            raise
        if self._pools.get(node.key) is pool and len(pool.idle) < self._max_idle:
            pool.idle.append(client)
        else:
            await _close_quietly(client)
        return result

    async def _pool(self, node: NodeInfo) -> _NodePool:
        identity = (node.host, node.zero_copy_port, node.incarnation)
        pool = self._pools.get(node.key)
        if pool is not None and pool.identity == identity:
            return pool
        if pool is not None:
            await _close_all(pool)
        pool = self._pools[node.key] = _NodePool(identity)
        return pool

    async def prune(self, live: Iterable[NodeKey]) -> None:
        """Close the connections of nodes no longer in the cluster."""
        keep = set(live)
        for key in [k for k in self._pools if k not in keep]:
            await _close_all(self._pools.pop(key))
        for key in [k for k in self._lanes if k not in keep]:
            await self._lanes.pop(key)[1].close()

    async def close(self) -> None:
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            await _close_all(pool)
        lanes, self._lanes = self._lanes, {}
        for _, lane in lanes.values():
            await lane.close()


async def _close_all(pool: _NodePool) -> None:
    idle, pool.idle = pool.idle, []
    for client in idle:
        await _close_quietly(client)


async def _close_quietly(client: AsyncZeroCopyFetchClient) -> None:
    with contextlib.suppress(OSError):
        await client.close()
