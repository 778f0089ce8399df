"""AdminClient against a fake gateway: per-topic outcomes (raised by default, returned with
raise_on_error=False), descriptions, incremental config changes, partitions, records and
offsets, and retries of retriable whole-request failures."""

from __future__ import annotations

import grpc
import pytest
from client_fakes import FakeGateway, FakeServer

from riverlog.client import AdminClient, NewTopic, RiverlogError, TopicPartition
from riverlog.client.admin import ConfigEntry, PartitionInfo
from riverlog.common.errors import ErrorCode
from riverlog.v1 import gateway_pb2_grpc


def admin(fake: FakeServer, **config: object) -> AdminClient:
    return AdminClient({"bootstrap.servers": fake.address, "retry.backoff.ms": 5}, **config)


def test_create_and_delete_topics(fake: FakeServer, gateway: FakeGateway) -> None:
    with admin(fake) as a:
        assert a.create_topics([NewTopic("a", 3, 1, {"retention.ms": "1000"}), NewTopic("b")]) == {
            "a": None,
            "b": None,
        }
        assert a.list_topics() == ["a", "b"]
        with pytest.raises(RiverlogError, match="topic 'a'") as info:
            a.create_topics([NewTopic("a", 1)])
        assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        outcomes = a.create_topics([NewTopic("a"), NewTopic("c")], raise_on_error=False)
        assert outcomes["c"] is None
        assert outcomes["a"] is not None and outcomes["a"].code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert a.delete_topics(["b"]) == {"b": None}
        assert a.list_topics() == ["a", "c"]
        assert a.create_topics([NewTopic("v", 2)], validate_only=True) == {"v": None}
        assert "v" not in gateway.topics


def test_describe_topics(fake: FakeServer, gateway: FakeGateway) -> None:
    with admin(fake) as a:
        a.create_topics([NewTopic("a", 2, 1, {"cleanup.policy": "compact"})])
        described = a.describe_topics(["a"])["a"]
        assert described.partitions == (
            PartitionInfo(0, 0, 0, (0,), (0,)),
            PartitionInfo(1, 0, 0, (0,), (0,)),
        )
        assert described.configs == {"cleanup.policy": "compact"}
        assert set(a.describe_topics()) == {"a"}
        with pytest.raises(RiverlogError, match="topic 'missing'"):
            a.describe_topics(["missing"])


def test_configs_incremental(fake: FakeServer, gateway: FakeGateway) -> None:
    with admin(fake) as a:
        a.create_topics([NewTopic("a", 1, 1, {"retention.ms": "5"})])
        assert a.alter_configs({"a": {"cleanup.policy": "compact", "retention.ms": None}}) == {
            "a": None
        }
        configs = a.describe_configs(["a"])["a"]
        assert configs["cleanup.policy"] == ConfigEntry("cleanup.policy", "compact", False)
        assert configs["retention.ms"].is_default
        with pytest.raises(RiverlogError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            a.alter_configs({"nope": {"retention.ms": 1}})


def test_partitions_records_offsets_cluster(fake: FakeServer, gateway: FakeGateway) -> None:
    with admin(fake) as a:
        a.create_topics([NewTopic("a", 1)])
        assert a.create_partitions({"a": 3}) == {"a": None}
        assert len(a.describe_topics(["a"])["a"].partitions) == 3
        with pytest.raises(RiverlogError) as info:
            a.create_partitions({"a": 2})
        assert info.value.code == ErrorCode.INVALID_PARTITIONS
        tp = TopicPartition("a", 0)
        assert a.list_offsets({tp: -2})[tp].offset == 0  # type: ignore[union-attr]
        assert a.delete_records({tp: -1}) == {tp: 0}
        cluster = a.describe_cluster()
        assert cluster.cluster_id == "fake" and cluster.nodes[0].kind == "storage"


class Flaky(FakeGateway):
    """Fails the first ListTopics calls as UNAVAILABLE."""

    failures = 2

    def ListTopics(self, request, context):  # type: ignore[no-untyped-def]
        if self.failures:
            self.failures -= 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
        return super().ListTopics(request, context)


def test_retriable_failures_are_retried() -> None:
    server = FakeServer(Flaky())
    try:
        with AdminClient(bootstrap_servers=server.address, retry_backoff_ms=5) as a:
            assert a.list_topics() == []
        with AdminClient(bootstrap_servers=server.address, retries=0) as a:
            server.gateway.failures = 1  # type: ignore[attr-defined]
            with pytest.raises(RiverlogError) as info:
                a.list_topics()
            assert info.value.retriable
    finally:
        server.stop()


def test_stub_covers_every_admin_method() -> None:
    methods = {"CreateTopics", "DeleteTopics", "ListTopics", "DescribeTopics", "DescribeConfigs",
               "AlterConfigs", "CreatePartitions", "DeleteRecords", "DescribeCluster"}  # fmt: skip
    assert methods <= set(dir(gateway_pb2_grpc.GatewayServicer))
