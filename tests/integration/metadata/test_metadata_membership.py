"""Node membership through real metadata processes: a registered node appears in every Watch
stream and disappears when its heartbeats stop; a restarted node (higher incarnation) replaces
the old registration, which is then fenced; a lower incarnation is refused."""

from __future__ import annotations

import pytest
from metadata_procs import run, until

from riverlog.common.cluster import MembershipSession, MetadataClient, MetadataWatcher, NodeInfo
from riverlog.common.cluster.convert import node_to_proto
from riverlog.common.errors import ErrorCode
from riverlog.v1 import metadata_pb2

pytestmark = pytest.mark.integration

SHORT = {"broker.session.timeout.ms": "2000", "metadata.controller.lease.ms": "2000"}


def storage(node_id: int, incarnation: int = 1, port: int = 19000) -> NodeInfo:
    return NodeInfo("storage", node_id, "127.0.0.1", port + node_id, "", 0, incarnation)


def test_registered_node_appears_in_watch_and_lapses_without_heartbeats(cluster_factory):
    cluster = cluster_factory(3, SHORT)
    addresses = cluster.addresses

    async def scenario() -> None:
        client = MetadataClient(addresses)
        watchers = [MetadataWatcher(MetadataClient([a]), watcher_id=-1) for a in addresses]
        for w in watchers:
            await w.start()
        session = MembershipSession(client, storage(1))
        registrations = []
        session.on_registered = registrations.append
        try:
            granted = await session.start()
            assert granted.lease_ttl_ms == 2000
            assert 0 < granted.heartbeat_interval_ms <= 2000 // 3
            assert registrations == [granted]
            for w in watchers:  # every instance pushes the node to its watchers
                image = await w.wait_for(lambda i: i.storage_node(1) is not None, 20)
                assert image.storage_node(1) == storage(1)
            await session.stop(unregister=False)  # the node "crashes"
            for w in watchers:
                await w.wait_for(lambda i: i.storage_node(1) is None, 30)
            response = await client.heartbeat(1, granted.lease_id)
            assert response.error_code == ErrorCode.UNKNOWN_NODE
        finally:
            for w in watchers:
                await w.stop()
                await w.client.close()
            await client.close()

    run(scenario())


def test_heartbeats_keep_a_node_registered_and_unregister_removes_it(cluster_factory):
    cluster = cluster_factory(2, SHORT)

    async def scenario() -> None:
        client = MetadataClient(cluster.addresses)
        watcher = MetadataWatcher(MetadataClient(cluster.addresses[1:]))
        await watcher.start()
        session = MembershipSession(client, storage(2))
        try:
            granted = await session.start()
            await watcher.wait_for(lambda i: i.storage_node(2) is not None, 20)
            # Heartbeats succeed on any instance: the lease lives in etcd.
            for address in cluster.addresses:
                other = MetadataClient([address])
                response = await other.heartbeat(2, granted.lease_id)
                await other.close()
                assert response.error_code == ErrorCode.NONE
                assert response.lease_ttl_ms == 2000
            await session.stop()
            await watcher.wait_for(lambda i: i.storage_node(2) is None, 20)
        finally:
            await watcher.stop()
            await watcher.client.close()
            await client.close()

    run(scenario())


def test_higher_incarnation_replaces_a_live_registration(cluster_factory):
    cluster = cluster_factory(2, SHORT)

    async def scenario() -> None:
        client = MetadataClient(cluster.addresses)
        watcher = MetadataWatcher(MetadataClient(cluster.addresses))
        await watcher.start()
        old = MembershipSession(client, storage(3, incarnation=100, port=19100))
        new = MembershipSession(client, storage(3, incarnation=200, port=19200))
        try:
            await old.start()
            await watcher.wait_for(lambda i: i.storage_node(3) is not None, 20)
            await new.start()
            image = await watcher.wait_for(
                lambda i: (n := i.storage_node(3)) is not None and n.incarnation == 200, 20
            )
            assert image.storage_node(3).port == 19203
            # The old process learns at its next heartbeat that it was replaced.
            await until(lambda: old.fenced, 20, "the old session fenced")
            # A lower incarnation than the live one is refused outright.
            stale = metadata_pb2.RegisterNodeRequest(node=node_to_proto(storage(3, 150)))
            response = await client.register_node(stale)
            assert response.error_code == ErrorCode.NODE_ID_IN_USE
            assert watcher.image.storage_node(3).incarnation == 200
        finally:
            await old.stop()
            await new.stop()
            await watcher.stop()
            await watcher.client.close()
            await client.close()

    run(scenario())


def test_bad_registrations_are_refused(cluster_factory):
    cluster = cluster_factory(1)

    async def scenario() -> None:
        client = MetadataClient(cluster.addresses)
        try:
            bad = [
                NodeInfo("storage", -1, "127.0.0.1", 1000),
                NodeInfo("storage", 1, "", 1000),
                NodeInfo("storage", 1, "127.0.0.1", 70000),
                NodeInfo("metadata", 1, "127.0.0.1", 1000),
            ]
            for node in bad:
                request = metadata_pb2.RegisterNodeRequest(node=node_to_proto(node))
                response = await client.register_node(request)
                assert response.error_code == ErrorCode.INVALID_REQUEST, node
            unspecified = metadata_pb2.RegisterNodeRequest()
            response = await client.register_node(unspecified)
            assert response.error_code == ErrorCode.INVALID_REQUEST
            assert (await client.describe_cluster()).nodes == []
        finally:
            await client.close()

    run(scenario())


def test_watcher_moves_to_another_instance_when_its_stream_breaks(cluster_factory):
    cluster = cluster_factory(2, SHORT)
    first, second = cluster.instances[0], cluster.instances[1]

    async def scenario() -> None:
        watcher = MetadataWatcher(MetadataClient([first.address, second.address]))
        seen: list[int] = []
        watcher.add_listener(lambda old, new: seen.append(new.version))
        client = MetadataClient([second.address])
        session = MembershipSession(client, storage(5))
        try:
            await watcher.start()
            assert watcher.client.current_address == first.address
            first.kill9()  # the stream breaks; the watcher resubscribes to the second
            await session.start()
            image = await watcher.wait_for(lambda i: i.storage_node(5) is not None, 30)
            assert watcher.client.current_address == second.address
            assert image.storage_node(5) == storage(5)
            assert seen == sorted(seen)  # versions never went back
        finally:
            await session.stop()
            await watcher.stop()
            await watcher.client.close()
            await client.close()

    run(scenario())
