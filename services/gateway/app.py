"""The gateway process: parse the command line, wire config → metadata → families → server.

Start-up order: follow the metadata (first snapshot received), bind and serve the Gateway API,
register as a `gateway` node (so the cluster lists it), then write the ready file. Shutdown runs
it backwards: unregister, drain the server, stop following, close channels. Several gateways may
run at once, each with its own `--node-id`.

    python -m riverlog.services.gateway --node-id N --host 127.0.0.1 --port P \\
        --metadata A1[,A2,...] [--ready-file F] [--config key=value ...]
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence

from riverlog.common.cluster import (
    ClusterImage,
    MembershipSession,
    MetadataClient,
    MetadataWatcher,
    NodeInfo,
    allocate_incarnation,
)
from riverlog.common.cluster.image import TRANSACTION_STATE_TOPIC
from riverlog.common.cluster.producer_ids import block_source
from riverlog.common.cluster.quota_watcher import ClientQuotaWatcher
from riverlog.common.errors import RiverlogError
from riverlog.common.grants import load_key
from riverlog.common.node import NodeOptions, parse_node_args, run_node
from riverlog.common.producer_ids import ProducerIdAllocator
from riverlog.common.rpc.server import RpcServer
from riverlog.common.service import setup_logging

from . import traffic
from .admin import Admin
from .config import GatewayConfig
from .context import ClientIdLogFilter
from .direct_access import DataAccess
from .enforcement import Enforcement
from .fetch import Fetcher
from .groups import GroupRouter
from .log_dirs import LogDirs
from .offsets import Offsets
from .peers.coordinator import CoordinatorPeers
from .peers.metadata import MetadataPeer
from .peers.quota import QuotaReporter
from .peers.storage import StoragePeers
from .produce import Producer
from .reassignment_progress import ReassignmentProgress
from .records import PlainRecords
from .routing.metadata_cache import MetadataCache
from .routing.router import Router
from .rpc.servicer import SERVICE_NAME, Families, GatewayServicer, add_to_server
from .rpc.tls import server_credentials

log = logging.getLogger(__name__)

KIND = "gateway"
_STOP_GRACE_S = 5.0


Options = NodeOptions[GatewayConfig]


def parse_args(argv: Sequence[str] | None = None) -> tuple[Options, str]:
    """The process options and the log level; exits with a usage message on bad input."""
    return parse_node_args(
        KIND, GatewayConfig.from_overrides, argv, node_id_help="this gateway's node id"
    )


class Gateway:
    """One gateway's components. Lifecycle: `await start()`, serve until told to stop, then
    `await stop()`; all on one event loop."""

    def __init__(self, options: Options) -> None:
        self.options = options
        config = options.config
        self.client = MetadataClient(options.metadata)
        self.watcher = MetadataWatcher(self.client, options.node_id)
        self.cache = MetadataCache(self.watcher)
        self.storage = StoragePeers(zero_copy=config.storage_zero_copy_enable)
        self.coordinators = CoordinatorPeers()
        router = Router(self.cache, config)
        self.producer_ids = ProducerIdAllocator(
            block_source(self.client, options.node_id, lambda: self.incarnation)
        )
        producer = Producer(router, self.storage, config)
        fetcher = Fetcher(router, self.storage, config)
        self.enforcement = Enforcement(
            config,
            options.node_id,
            ClientQuotaWatcher(self.client, options.node_id),
            lambda view, clock, interval_ms: QuotaReporter(
                view, lambda: self.watcher.image, clock, interval_ms
            ),
        )
        metadata = MetadataPeer(self.client, config)
        log_dirs = LogDirs(self.cache, self.storage)
        families = Families(
            config=config,
            producer=producer,
            fetcher=fetcher,
            offsets=Offsets(router, self.storage, config),
            records=PlainRecords(self.cache, producer, fetcher),
            admin=Admin(self.cache, config),
            metadata=metadata,
            producer_ids=self.producer_ids,
            quotas=self.enforcement.quotas,
            auth=self.enforcement.auth,
            authz=self.enforcement.authz,
            groups=GroupRouter(
                self.cache,
                self.coordinators,
                config,
                lambda: metadata.create_internal_topic(TRANSACTION_STATE_TOPIC),
            ),
            progress=ReassignmentProgress(log_dirs),
            log_dirs=log_dirs,
            direct=DataAccess(
                config,
                self.cache,
                _direct_access_key(config),
                self.enforcement.quotas,
                self.enforcement.authz,
            ),
        )
        traffic.register()
        servicer = GatewayServicer(families)
        self.server = RpcServer(
            options.host,
            options.port,
            [(add_to_server, servicer, SERVICE_NAME)],
            credentials=server_credentials(config),
            interceptors=servicer.interceptors(),
        )
        self.membership: MembershipSession | None = None
        self.incarnation = 0  # from the metadata service at start (decision 0003)

    @property
    def address(self) -> str:
        return self.server.address

    async def _prune(self, old: ClusterImage, new: ClusterImage) -> None:
        """Close the channels of nodes that left the cluster."""
        await self.storage.channels.on_image(old, new)
        await self.coordinators.channels.on_image(old, new)

    async def start(self) -> None:
        startup_s = self.options.config.metadata_startup_timeout_ms / 1000
        image = await self.watcher.start(timeout_s=startup_s)
        self.watcher.add_listener(self._prune)
        await self.enforcement.start()
        log.info(
            "metadata snapshot %d: %d topics, %d nodes",
            image.version,
            len(image.topics),
            len(image.nodes),
        )
        await self.server.start()
        self.incarnation = await allocate_incarnation(self.client, KIND, self.options.node_id)
        node = NodeInfo(
            kind=KIND,
            node_id=self.options.node_id,
            host=self.options.advertised_host,
            port=self.server.port,
            incarnation=self.incarnation,
        )
        self.membership = MembershipSession(self.client, node)
        await self.membership.start()
        log.info("gateway %d serving on %s", self.options.node_id, self.address)

    @property
    def fenced(self) -> bool:
        return self.membership is not None and self.membership.fenced

    async def stop(self) -> None:
        if self.membership is not None:
            with contextlib.suppress(RiverlogError):
                await self.membership.stop()
        await self.server.stop(_STOP_GRACE_S)
        await self.producer_ids.close()
        await self.enforcement.stop()
        await self.watcher.stop()
        await self.storage.close()
        await self.coordinators.close()
        await self.client.close()


def _direct_access_key(config: GatewayConfig) -> bytes | None:
    """The key GrantDataAccess signs grants with (decision 0047); None: no direct access."""
    if not config.direct_access_secret_key_file:
        return None
    if config.tls:
        log.warning(
            "direct.access.secret.key.file is set, but this gateway serves TLS and the direct"
            " ports are plaintext: GrantDataAccess answers DELEGATION_TOKEN_AUTH_DISABLED"
        )
        return None
    return load_key(config.direct_access_secret_key_file)


def _install_log_filter() -> None:
    log_filter = ClientIdLogFilter()
    for handler in logging.getLogger().handlers:
        handler.addFilter(log_filter)
        fmt = handler.formatter._fmt if handler.formatter else None
        if fmt and "%(client_id)" not in fmt:
            handler.setFormatter(
                logging.Formatter(fmt.replace("%(message)s", "[%(client_id)s] %(message)s"))
            )


def main(argv: Sequence[str] | None = None) -> None:
    options, log_level = parse_args(argv)
    setup_logging(log_level, f"gateway-{options.node_id}")
    _install_log_filter()
    run_node(KIND, options, Gateway)
