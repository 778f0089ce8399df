"""The storage node process: command line → config → log manager → replica manager (fed by the
cluster image) → gRPC and zero-copy servers → membership, and the way back down on SIGTERM.

Replication hangs off the replica manager: the follower fetchers (per leader node one for its
user partitions and one for its internal ones, over the leaders' zero-copy channels) follow
every image, leaders send ISR changes to the controller through the AlterPartition sender and
check their followers' lag periodically, and the self-fence refuses writes once the node's
lease may have lapsed (see `fencing.py`). `StorageNode` is the
process object `common/node.py`'s `serve_process` serves (as every service's), with the wait for
a newer incarnation of the node id (the fencing wait) as its `serving` hook.

Start order matters: the logs are loaded and the first cluster image applied before the servers
answer (so a request never sees a half-known node), and the node registers only once it serves
(so the controller never names a leader that cannot be reached). Stop order is the reverse:
waiting fetches are released, the servers drain, the logs close cleanly (the clean-shutdown
marker spares the next start a recovery scan), and the registration is released last.

    python -m riverlog.services.storage --node-id N --host 127.0.0.1 --port P \
        --zero-copy-port Q [--direct-port D] [--direct-host H] --log-dirs DIR1[,DIR2] \
        --metadata A1[,A2,...] [--rack R] [--ready-file F] [--config key=value ...]

With `direct.access.secret.key.file` the node also opens its direct port (decision 0047): the
zero-copy server in grant mode, for clients holding a grant from a gateway, advertised as the
node's `direct_port`, bound on `--direct-host` (default `--host`), so an operator can put it
on a client-facing interface while the gRPC and zero-copy ports stay internal. It has
connection caps and timeouts (`max.connections`, `max.connections.per.ip`,
`direct.grant.timeout.ms`, `connections.max.idle.ms`, `direct.max.request.bytes`). Not under
internal TLS (plaintext, as the zero-copy channel).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from riverlog.common.clock import SYSTEM_CLOCK, Clock
from riverlog.common.cluster import (
    MembershipSession,
    MetadataClient,
    MetadataWatcher,
    NodeInfo,
    allocate_incarnation,
)
from riverlog.common.errors import RiverlogError
from riverlog.common.grants import load_key
from riverlog.common.node import parse_service_overrides, serve_process, until_stopped_or_fenced
from riverlog.common.quota.window import WindowConfig
from riverlog.common.rpc import tls
from riverlog.common.rpc.server import RpcServer
from riverlog.common.service import base_arg_parser, run, setup_logging
from riverlog.common.types import TopicPartition
from riverlog.v1 import storage_pb2_grpc

from .config import StorageConfig
from .fencing import SelfFence
from .grants import GrantLedger
from .log import LogConfig, LogManager
from .log.cleaner import CleanerConfig, LogCleaner
from .log.dir_failure import LogDirFailureChannel
from .metrics import register_replication_metrics
from .peers.controller import ControllerClient
from .peers.leader import LeaderClient, leader_channels
from .peers.txn_coordinator import TxnCoordinatorClient, coordinator_channels
from .prometheus import register_prometheus_metrics
from .remote.follow import TieringFollower, remote_log_manager_for
from .replica.alter_partition import AlterPartitionManager
from .replica.fetch import FetchHandler
from .replica.fetcher import FetcherSettings, ReplicaFetcherManager
from .replica.offsets import OffsetsHandler
from .replica.produce import ProduceHandler
from .replica.purgatory import Purgatory
from .replica.replica_manager import ReplicaManager
from .replica.throttle import FOLLOWER, LEADER, ReplicationQuota
from .rpc.servicer import SERVICE_NAME, StorageServicer
from .rpc.zerocopy import ZeroCopyServer
from .tasks import PeriodicTasks

log = logging.getLogger(__name__)


class StorageNode:
    """One storage node. Lifecycle: `await start()` (returns once registered and serving),
    `await stop()`. Everything runs on the event loop that called `start()`."""

    def __init__(self, config: StorageConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.clock = clock
        self.base_log_config = LogConfig.from_overrides(dict(config.log_defaults))
        self.purgatory: Purgatory[TopicPartition] = Purgatory()
        self.log_manager: LogManager | None = None
        self.replicas: ReplicaManager | None = None
        self.remote_log: TieringFollower | None = None
        self.metadata = MetadataClient(list(config.metadata_addresses))
        self.watcher = MetadataWatcher(self.metadata, watcher_id=config.node_id)
        self.membership: MembershipSession | None = None
        self.rpc: RpcServer | None = None
        self.zero_copy: ZeroCopyServer | None = None
        self.direct: ZeroCopyServer | None = None
        self.tasks = PeriodicTasks(clock)
        self.incarnation = 0  # from the metadata service at start (decision 0003)
        self.fence = SelfFence(lambda: self.watcher.image.version)
        self.alter_partition: AlterPartitionManager | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self.leader_channels = leader_channels()
        self.coordinator_channels = coordinator_channels()
        self.cleaner: LogCleaner | None = None
        self.offline_replicas: Callable[[], frozenset[TopicPartition]] = frozenset
        self.replica_sizes: Callable[[], dict[TopicPartition, int]] = dict

    @property
    def fenced(self) -> bool:
        return self.membership is not None and self.membership.fenced

    @property
    def address(self) -> str:
        if self.rpc is None:
            raise RuntimeError("the storage node is not serving")
        return self.rpc.address

    def ready_info(self) -> dict[str, object]:
        """What the ready file says besides the address: the zero-copy and direct ports and
        the node id."""
        return {
            "zero_copy_port": self.zero_copy.port if self.zero_copy is not None else 0,
            "direct_port": self.direct.port if self.direct is not None else 0,
            "node_id": self.config.node_id,
        }

    async def start(self) -> None:
        config = self.config
        for directory in config.log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
        self.incarnation = await allocate_incarnation(self.metadata, "storage", config.node_id)
        started = time.monotonic()
        log_manager = LogManager(list(config.log_dirs), self.clock, self.base_log_config)
        self.log_manager = log_manager
        log.info(
            "loaded %d logs from %s in %.1f s",
            len(list(log_manager.all_logs())),
            ",".join(map(str, config.log_dirs)),
            time.monotonic() - started,
        )
        alter: AlterPartitionManager | None = None
        replicas = ReplicaManager(
            config.node_id,
            log_manager,
            self.base_log_config,
            self.purgatory,
            clock=self.clock,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            producer_id_expiration_ms=config.producer_id_expiration_ms,
            alter_isr=lambda request: alter.submit(request) if alter else None,
            may_lead=self.fence.may_lead,
        )
        self.replicas = replicas
        # A failed write takes its log dir offline; with every dir offline the node halts.
        # With some, the replicas on them go to the controller in the next (immediate)
        # heartbeat, which moves their leaderships (decision 0022).
        failures = LogDirFailureChannel(config.log_dirs)
        failures.on_offline.append(log_manager.mark_offline)
        failures.on_offline.append(self._report_offline)
        replicas.on_storage_error = failures.storage_error
        self.offline_replicas = lambda: log_manager.partitions_in(failures.offline)
        self.replica_sizes = lambda: {log.tp: log.size_bytes for log in log_manager.all_logs()}
        controller = ControllerClient(self.metadata, config.node_id, lambda: self.incarnation)
        alter = AlterPartitionManager(controller, replicas.partitions.get)
        self.alter_partition = alter
        alter.start()
        zero_copy = config.replica_fetch_zero_copy_enable
        window = WindowConfig.from_kafka(
            config.replication_quota_window_num, config.replication_quota_window_size_seconds
        )
        leader_quota = ReplicationQuota(LEADER, config.node_id, self.clock, window)
        follower_quota = ReplicationQuota(FOLLOWER, config.node_id, self.clock, window)
        if config.remote_log.enabled:
            self.remote_log = remote_log_manager_for(config.remote_log, self.clock, replicas)
            replicas.remote_storage_system_enable = True
        self.fetchers = ReplicaFetcherManager(
            config.node_id,
            replicas,
            lambda node: LeaderClient(node, self.leader_channels, zero_copy=zero_copy),
            FetcherSettings(
                max_wait_ms=config.replica_fetch_wait_max_ms,
                min_bytes=config.replica_fetch_min_bytes,
                max_bytes=config.replica_fetch_max_bytes,
                response_max_bytes=config.replica_fetch_response_max_bytes,
                backoff_ms=config.replica_fetch_backoff_ms,
            ),
            is_offline=lambda tp: failures.is_offline(log_manager.log_dir_of(tp)),
            quota=follower_quota,
            remote_aux=self.remote_log.aux_state if self.remote_log is not None else None,
        )
        failures.on_offline.append(lambda _dir: self.fetchers.update() if self.fetchers else None)
        replicas.on_partitions_changed.append(self.fetchers.update)
        register_replication_metrics(replicas)
        self.watcher.add_listener(lambda _old, new: leader_quota.update(new))
        self.watcher.add_listener(lambda _old, new: follower_quota.update(new))
        self.watcher.add_listener(replicas.on_image)
        if self.remote_log is not None:
            self.watcher.add_listener(self.remote_log.on_image)
        self.watcher.add_listener(self.leader_channels.on_image)
        self.watcher.add_listener(self.coordinator_channels.on_image)
        await self.watcher.start(timeout_s=None)

        fetch = FetchHandler(
            replicas,
            self.purgatory,
            config.fetch_max_bytes,
            leader_quota,
            remote=self.remote_log.reader if self.remote_log is not None else None,
        )
        register_prometheus_metrics(
            replicas,
            fetch,
            self.remote_log,
            lambda: self.zero_copy.accepted if self.zero_copy is not None else 0,
            lambda: self.direct,
        )
        servicer = StorageServicer(
            config.node_id,
            ProduceHandler(
                replicas,
                self.purgatory,
                TxnCoordinatorClient(self.coordinator_channels, lambda: self.watcher.image)
                if config.transaction_partition_verification_enable
                else None,
            ),
            fetch,
            OffsetsHandler(
                replicas,
                config.log_dirs,
                remote=self.remote_log.reader if self.remote_log is not None else None,
            ),
        )
        add = storage_pb2_grpc.add_StorageServiceServicer_to_server
        self.rpc = RpcServer(config.host, config.port, [(add, servicer, SERVICE_NAME)])
        if tls.zero_copy_listener(config.zero_copy_port):  # off under internal TLS
            self.zero_copy = ZeroCopyServer(
                config.host,
                config.zero_copy_port,
                fetch,
                config.zero_copy_max_request_bytes,
                produce=servicer.start_produce,
            )
            await self.zero_copy.start()
        ledger = self._grant_ledger()
        if ledger is not None:
            self.direct = ZeroCopyServer(
                config.direct_host or config.host,
                config.direct_port,
                fetch,
                config.zero_copy_max_request_bytes,
                produce=servicer.start_produce,
                grants=ledger,
                limits=config.direct_limits,
            )
            await self.direct.start()
        await self.rpc.start()
        self._schedule(log_manager)
        self.cleaner = LogCleaner(
            log_manager,
            self.clock,
            CleanerConfig(
                enable=config.log_cleaner_enable,
                backoff_ms=config.log_cleaner_backoff_ms,
                dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
            ),
        )
        self.cleaner.start()

        node = NodeInfo(
            kind="storage",
            node_id=config.node_id,
            host=config.advertised_host or config.host,
            port=self.rpc.port,
            rack=config.rack,
            zero_copy_port=self.zero_copy.port if self.zero_copy is not None else 0,
            direct_port=self.direct.port if self.direct is not None else 0,
            incarnation=self.incarnation,
        )
        self.membership = MembershipSession(
            self.metadata,
            node,
            on_registered=self.fence.on_registered,
            offline_replicas=self.offline_replicas,
            replica_sizes=self.replica_sizes,
        )
        await self.membership.start()
        self.fence.attach(self.membership)
        log.info(
            "storage node %d serving on %s (zero-copy port %d)",
            config.node_id,
            self.rpc.address,
            self.zero_copy.port if self.zero_copy is not None else 0,
        )

    def _grant_ledger(self) -> GrantLedger | None:
        """The direct port's grant checks, when this node has a direct-access key and no
        internal TLS (decision 0047)."""
        path = self.config.direct_access_secret_key_file
        if not path:
            return None
        if tls.current().enabled:
            log.warning(
                "direct.access.secret.key.file is set, but under internal TLS the node"
                " opens no direct port (plaintext); clients use the gateways"
            )
            return None
        return GrantLedger(load_key(path), self.config.node_id, self.clock)

    def _report_offline(self, _log_dir: Path) -> None:
        """A log dir went offline: heartbeat now, carrying the replicas on it."""
        if self.membership is not None:
            self.membership.heartbeat_now()

    def _schedule(self, log_manager: LogManager) -> None:
        config = self.config
        self.tasks.add(
            "checkpoint", config.log_flush_offset_checkpoint_interval_ms, log_manager.checkpoint
        )
        self.tasks.add(
            "retention",
            config.log_retention_check_interval_ms,
            lambda: log_manager.run_retention(self.clock.time_ms()),
        )
        self.tasks.add(
            "isr-shrink",
            max(config.replica_lag_time_max_ms // 2, 1),
            lambda: self.replicas.maybe_shrink_isr() if self.replicas else 0,
        )
        self.tasks.add(
            "flush",
            config.log_flush_scheduler_interval_ms,
            lambda: log_manager.flush_dirty(self.clock.time_ms()),
        )
        self.tasks.start()

    async def stop(self) -> None:
        """Release waiting fetches, drain the servers, close the logs, unregister."""
        grace = self.config.controlled_shutdown_grace_ms / 1000.0
        self.purgatory.close()
        if self.rpc is not None:
            await self.rpc.stop(grace)
        if self.zero_copy is not None:
            await self.zero_copy.stop()
        if self.direct is not None:
            await self.direct.stop()
        await self.tasks.stop()
        if self.remote_log is not None:
            await self.remote_log.stop()
        if self.cleaner is not None:
            await self.cleaner.stop()
        await self.watcher.stop()
        if self.fetchers is not None:
            await self.fetchers.close()
        await self.leader_channels.close()
        await self.coordinator_channels.close()
        if self.alter_partition is not None:
            await self.alter_partition.stop()
        if self.replicas is not None:
            self.replicas.close()
        if self.log_manager is not None:
            self.log_manager.close()
            self.log_manager = None
        if self.membership is not None:
            await self.membership.stop()
        await self.metadata.close()


async def serve(config: StorageConfig, stop: asyncio.Event) -> None:
    node = StorageNode(config)

    async def until_fenced() -> None:
        if await until_stopped_or_fenced(node, stop):
            log.error("a newer incarnation of node %d took over; stopping", config.node_id)

    try:
        await serve_process(
            node,
            stop,
            label=f"storage node {config.node_id}",
            ready_file=config.ready_file,
            ready_info=node.ready_info,
            serving=until_fenced,
            interruptible_start=True,
        )
    finally:
        log.info("storage node %d stopped", config.node_id)


def build_parser() -> argparse.ArgumentParser:
    parser = base_arg_parser("storage")
    parser.add_argument("--node-id", type=int, required=True, help="this node's id (>= 0)")
    parser.add_argument(
        "--zero-copy-port", type=int, default=0, help="raw-socket fetch port (0: any free port)"
    )
    parser.add_argument(
        "--direct-port",
        type=int,
        default=0,
        help="direct data port for clients with grants, opened with"
        " direct.access.secret.key.file (0: any free port)",
    )
    parser.add_argument(
        "--direct-host",
        default="",
        help="address the direct port binds (e.g. a client-facing interface), when it differs"
        " from --host; clients reach it at the advertised host (default: --host)",
    )
    parser.add_argument("--log-dirs", required=True, help="comma-separated log directories")
    parser.add_argument("--rack", default="", help="this node's rack, for placement")
    return parser


def config_from_args(argv: Sequence[str] | None = None) -> tuple[StorageConfig, str]:
    """The config and the log level; exits with status 2 on a bad command line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = StorageConfig.from_settings(
            node_id=args.node_id,
            host=args.host,
            port=args.port,
            zero_copy_port=args.zero_copy_port,
            log_dirs=args.log_dirs,
            metadata=args.metadata,
            rack=args.rack,
            ready_file=args.ready_file,
            overrides=parse_service_overrides(args.config),
            advertised_host=args.advertised_host,
            direct_port=args.direct_port,
            direct_host=args.direct_host,
        )
        LogConfig.from_overrides(dict(config.log_defaults))
        tls.zero_copy_listener(args.zero_copy_port)
    except (RiverlogError, ValueError) as exc:
        parser.error(str(exc))
    return config, args.log_level


def main(argv: Sequence[str] | None = None) -> None:
    config, level = config_from_args(argv)
    setup_logging(level, f"storage-{config.node_id}")
    run(lambda stop: serve(config, stop), "storage")
    sys.exit(0)
