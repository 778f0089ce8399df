"""Topic administration through a NON-controller metadata instance (forwarded to the controller)
with real processes and etcd: create, list, describe, describe/alter configs, add partitions,
delete; and every kind of bad input answered per topic with a clear code, changing nothing."""

from __future__ import annotations

import asyncio

import pytest
from metadata_procs import MetadataCluster, run, wait_until

from riverlog.common.cluster import MembershipSession, MetadataClient, NodeInfo
from riverlog.common.errors import ErrorCode
from riverlog.v1 import admin_pb2

pytestmark = pytest.mark.integration

Op = admin_pb2.AlterConfigsRequest.Op


def non_controller(cluster: MetadataCluster) -> str:
    async def find() -> str | None:
        client = MetadataClient(cluster.addresses)
        try:
            view = await client.describe_cluster()
        finally:
            await client.close()
        if view.controller_id < 0:
            return None
        return next(i.address for k, i in cluster.instances.items() if k != view.controller_id)

    return wait_until(lambda: run(find()), what="a controller")


def topic(name: str, partitions: int = 1, rf: int = 1, **configs: str):
    return admin_pb2.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf, configs=configs
    )


async def with_storage_nodes(count: int, addresses: list[str], body) -> None:
    """Run `body(client)` with `count` fake storage nodes registered (racks r0/r1)."""
    client = MetadataClient(addresses)
    sessions = [
        MembershipSession(client, NodeInfo("storage", i, "127.0.0.1", 20000 + i, f"r{i % 2}"))
        for i in range(count)
    ]
    try:
        for s in sessions:
            await s.start()
        for _ in range(200):  # the controller's image must show them before placement
            if len((await client.describe_cluster()).nodes) == count:
                break
            await asyncio.sleep(0.05)
        await body(client)
    finally:
        for s in sessions:
            await s.stop()
        await client.close()


def codes(response) -> dict[str, int]:
    return {t.name: t.error_code for t in response.topics}


def test_topic_lifecycle_through_a_standby(cluster_factory):
    cluster = cluster_factory(3)
    standby = non_controller(cluster)

    async def body(_: MetadataClient) -> None:
        client = MetadataClient([standby])
        try:
            created = await client.create_topics(
                admin_pb2.CreateTopicsRequest(
                    topics=[
                        topic("orders", 6, 3, **{"retention.ms": "1000"}),
                        topic("audit", -1, -1),
                    ]
                )
            )
            assert codes(created) == {"orders": 0, "audit": 0}, created
            ids = {t.name: t.topic_id for t in created.topics}
            assert all(len(i) == 22 for i in ids.values())

            names = await _eventually(
                client, lambda c: c.list_topics(), lambda r: len(r.names) == 2
            )
            assert list(names.names) == ["audit", "orders"]
            described = await client.describe_topics(["orders"])
            meta = described.topics[0].metadata
            assert meta.topic_id == ids["orders"] and len(meta.partitions) == 6
            for p in meta.partitions:
                assert len(set(p.replicas)) == 3 and p.leader == p.replicas[0]
                assert list(p.isr) == list(p.replicas) and p.leader_epoch == 0
            assert {p.replicas[0] for p in meta.partitions} == {0, 1, 2}  # leaders spread

            configs = (await client.describe_configs(["orders"])).topics[0]
            by_name = {c.name: c for c in configs.configs}
            assert (
                by_name["retention.ms"].value == "1000" and not by_name["retention.ms"].is_default
            )
            assert (
                by_name["cleanup.policy"].value == "delete" and by_name["cleanup.policy"].is_default
            )

            altered = await client.alter_configs(
                admin_pb2.AlterConfigsRequest(
                    topics=[
                        admin_pb2.AlterConfigsRequest.Topic(
                            name="orders",
                            ops=[
                                Op(name="retention.ms", type=Op.DELETE),
                                Op(name="cleanup.policy", value="compact", type=Op.SET),
                            ],
                        )
                    ]
                )
            )
            assert codes(altered) == {"orders": 0}
            configs = await _eventually(
                client,
                lambda c: c.describe_configs(["orders"]),
                lambda r: (
                    {c.name: c.value for c in r.topics[0].configs}["cleanup.policy"] == "compact"
                ),
            )
            by_name = {c.name: c for c in configs.topics[0].configs}
            assert by_name["retention.ms"].is_default

            grown = await client.create_partitions(
                admin_pb2.CreatePartitionsRequest(
                    topics=[admin_pb2.CreatePartitionsRequest.Topic(name="orders", count=8)]
                )
            )
            assert codes(grown) == {"orders": 0}
            described = await _eventually(
                client,
                lambda c: c.describe_topics(["orders"]),
                lambda r: len(r.topics[0].metadata.partitions) == 8,
            )
            assert [p.partition for p in described.topics[0].metadata.partitions] == list(range(8))
            assert described.topics[0].metadata.topic_id == ids["orders"]

            deleted = await client.delete_topics(["orders"])
            assert codes(deleted) == {"orders": 0}
            names = await _eventually(
                client, lambda c: c.list_topics(), lambda r: len(r.names) == 1
            )
            assert list(names.names) == ["audit"]
            again = await client.create_topics(
                admin_pb2.CreateTopicsRequest(topics=[topic("orders")])
            )
            assert codes(again) == {"orders": 0}
            assert again.topics[0].topic_id != ids["orders"]  # a new id per (re)creation
        finally:
            await client.close()

    run(with_storage_nodes(3, cluster.addresses, body))


async def _eventually(client, call, predicate, timeout_s: float = 20.0):
    """Reads on a standby follow the controller's writes by watch: poll with a deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = await call(client)
        if predicate(result):
            return result
        assert loop.time() < deadline, f"timed out; last: {result}"
        await asyncio.sleep(0.05)


def test_bad_requests_get_clear_codes_and_change_nothing(cluster_factory):
    cluster = cluster_factory(2)
    standby = non_controller(cluster)

    async def body(_: MetadataClient) -> None:
        client = MetadataClient([standby])
        try:
            first = await client.create_topics(
                admin_pb2.CreateTopicsRequest(topics=[topic("a.b"), topic("keep", 2, 2)])
            )
            assert codes(first) == {"a.b": 0, "keep": 0}
            await _eventually(client, lambda c: c.list_topics(), lambda r: len(r.names) == 2)
            bad = [
                topic(""),
                topic("."),
                topic(".."),
                topic("x" * 250),
                topic("bad/name"),
                topic("spaced name"),
                topic("ünïcode"),
                topic("a_b"),  # collides with a.b
                topic("keep"),  # exists
                topic("rf3", 1, 3),  # two live storage nodes
                topic("rf0", 1, 0),
                topic("rfneg", 1, -7),
                topic("p0", 0),
                topic("pneg", -5),
                topic("phuge", 2_147_483_647),
                topic("cfgname", 1, 1, **{"no.such.config": "1"}),
                topic("cfgvalue", 1, 1, **{"retention.ms": "soon"}),
                topic("cfgrange", 1, 1, **{"min.insync.replicas": "0"}),
            ]
            response = await client.create_topics(
                admin_pb2.CreateTopicsRequest(topics=[*bad, topic("fine")])
            )
            got = [t.error_code for t in response.topics]
            E = ErrorCode
            assert got == [
                *[E.INVALID_TOPIC_EXCEPTION] * 8,
                E.TOPIC_ALREADY_EXISTS,
                *[E.INVALID_REPLICATION_FACTOR] * 3,
                *[E.INVALID_PARTITIONS] * 3,
                *[E.INVALID_CONFIG] * 3,
                E.NONE,  # one bad topic never fails the others
            ]
            assert all(t.error_message for t in response.topics[:-1])
            dup = await client.create_topics(
                admin_pb2.CreateTopicsRequest(topics=[topic("twice"), topic("twice")])
            )
            assert [t.error_code for t in dup.topics] == [E.INVALID_REQUEST] * 2
            dry = await client.create_topics(
                admin_pb2.CreateTopicsRequest(topics=[topic("dry")], validate_only=True)
            )
            assert codes(dry) == {"dry": 0}

            deleted = await client.delete_topics(["nope", ""])
            assert codes(deleted) == {
                "nope": E.UNKNOWN_TOPIC_OR_PARTITION,
                "": E.UNKNOWN_TOPIC_OR_PARTITION,
            }
            parts = await client.create_partitions(
                admin_pb2.CreatePartitionsRequest(
                    topics=[
                        admin_pb2.CreatePartitionsRequest.Topic(name="keep", count=1),
                        admin_pb2.CreatePartitionsRequest.Topic(name="keep", count=2),
                        admin_pb2.CreatePartitionsRequest.Topic(name="nope", count=3),
                    ]
                )
            )
            assert [t.error_code for t in parts.topics] == [E.INVALID_REQUEST] * 2 + [
                E.UNKNOWN_TOPIC_OR_PARTITION
            ]
            for count, code in [
                (1, E.INVALID_PARTITIONS),
                (2, E.INVALID_PARTITIONS),
                (10**9, E.INVALID_PARTITIONS),
            ]:
                r = await client.create_partitions(
                    admin_pb2.CreatePartitionsRequest(
                        topics=[admin_pb2.CreatePartitionsRequest.Topic(name="keep", count=count)]
                    )
                )
                assert r.topics[0].error_code == code, count
            T = admin_pb2.AlterConfigsRequest.Topic
            alter = await client.alter_configs(
                admin_pb2.AlterConfigsRequest(
                    topics=[
                        T(name="keep", ops=[Op(name="retention.ms", value="-5", type=Op.SET)]),
                        T(name="a.b", ops=[Op(name="bogus", value="1", type=Op.SET)]),
                        T(name="nope", ops=[Op(name="retention.ms", value="1", type=Op.SET)]),
                        T(name="fine", ops=[Op(name="retention.ms", value="1", type=99)]),
                    ]
                )
            )
            assert [t.error_code for t in alter.topics] == [
                E.INVALID_CONFIG,
                E.INVALID_CONFIG,
                E.UNKNOWN_TOPIC_OR_PARTITION,
                E.INVALID_REQUEST,
            ]

            # Nothing changed: three topics, "keep" as created, no overrides.
            names = await _eventually(
                client, lambda c: c.list_topics(), lambda r: len(r.names) == 3
            )
            assert list(names.names) == ["a.b", "fine", "keep"]
            keep = (await client.describe_topics(["keep"])).topics[0].metadata
            assert len(keep.partitions) == 2 and all(len(p.replicas) == 2 for p in keep.partitions)
            assert list(keep.configs) == []
            missing = await client.describe_topics(["nope"])
            assert missing.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
            unknown_cfg = await client.describe_configs(["nope"])
            assert unknown_cfg.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        finally:
            await client.close()

    run(with_storage_nodes(2, cluster.addresses, body))
