"""Process wiring of a metadata instance: flags → config → etcd store → image → election,
topic controller and node registry → gRPC server, then serve until SIGTERM.

    python -m riverlog.services.metadata --instance-id N --host 127.0.0.1 --port P \\
        --etcd http://127.0.0.1:2379 [--ready-file F] [--config key=value ...]

The ready file (JSON: address, pid, instance_id, cluster_id) appears once the server is bound,
the image is loaded and the instance takes part in elections.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys

from riverlog.common.rpc.server import RpcServer
from riverlog.common.service import (
    base_arg_parser,
    parse_overrides,
    run,
    setup_logging,
    write_ready_file,
)
from riverlog.v1 import metadata_pb2_grpc

from .client_quotas import ClientQuotaBook
from .config import MetadataConfig
from .controller.cluster import NodeRegistry
from .controller.coordinators import CoordinatorAssigner
from .controller.election import ControllerElection
from .controller.producer_ids import ProducerIdManager
from .controller.replication import ReplicationController
from .controller.topics import TopicController, new_topic_id
from .image import MetadataImage
from .peers.controller import ControllerPeer
from .rpc.servicer import MetadataServicer
from .store import EtcdStore

log = logging.getLogger("riverlog.services.metadata")

SERVICE_NAME = "riverlog.v1.MetadataService"


def arg_parser() -> argparse.ArgumentParser:
    parser = base_arg_parser("metadata")
    parser.add_argument("--instance-id", type=int, required=True, help="this instance's id")
    parser.add_argument(
        "--etcd",
        default="http://127.0.0.1:2379",
        help="comma-separated etcd client URLs",
    )
    return parser


async def _until_etcd(store: EtcdStore, stop: asyncio.Event) -> str | None:
    """The cluster id, waiting for etcd to answer; None if told to stop first."""
    while not stop.is_set():
        try:
            return await store.ensure_cluster_id(new_topic_id())
        except Exception as exc:
            log.warning("etcd not reachable yet (%s); retrying", exc)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await stop.wait()
    return None


async def serve(
    config: MetadataConfig,
    ready_file: str | None,
    stop: asyncio.Event,
    advertised_host: str | None = None,
) -> None:
    store = EtcdStore(config.etcd_endpoints, config.etcd_prefix, config.etcd_timeout_ms / 1000)
    cluster_id = await _until_etcd(store, stop)
    if cluster_id is None:
        store.close()
        return
    image = MetadataImage(store)
    await image.start()
    quota_store = EtcdStore(
        config.etcd_endpoints, config.etcd_prefix + "client/", config.etcd_timeout_ms / 1000
    )
    client_quotas = ClientQuotaBook(quota_store)
    await client_quotas.start()
    election = ControllerElection(store, image, config)
    topics = TopicController(election, image, config)
    registry = NodeRegistry(store, config, cluster_id)
    peer = ControllerPeer(config.forward_timeout_ms / 1000)
    replication = ReplicationController(election, image, config)
    producer_ids = ProducerIdManager(election, image)
    servicer = MetadataServicer(image, election, topics, registry, peer, replication, producer_ids)
    server = RpcServer(
        config.host,
        config.port,
        [(metadata_pb2_grpc.add_MetadataServiceServicer_to_server, servicer, SERVICE_NAME)],
    )
    servicer.client_quotas = client_quotas
    await server.start()
    await election.start(advertised_host or config.host, server.port)
    assigner = CoordinatorAssigner(election, image, topics, config)
    assigner.start()
    replication.start()
    log.info(
        "metadata instance %d serving on %s (cluster %s)",
        config.instance_id,
        server.address,
        cluster_id,
    )
    write_ready_file(
        ready_file,
        {
            "address": server.address,
            "instance_id": config.instance_id,
            "cluster_id": cluster_id,
        },
    )
    try:
        await stop.wait()
    finally:
        log.info("metadata instance %d stopping", config.instance_id)
        await assigner.stop()
        await replication.stop()
        await election.stop()
        await server.stop(grace=1.0)
        await peer.close()
        await image.stop()
        await client_quotas.stop()
        quota_store.close()
        store.close()


def main(argv: list[str] | None = None) -> None:
    args = arg_parser().parse_args(argv)
    setup_logging(args.log_level, f"metadata-{args.instance_id}")
    try:
        config = MetadataConfig.from_args(
            args.instance_id, args.host, args.port, args.etcd, parse_overrides(args.config)
        )
    except ValueError as exc:
        print(f"metadata: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    log.info("config: %s", config.describe())
    run(lambda stop: serve(config, args.ready_file, stop, args.advertised_host), "metadata")
