"""The gateway's background exchange with the quota service: usage out, holds and allowances in.

Every `quota.report.interval.ms` (100 ms) the reporter drains the usage the gateway recorded
since the last report (`LocalQuotaView.drain_report`), splits it by owner (`owner_of` over the
live quota instances of the cluster image, the function the quota instances hand their windows
over by), and sends each instance its part, an empty part too, so each answer
refreshes that instance's holds and allowances. Nothing of this is on the request path. An
instance that cannot be reached gets its part back into the next report (usage is never lost,
at worst counted late) and its stale allowances stop limiting; the gateway keeps enforcing with
its local view. That is logged once when it starts and once when it ends, never per report.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import grpc

from riverlog.common.clock import Clock
from riverlog.common.cluster import ClusterImage, NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.convert import answer_from_proto, report_to_proto
from riverlog.common.quota.exchange import LocalQuotaView, UsageReport
from riverlog.common.rpc.channels import ChannelCache, closed_channel_raises
from riverlog.v1 import quota_pb2_grpc

log = logging.getLogger(__name__)

KIND = "quota"
_CALL_TIMEOUT_S = 1.0


def quota_nodes(image: ClusterImage) -> list[NodeInfo]:
    """The live quota instances in shard order (by node id)."""
    return image.nodes_of_kind(KIND)


class QuotaReporter:
    """One per gateway. Lifecycle: `start()` after the metadata snapshot, `await stop()` at
    shutdown; runs as one task on the gateway's event loop, which also owns the view."""

    def __init__(
        self,
        view: LocalQuotaView,
        image: Callable[[], ClusterImage],
        clock: Clock,
        interval_ms: int = 100,
    ) -> None:
        self.view = view
        self.image = image
        self.clock = clock
        self.interval_s = interval_ms / 1000
        self.channels: ChannelCache[quota_pb2_grpc.QuotaServiceAsyncStub] = ChannelCache(
            quota_pb2_grpc.QuotaServiceStub, "quota instance"
        )
        self._unreachable: set[int] = set()
        self._task: asyncio.Task[None] | None = None
        self.reports_sent = 0
        self._known_sources: set[str] = set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="quota-reporter")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.channels.close()

    def _stub(self, node: NodeInfo) -> quota_pb2_grpc.QuotaServiceAsyncStub:
        return self.channels.stub(node)

    async def _run(self) -> None:
        while True:
            started = asyncio.get_running_loop().time()
            try:
                await self.report_once()
            except Exception:
                log.exception("quota report failed")
            elapsed = asyncio.get_running_loop().time() - started
            await asyncio.sleep(max(self.interval_s - elapsed, 0.005))

    async def report_once(self) -> None:
        """Drain, split and send one report; apply the answers."""
        report = self.view.drain_report()
        nodes = quota_nodes(self.image())
        live = {f"quota-{n.node_id}" for n in nodes}
        for source in list(self._known_sources):
            if source not in live:
                self.view.forget_source(source)
        self._known_sources = live
        await self.channels.prune(n.key for n in nodes)
        if not nodes:
            return  # no quota service: the local view alone enforces
        parts = report.split([n.node_id for n in nodes])
        await asyncio.gather(
            *(
                self._send(
                    node, parts.get(node.node_id, UsageReport(report.gateway_id, report.seq, ()))
                )
                for node in nodes
            )
        )
        self.reports_sent += 1

    async def _send(self, node: NodeInfo, part: UsageReport) -> None:
        part = UsageReport(part.gateway_id, part.seq, part.deltas, self.view_interval_ms)
        try:
            # a channel closed under the call (the instance left or restarted) is one more
            # unreachable instance, not the end of the reporter's task
            with closed_channel_raises(
                ErrorCode.NETWORK_EXCEPTION, f"quota instance {node.node_id}"
            ):
                response = await self._stub(node).ReportUsage(
                    report_to_proto(part), timeout=_CALL_TIMEOUT_S
                )
        except (grpc.RpcError, RiverlogError) as exc:
            self.view.requeue(part)
            if node.node_id not in self._unreachable:
                self._unreachable.add(node.node_id)
                log.warning(
                    "quota instance %d at %s unreachable (%s); enforcing with the local view",
                    node.node_id,
                    node.address,
                    exc.code() if isinstance(exc, grpc.RpcError) and hasattr(exc, "code") else exc,
                )
            return
        if node.node_id in self._unreachable:
            self._unreachable.discard(node.node_id)
            log.info("quota instance %d reachable again", node.node_id)
        now = self.clock.monotonic_ms()
        self.view.apply_answer(f"quota-{node.node_id}", answer_from_proto(response, now), now)

    @property
    def view_interval_ms(self) -> int:
        return max(int(self.interval_s * 1000), 1)
