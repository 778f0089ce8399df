"""DescribeLogDirs through the SDK on the session's real cluster (decision 0040): records of a
known size show on every replica of every storage node, a filter keeps only what it names, an
unknown topic or partition is an error of its own, and the asyncio client answers the same."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from riverlog.client import AdminClient, LogDirs, Producer, RiverlogError, TopicPartition
from riverlog.client.aio import AIOAdminClient
from riverlog.cluster import LocalCluster
from riverlog.common.errors import ErrorCode

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

RECORDS = 200
VALUE = b"v" * 500  # per partition: 100 records of 500 bytes, so at least 50,000 bytes


def _produce(address: str, topic: str) -> None:
    with Producer({"bootstrap.servers": address, "acks": "all", "linger.ms": 5}) as producer:
        futures = [producer.send(topic, VALUE, partition=i % 2) for i in range(RECORDS)]
        producer.flush(30)
        for f in futures:
            f.result(30)


def _until(
    admin: AdminClient, done: Callable[[LogDirs], bool], what: str, timeout_s: float = 30.0
) -> LogDirs:
    """Poll describe_log_dirs until `done` (followers copy after the leader acknowledges)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = admin.describe_log_dirs()
        if done(result) or time.monotonic() > deadline:
            assert done(result), f"{what}: {result}"
            return result
        time.sleep(0.2)


def test_every_replica_reports_at_least_the_payload(
    cluster: LocalCluster, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2, 3)
    _produce(cluster.gateway_address, topic)
    payload = RECORDS // 2 * len(VALUE)
    tps = [TopicPartition(topic, p) for p in (0, 1)]
    with AdminClient({"bootstrap.servers": cluster.gateway_address}) as admin:
        result = _until(
            admin,
            lambda r: all(
                len(r.replicas(tp)) == 3
                and all(i.log_end_offset == RECORDS // 2 for i in r.replicas(tp).values())
                for tp in tps
            ),
            "every replica has every record",
        )
        assert sorted(result.nodes) == [1, 2, 3] and not result.node_errors
        for tp in tps:
            for node, info in result.replicas(tp).items():
                assert info.size_bytes >= payload, (tp, node, info)
                assert (info.remote_size_bytes, info.log_start_offset) == (0, 0)
                assert (info.local_log_start_offset, info.offset_lag) == (0, 0)
                assert not info.is_future
        for dirs in result.nodes.values():
            assert all(d.error is None for d in dirs.values())

        filtered = admin.describe_log_dirs([TopicPartition(topic, 1)], node_ids=[2])
        assert list(filtered.nodes) == [2]
        [(path, d)] = filtered.nodes[2].items()
        assert path in result.nodes[2]
        assert list(d.replica_infos) == [TopicPartition(topic, 1)]
        assert d.replica_infos[TopicPartition(topic, 1)] == result.replicas(tps[1])[2]

        by_name = admin.describe_log_dirs([topic])
        assert all(set(by_name.replicas(tp)) == {1, 2, 3} for tp in tps)


def test_an_unknown_topic_or_partition_is_an_error_of_its_own(
    cluster: LocalCluster, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1, 1)
    missing = f"{topic}-missing"
    with AdminClient({"bootstrap.servers": cluster.gateway_address}) as admin:
        with pytest.raises(RiverlogError) as raised:
            admin.describe_log_dirs([missing])
        assert raised.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert missing in raised.value.message
        result = admin.describe_log_dirs(
            [missing, TopicPartition(topic, 0), TopicPartition(topic, 5)], raise_on_error=False
        )
        assert set(result.errors) == {TopicPartition(missing, -1), TopicPartition(topic, 5)}
        assert all(e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for e in result.errors.values())
        assert len(result.replicas(TopicPartition(topic, 0))) == 1  # the rest is answered


async def test_the_asyncio_client_answers_the_same(
    cluster: LocalCluster, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1, 1)
    async with AIOAdminClient({"bootstrap.servers": cluster.gateway_address}) as admin:
        result = await admin.describe_log_dirs([topic])
    assert set(result.nodes) == {1, 2, 3}
    [node] = result.replicas(TopicPartition(topic, 0))
    assert node in {1, 2, 3}
