"""The coordinator process: parse the command line, wire config → metadata → ownership →
server, register as a `coordinator` node, and serve until SIGTERM.

Start-up order: follow the metadata (first snapshot), bind and serve the Coordinator API, start
the shards already assigned here and, in the background, the switch of `__consumer_offsets` to
compaction, register (the controller then assigns partitions to this instance), write the
ready file. Shutdown runs backwards: stop taking partitions, unregister (the controller moves
this instance's partitions at once, possibly to another instance that is stopping too: it
declines them), stop the shards, drain the server, stop following.

    python -m riverlog.services.coordinator --node-id N --host 127.0.0.1 --port P \\
        --metadata A1[,A2,...] [--ready-file F] [--config key=value ...]
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence

from riverlog.common.clock import SYSTEM_CLOCK
from riverlog.common.cluster import (
    MembershipSession,
    MetadataClient,
    MetadataWatcher,
    NodeInfo,
    allocate_incarnation,
)
from riverlog.common.cluster.image import TRANSACTION_STATE_TOPIC
from riverlog.common.cluster.producer_ids import block_source
from riverlog.common.errors import RiverlogError
from riverlog.common.metrics.endpoint import settings as metrics_settings
from riverlog.common.metrics.settings import DEFAULT_LAG_INTERVAL_MS
from riverlog.common.node import NodeOptions, parse_node_args, run_node
from riverlog.common.producer_ids import ProducerIdAllocator
from riverlog.common.rpc.server import RpcServer
from riverlog.common.service import setup_logging

from .config import CoordinatorConfig
from .coordinator import GroupCoordinator
from .offsets.compaction import OffsetsTopicCompaction
from .ownership import Ownership, groups_kind, transactions_kind
from .peers.coordinators import PeerCoordinators
from .peers.markers import StorageMarkerChannel
from .peers.metadata import TopicConfigs
from .peers.storage import StorageClient
from .peers.watermarks import high_watermarks
from .prometheus import LagMonitor
from .rpc.servicer import SERVICE_NAME, CoordinatorServicer, add_to_server
from .rpc.transactions import TransactionRpc
from .txn.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

KIND = "coordinator"
_STOP_GRACE_S = 2.0


Options = NodeOptions[CoordinatorConfig]


def parse_args(argv: Sequence[str] | None = None) -> tuple[Options, str]:
    """The process options and the log level; exits with a usage message on bad input."""
    return parse_node_args(
        KIND, CoordinatorConfig.from_overrides, argv, node_id_help="this coordinator's node id"
    )


class CoordinatorProcess:
    """One instance's components. Lifecycle: `await start()`, serve, `await stop()`; all on
    one event loop."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.client = MetadataClient(options.metadata)
        self.watcher = MetadataWatcher(self.client, options.node_id)
        self.storage = StorageClient(lambda: self.watcher.image)
        self.watcher.add_listener(self.storage.channels.on_image)
        self.incarnation = 0  # from the metadata service at start (decision 0003)
        self.ownership = Ownership(
            options.node_id,
            options.config,
            SYSTEM_CLOCK,
            self.watcher,
            self.storage,
            groups_kind(self._new_groups, GroupCoordinator.on_partition_counts),
            incarnation=self.incarnation,
        )
        # Transactions (decision 0028): __transaction_state shards beside the group shards,
        # producer ids from the metadata service's blocks, markers to the partition leaders.
        self.producer_ids = ProducerIdAllocator(
            block_source(self.client, options.node_id, lambda: self.incarnation)
        )
        self.peers = PeerCoordinators(lambda: self.watcher.image)
        self.watcher.add_listener(self.peers.channels.on_image)
        self.markers = StorageMarkerChannel(self.storage, lambda: self.watcher.image, self.peers)
        self.transactions = Ownership(
            options.node_id,
            options.config,
            SYSTEM_CLOCK,
            self.watcher,
            self.storage.for_topic(TRANSACTION_STATE_TOPIC),
            transactions_kind(self._new_transactions),
            incarnation=self.incarnation,
        )
        self.compaction = OffsetsTopicCompaction(self.watcher, TopicConfigs(self.client).set)
        servicer = CoordinatorServicer(
            self.ownership, TransactionRpc(self.transactions), self.peers.verify_in_transaction
        )
        self.server = RpcServer(
            options.host, options.port, [(add_to_server, servicer, SERVICE_NAME)]
        )
        self.membership: MembershipSession | None = None
        settings = metrics_settings()
        self.lag = LagMonitor(
            self.ownership,
            lambda tps: high_watermarks(self.storage, self.watcher.image, tps),
            (settings.lag_interval_ms if settings else DEFAULT_LAG_INTERVAL_MS) / 1000,
        )

    def _new_groups(self, _notify: object) -> GroupCoordinator:
        return GroupCoordinator(self.options.config, SYSTEM_CLOCK, self._partition_count)

    def _new_transactions(
        self, notify: Callable[[Callable[[TransactionCoordinator], None]], None]
    ) -> TransactionCoordinator:
        return TransactionCoordinator(
            self.options.config, SYSTEM_CLOCK, self.markers, self.producer_ids.take_now, notify
        )

    def _partition_count(self, topic: str) -> int:
        info = self.watcher.image.topics.get(topic)
        return len(info.partitions) if info is not None else 0

    @property
    def address(self) -> str:
        return self.server.address

    async def start(self) -> None:
        startup_s = self.options.config.metadata_startup_timeout_ms / 1000
        await self.watcher.start(timeout_s=startup_s)
        await self.server.start()
        self.incarnation = await allocate_incarnation(self.client, KIND, self.options.node_id)
        self.ownership.incarnation = self.incarnation
        self.transactions.incarnation = self.incarnation
        await self.ownership.attach()
        await self.transactions.attach()
        self.compaction.start()
        node = NodeInfo(
            kind=KIND,
            node_id=self.options.node_id,
            host=self.options.advertised_host,
            port=self.server.port,
            incarnation=self.incarnation,
        )
        self.membership = MembershipSession(self.client, node)
        await self.membership.start()
        self.lag.start()
        log.info("coordinator %d serving on %s", self.options.node_id, self.address)

    @property
    def fenced(self) -> bool:
        return self.membership is not None and self.membership.fenced

    async def stop(self) -> None:
        await self.lag.stop()
        self.ownership.begin_stop()
        self.transactions.begin_stop()
        await self.compaction.stop()
        if self.membership is not None:
            with contextlib.suppress(RiverlogError):
                await self.membership.stop()
        await self.ownership.stop()
        await self.transactions.stop()
        await self.markers.close()
        await self.peers.close()
        await self.producer_ids.close()
        await self.server.stop(_STOP_GRACE_S)
        await self.watcher.stop()
        await self.storage.close()
        await self.client.close()


def main(argv: Sequence[str] | None = None) -> None:
    options, log_level = parse_args(argv)
    setup_logging(log_level, f"coordinator-{options.node_id}")
    run_node(KIND, options, CoordinatorProcess)
