"""The metadata instance's metrics for Prometheus (decision 0033): the active controller count
(1 on the controller, 0 elsewhere, so the sum over instances is 1 in a healthy cluster),
offline partitions (served by the controller only, as Kafka's controller does) and the leader
elections this instance wrote (Kafka's KafkaController and ControllerStats metrics). Read on
the event loop at scrape time."""

from __future__ import annotations

import asyncio

from prometheus_client.core import Metric

from riverlog.common.metrics import endpoint
from riverlog.common.metrics.endpoint import LoopCollector, family

from .controller.election import ControllerElection
from .controller.replication import ReplicationController
from .image import MetadataImage

NAMES = (
    "riverlog_controller_active",
    "riverlog_offline_partitions",
    "riverlog_leader_elections",
)


def snapshot(
    instance_id: int,
    election: ControllerElection,
    image: MetadataImage,
    replication: ReplicationController,
) -> list[Metric]:
    active, offline, elections = (family(n) for n in NAMES)
    instance = str(instance_id)
    is_controller = election.is_controller
    active.add_metric([instance], 1 if is_controller else 0)
    if is_controller:
        offline.add_metric(
            [],
            sum(1 for t in image.cluster.topics.values() for p in t.partitions if p.leader < 0),
        )
    elections.add_metric([instance], replication.leader_elections)
    return [active, offline, elections]


def register_prometheus_metrics(
    instance_id: int,
    election: ControllerElection,
    image: MetadataImage,
    replication: ReplicationController,
) -> None:
    """Serve the families on `/metrics` (no-op when this process serves none)."""
    if not endpoint.enabled():
        return
    loop = asyncio.get_running_loop()
    endpoint.register(
        "metadata",
        LoopCollector(loop, NAMES, lambda: snapshot(instance_id, election, image, replication)),
    )
