"""Leadership and ISR on real metadata processes and a real etcd, with registered stand-in
storage nodes (no storage processes: the controller only sees registrations): a node that
leaves loses every leadership and ISR seat in one change, AlterPartition is guarded by the
leader and partition epochs, offline partitions come back with their replica, unclean and
preferred elections, producer id blocks, and a new controller finishing the work of a killed
one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from metadata_procs import run, wait_until

from riverlog.common.cluster import MembershipSession, MetadataClient, NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import admin_pb2, common_pb2, metadata_pb2

pytestmark = pytest.mark.integration

# Nodes leave by unregistering (their key goes at once), so sessions can be long enough that a
# loaded machine never lets a heartbeat lapse by accident.
SHORT = {
    "broker.session.timeout.ms": "10000",
    "metadata.controller.lease.ms": "3000",
    "auto.leader.rebalance.enable": "false",
}


def storage(node_id: int, incarnation: int = 1) -> NodeInfo:
    return NodeInfo("storage", node_id, "127.0.0.1", 19100 + node_id, "", 0, incarnation)


async def poll(call: Callable[[], Awaitable[Any]], predicate, timeout_s: float = 30.0) -> Any:
    """Await `call()` until `predicate(result)`; bounded."""
    async with asyncio.timeout(timeout_s):
        while True:
            try:
                result = await call()
                if predicate(result):
                    return result
            except RiverlogError:
                pass
            await asyncio.sleep(0.05)


class Harness:
    """A metadata client and stand-in storage nodes, on one event loop."""

    def __init__(self, addresses: list[str]) -> None:
        self.client = MetadataClient(addresses)
        self.sessions: dict[int, MembershipSession] = {}

    async def join(self, node_id: int, incarnation: int = 1) -> None:
        session = MembershipSession(self.client, storage(node_id, incarnation))
        await session.start()
        self.sessions[node_id] = session
        await poll(self.client.describe_cluster, lambda r: node_id in live_ids(r))

    async def leave(self, node_id: int, crash: bool = False) -> None:
        await self.sessions.pop(node_id).stop(unregister=not crash)

    async def close(self) -> None:
        for session in list(self.sessions.values()):
            await session.stop()
        await self.client.close()

    async def create(self, name: str, partitions: int, rf: int, **configs: str) -> None:
        request = admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreatableTopic(
                    name=name, num_partitions=partitions, replication_factor=rf, configs=configs
                )
            ]
        )
        result = (await self.client.create_topics(request)).topics[0]
        assert result.error_code == 0, result.error_message

    async def partitions(self, name: str) -> list[common_pb2.PartitionState]:
        response = await self.client.describe_topics([name])
        return list(response.topics[0].metadata.partitions)

    async def wait_partitions(self, name: str, predicate, timeout_s: float = 30.0):
        return await poll(lambda: self.partitions(name), predicate, timeout_s)

    async def elect(self, preferred: bool, *tps: tuple[str, int]) -> admin_pb2.ElectLeadersResponse:
        request = admin_pb2.ElectLeadersRequest(
            election_type=admin_pb2.ELECTION_TYPE_PREFERRED
            if preferred
            else admin_pb2.ELECTION_TYPE_UNCLEAN,
            partitions=[common_pb2.TopicPartition(topic=t, partition=p) for t, p in tps],
        )
        result: admin_pb2.ElectLeadersResponse = await self.client.call("ElectLeaders", request)
        return result


def live_ids(response: admin_pb2.DescribeClusterResponse) -> set[int]:
    return {n.node_id for n in response.nodes if n.kind == common_pb2.NODE_KIND_STORAGE}


def scenario(cluster_factory, body, count: int = 1) -> None:
    cluster = cluster_factory(count, SHORT)

    async def go() -> None:
        harness = Harness(cluster.addresses)
        try:
            await body(harness)
        finally:
            await harness.close()

    run(go())


def test_leaving_node_loses_every_leadership_and_isr_seat_in_one_change(cluster_factory):
    async def body(h: Harness) -> None:
        for node in (1, 2, 3):
            await h.join(node)
        await h.create("t", 6, 3)
        before = await h.partitions("t")
        await h.leave(2)
        after = await h.wait_partitions("t", lambda ps: all(2 not in p.isr for p in ps))
        for old, new in zip(before, after, strict=True):
            assert list(new.isr) == [r for r in old.isr if r != 2]
            assert new.partition_epoch == old.partition_epoch + 1
            if old.leader == 2:
                assert new.leader == next(r for r in old.replicas if r in new.isr)
                assert new.leader_epoch == old.leader_epoch + 1
            else:
                assert (new.leader, new.leader_epoch) == (old.leader, old.leader_epoch)
        cluster = await h.client.describe_cluster()
        assert cluster.under_replicated_partitions >= 6
        assert cluster.leader_elections == sum(1 for p in before if p.leader == 2)

    scenario(cluster_factory, body)


def test_alter_partition_is_guarded_by_leader_and_partition_epochs(cluster_factory):
    async def body(h: Harness) -> None:
        for node in (1, 2, 3):
            await h.join(node)
        await h.create("a", 1, 3)
        [p] = await h.partitions("a")
        leader = p.leader
        follower = next(r for r in p.replicas if r != leader)

        async def alter(node: int, isr, leader_epoch: int, partition_epoch: int, inc: int = 1):
            request = metadata_pb2.AlterPartitionRequest(
                node_id=node,
                node_incarnation=inc,
                partitions=[
                    metadata_pb2.AlterPartitionItem(
                        topic="a",
                        partition=0,
                        leader_epoch=leader_epoch,
                        new_isr=isr,
                        partition_epoch=partition_epoch,
                    )
                ],
            )
            response: metadata_pb2.AlterPartitionResponse = await h.client.call(
                "AlterPartition", request
            )
            return response

        shrunk_isr = [r for r in p.replicas if r != follower]
        response = await alter(leader, shrunk_isr, p.leader_epoch, p.partition_epoch)
        [result] = response.partitions
        assert result.error_code == 0, result.error_message
        assert list(result.state.isr) == shrunk_isr
        assert result.state.partition_epoch == p.partition_epoch + 1
        [now] = await h.partitions("a")
        assert list(now.isr) == shrunk_isr  # published through the image

        stale = await alter(leader, list(p.replicas), p.leader_epoch, p.partition_epoch)
        assert stale.partitions[0].error_code == ErrorCode.INVALID_UPDATE_VERSION
        assert stale.partitions[0].state.partition_epoch == now.partition_epoch
        fenced = await alter(leader, list(p.replicas), p.leader_epoch - 1, now.partition_epoch)
        assert fenced.partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
        other = await alter(follower, list(p.replicas), p.leader_epoch, now.partition_epoch)
        assert other.partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        zombie = await alter(leader, list(p.replicas), p.leader_epoch, now.partition_epoch, 99)
        assert zombie.error_code == ErrorCode.STALE_BROKER_EPOCH

        await h.leave(follower)
        await poll(h.client.describe_cluster, lambda r: follower not in live_ids(r))
        [now] = await h.partitions("a")  # the follower was out of the ISR: nothing changed
        dead = await alter(leader, list(p.replicas), now.leader_epoch, now.partition_epoch)
        assert dead.partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA
        grown = await alter(leader, list(now.isr), now.leader_epoch, now.partition_epoch)
        assert grown.partitions[0].error_code == 0  # unchanged: answered, no write
        assert grown.partitions[0].state.partition_epoch == now.partition_epoch

    scenario(cluster_factory, body)


def test_offline_without_unclean_then_back_with_the_returning_replica(cluster_factory):
    async def body(h: Harness) -> None:
        for node in (1, 2):
            await h.join(node)
        await h.create("clean", 1, 2)
        await h.create("dirty", 1, 2, **{"unclean.leader.election.enable": "true"})
        [p] = await h.partitions("clean")
        first, second = p.leader, next(r for r in p.replicas if r != p.leader)
        await h.leave(second)  # the follower goes first: the ISR shrinks to the leader
        await h.wait_partitions("clean", lambda ps: list(ps[0].isr) == [first])
        await h.join(second)  # back, but out of sync: not in the ISR
        await h.leave(first)
        [off] = await h.wait_partitions("clean", lambda ps: ps[0].leader == -1)
        assert list(off.isr) == [first]  # Kafka leaves the last ISR as it was
        assert off.leader_epoch == p.leader_epoch + 1
        cluster = await h.client.describe_cluster()
        assert cluster.offline_partitions >= 1
        # The same on the topic that allows unclean election: the out-of-sync replica leads.
        [dirty] = await h.wait_partitions("dirty", lambda ps: ps[0].leader == second)
        assert list(dirty.isr) == [second]
        await h.join(first)
        [back] = await h.wait_partitions("clean", lambda ps: ps[0].leader == first)
        assert back.leader_epoch == off.leader_epoch + 1

    scenario(cluster_factory, body)


def test_unclean_and_preferred_elect_leaders(cluster_factory):
    async def body(h: Harness) -> None:
        for node in (1, 2):
            await h.join(node)
        await h.create("e", 2, 2)
        parts = await h.partitions("e")
        p0 = parts[0]
        preferred = p0.replicas[0]
        other = p0.replicas[1]
        await h.leave(preferred)
        await h.wait_partitions("e", lambda ps: ps[0].leader == other)
        await h.join(preferred)  # back but out of the ISR: the preferred leader cannot lead
        response = await h.elect(True, ("e", 0), ("e", 9))
        codes = {r.partition: r.error_code for r in response.partitions}
        assert codes == {
            0: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        # The leader takes it back into the ISR (as a caught-up follower would), then the
        # preferred election moves leadership back.
        [now, _] = await h.partitions("e")
        alter = metadata_pb2.AlterPartitionRequest(
            node_id=other,
            node_incarnation=1,
            partitions=[
                metadata_pb2.AlterPartitionItem(
                    topic="e",
                    partition=0,
                    leader_epoch=now.leader_epoch,
                    new_isr=[other, preferred],
                    partition_epoch=now.partition_epoch,
                )
            ],
        )
        result = await h.client.call("AlterPartition", alter)
        assert result.partitions[0].error_code == 0, result.partitions[0].error_message
        response = await h.elect(True)
        by_partition = {r.partition: r for r in response.partitions}
        assert by_partition[0].error_code == 0
        assert by_partition[0].leader == preferred
        assert by_partition[0].leader_epoch == now.leader_epoch + 1
        [moved, _] = await h.partitions("e")
        assert moved.leader == preferred
        response = await h.elect(True, ("e", 0))
        assert response.partitions[0].error_code == ErrorCode.ELECTION_NOT_NEEDED
        response = await h.elect(False, ("e", 0))
        assert response.partitions[0].error_code == ErrorCode.ELECTION_NOT_NEEDED

    scenario(cluster_factory, body)


def test_producer_id_blocks_never_overlap(cluster_factory):
    async def body(h: Harness) -> None:
        await h.join(1)
        starts = []
        for _ in range(3):
            request = metadata_pb2.AllocateProducerIdsRequest(node_id=1, node_incarnation=1)
            response = await h.client.call("AllocateProducerIds", request)
            assert response.error_code == 0, response.error_message
            assert response.producer_id_len == 1000
            starts.append(response.producer_id_start)
        assert starts == [starts[0], starts[0] + 1000, starts[0] + 2000]
        request = metadata_pb2.AllocateProducerIdsRequest(node_id=7, node_incarnation=1)
        response = await h.client.call("AllocateProducerIds", request)
        assert response.error_code == ErrorCode.STALE_BROKER_EPOCH

    scenario(cluster_factory, body, count=2)


def test_new_controller_elects_for_nodes_that_died_without_one(cluster_factory):
    cluster = cluster_factory(2, SHORT)

    def controller() -> int:
        async def call() -> int:
            client = MetadataClient(cluster.addresses)
            try:
                return (await client.describe_cluster()).controller_id
            finally:
                await client.close()

        return run(call())

    [old] = wait_until(lambda: (c := controller()) >= 0 and [c], what="a controller")
    survivor = next(i for i in cluster.instances if i != old)

    async def prepare(h: Harness) -> list[common_pb2.PartitionState]:
        for node in (1, 2, 3):
            await h.join(node)
        await h.create("f", 6, 2)
        return await h.partitions("f")

    async def go() -> None:
        h = Harness(cluster.addresses)
        try:
            before = await prepare(h)
            cluster.instances[old].kill9()  # no controller until the lease runs out
            await h.leave(3)  # dies while no controller is active
            after = await h.wait_partitions(
                "f", lambda ps: all(3 not in p.isr for p in ps), timeout_s=60
            )
            cluster_view = await h.client.describe_cluster()
            assert cluster_view.controller_id == survivor
            for old_p, new_p in zip(before, after, strict=True):
                if old_p.leader == 3:
                    assert new_p.leader in (1, 2)
                    assert new_p.leader_epoch == old_p.leader_epoch + 1
        finally:
            await h.close()

    run(go())


def test_auto_rebalance_moves_leadership_back_to_preferred_replicas(cluster_factory):
    configs = {
        **SHORT,
        "auto.leader.rebalance.enable": "true",
        "leader.imbalance.check.interval.seconds": "1",
    }
    cluster = cluster_factory(1, configs)

    async def go() -> None:
        h = Harness(cluster.addresses)
        try:
            for node in (1, 2):
                await h.join(node)
            await h.create("r", 4, 2)
            await h.leave(1)
            moved = await h.wait_partitions("r", lambda ps: all(p.leader == 2 for p in ps))
            await h.join(1)
            # The leader takes node 1 back into every ISR, as once its fetcher caught up.
            request = metadata_pb2.AlterPartitionRequest(
                node_id=2,
                node_incarnation=1,
                partitions=[
                    metadata_pb2.AlterPartitionItem(
                        topic="r",
                        partition=p.partition,
                        leader_epoch=p.leader_epoch,
                        new_isr=[2, 1],
                        partition_epoch=p.partition_epoch,
                    )
                    for p in moved
                ],
            )
            response = await h.client.call("AlterPartition", request)
            assert all(r.error_code == 0 for r in response.partitions), response
            back = await h.wait_partitions(
                "r", lambda ps: all(p.leader == p.replicas[0] for p in ps)
            )
            assert any(p.leader == 1 for p in back)
        finally:
            await h.close()

    run(go())


def test_new_controller_sees_a_restart_that_happened_without_a_controller(cluster_factory):
    cluster = cluster_factory(2, SHORT)

    def controller() -> int:
        async def call() -> int:
            client = MetadataClient(cluster.addresses)
            try:
                return (await client.describe_cluster()).controller_id
            finally:
                await client.close()

        return run(call())

    [old] = wait_until(lambda: (c := controller()) >= 0 and [c], what="a controller")

    async def go() -> None:
        h = Harness(cluster.addresses)
        try:
            for node in (1, 2):
                await h.join(node)
            await h.create("g", 4, 2)
            before = await h.partitions("g")
            led = [p.partition for p in before if p.leader == 1]
            assert led
            cluster.instances[old].kill9()
            # Node 1 restarts (a new incarnation replaces its live registration) while no
            # controller is active: its key never disappears.
            await h.sessions.pop(1).stop(unregister=False)
            await h.join(1, incarnation=2)
            after = await h.wait_partitions(
                "g",
                lambda ps: all(p.leader != 1 and 1 not in p.isr for p in ps),
                timeout_s=60,
            )
            for old_p, new_p in zip(before, after, strict=True):
                if old_p.partition in led:
                    assert new_p.leader == 2
                    assert new_p.leader_epoch == old_p.leader_epoch + 1
        finally:
            await h.close()

    run(go())
