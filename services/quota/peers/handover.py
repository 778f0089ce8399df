"""Handing quota windows to their next owner when the set of quota instances changes.

Entities are sharded over the live quota instances (`owner_of`), so adding or removing one
moves most of them. Without a handover the new owner would start an empty window and a client
held back for exceeding its quota would be let go. So every instance, whenever it sees the set
change in the cluster image (and once a second, for reports that reached it late from a gateway
still on the old set), sends the windows it holds but no longer owns to their owner and forgets
them; a window that cannot be delivered is taken back and retried. A leaving instance sends all
of its windows, flagged `leaving` so the receivers stop counting it as an owner before the
metadata service tells them it is gone (they would otherwise hand some entities straight back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import grpc

from riverlog.common.cluster import ClusterImage, NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.convert import handover_to_proto
from riverlog.common.quota.handover import EntityWindow, WindowHandover
from riverlog.common.rpc.channels import ChannelCache, closed_channel_raises
from riverlog.v1 import quota_pb2_grpc

from ..ledger import QuotaLedger

log = logging.getLogger(__name__)

KIND = "quota"
SWEEP_S = 1.0
_CALL_TIMEOUT_S = 5.0


class WindowHandoff:
    """One per quota instance. Lifecycle: `start()` once registered, `poke()` when the quota
    instances may have changed, `await stop()` (the background task), `await leave()` before
    unregistering on a clean stop and again after the server stopped (for reports that came in
    meanwhile), `await close()`. Runs on the service's event loop, which also owns the ledger."""

    def __init__(
        self, node_id: int, ledger: QuotaLedger, image: Callable[[], ClusterImage]
    ) -> None:
        self.node_id = node_id
        self.ledger = ledger
        self.image = image
        self.channels: ChannelCache[quota_pb2_grpc.QuotaServiceAsyncStub] = ChannelCache(
            quota_pb2_grpc.QuotaServiceStub, "quota instance"
        )
        self.incarnation = 0  # this instance's registration, set by `start`
        # peers that said they leave (node id -> incarnation), until the image agrees
        self._leaving: dict[int, int] = {}
        self._owner_ids: tuple[int, ...] = ()  # the owners of the last sweep
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.windows_sent = 0

    def start(self, incarnation: int) -> None:
        self.incarnation = incarnation
        self._task = asyncio.create_task(self._run(), name="quota-window-handoff")

    def poke(self) -> None:
        self._wake.set()

    def peer_leaving(self, node_id: int, incarnation: int) -> None:
        """A peer handed its windows over before unregistering: that incarnation of it is not
        an owner any more (a later one, restarted with the same id, is)."""
        if node_id != self.node_id:
            self._leaving[node_id] = incarnation

    def owners(self, *, without_self: bool = False) -> list[NodeInfo]:
        """The quota instances that own entities now, by node id."""
        nodes = self.image().nodes_of_kind(KIND)
        present = {(n.node_id, n.incarnation) for n in nodes}
        # gone from the image (or registered again): nothing more to remember
        self._leaving = {i: inc for i, inc in self._leaving.items() if (i, inc) in present}
        return [
            n
            for n in nodes
            if self._leaving.get(n.node_id) != n.incarnation
            and not (without_self and n.node_id == self.node_id)
        ]

    async def stop(self) -> None:
        """End the background task after its pass in progress, if any: cancelling a send
        midway would lose windows already taken out of the ledger (or, taken back, count
        them twice if they did arrive)."""
        if self._task is None:
            return
        self._stopping = True
        self._wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), 2 * _CALL_TIMEOUT_S)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._task = None

    async def close(self) -> None:
        await self.channels.close()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), SWEEP_S)
            self._wake.clear()
            if self._stopping:
                return
            owners = self.owners()
            ids = tuple(n.node_id for n in owners)
            if self.node_id not in ids:
                continue  # not (or not yet, or no longer) registered: keep what is here
            # a new set moves many entities: look at all; else only those reported since
            everything, self._owner_ids = ids != self._owner_ids, ids
            try:
                await self.hand_over(owners, leaving=False, only_recent=not everything)
            except Exception:
                log.exception("quota window handover failed")

    async def leave(self) -> int:
        """Send every window to the instances that own its entity once this one is gone;
        returns how many went. Nothing goes when this is the last instance."""
        return await self.hand_over(self.owners(without_self=True), leaving=True)

    async def hand_over(
        self, owners: list[NodeInfo], *, leaving: bool, only_recent: bool = False
    ) -> int:
        by_id = {n.node_id: n for n in owners}
        out = self.ledger.hand_out(self.node_id, list(by_id), only_recent=only_recent)
        if not out:
            return 0
        sent = await asyncio.gather(
            *(self._send(by_id[owner], windows, leaving) for owner, windows in out.items())
        )
        return sum(sent)

    async def _send(self, node: NodeInfo, windows: list[EntityWindow], leaving: bool) -> int:
        handover = WindowHandover(self.node_id, tuple(windows), leaving, self.incarnation)
        request = handover_to_proto(handover)
        try:
            # a channel closed under the call (the instance left or restarted): keep the
            # windows for the next sweep, as for any unreachable instance
            with closed_channel_raises(
                ErrorCode.NETWORK_EXCEPTION, f"quota instance {node.node_id}"
            ):
                response = await self.channels.stub(node).HandOverWindows(
                    request, timeout=_CALL_TIMEOUT_S
                )
        except (grpc.RpcError, RiverlogError) as exc:
            log.warning(
                "could not hand %d quota windows to instance %d (%s); keeping them",
                len(windows),
                node.node_id,
                exc.code() if isinstance(exc, grpc.RpcError) and hasattr(exc, "code") else exc,
            )
            self.ledger.absorb(windows)
            return 0
        if response.error_code:
            log.warning(
                "quota instance %d refused %d windows: %s; keeping them",
                node.node_id,
                len(windows),
                response.error_message,
            )
            self.ledger.absorb(windows)
            return 0
        self.windows_sent += len(windows)
        log.info("handed %d quota windows to instance %d", len(windows), node.node_id)
        return len(windows)
