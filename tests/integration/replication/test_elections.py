"""Leader elections by the controller on a real cluster (etcd, two metadata instances, three
storage nodes, one gateway; short leases): kill -9 of a storage node moves every leadership it
held in one change per partition, a partition whose replicas all died goes offline and comes
back with its in-sync replica (or, with unclean.leader.election.enable, with the first live
one), `riverlog leaders elect --preferred` moves leadership back, and a controller killed
while a storage node dies is replaced by one that elects for it.

Leadership and metadata only: the data path of replication is the storage tests' concern.
Every test restarts what it killed; every wait is bounded; processes are stopped by PID by the
launcher.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import grpc
import pytest

from riverlog.cli.main import main as cli_main
from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import admin_pb2, common_pb2, gateway_pb2_grpc

pytestmark = [pytest.mark.integration, pytest.mark.slow]

T = TypeVar("T")
SESSION_MS = 3_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("elections"),
        storage_nodes=3,
        metadata_nodes=2,
        gateways=1,
        extra_config={
            "metadata": {
                "broker.session.timeout.ms": str(SESSION_MS),
                "broker.heartbeat.interval.ms": "500",
                "metadata.controller.lease.ms": "3000",
                "auto.leader.rebalance.enable": "false",
            },
            "storage": {
                "replica.lag.time.max.ms": "3000",
                "replica.fetch.wait.max.ms": "200",
            },
        },
    ) as local:
        yield local


def wait_until(predicate: Callable[[], T | None], timeout_s: float = 60.0, what: str = "") -> T:
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
            last = value
        except grpc.RpcError as exc:
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last})")


def partitions(cluster: LocalCluster, topic: str) -> list[common_pb2.PartitionState]:
    with sync_channel(cluster.gateway_address) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)  # type: ignore[no-untyped-call]
        response = stub.DescribeTopics(admin_pb2.DescribeTopicsRequest(names=[topic]), timeout=5)
    return sorted(response.topics[0].metadata.partitions, key=lambda p: p.partition)


def live_storage(cluster: LocalCluster) -> set[int]:
    nodes = cluster.describe_cluster().nodes
    return {n.node_id for n in nodes if n.kind == common_pb2.NODE_KIND_STORAGE}


def restart_all(cluster: LocalCluster) -> None:
    for proc in cluster.by_role("storage") + cluster.by_role("metadata"):
        if not proc.alive:
            proc.restart(timeout=60)
    wait_until(lambda: live_storage(cluster) == {1, 2, 3}, what="every storage node live")


def test_kill9_of_a_storage_node_moves_its_leaderships_in_one_change(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
):
    topic = unique_topic_name("kill-leader")
    cluster.create_topic(topic, partitions=6, replication_factor=3)
    wait_until(lambda: all(len(p.isr) == 3 for p in partitions(cluster, topic)), what="full ISRs")
    before = partitions(cluster, topic)
    victim = before[0].leader
    try:
        cluster.storage(victim).kill()
        after = wait_until(
            lambda: (
                (ps := partitions(cluster, topic))
                and all(victim not in p.isr and p.leader != victim for p in ps)
                and ps
            ),
            what=f"node {victim} out of every ISR and leadership",
        )
        for old, new in zip(before, after, strict=True):
            # One change per partition: no intermediate state was written.
            assert new.partition_epoch == old.partition_epoch + 1, (old, new)
            if old.leader == victim:
                assert new.leader == next(r for r in old.replicas if r in new.isr)
                assert new.leader_epoch == old.leader_epoch + 1
            else:
                assert (new.leader, new.leader_epoch) == (old.leader, old.leader_epoch)
        assert cluster.describe_cluster().under_replicated_partitions >= len(after)
        capsys.readouterr()
        describe = ["topics", "describe", topic, "--bootstrap", cluster.gateway_address]
        assert cli_main([*describe, "--under-replicated-partitions"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert len(lines) == len(after)
        assert all(line.endswith("UnderReplicated") and "LeaderEpoch: " in line for line in lines)
        assert cli_main([*describe, "--unavailable-partitions"]) == 0
        assert capsys.readouterr().out.strip() == ""
    finally:
        restart_all(cluster)


def test_offline_without_unclean_then_back_with_its_in_sync_replica(cluster: LocalCluster):
    topic = unique_topic_name("offline")
    cluster.create_topic(topic, partitions=1, replication_factor=2)
    [p] = wait_until(
        lambda: (ps := partitions(cluster, topic)) and len(ps[0].isr) == 2 and ps,
        what="a full ISR",
    )
    leader, follower = p.leader, next(r for r in p.replicas if r != p.leader)
    try:
        cluster.storage(follower).kill()
        wait_until(lambda: list(partitions(cluster, topic)[0].isr) == [leader], what="shrink")
        cluster.storage(leader).kill()
        [off] = wait_until(
            lambda: (ps := partitions(cluster, topic)) and ps[0].leader == -1 and ps,
            what="offline",
        )
        assert list(off.isr) == [leader]
        status = cluster.describe_cluster()
        assert status.offline_partitions >= 1
        cluster.storage(follower).restart(timeout=60)
        wait_until(lambda: follower in live_storage(cluster), what="the follower back")
        # The out-of-sync replica does not lead: a reconcile after its return changes nothing.
        assert partitions(cluster, topic)[0].leader == -1
        cluster.storage(leader).restart(timeout=60)
        [back] = wait_until(
            lambda: (ps := partitions(cluster, topic)) and ps[0].leader == leader and ps,
            what="the in-sync replica leading again",
        )
        assert back.leader_epoch == off.leader_epoch + 1
    finally:
        restart_all(cluster)


def test_unclean_election_lets_the_first_live_replica_lead(cluster: LocalCluster):
    topic = unique_topic_name("unclean")
    cluster.create_topic(
        topic,
        partitions=1,
        replication_factor=2,
        configs={"unclean.leader.election.enable": "true"},
    )
    [p] = wait_until(
        lambda: (ps := partitions(cluster, topic)) and len(ps[0].isr) == 2 and ps,
        what="a full ISR",
    )
    leader, follower = p.leader, next(r for r in p.replicas if r != p.leader)
    try:
        cluster.storage(follower).kill()
        wait_until(lambda: list(partitions(cluster, topic)[0].isr) == [leader], what="shrink")
        cluster.storage(leader).kill()
        wait_until(lambda: partitions(cluster, topic)[0].leader == -1, what="offline")
        cluster.storage(follower).restart(timeout=60)
        [now] = wait_until(
            lambda: (ps := partitions(cluster, topic)) and ps[0].leader == follower and ps,
            what="the out-of-sync replica leading",
        )
        assert list(now.isr) == [follower]
    finally:
        restart_all(cluster)


def test_preferred_election_moves_leadership_back(cluster: LocalCluster, capsys):
    topic = unique_topic_name("preferred")
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    wait_until(lambda: all(len(p.isr) == 3 for p in partitions(cluster, topic)), what="full ISRs")
    first = partitions(cluster, topic)[0]
    preferred = first.replicas[0]
    try:
        cluster.storage(preferred).kill()
        wait_until(lambda: partitions(cluster, topic)[0].leader != preferred, what="failover")
        cluster.storage(preferred).restart(timeout=60)
        # Back in every ISR once its fetcher caught up (the leader's AlterPartition).
        wait_until(
            lambda: all(preferred in p.isr for p in partitions(cluster, topic)),
            timeout_s=90,
            what=f"node {preferred} back in the ISRs",
        )
        moved = partitions(cluster, topic)[0]
        assert moved.leader != preferred
        status = cli_main(
            ["leaders", "elect", "--preferred", "--topic", topic, "--bootstrap",
             cluster.gateway_address]
        )  # fmt: skip
        out = capsys.readouterr().out
        assert status == 0, out
        assert f"{topic}-0" in out
        now = partitions(cluster, topic)
        assert all(p.leader == p.replicas[0] for p in now)
        assert now[0].leader_epoch == moved.leader_epoch + 1
    finally:
        restart_all(cluster)


def test_new_controller_elects_for_a_node_that_died_with_the_old_one(cluster: LocalCluster):
    topic = unique_topic_name("controller-kill")
    cluster.create_topic(topic, partitions=6, replication_factor=2)
    before = partitions(cluster, topic)
    view = cluster.describe_cluster()
    old_controller, epoch = view.controller_id, view.controller_epoch
    victim = before[0].leader
    try:
        cluster.metadata(old_controller).kill()
        cluster.storage(victim).kill()
        after = wait_until(
            lambda: (
                (ps := partitions(cluster, topic))
                and all(p.leader != victim and victim not in p.isr for p in ps)
                and ps
            ),
            timeout_s=90,
            what="elections by the new controller",
        )
        view = cluster.describe_cluster()
        assert view.controller_id != old_controller and view.controller_epoch > epoch
        for old, new in zip(before, after, strict=True):
            if old.leader == victim:
                assert new.leader_epoch == old.leader_epoch + 1
                assert new.leader in old.replicas
    finally:
        restart_all(cluster)
