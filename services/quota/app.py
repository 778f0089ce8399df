"""The quota service process: wire config → quota watch → ledger → server, register, serve.

    python -m riverlog.services.quota --node-id N --host 127.0.0.1 --port P \\
        --metadata A1[,A2,...] [--ready-file F] [--config quota.window.num=11 ...]

Start-up order: follow the quota configs (WatchClientQuotas; the ledger needs bounds to judge)
and the cluster image (the other quota instances), bind and serve QuotaService, register as a
`quota` node (gateways find the instances, and shard entities among them, through the cluster
image), start handing windows over, then write the ready file. Windows are in memory: when the
set of instances changes each one sends the windows it no longer owns to their owner
(`peers/handover.py`), and a clean stop (SIGTERM, `riverlog cluster remove quota N`) hands all
of them over before unregistering, and once more after the server stopped for the reports that
came in meanwhile. A crashed instance's windows are lost, like a restarted Kafka broker's, and
the gateways' local views enforce meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence

from riverlog.common.clock import SystemClock
from riverlog.common.cluster import (
    ClusterImage,
    MembershipSession,
    MetadataClient,
    MetadataWatcher,
    NodeInfo,
    allocate_incarnation,
)
from riverlog.common.cluster.quota_watcher import ClientQuotaWatcher
from riverlog.common.errors import RiverlogError
from riverlog.common.node import NodeOptions, parse_node_args, run_node
from riverlog.common.quota.resolver import QuotaResolver
from riverlog.common.rpc.server import RpcServer
from riverlog.common.service import setup_logging

from .config import QuotaConfig
from .ledger import QuotaLedger
from .peers.handover import WindowHandoff
from .prometheus import register_prometheus_metrics
from .rpc.servicer import SERVICE_NAME, QuotaServicer, add_to_server

log = logging.getLogger("riverlog.services.quota")

KIND = "quota"

Options = NodeOptions[QuotaConfig]


class QuotaProcess:
    """One instance's components. Lifecycle: `await start()`, serve (calling `expire_if_due()`
    now and then), `await stop()`; all on one event loop."""

    def __init__(self, options: Options) -> None:
        self.options = options
        config = options.config
        clock = SystemClock()
        self.client = MetadataClient(options.metadata)
        self.ledger = QuotaLedger(QuotaResolver(), clock, config.window)
        self._clock = clock
        self.watcher = ClientQuotaWatcher(self.client, options.node_id)
        ledger = self.ledger
        self.watcher.add_listener(lambda resolver, _users: ledger.update_resolver(resolver))
        self.cluster = MetadataWatcher(self.client, options.node_id)
        self.handoff = WindowHandoff(options.node_id, self.ledger, lambda: self.cluster.image)
        self.cluster.add_listener(self._on_cluster_change)
        servicer = QuotaServicer(self.ledger, clock, self.handoff.peer_leaving)
        self.server = RpcServer(
            options.host, options.port, [(add_to_server, servicer, SERVICE_NAME)]
        )
        self.membership: MembershipSession | None = None
        self._expire_s = config.quota_expire_interval_ms / 1000
        self._next_expiry = 0.0

    @property
    def address(self) -> str:
        return self.server.address

    async def start(self) -> None:
        node_id = self.options.node_id
        if not await self.watcher.start(timeout_s=30.0):
            log.warning("no quota configs from the metadata service yet; serving without bounds")
        await self.cluster.start(timeout_s=30.0)
        await self.server.start()
        register_prometheus_metrics(self.ledger, self._clock)
        node = NodeInfo(
            kind=KIND,
            node_id=node_id,
            host=self.options.advertised_host,
            port=self.server.port,
            incarnation=await allocate_incarnation(self.client, KIND, node_id),
        )
        self.membership = MembershipSession(self.client, node)
        await self.membership.start()
        self.handoff.start(node.incarnation)
        log.info("quota instance %d serving on %s", node_id, self.address)
        self._next_expiry = time.monotonic() + self._expire_s

    @property
    def fenced(self) -> bool:
        return self.membership is not None and self.membership.fenced

    def expire_if_due(self) -> None:
        """Drop the windows of entities idle past `quota.expire.interval.ms`, when it is time."""
        if time.monotonic() >= self._next_expiry:
            self.ledger.expire_inactive()
            self._next_expiry = time.monotonic() + self._expire_s

    def _on_cluster_change(self, old: ClusterImage, new: ClusterImage) -> None:
        if old.nodes_of_kind(KIND) != new.nodes_of_kind(KIND):
            self.handoff.poke()

    async def stop(self) -> None:
        await self.handoff.stop()
        handing_over = self.membership is not None and not self.fenced
        if handing_over:  # fenced: a newer incarnation of this id owns these entities now
            await self._leave("before unregistering")
        if self.membership is not None:
            with contextlib.suppress(RiverlogError):
                await self.membership.stop()
        await self.server.stop(1.0)
        if handing_over:
            await self._leave("after the server stopped")
        await self.handoff.close()
        await self.cluster.stop()
        await self.watcher.stop()
        await self.client.close()

    async def _leave(self, when: str) -> None:
        try:
            sent = await self.handoff.leave()
        except Exception:
            log.exception("quota window handover %s failed", when)
            return
        if sent:
            log.info("handed %d quota windows over %s", sent, when)


def main(argv: Sequence[str] | None = None) -> None:
    options, log_level = parse_node_args(
        KIND, QuotaConfig.from_overrides, argv, node_id_help="this instance's node id"
    )
    setup_logging(log_level, f"quota-{options.node_id}")
    run_node(KIND, options, QuotaProcess, label="quota instance", tick=QuotaProcess.expire_if_due)
