"""Incarnations from etcd (decision 0003) and replicas on offline log dirs (decision 0022), on
real metadata processes and a real etcd with stand-in storage nodes: allocated incarnations
grow and outrank a live registration's (even a wall-clock one from before), and a node's
heartbeat reporting a replica offline moves that partition's leadership and ISR seat, keeps
it from leading or rejoining the ISR until the node restarts, and leaves its other partitions
alone."""

from __future__ import annotations

import pytest
from metadata_procs import run, until
from test_metadata_leadership import SHORT, Harness, live_ids, poll, storage

from riverlog.common.cluster import (
    MembershipSession,
    MetadataClient,
    MetadataWatcher,
    allocate_incarnation,
)
from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.v1 import common_pb2, metadata_pb2

pytestmark = pytest.mark.integration

CLOCK_INCARNATION = 1_764_000_000_000_000_000  # time.time_ns() in 2025: what nodes sent before


def test_allocated_incarnations_grow_and_outrank_the_live_registration(cluster_factory):
    cluster = cluster_factory(2, SHORT)

    async def scenario() -> None:
        client = MetadataClient(cluster.addresses)
        watcher = MetadataWatcher(MetadataClient(cluster.addresses))
        await watcher.start()
        old = MembershipSession(client, storage(4, CLOCK_INCARNATION))
        new = None
        try:
            first = await allocate_incarnation(client, "storage", 4)
            second = await allocate_incarnation(client, "storage", 4)
            gateway = await allocate_incarnation(client, "gateway", 4)
            assert 0 < first < second < gateway
            await old.start()
            await watcher.wait_for(lambda i: i.storage_node(4) is not None, 20)
            # A process restarted while its predecessor's (clock-based) registration is live
            # still gets an incarnation above it, so it takes over instead of being refused.
            third = await allocate_incarnation(client, "storage", 4)
            assert third > CLOCK_INCARNATION
            new = MembershipSession(client, storage(4, third))
            await new.start()
            await watcher.wait_for(lambda i: i.storage_node(4).incarnation == third, 20)
            await until(lambda: old.fenced, 20, "the old session fenced")
        finally:
            await old.stop()
            if new is not None:
                await new.stop()
            await watcher.stop()
            await watcher.client.close()
            await client.close()

    run(scenario())


def alter(h: Harness, sender: int, state, new_isr: list[int]):
    request = metadata_pb2.AlterPartitionRequest(
        node_id=sender,
        node_incarnation=1,
        partitions=[
            metadata_pb2.AlterPartitionItem(
                topic="t",
                partition=state.partition,
                leader_epoch=state.leader_epoch,
                new_isr=new_isr,
                partition_epoch=state.partition_epoch,
            )
        ],
    )
    return h.client.call("AlterPartition", request)


def test_offline_replica_loses_leadership_and_isr_seat_until_its_node_restarts(cluster_factory):
    cluster = cluster_factory(1, SHORT)

    async def body(h: Harness) -> None:
        offline: set[TopicPartition] = set()
        one = MembershipSession(h.client, storage(1), offline_replicas=lambda: frozenset(offline))
        await one.start()
        h.sessions[1] = one
        for node in (2, 3):
            await h.join(node)
        await poll(h.client.describe_cluster, lambda r: live_ids(r) == {1, 2, 3})
        await h.create("t", 6, 3)
        before = await h.partitions("t")
        led = [p for p in before if p.leader == 1]
        assert len(led) >= 2, [(p.partition, p.leader) for p in before]
        failed, healthy = led[0], led[1:]
        offline.add(TopicPartition("t", failed.partition))
        one.heartbeat_now()
        after = await h.wait_partitions("t", lambda ps: ps[failed.partition].leader != 1)
        moved = after[failed.partition]
        assert 1 not in moved.isr and moved.leader in (2, 3)
        assert moved.leader_epoch == failed.leader_epoch + 1
        assert moved.partition_epoch == failed.partition_epoch + 1
        for p in healthy:
            assert after[p.partition] == p  # led by node 1 still, nothing bumped
        nodes = (await h.client.describe_cluster()).nodes
        [reported] = [n for n in nodes if n.node_id == 1 and n.kind == common_pb2.NODE_KIND_STORAGE]
        assert [(tp.topic, tp.partition) for tp in reported.offline_replicas] == [
            ("t", failed.partition)
        ]
        # Not let back into the ISR, not elected preferred leader.
        result = await alter(h, moved.leader, moved, [*moved.isr, 1])
        assert result.partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA
        response = await h.elect(True, ("t", failed.partition))
        assert response.partitions[0].error_code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        # A restart (new incarnation, a fresh registration) clears the report: the leader may
        # take the replica back into the ISR once it caught up, and it may lead again.
        await h.leave(1, crash=True)
        offline.clear()
        await h.join(1, incarnation=2)
        [now] = [p for p in await h.partitions("t") if p.partition == failed.partition]
        result = await alter(h, now.leader, now, [*now.isr, 1])
        assert result.partitions[0].error_code == 0, result.partitions[0].error_message
        response = await h.elect(True, ("t", failed.partition))
        assert response.partitions[0].error_code == 0
        assert response.partitions[0].leader == 1

    async def go() -> None:
        harness = Harness(cluster.addresses)
        try:
            await body(harness)
        finally:
            await harness.close()

    run(go())
