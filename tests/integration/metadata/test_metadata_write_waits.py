"""A controller write waits for its own etcd watch to show it, and never for a revision the
watch cannot deliver: etcd's current revision may be a write under another prefix (the replica
sizes, another cluster sharing etcd), and a transaction that changes nothing (create_topic's
clearing of leftover partitions) reports that revision. Real etcd, in process and with two
metadata processes; a wait that gives up is counted and logged, and must never happen."""

from __future__ import annotations

import asyncio
import time
import uuid

import etcd3
import pytest
from metadata_procs import MetadataCluster, run
from test_metadata_topics import non_controller, topic, with_storage_nodes

from riverlog.common.cluster import MetadataClient
from riverlog.services.metadata.config import MetadataConfig
from riverlog.services.metadata.controller.election import ControllerElection
from riverlog.services.metadata.image import MetadataImage
from riverlog.services.metadata.store import EtcdStore, Op
from riverlog.v1 import admin_pb2

pytestmark = pytest.mark.integration

GAVE_UP = "the image waited"


def _write_elsewhere(etcd) -> None:
    """Advance etcd's revision with a key no watch of the cluster's prefix sees."""
    raw = etcd3.client(host="127.0.0.1", port=etcd.client_port)
    try:
        raw.put(f"/elsewhere-{uuid.uuid4().hex[:8]}/noise", b"x")
    finally:
        raw.close()


async def _until(predicate, timeout_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def _until_listed(client: MetadataClient, names: list[str]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20.0
    while not set(names) <= set((await client.list_topics()).names):
        assert loop.time() < deadline, f"{client.current_address} never listed {names}"
        await asyncio.sleep(0.05)


@pytest.mark.timeout(120)
def test_a_write_that_changes_nothing_has_nothing_to_wait_for(etcd):
    prefix = f"/rl-{uuid.uuid4().hex[:10]}/"

    async def scenario() -> None:
        config = MetadataConfig.from_args(
            5, "127.0.0.1", 1005, etcd.endpoint, {"metadata.etcd.prefix": prefix}
        )
        store = EtcdStore(config.etcd_endpoints, prefix)
        image = MetadataImage(store)
        await image.start()
        election = ControllerElection(store, image, config)
        await election.start("127.0.0.1", 1005)
        try:
            await _until(lambda: election.is_controller)
            for i in range(3):
                _write_elsewhere(etcd)
                # Deletes of absent keys: etcd keeps its revision, the other prefix's.
                nothing = await election.write([], [Op(f"{prefix}partitions/t{i}/", prefix=True)])
                assert nothing == 0
                _write_elsewhere(etcd)
                revision = await election.write([], [Op(f"{prefix}probe", str(i).encode())])
                assert revision is not None and image.cluster.version >= revision
            assert image.wait_timeouts == 0
        finally:
            await election.stop()
            await image.stop()
            store.close()

    run(scenario())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_creates_on_both_instances_never_wait_out_the_watch(cluster_factory, etcd):
    # A forward timeout far above what a create takes, yet below the image's 10 s wait: a
    # create stalled on the watch fails forwarded with DEADLINE_EXCEEDED; a stall of a local
    # create shows in the log line of the wait that gave up (and in the latency printed).
    cluster: MetadataCluster = cluster_factory(2, {"metadata.forward.timeout.ms": "5000"})
    standby = non_controller(cluster)
    addresses = [standby, *(a for a in cluster.addresses if a != standby)]
    names = [f"waits-{i}" for i in range(8)]
    latencies: list[float] = []

    async def body(_: MetadataClient) -> None:
        clients = [MetadataClient([a], timeout_s=120) for a in addresses]
        try:
            for i, name in enumerate(names):
                _write_elsewhere(etcd)
                client = clients[i % 2]  # alternately forwarded and local
                request = admin_pb2.CreateTopicsRequest(topics=[topic(name)])
                started = time.monotonic()
                response = await client.stub_for(client.current_address).CreateTopics(
                    request, timeout=120
                )
                latencies.append(time.monotonic() - started)
                assert [t.error_code for t in response.topics] == [0], response
            for client in clients:  # every instance's image shows every topic
                await _until_listed(client, names)
        finally:
            for client in clients:
                await client.close()

    run(with_storage_nodes(1, cluster.addresses, body))
    print(f"create latencies: max {max(latencies):.3f} s over {len(latencies)}")
    logs = {i: p.log() for i, p in cluster.instances.items()}
    assert not any(GAVE_UP in log for log in logs.values()), logs
