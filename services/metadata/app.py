"""Process wiring of a metadata instance: flags → config → etcd store → image → election,
topic controller and node registry → gRPC server, then serve until SIGTERM.

    python -m riverlog.services.metadata --instance-id N --host 127.0.0.1 --port P \\
        --etcd http://127.0.0.1:2379 [--ready-file F] [--config key=value ...]

etcd over TLS: https:// URLs and `--config metadata.etcd.ssl.ca.location=F` (plus
`metadata.etcd.ssl.certificate.location` / `.key.location` for etcd's --client-cert-auth).

The ready file (JSON: address, pid, instance_id, cluster_id) appears once the server is bound,
the image is loaded and the instance takes part in elections. `MetadataInstance` is the process
object `common/node.py`'s `serve_process` serves, as every service's; a metadata instance has no
node id or membership, so it serves until told to stop.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from riverlog.common.errors import RiverlogError
from riverlog.common.node import parse_service_overrides, serve_process
from riverlog.common.rpc.server import RpcServer
from riverlog.common.service import base_arg_parser, run, setup_logging
from riverlog.v1 import metadata_pb2_grpc

from .client_quotas import ClientQuotaBook
from .config import MetadataConfig
from .controller.acls import AclController
from .controller.balancer import ReplicaBalancer
from .controller.cluster import NodeRegistry
from .controller.coordinators import CoordinatorAssigner
from .controller.draining import DrainingController
from .controller.election import ControllerElection
from .controller.node_configs import NodeConfigController
from .controller.producer_ids import ProducerIdManager
from .controller.reassignments import ReassignmentController
from .controller.replica_sizes import ReplicaSizeBook, sizes_prefix
from .controller.replication import ReplicationController
from .controller.topics import TopicController, new_topic_id
from .image import MetadataImage
from .peers.controller import ControllerPeer
from .prometheus import register_prometheus_metrics
from .rpc.acls import AclsRpc
from .rpc.balancer import BalancerRpc
from .rpc.reassignments import ReassignmentsRpc
from .rpc.servicer import MetadataServicer
from .store import EtcdCredentials, EtcdStore

log = logging.getLogger("riverlog.services.metadata")

SERVICE_NAME = "riverlog.v1.MetadataService"


def arg_parser() -> argparse.ArgumentParser:
    parser = base_arg_parser("metadata")
    parser.add_argument("--instance-id", type=int, required=True, help="this instance's id")
    parser.add_argument(
        "--etcd",
        default="http://127.0.0.1:2379",
        help="comma-separated etcd client URLs (https:// with metadata.etcd.ssl.* settings)",
    )
    return parser


_ETCD_RETRY_S = 1.0


class MetadataInstance:
    """One metadata instance. Lifecycle: `await start()` (waits for etcd, loads the image,
    serves and takes part in elections; cancelled when told to stop while it waits), then
    `await stop()` (also after a failed or cancelled start: stops what had started, in the
    reverse order). Everything runs on the event loop that called `start()`."""

    def __init__(self, config: MetadataConfig, advertised_host: str | None = None) -> None:
        self.config = config
        self.advertised_host = advertised_host or config.host
        self.etcd_credentials = etcd_credentials(config)
        self.store = self._etcd_store(config.etcd_prefix)
        self.cluster_id = ""
        self.image: MetadataImage | None = None
        self.quota_store: EtcdStore | None = None
        self.sizes_store: EtcdStore | None = None
        self.client_quotas: ClientQuotaBook | None = None
        self.peer: ControllerPeer | None = None
        self.server: RpcServer | None = None
        self.election: ControllerElection | None = None
        self.assigner: CoordinatorAssigner | None = None
        self.replication: ReplicationController | None = None
        self.reassignments: ReassignmentController | None = None
        self.balancer: ReplicaBalancer | None = None
        self.draining: DrainingController | None = None

    def _etcd_store(self, prefix: str) -> EtcdStore:
        config = self.config
        timeout_s = config.etcd_timeout_ms / 1000
        return EtcdStore(config.etcd_endpoints, prefix, timeout_s, self.etcd_credentials)

    @property
    def address(self) -> str:
        if self.server is None:
            raise RuntimeError("the metadata instance is not serving")
        return self.server.address

    def ready_info(self) -> dict[str, object]:
        """What the ready file says besides the address."""
        return {"instance_id": self.config.instance_id, "cluster_id": self.cluster_id}

    async def _until_etcd(self) -> str:
        """The cluster id, waiting for etcd to answer."""
        while True:
            try:
                return await self.store.ensure_cluster_id(new_topic_id())
            except Exception as exc:
                log.warning("etcd not reachable yet (%s); retrying", exc)
            await asyncio.sleep(_ETCD_RETRY_S)

    async def start(self) -> None:
        config = self.config
        self.cluster_id = await self._until_etcd()
        image = self.image = MetadataImage(self.store)
        await image.start()
        self.quota_store = self._etcd_store(config.etcd_prefix + "client/")
        self.client_quotas = ClientQuotaBook(self.quota_store)
        await self.client_quotas.start()
        election = ControllerElection(self.store, image, config)
        topics = TopicController(election, image, config)
        self.sizes_store = self._etcd_store(sizes_prefix(config.etcd_prefix))
        sizes = ReplicaSizeBook(self.sizes_store)
        registry = NodeRegistry(self.store, config, self.cluster_id, sizes)
        self.peer = ControllerPeer(config.forward_timeout_ms / 1000)
        replication = ReplicationController(election, image, config)
        producer_ids = ProducerIdManager(election, image)
        reassignments = ReassignmentController(replication, image)
        node_configs = NodeConfigController(election, image)
        balancer = ReplicaBalancer(
            replication, reassignments, topics, image, config, sizes, node_configs
        )
        servicer = MetadataServicer(
            image, election, topics, registry, self.peer, replication, producer_ids
        )
        self.server = RpcServer(
            config.host,
            config.port,
            [(metadata_pb2_grpc.add_MetadataServiceServicer_to_server, servicer, SERVICE_NAME)],
        )
        servicer.client_quotas = self.client_quotas
        servicer.reassignments = ReassignmentsRpc(reassignments)
        servicer.node_configs = node_configs
        servicer.balancer = BalancerRpc(balancer)
        draining = servicer.draining = DrainingController(election, image)
        servicer.acls = AclsRpc(
            AclController(election, self.client_quotas), self.client_quotas.acls
        )
        await self.server.start()
        self.election = election
        await election.start(self.advertised_host, self.server.port)
        self.assigner = CoordinatorAssigner(election, image, topics, config)
        self.assigner.start()
        self.replication = replication
        replication.start()
        register_prometheus_metrics(config.instance_id, election, image, replication)
        self.reassignments = reassignments
        reassignments.start()
        self.balancer = balancer
        balancer.start()
        self.draining = draining
        draining.start()
        log.info(
            "metadata instance %d serving on %s (cluster %s)",
            config.instance_id,
            self.server.address,
            self.cluster_id,
        )

    async def stop(self) -> None:
        if self.assigner is not None:
            await self.assigner.stop()
        if self.balancer is not None:
            await self.balancer.stop()
        if self.draining is not None:
            await self.draining.stop()
        if self.reassignments is not None:
            await self.reassignments.stop()
        if self.replication is not None:
            await self.replication.stop()
        if self.election is not None:
            await self.election.stop()
        if self.server is not None:
            await self.server.stop(grace=1.0)
        if self.peer is not None:
            await self.peer.close()
        if self.image is not None:
            await self.image.stop()
        if self.client_quotas is not None:
            await self.client_quotas.stop()
        if self.quota_store is not None:
            self.quota_store.close()
        if self.sizes_store is not None:
            self.sizes_store.close()
        self.store.close()


def etcd_credentials(config: MetadataConfig) -> EtcdCredentials | None:
    """etcd's client TLS (https:// endpoints: `metadata.etcd.ssl.*`), None for http://; reads
    the PEM files (RiverlogError(INVALID_CONFIG) naming an unreadable one)."""
    if not config.etcd_tls:
        return None
    return EtcdCredentials(
        config.etcd_ssl_ca_location,
        config.etcd_ssl_key_location or None,
        config.etcd_ssl_certificate_location or None,
    )


async def serve(
    config: MetadataConfig,
    ready_file: str | None,
    stop: asyncio.Event,
    advertised_host: str | None = None,
) -> None:
    instance = MetadataInstance(config, advertised_host)
    await serve_process(
        instance,
        stop,
        label=f"metadata instance {config.instance_id}",
        ready_file=ready_file,
        ready_info=instance.ready_info,
        interruptible_start=True,
    )


def main(argv: list[str] | None = None) -> None:
    args = arg_parser().parse_args(argv)
    setup_logging(args.log_level, f"metadata-{args.instance_id}")
    try:
        config = MetadataConfig.from_args(
            args.instance_id, args.host, args.port, args.etcd, parse_service_overrides(args.config)
        )
        etcd_credentials(config)  # an unreadable TLS file stops the process here, not later
    except (ValueError, RiverlogError) as exc:
        print(f"metadata: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    log.info("config: %s", config.describe())
    run(lambda stop: serve(config, args.ready_file, stop, args.advertised_host), "metadata")
