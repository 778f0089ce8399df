"""Controller election across real metadata processes on a real etcd: exactly one controller,
failover with epoch + 1 after kill -9, and a paused (SIGSTOP past its lease) controller that
comes back deposed and steps down."""

from __future__ import annotations

import asyncio
import signal

import pytest
from metadata_procs import MetadataCluster, run, wait_until

from riverlog.common.cluster import MembershipSession, MetadataClient, NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import admin_pb2

pytestmark = pytest.mark.integration

FAST = {"metadata.controller.lease.ms": "2000"}


def describe(address: str) -> admin_pb2.DescribeClusterResponse:
    async def call() -> admin_pb2.DescribeClusterResponse:
        client = MetadataClient([address], timeout_s=5)
        try:
            return await client.describe_cluster()
        finally:
            await client.close()

    return run(call())


async def describe_async(address: str) -> admin_pb2.DescribeClusterResponse:
    client = MetadataClient([address], timeout_s=5)
    try:
        return await client.describe_cluster()
    finally:
        await client.close()


async def poll(call, predicate, timeout_s: float = 30.0):
    """Await `call()` until `predicate(result)`; bounded, without blocking the event loop."""
    async with asyncio.timeout(timeout_s):
        while True:
            try:
                result = await call()
                if predicate(result):
                    return result
            except RiverlogError:
                pass
            await asyncio.sleep(0.05)


def agreed_controller(cluster: MetadataCluster) -> tuple[int, int] | None:
    """(controller id, epoch) when every live instance reports the same live controller."""
    views = {(d.controller_id, d.controller_epoch) for d in map(describe, cluster.addresses)}
    if len(views) != 1:
        return None
    controller, epoch = views.pop()
    if controller < 0 or not cluster.instances[controller].alive:
        return None
    return controller, epoch


def elections_won(cluster: MetadataCluster) -> int:
    return sum(p.log().count("is the controller (epoch") for p in cluster.instances.values())


def test_three_instances_elect_exactly_one_controller(cluster_factory):
    cluster = cluster_factory(3, FAST)
    controller, epoch = wait_until(lambda: agreed_controller(cluster), what="one controller")
    assert epoch == 1
    assert elections_won(cluster) == 1
    for address in cluster.addresses:
        view = describe(address)
        flagged = [i.instance_id for i in view.metadata_instances if i.is_controller]
        assert flagged == [controller]
        assert sorted(i.instance_id for i in view.metadata_instances) == [0, 1, 2]
        assert view.cluster_id == describe(cluster.addresses[0]).cluster_id


def test_kill9_controller_hands_over_with_epoch_plus_one(cluster_factory):
    cluster = cluster_factory(3, FAST)
    old, epoch = wait_until(lambda: agreed_controller(cluster), what="one controller")
    cluster.instances[old].kill9()
    new, new_epoch = wait_until(
        lambda: (view := agreed_controller(cluster)) and view[0] != old and view,
        what="a new controller",
    )
    assert new != old
    assert new_epoch == epoch + 1
    # The restarted instance rejoins as a standby; the epoch does not move.
    cluster.instances[old].start()
    wait_until(
        lambda: len(describe(cluster.instances[old].address).metadata_instances) == 3,
        what="the restarted instance in the image",
    )
    assert agreed_controller(cluster) == (new, new_epoch)


def test_paused_controller_is_deposed_and_steps_down(cluster_factory):
    cluster = cluster_factory(3, FAST)
    old, epoch = wait_until(lambda: agreed_controller(cluster), what="one controller")
    paused = cluster.instances[old]
    others = [p for i, p in cluster.instances.items() if i != old]
    retention = admin_pb2.AlterConfigsRequest.Op(name="retention.ms", value="4242")

    async def scenario() -> admin_pb2.AlterConfigsResponse:
        # A storage node and a topic, so that there is something for a write to change.
        client = MetadataClient([p.address for p in others])
        node = NodeInfo("storage", 0, "127.0.0.1", 19999)
        session = MembershipSession(client, node)
        await session.start()
        try:
            await poll(lambda: client.describe_cluster(), lambda r: len(r.nodes) == 1)
            request = admin_pb2.CreateTopicsRequest(
                topics=[
                    admin_pb2.CreatableTopic(name="t", num_partitions=-1, replication_factor=-1)
                ]
            )
            assert (await client.create_topics(request)).topics[0].error_code == 0
            await poll(lambda: describe_async(paused.address), lambda r: r.metadata_version > 0)
            paused.signal(signal.SIGSTOP)
            try:
                await poll(
                    lambda: client.describe_cluster(),
                    lambda r: r.controller_epoch == epoch + 1,
                )
            finally:
                paused.signal(signal.SIGCONT)
            # Straight after waking, the old controller is asked to write. Whatever it notices
            # first (the fenced transaction, its lapsed lease, the new key in its image), the
            # write never lands under its stale epoch: it is refused or done by the new one.
            stale = MetadataClient([paused.address])
            try:
                alter = admin_pb2.AlterConfigsRequest(
                    topics=[admin_pb2.AlterConfigsRequest.Topic(name="t", ops=[retention])]
                )
                return await stale.alter_configs(alter)
            finally:
                await stale.close()
        finally:
            await session.stop()
            await client.close()

    response = run(scenario())
    # Refused (it learned it lost the election: NOT_CONTROLLER; or its fenced transaction
    # failed: STALE_CONTROLLER_EPOCH), or forwarded to the new controller and done.
    assert response.topics[0].error_code in (
        ErrorCode.NONE,
        ErrorCode.STALE_CONTROLLER_EPOCH,
        ErrorCode.NOT_CONTROLLER,
    )
    new, new_epoch = wait_until(lambda: agreed_controller(cluster), what="agreement")
    assert new != old and new_epoch == epoch + 1
    wait_until(lambda: "steps down as controller" in paused.log(), what="the step-down log")
    assert describe(paused.address).controller_id == new


def test_single_instance_restarted_after_kill9_is_controller_again(cluster_factory):
    cluster = cluster_factory(1)  # default 6 s controller lease, still held by the dead process
    wait_until(lambda: agreed_controller(cluster) == (0, 1), what="the first election")
    only = cluster.instances[0]
    only.kill9()
    only.start()
    assert wait_until(lambda: agreed_controller(cluster), what="re-election") == (0, 2)
    assert "removing the controller key left by this instance" in only.log() or (
        elections_won(cluster) == 2
    )
