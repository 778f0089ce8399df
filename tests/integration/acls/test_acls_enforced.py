"""ACLs through real processes (etcd, two metadata instances, a storage node, a coordinator and
two gateways whose super users are User:admin and, for the fixtures' topic helper,
User:ANONYMOUS): a principal without WRITE cannot produce and
nothing is written, READ on a prefix reads and lists only the matching topics, a group ACL
blocks joining, DescribeLogDirs needs DESCRIBE on the cluster, a change applies on both
gateways (the time it took is printed), and a grant of direct data access (decision 0047)
needs the operation's ACL on every topic it names. The SDK clients' cases run against both
SDK flavours, sync and asyncio (the `sdk` fixture, sdk_flavours.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from direct_client import DirectConnection, fetch_request
from sdk_flavours import Sdk

from riverlog.client import AdminClient, Consumer, TopicPartition
from riverlog.cluster import LocalCluster
from riverlog.common.acl.convert import binding_to_proto, filter_to_proto
from riverlog.common.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records.builder import BatchBuilder
from riverlog.common.rpc.status import from_rpc_error
from riverlog.v1 import (
    acls_pb2,
    admin_pb2,
    common_pb2,
    coordinator_pb2,
    data_pb2,
    gateway_pb2,
    gateway_pb2_grpc,
    metadata_pb2_grpc,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

USERS = {
    "admin": "pw-admin",
    "alice": "pw-alice",
    "bob": "pw-bob",
    "dave": "pw-dave",
    "frank": "pw-frank",
    "carol": "pw-carol",  # last but one: the fixture waits until it authenticates
    "erin": "pw-erin",
}


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        Path(tmp_path_factory.mktemp("acls")),
        storage_nodes=1,
        metadata_nodes=2,  # one forwards ACL writes to the other, the controller
        gateways=2,
        coordinators=1,
        extra_config={
            # ANONYMOUS too: the cluster's own create_topic helper calls without credentials
            "gateway": {"super.users": "User:admin;User:ANONYMOUS"},
            "metadata": {"offsets.topic.num.partitions": "2"},
            "coordinator": {"group.initial.rebalance.delay.ms": "0"},
        },
    ) as local:
        with _admin(local, user="") as anonymous:  # users first (no ACL yet: anyone may)
            for name, password in USERS.items():
                anonymous.upsert_user(name, password)
        for gateway in (0, 1):  # every gateway knows them
            with Caller(local, "carol", gateway) as carol:
                assert _until(lambda: _authenticates(carol), 10.0)
        # One ACL from the start, so enforcement is on for every test whatever runs first.
        local.create_topic(BASELINE_TOPIC, partitions=1)
        with _admin(local) as admin:
            admin.create_acls([_binding(BASELINE_TOPIC, AclOperation.READ, "User:carol")])
        for gateway in (0, 1):
            with Caller(local, "alice", gateway) as alice:
                assert _until(lambda: _refuses_fetch(alice, BASELINE_TOPIC), 30.0)
        yield local


BASELINE_TOPIC = "acl-baseline"


def _refuses_fetch(caller: Caller, topic: str) -> bool:
    try:
        return caller.fetch_records(topic).error_code != 0
    except grpc.RpcError:
        return True


def _authenticates(caller: Caller) -> bool:
    try:
        caller.list_topics()
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
        return False
    return True


def _admin(cluster: LocalCluster, user: str = "admin", gateway: int = 0) -> AdminClient:
    conf = {"bootstrap.servers": cluster.gateway_addresses[gateway]}
    if user:
        conf |= {"sasl.username": user, "sasl.password": USERS[user]}
    return AdminClient(conf)


class Caller:
    """Raw Gateway calls as one user on one gateway."""

    def __init__(self, cluster: LocalCluster, user: str, gateway: int = 0) -> None:
        self.channel = grpc.insecure_channel(cluster.gateway_addresses[gateway])
        self.stub = gateway_pb2_grpc.GatewayStub(self.channel)
        self.metadata = (("riverlog-user", user), ("riverlog-password", USERS[user]))

    def __enter__(self) -> Caller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.channel.close()

    def call(self, method: Callable[..., object], request: object) -> object:
        return method(request, metadata=self.metadata, timeout=15)

    def produce(self, topic: str) -> data_pb2.ProducePartitionResponse:
        builder = BatchBuilder()
        builder.append(1_700_000_000_000, b"k", b"v")
        request = data_pb2.ProduceRequest(
            acks=common_pb2.ACKS_LEADER,
            timeout_ms=10_000,
            partitions=[
                data_pb2.ProducePartition(topic=topic, partition=0, records=builder.build())
            ],
        )
        response = self.stub.Produce(request, metadata=self.metadata, timeout=15)
        return response.partitions[0]

    def end_offset(self, topic: str) -> int:
        request = data_pb2.ListOffsetsRequest(
            partitions=[
                data_pb2.ListOffsetsPartition(
                    topic=topic, partition=0, spec=common_pb2.OFFSET_SPEC_LATEST
                )
            ]
        )
        response = self.stub.ListOffsets(request, metadata=self.metadata, timeout=15)
        assert response.partitions[0].error_code == 0, response
        return response.partitions[0].offset

    def fetch_records(self, topic: str) -> gateway_pb2.FetchRecordsResponse:
        request = gateway_pb2.FetchRecordsRequest(topic=topic, partition=0, offset=0)
        return self.stub.FetchRecords(request, metadata=self.metadata, timeout=15)

    def list_topics(self) -> list[str]:
        response = self.stub.ListTopics(
            admin_pb2.ListTopicsRequest(), metadata=self.metadata, timeout=15
        )
        return list(response.names)


def _binding(
    name: str,
    op: AclOperation,
    principal: str,
    rtype: ResourceType = ResourceType.TOPIC,
    pattern: PatternType = PatternType.LITERAL,
    permission: AclPermission = AclPermission.ALLOW,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, "*", op, permission)
    )


def _refused(call: Callable[[], object]) -> ErrorCode:
    with pytest.raises(grpc.RpcError) as info:
        call()
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
    return from_rpc_error(info.value).code  # type: ignore[arg-type]


def _until(condition: Callable[[], bool], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)  # a bounded poll, not a wait for a race to end


def test_without_write_nothing_is_written(acl_cluster: LocalCluster) -> None:
    topic = "acl-orders"
    acl_cluster.create_topic(topic, partitions=1)
    with _admin(acl_cluster) as admin:
        admin.create_acls([_binding(topic, AclOperation.READ, "User:alice")])
    with (
        Caller(acl_cluster, "admin") as admin,
        Caller(acl_cluster, "alice") as alice,
        Caller(acl_cluster, "carol") as carol,
    ):
        assert _until(lambda: topic not in carol.list_topics(), 5.0)  # ACLs are enforced
        before = admin.end_offset(topic)
        for caller in (alice, carol):  # READ only; nothing at all
            result = caller.produce(topic)
            assert result.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            assert "not authorized to WRITE" in result.error_message
        code = _refused(
            lambda: alice.call(
                alice.stub.ProduceRecords,
                gateway_pb2.ProduceRecordsRequest(
                    topic=topic, records=[common_pb2.Record(value=b"x", has_value=True)]
                ),
            )
        )
        assert code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert admin.end_offset(topic) == before  # nothing was written
        assert admin.produce(topic).error_code == 0  # the super user may
        assert admin.end_offset(topic) == before + 1
        with _admin(acl_cluster) as client:
            client.create_acls([_binding(topic, AclOperation.WRITE, "User:alice")])
        assert _until(lambda: alice.produce(topic).error_code == 0, 5.0)
        assert admin.end_offset(topic) == before + 2


def test_read_on_a_prefix_reads_and_lists_only_matching_topics(acl_cluster: LocalCluster) -> None:
    for name in ("sales-eu", "sales-us", "hr-pay"):
        acl_cluster.create_topic(name, partitions=1)
    with Caller(acl_cluster, "admin") as admin:
        for name in ("sales-eu", "sales-us", "hr-pay"):
            assert admin.produce(name).error_code == 0
    with _admin(acl_cluster) as client:
        client.create_acls(
            [_binding("sales-", AclOperation.READ, "User:bob", pattern=PatternType.PREFIXED)]
        )
    with Caller(acl_cluster, "bob") as bob:
        assert _until(lambda: "sales-eu" in bob.list_topics(), 5.0)
        listed = bob.list_topics()
        assert {"sales-eu", "sales-us"} <= set(listed)
        assert not [t for t in listed if not t.startswith("sales-")]
        meta = bob.call(bob.stub.GetMetadata, gateway_pb2.GetMetadataRequest())
        assert {t.name for t in meta.topics} == set(listed)  # type: ignore[attr-defined]
        named = bob.call(
            bob.stub.GetMetadata,
            gateway_pb2.GetMetadataRequest(topics=["sales-eu", "hr-pay", "hr-none"]),
        )
        assert [t.name for t in named.topics] == ["sales-eu"]  # type: ignore[attr-defined]
        errors = {e.name: e.error_code for e in named.errors}  # type: ignore[attr-defined]
        denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # existing or not: no leak
        assert errors == {"hr-pay": denied, "hr-none": denied}
        read = bob.fetch_records("sales-eu")
        assert read.error_code == 0 and [r.value for r in read.records] == [b"v"]
        assert _refused(lambda: bob.fetch_records("hr-pay")) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        fetch = bob.call(
            bob.stub.Fetch,
            data_pb2.FetchRequest(
                max_bytes=1 << 20,
                partitions=[
                    data_pb2.FetchPartition(topic="hr-pay", partition=0, fetch_offset=0),
                    data_pb2.FetchPartition(topic="sales-us", partition=0, fetch_offset=0),
                ],
            ),
        )
        codes = {p.topic: p.error_code for p in fetch.partitions}  # type: ignore[attr-defined]
        assert codes == {"hr-pay": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "sales-us": 0}
        assert bob.produce("sales-eu").error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _join(caller: Caller, group: str) -> object:
    request = coordinator_pb2.JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=[coordinator_pb2.JoinGroupProtocol(name="range", metadata=b"")],
    )
    return caller.call(caller.stub.JoinGroup, request)


def test_a_group_acl_blocks_joining(acl_cluster: LocalCluster) -> None:
    group = "acl-group"
    acl_cluster.create_topic("acl-group-topic", partitions=1)
    with _admin(acl_cluster) as client:
        client.create_acls(
            [_binding("acl-", AclOperation.READ, "User:carol", pattern=PatternType.PREFIXED)]
        )
    with Caller(acl_cluster, "carol") as carol:
        assert _until(lambda: "acl-group-topic" in carol.list_topics(), 5.0)
        assert _refused(lambda: _join(carol, group)) == ErrorCode.GROUP_AUTHORIZATION_FAILED
        with _admin(acl_cluster) as client:
            client.create_acls(
                [_binding(group, AclOperation.READ, "User:carol", rtype=ResourceType.GROUP)]
            )
            found = client.describe_acls(AclBindingFilter(ResourceType.GROUP, group))
            assert [b.entry.principal for b in found] == ["User:carol"]

        def joined() -> bool:
            try:
                answer = _join(carol, group)
            except grpc.RpcError as exc:
                assert from_rpc_error(exc).code == ErrorCode.GROUP_AUTHORIZATION_FAILED  # type: ignore[arg-type]
                return False
            return answer.error_code in (0, ErrorCode.MEMBER_ID_REQUIRED)  # type: ignore[attr-defined]

        assert _until(joined, 10.0)


def test_a_change_applies_on_every_gateway(acl_cluster: LocalCluster) -> None:
    """Both ways, on both gateways. How long it took is printed (the aim is under a second;
    a timing is not asserted: a loaded CI machine would make it flaky)."""
    topic = "acl-everywhere"
    acl_cluster.create_topic(topic, partitions=1)
    callers = [Caller(acl_cluster, "alice", gateway=i) for i in (0, 1)]
    try:

        def readable_everywhere(expected: bool) -> bool:
            outcomes = []
            for caller in callers:
                try:
                    outcomes.append(caller.fetch_records(topic).error_code == 0)
                except grpc.RpcError:
                    outcomes.append(False)
            return all(o == expected for o in outcomes)

        assert readable_everywhere(False)
        binding = _binding(topic, AclOperation.READ, "User:alice")
        with _admin(acl_cluster, gateway=1) as client:
            client.create_acls([binding])
            added = time.monotonic()
        assert _until(lambda: readable_everywhere(True), 30.0)
        took_add = time.monotonic() - added
        with _admin(acl_cluster, gateway=0) as client:
            deleted = client.delete_acls([AclBindingFilter(ResourceType.TOPIC, topic)])
            removed = time.monotonic()
        assert deleted == [[binding]]
        assert _until(lambda: readable_everywhere(False), 30.0)
        took_remove = time.monotonic() - removed
        print(f"[acl] applied on both gateways {took_add * 1000:.0f} ms after CreateAcls, "
              f"{took_remove * 1000:.0f} ms after DeleteAcls")  # fmt: skip
    finally:
        for caller in callers:
            caller.channel.close()


def test_acl_calls_need_the_cluster_permission(acl_cluster: LocalCluster) -> None:
    with _admin(acl_cluster, user="bob") as bob:
        with pytest.raises(RiverlogError) as info:
            bob.create_acls([_binding("x", AclOperation.ALL, "User:bob")])
        assert info.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        with pytest.raises(RiverlogError) as info:
            bob.describe_acls()
        assert info.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with _admin(acl_cluster) as admin:
        assert not admin.describe_acls(AclBindingFilter(name="x"))
        with pytest.raises(RiverlogError) as info:
            admin.create_acls([_binding("x", AclOperation.ALL, "bob")])
        assert info.value.code == ErrorCode.INVALID_REQUEST
        assert not admin.describe_acls(AclBindingFilter(name="x"))


def test_describe_log_dirs_needs_describe_on_the_cluster(acl_cluster: LocalCluster) -> None:
    """Kafka's rule for DescribeLogDirs (decision 0040): DESCRIBE on the cluster, else
    CLUSTER_AUTHORIZATION_FAILED; READ on the topic is not enough."""
    topic = "acl-log-dirs"
    acl_cluster.create_topic(topic, partitions=1)
    on_topic = _binding(topic, AclOperation.READ, "User:dave")
    on_cluster = _binding(
        "kafka-cluster", AclOperation.DESCRIBE, "User:dave", rtype=ResourceType.CLUSTER
    )
    with _admin(acl_cluster) as admin:
        admin.create_acls([on_topic])
        try:
            with _admin(acl_cluster, user="dave") as dave:
                with pytest.raises(RiverlogError) as info:
                    dave.describe_log_dirs([topic])
                assert info.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                admin.create_acls([on_cluster])
                assert _until(lambda: _describes_log_dirs(dave, topic), 10.0)
                assert list(dave.describe_log_dirs([topic]).replicas(TopicPartition(topic, 0)))
            assert admin.describe_log_dirs([topic]).replicas(TopicPartition(topic, 0))  # super
        finally:
            admin.delete_acls(
                [AclBindingFilter(name=n, principal="User:dave") for n in (topic, "kafka-cluster")]
            )


def _describes_log_dirs(admin: AdminClient, topic: str) -> bool:
    try:
        admin.describe_log_dirs([topic])
    except RiverlogError as exc:
        assert exc.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return False
    return True


def test_cli_adds_lists_and_removes(
    acl_cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    from riverlog.cli.main import main

    conn = ["--bootstrap", acl_cluster.gateway_addresses[0], "--user", "admin"]
    conn += ["--password", USERS["admin"]]
    resource = ["--topic", "cli-", "--resource-pattern-type", "PREFIXED"]
    add = ["acls", "add", "--allow-principal", "User:dave", "--operation", "Read", *resource]
    assert main([*add, *conn]) == 0
    capsys.readouterr()
    assert main(["acls", "list", *resource, "--json", *conn]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed == [
        {
            "resource_type": "TOPIC",
            "resource_name": "cli-",
            "pattern_type": "PREFIXED",
            "principal": "User:dave",
            "host": "*",
            "operation": "READ",
            "permission_type": "ALLOW",
        }
    ]
    bob = ["--bootstrap", acl_cluster.gateway_addresses[0], "--user", "bob"]
    assert main(["acls", "list", *bob, "--password", USERS["bob"]]) == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in capsys.readouterr().err
    assert main(["acls", "remove", *resource, *conn]) == 0
    assert "Removed 1 ACL binding(s)." in capsys.readouterr().out
    assert main(["acls", "list", *resource, "--json", *conn]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_more_patterns_than_one_etcd_transaction_holds(acl_cluster: LocalCluster) -> None:
    # etcd's --max-txn-ops (128) bounds one transaction: the controller writes in runs
    many = [_binding(f"bulk-{i}", AclOperation.READ, "User:erin") for i in range(300)]
    with _admin(acl_cluster) as admin:
        assert set(admin.create_acls(many).values()) == {None}
        assert len(admin.describe_acls(AclBindingFilter(principal="User:erin"))) == 300
        deleted = admin.delete_acls([AclBindingFilter(principal="User:erin")])
        assert sorted(deleted[0], key=str) == sorted(many, key=str)
        assert admin.describe_acls(AclBindingFilter(principal="User:erin")) == []


def test_sdk_clients_see_kafkas_errors(sdk: Sdk, acl_cluster: LocalCluster) -> None:
    topic = f"acl-sdk-{sdk.name}"
    acl_cluster.create_topic(topic, partitions=1)
    with _admin(acl_cluster) as admin:
        admin.create_acls([_binding(topic, AclOperation.READ, "User:erin")])
    conf = {
        "bootstrap.servers": acl_cluster.gateway_addresses[0],
        "sasl.username": "erin",
        "sasl.password": USERS["erin"],
    }
    with sdk.Producer({**conf, "enable.idempotence": False, "retries": 0}) as producer:
        future = producer.send(topic, b"v", partition=0)
        producer.flush(timeout=15)
        with pytest.raises(RiverlogError) as info:
            future.get(timeout=15)
        assert info.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    group = {"group.id": f"{topic}-group", "auto.offset.reset": "earliest"}
    with sdk.Consumer({**conf, **group}) as c:
        c.subscribe([topic])
        with pytest.raises(RiverlogError) as info:
            for _ in range(20):
                c.poll(timeout_ms=500)
        assert info.value.code == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_every_metadata_instance_takes_acl_writes(acl_cluster: LocalCluster) -> None:
    # the controller writes (fenced); the other instance forwards to it; both answer reads
    addresses = acl_cluster.metadata_addresses
    assert len(addresses) == 2
    for i, address in enumerate(addresses):
        binding = _binding(f"meta-{i}", AclOperation.READ, "User:frank")
        with grpc.insecure_channel(address) as channel:
            stub = metadata_pb2_grpc.MetadataServiceStub(channel)
            created = stub.CreateAcls(
                acls_pb2.CreateAclsRequest(creations=[binding_to_proto(binding)]), timeout=15
            )
            assert [r.error_code for r in created.results] == [0]
    wanted = filter_to_proto(AclBindingFilter(principal="User:frank"))

    def both_listed(stub: metadata_pb2_grpc.MetadataServiceStub) -> bool:
        answer = stub.DescribeAcls(acls_pb2.DescribeAclsRequest(filter=wanted), timeout=15)
        return sorted(b.resource_name for b in answer.bindings) == ["meta-0", "meta-1"]

    for address in addresses:
        with grpc.insecure_channel(address) as channel:
            stub = metadata_pb2_grpc.MetadataServiceStub(channel)
            assert _until(lambda: both_listed(stub), 5.0)  # noqa: B023
    with _admin(acl_cluster) as admin:
        admin.delete_acls([AclBindingFilter(principal="User:frank")])


def test_a_consumer_with_read_on_topic_and_group_consumes_and_commits(
    sdk: Sdk, acl_cluster: LocalCluster
) -> None:
    topic, group = f"acl-commit-{sdk.name}", f"acl-commit-group-{sdk.name}"
    acl_cluster.create_topic(topic, partitions=1)
    with Caller(acl_cluster, "admin") as admin:
        assert admin.produce(topic).error_code == 0
    with _admin(acl_cluster) as client:
        client.create_acls(
            [
                _binding(topic, AclOperation.READ, "User:erin"),
                _binding(group, AclOperation.READ, "User:erin", rtype=ResourceType.GROUP),
            ]
        )
    conf = {
        "bootstrap.servers": acl_cluster.gateway_addresses[1],
        "sasl.username": "erin",
        "sasl.password": USERS["erin"],
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    tp = TopicPartition(topic, 0)
    with sdk.Consumer(conf) as consumer:
        consumer.subscribe([topic])
        values: list[bytes | None] = []
        deadline = time.monotonic() + 60
        while not values and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in batch)
        assert values == [b"v"]
        consumer.commit_sync()
        committed = consumer.committed([tp])[tp]
        assert committed is not None and committed.offset == 1


def _fetch_offsets(caller: Caller, group: str, topics: list[str]) -> object:
    request = coordinator_pb2.OffsetFetchRequest(
        group_id=group,
        topics=[coordinator_pb2.OffsetFetchTopic(name=t, partitions=[0]) for t in topics],
    )
    return caller.call(caller.stub.OffsetFetch, request)


def test_offset_fetch_answers_refused_topics_and_the_sdk_raises(acl_cluster: LocalCluster) -> None:
    """Kafka's OffsetFetch: a topic the principal may not DESCRIBE answers each asked partition
    TOPIC_AUTHORIZATION_FAILED with offset -1 (it was left out, which the SDK read as "nothing
    committed" and reset), a group it may not DESCRIBE fails the call with
    GROUP_AUTHORIZATION_FAILED; the SDK consumer's committed() raises both, the admin client's
    list_group_offsets skips the refused partition and raises the refused group."""
    allowed, secret, group = "acl-offsets-ok", "acl-offsets-secret", "acl-offsets-group"
    for topic in (allowed, secret):
        acl_cluster.create_topic(topic, partitions=1)
    commit = coordinator_pb2.OffsetCommitRequest(
        group_id=group,
        generation_id=-1,
        topics=[
            coordinator_pb2.OffsetCommitTopic(
                name=t,
                partitions=[coordinator_pb2.OffsetCommitPartition(partition=0, committed_offset=3)],
            )
            for t in (allowed, secret)
        ],
    )
    with Caller(acl_cluster, "admin") as admin:
        committed = admin.call(admin.stub.OffsetCommit, commit)
        assert [p.error_code for t in committed.topics for p in t.partitions] == [0, 0]  # type: ignore[attr-defined]
    with _admin(acl_cluster) as client:
        client.create_acls(
            [
                _binding(allowed, AclOperation.READ, "User:dave"),
                _binding(group, AclOperation.READ, "User:dave", rtype=ResourceType.GROUP),
            ]
        )
    with Caller(acl_cluster, "dave") as dave:

        def granted() -> bool:
            try:
                answer = _fetch_offsets(dave, group, [allowed])
            except grpc.RpcError:
                return False
            return answer.topics[0].partitions[0].committed_offset == 3  # type: ignore[attr-defined, no-any-return]

        assert _until(granted, 10.0)
        answer = _fetch_offsets(dave, group, [secret, allowed])
        assert [
            (t.name, [(p.partition, p.committed_offset, p.error_code) for p in t.partitions])
            for t in answer.topics  # type: ignore[attr-defined]
        ] == [
            (secret, [(0, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]),
            (allowed, [(0, 3, 0)]),
        ]
        assert (
            _refused(lambda: _fetch_offsets(dave, "acl-offsets-other", [allowed]))
            == ErrorCode.GROUP_AUTHORIZATION_FAILED
        )
    conf = {
        "bootstrap.servers": acl_cluster.gateway_addresses[0],
        "sasl.username": "dave",
        "sasl.password": USERS["dave"],
    }
    with Consumer({**conf, "group.id": group}) as consumer:
        found = consumer.committed([TopicPartition(allowed, 0)], timeout_ms=15_000)
        assert [(tp.topic, c.offset if c else None) for tp, c in found.items()] == [(allowed, 3)]
        with pytest.raises(RiverlogError, match=secret) as info:
            consumer.committed([TopicPartition(secret, 0)], timeout_ms=15_000)
        assert info.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    with Consumer({**conf, "group.id": "acl-offsets-other"}) as consumer:
        with pytest.raises(RiverlogError) as info:
            consumer.committed([TopicPartition(allowed, 0)], timeout_ms=15_000)
        assert info.value.code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    # The admin client, as Kafka's listConsumerGroupOffsets, leaves the refused partition out
    # (a warning in its log) and answers the others; a refused group fails the call.
    asked = [TopicPartition(secret, 0), TopicPartition(allowed, 0)]
    with _admin(acl_cluster, "dave") as admin_client:
        offsets = admin_client.list_group_offsets(group, asked)
        assert {tp: om.offset for tp, om in offsets.items()} == {TopicPartition(allowed, 0): 3}
        with pytest.raises(RiverlogError) as info:
            admin_client.list_group_offsets("acl-offsets-other", asked)
        assert info.value.code == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_a_direct_access_grant_needs_the_acl_on_every_topic(acl_cluster: LocalCluster) -> None:
    topic = "acl-direct"
    acl_cluster.create_topic(topic, partitions=1)
    with Caller(acl_cluster, "admin") as admin:
        assert admin.produce(topic).error_code == 0
    with _admin(acl_cluster) as client:
        client.create_acls([_binding(topic, AclOperation.READ, "User:frank")])

    def grant(caller: Caller, op: int, topics: list[str]) -> gateway_pb2.GrantDataAccessResponse:
        request = gateway_pb2.GrantDataAccessRequest(
            operation=op,  # type: ignore[arg-type]
            topics=topics,
            node_id=1,
        )
        return caller.call(caller.stub.GrantDataAccess, request)  # type: ignore[return-value]

    with Caller(acl_cluster, "frank") as frank:
        read = gateway_pb2.DATA_ACCESS_READ
        assert _until(lambda: grant(frank, read, [topic]).error_code == 0, 5.0)
        write = grant(frank, gateway_pb2.DATA_ACCESS_WRITE, [topic])
        assert write.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and not write.grant
        assert "not authorized to WRITE" in write.error_message
        mixed = grant(frank, read, [topic, BASELINE_TOPIC])  # one refused: nothing granted
        assert mixed.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and not mixed.grant
        assert BASELINE_TOPIC in mixed.error_message
        granted = grant(frank, read, [topic])
    with DirectConnection(granted.host, granted.direct_port) as conn:
        assert conn.send_grant(granted.grant).error_code == 0
        (part,) = conn.fetch(fetch_request(topic)).partitions
        assert part.error_code == 0 and part.high_watermark == 1 and part.records
