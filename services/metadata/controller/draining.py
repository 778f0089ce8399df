"""Storage nodes being drained (decision 0025's addendum): controller state that keeps new
replicas off a node while `riverlog partitions drain` / `cluster remove storage N` empties it.

The set is one etcd key (`controller_state/draining_nodes`), written by the controller in a
fenced transaction compared with the revision it read, like every controller write; the image
reads it back (`MetadataImage.draining`), so placement of new topics and partitions, the
reassignment checks and the replica balancer see the same set, and a new controller inherits
it. A mark ends when the operator removes it, or when the controller sees that the node has
unregistered and no partition names it any more (the drained node was stopped): an id that
comes back later is a new, empty node, not a drained one. A node that crashes mid-drain still
holds replicas, so it stays marked and comes back draining.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection

from riverlog.common.cluster.image import ClusterImage
from riverlog.common.errors import ErrorCode, RiverlogError

from ..image import MetadataImage
from ..records import draining_nodes_decode, draining_nodes_encode
from ..store import Compare, Op
from .background import cancel_all, wait_woken
from .election import ControllerElection

log = logging.getLogger(__name__)

WRITE_ATTEMPTS = 5
CHECK_S = 5.0

Change = Callable[[frozenset[int]], frozenset[int]]


def named_nodes(cluster: ClusterImage) -> frozenset[int]:
    """Every node some partition names as a replica (adding and removing ones included)."""
    return frozenset(r for t in cluster.topics.values() for p in t.partitions for r in p.replicas)


def ended_marks(
    draining: Collection[int], registered: Collection[int], named: Collection[int]
) -> frozenset[int]:
    """The marks to remove: nodes neither registered nor named by any partition. Pure."""
    return frozenset(n for n in draining if n not in registered and n not in named)


class DrainingController:
    """AlterNodeDraining, and the removal of ended marks on the active controller (idle on
    standbys). Lifecycle: `start()`, `await stop()`; runs on the loop that started it."""

    def __init__(self, election: ControllerElection, image: MetadataImage) -> None:
        self.election = election
        self.image = image
        self._wake = asyncio.Event()
        self._writes = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        image.add_listener(self._on_image)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="controller-draining")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_all([task])

    def _storage_ids(self) -> frozenset[int]:
        return frozenset(n.node_id for n in self.image.cluster.nodes_of_kind("storage"))

    def _ended(self) -> frozenset[int]:
        if not self.image.draining:
            return frozenset()
        cluster = self.image.cluster
        return ended_marks(self.image.draining, self._storage_ids(), named_nodes(cluster))

    def _on_image(self) -> None:
        if self.election.is_controller and self._ended():
            self._wake.set()

    async def alter(self, node_id: int, draining: bool) -> frozenset[int]:
        """Mark (or unmark) `node_id`; every marked node after the change. Marking needs a
        registered storage node or one some partition names (INVALID_REQUEST otherwise)."""
        if not self.election.is_controller:
            raise RiverlogError("this instance is not the controller", ErrorCode.NOT_CONTROLLER)
        if node_id < 0:
            raise RiverlogError(f"node id {node_id} is negative", ErrorCode.INVALID_REQUEST)
        if draining and node_id not in self._storage_ids() | named_nodes(self.image.cluster):
            raise RiverlogError(
                f"storage node {node_id} is not registered and holds no replica",
                ErrorCode.INVALID_REQUEST,
            )
        if draining:
            return await self._change(lambda marked: marked | {node_id})
        return await self._change(lambda marked: marked - {node_id})

    async def _change(self, change: Change) -> frozenset[int]:
        key = self.image.keys.draining_nodes
        async with self._writes:
            for _ in range(WRITE_ATTEMPTS):
                entry = await self.image.store.get(key)
                marked = draining_nodes_decode(entry.value) if entry is not None else frozenset()
                after = change(marked)
                if after == marked:
                    return marked
                compare = Compare(key, entry.mod_revision if entry is not None else 0)
                op = Op(key, draining_nodes_encode(after)) if after else Op(key)
                if await self.election.write([compare], [op]) is not None:
                    log.info("draining storage nodes: %s", sorted(after) or "none")
                    return after
        raise RiverlogError("the draining nodes keep changing; retry.", ErrorCode.INVALID_REQUEST)

    async def _loop(self) -> None:
        while True:
            await wait_woken(self._wake, CHECK_S)
            if not self.election.is_controller:
                continue
            if not self._ended():
                continue
            try:
                await self._change(lambda marked: marked - self._ended())
            except RiverlogError as exc:
                log.warning("draining nodes: %s", exc)
            except Exception:
                log.exception("removing ended draining marks failed")
