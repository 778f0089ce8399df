"""SDK group members across a coordinator failover, on a cluster of their own (two coordinator
instances, `__consumer_offsets` replicated on three storage nodes): the instance that owns the
group is killed with SIGKILL while two members consume; the other instance takes the group
over, the members keep consuming without an error reaching the application, every record is
read, and the committed offsets end where the members stopped."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from group_support import create_topic

from riverlog.client import AdminClient, Consumer, Producer
from riverlog.cluster import LocalCluster
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import coordinator_pb2, gateway_pb2_grpc

pytestmark = pytest.mark.integration

WAIT_S = 90.0


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("groups-failover"),
        storage_nodes=3,
        metadata_nodes=1,
        gateways=1,
        coordinators=2,
        extra_config={
            "metadata": {"offsets.topic.num.partitions": "6"},
            "coordinator": {
                "group.min.session.timeout.ms": "500",
                "group.initial.rebalance.delay.ms": "0",
            },
        },
    ) as local:
        yield local


def coordinator_of(bootstrap: str, group: str) -> int:
    channel = sync_channel(bootstrap)
    try:
        stub = gateway_pb2_grpc.GatewayStub(channel)  # type: ignore[no-untyped-call]
        response = stub.FindCoordinator(coordinator_pb2.FindCoordinatorRequest(keys=[group]))
        return int(response.coordinators[0].node_id)
    finally:
        channel.close()


def test_members_keep_consuming_across_a_coordinator_kill(cluster: LocalCluster) -> None:
    bootstrap = cluster.gateway_address
    topic = create_topic(bootstrap, "failover", 4)
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for i in range(400):
            p.send(topic, b"v%d" % i, partition=i % 4)
    group = f"{topic}-g"
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10_000,
        "heartbeat.interval.ms": 500,
        "auto.commit.interval.ms": 200,
        "max.poll.records": 5,
    }
    # Both members are polled from this one thread: a poll() returns on time while its
    # member's JoinGroup waits for the other to rejoin, as with Kafka's consumer.
    members = [Consumer(conf), Consumer(conf)]
    read: set[tuple[int, int]] = set()
    killed = False
    try:
        for m in members:
            m.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while len(read) < 400:
            assert time.monotonic() < deadline, f"read {len(read)} of 400"
            for m in members:
                for records in m.poll(timeout_ms=50).values():
                    read.update((r.partition, r.offset) for r in records)
                time.sleep(0.01)
            if not killed and len(read) >= 80 and all(m.assignment() for m in members):
                owner = coordinator_of(bootstrap, group)
                cluster.coordinator(owner).kill()
                killed = True
        assert killed
        for m in members:
            m.commit_sync()
    finally:
        for m in members:
            m.close()
    assert coordinator_of(bootstrap, group) != owner  # the other instance owns it now
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        committed = admin.list_group_offsets(group)
    assert {tp.partition: om.offset for tp, om in committed.items()} == dict.fromkeys(range(4), 100)
