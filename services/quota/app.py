"""The quota service process: wire config → quota watch → ledger → server, register, serve.

    python -m riverlog.services.quota --node-id N --host 127.0.0.1 --port P \\
        --metadata A1[,A2,...] [--ready-file F] [--config quota.window.num=11 ...]

Start-up order: follow the quota configs (WatchClientQuotas; the ledger needs bounds to judge),
bind and serve QuotaService, register as a `quota` node (gateways find the instances, and shard
entities among them, through the cluster image), then write the ready file. Shutdown runs it
backwards. Windows are in memory only: a restarted instance starts them empty, like a restarted
Kafka broker, and the gateways' local views enforce meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Sequence

from riverlog.common.clock import SystemClock
from riverlog.common.cluster import MembershipSession, MetadataClient, NodeInfo, parse_addresses
from riverlog.common.cluster.quota_watcher import ClientQuotaWatcher
from riverlog.common.errors import RiverlogError
from riverlog.common.quota.resolver import QuotaResolver
from riverlog.common.rpc.server import RpcServer
from riverlog.common.service import (
    base_arg_parser,
    parse_overrides,
    run,
    setup_logging,
    write_ready_file,
)

from .config import QuotaConfig
from .ledger import QuotaLedger
from .rpc.servicer import SERVICE_NAME, QuotaServicer, add_to_server

log = logging.getLogger("riverlog.services.quota")

KIND = "quota"
_FENCE_CHECK_S = 1.0


async def serve(
    node_id: int,
    host: str,
    port: int,
    metadata: list[str],
    config: QuotaConfig,
    ready_file: str | None,
    stop: asyncio.Event,
) -> None:
    clock = SystemClock()
    client = MetadataClient(metadata)
    ledger = QuotaLedger(QuotaResolver(), clock, config.window)
    watcher = ClientQuotaWatcher(client, node_id)
    watcher.add_listener(lambda resolver, _users: ledger.update_resolver(resolver))
    server = RpcServer(host, port, [(add_to_server, QuotaServicer(ledger, clock), SERVICE_NAME)])
    membership: MembershipSession | None = None
    try:
        if not await watcher.start(timeout_s=30.0):
            log.warning("no quota configs from the metadata service yet; serving without bounds")
        await server.start()
        node = NodeInfo(
            kind=KIND, node_id=node_id, host=host, port=server.port, incarnation=time.time_ns()
        )
        membership = MembershipSession(client, node)
        await membership.start()
        log.info("quota instance %d serving on %s", node_id, server.address)
        write_ready_file(ready_file, {"address": server.address, "node_id": node_id})
        expire_s = config.quota_expire_interval_ms / 1000
        next_expiry = time.monotonic() + expire_s
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), _FENCE_CHECK_S)
            if membership.fenced:
                log.error("quota instance %d was replaced by a newer incarnation", node_id)
                break
            if time.monotonic() >= next_expiry:
                ledger.expire_inactive()
                next_expiry = time.monotonic() + expire_s
    finally:
        log.info("quota instance %d stopping", node_id)
        if membership is not None:
            with contextlib.suppress(RiverlogError):
                await membership.stop()
        await server.stop(1.0)
        await watcher.stop()
        await client.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = base_arg_parser(KIND)
    parser.add_argument("--node-id", type=int, required=True, help="this instance's node id")
    args = parser.parse_args(argv)
    try:
        config = QuotaConfig.from_overrides(parse_overrides(args.config))
        metadata = parse_addresses(args.metadata)
    except (ValueError, RiverlogError) as exc:
        parser.error(str(exc))
    if args.node_id < 0:
        parser.error("--node-id must not be negative")
    setup_logging(args.log_level, f"quota-{args.node_id}")
    try:
        run(
            lambda stop: serve(
                args.node_id, args.host, args.port, metadata, config, args.ready_file, stop
            ),
            "riverlog-quota",
        )
    except RiverlogError as exc:
        log.error("quota instance %d cannot run: %s", args.node_id, exc)
        sys.exit(1)
