"""The gateway's ACL rules on requests and answers, without a server: refused topic items
are taken out before forwarding and answered in request order, a call with every item
refused is not forwarded, whole-call refusals carry Kafka's codes, and listings are filtered.
Dormant (no binding) the authorizer allows everything."""

from __future__ import annotations

import pytest

from riverlog.common.acl.authorizer import AclIndex
from riverlog.common.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.gateway.authorization import GatewayAuthorizer, peer_host
from riverlog.services.gateway.config import GatewayConfig
from riverlog.services.gateway.context import Deadline, RequestContext
from riverlog.services.gateway.rpc.authorization import CHECKED_BY_SERVICER, OPEN, RULES
from riverlog.v1 import admin_pb2, coordinator_pb2, gateway_pb2, transactions_pb2


def _allow(rtype: ResourceType, name: str, op: AclOperation, pattern=PatternType.LITERAL):
    return AclBinding(
        ResourcePattern(rtype, name, pattern),
        AccessControlEntry("User:alice", "*", op, AclPermission.ALLOW),
    )


@pytest.fixture
def authz() -> GatewayAuthorizer:
    a = GatewayAuthorizer(GatewayConfig.from_overrides({"super.users": "User:root"}))
    a.update(
        AclIndex(
            [
                _allow(ResourceType.TOPIC, "ok-", AclOperation.ALL, PatternType.PREFIXED),
                _allow(ResourceType.GROUP, "g", AclOperation.READ),
            ]
        )
    )
    return a


def ctx(user: str = "alice") -> RequestContext:
    return RequestContext("X", Deadline.after(5), peer="ipv4:127.0.0.1:5000", principal=user)


def test_every_gateway_rpc_has_an_acl_check() -> None:
    """A new Gateway RPC (another branch's) fails here until it gets a rule in RULES."""
    methods = {m.name for m in gateway_pb2.DESCRIPTOR.services_by_name["Gateway"].methods}
    unchecked = methods - set(RULES) - CHECKED_BY_SERVICER - OPEN
    assert not unchecked, f"Gateway RPCs without an ACL rule: {sorted(unchecked)}"


def test_peer_host() -> None:
    assert peer_host("ipv4:127.0.0.1:5000") == "127.0.0.1"
    assert peer_host("ipv6:[::1]:5000") == "::1"


def test_dormant_without_bindings() -> None:
    a = GatewayAuthorizer(GatewayConfig())
    a.update(AclIndex())
    assert not a.active
    assert a.allowed(ctx(), AclOperation.DELETE, ResourceType.TOPIC, "t")


def test_closed_to_all_but_super_users_until_the_first_image() -> None:
    a = GatewayAuthorizer(GatewayConfig.from_overrides({"super.users": "User:root"}))
    assert a.active
    assert not a.allowed(ctx(), AclOperation.READ, ResourceType.TOPIC, "t")
    assert a.allowed(ctx("root"), AclOperation.READ, ResourceType.TOPIC, "t")
    a.update(AclIndex())
    assert a.allowed(ctx(), AclOperation.READ, ResourceType.TOPIC, "t")


def test_disabled_authorizer_ignores_bindings() -> None:
    a = GatewayAuthorizer(GatewayConfig.from_overrides({"authorizer.enable": "false"}))
    a.update(AclIndex([_allow(ResourceType.TOPIC, "x", AclOperation.READ)]))
    assert not a.active


def test_refused_topics_are_answered_in_order_and_not_forwarded(authz: GatewayAuthorizer) -> None:
    request = admin_pb2.DeleteTopicsRequest(names=["no-1", "ok-a", "no-2", "ok-b"])
    plan = RULES["DeleteTopics"](authz, ctx(), request)
    assert plan is not None and not plan.skip
    assert list(request.names) == ["ok-a", "ok-b"]  # only these are forwarded
    forwarded = admin_pb2.DeleteTopicsResponse(
        topics=[admin_pb2.TopicResult(name="ok-b"), admin_pb2.TopicResult(name="ok-a")]
    )
    answer = plan.after(forwarded)
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("no-1", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("ok-a", 0),
        ("no-2", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("ok-b", 0),
    ]


def test_every_item_refused_skips_the_call(authz: GatewayAuthorizer) -> None:
    request = admin_pb2.CreateTopicsRequest(topics=[admin_pb2.CreatableTopic(name="no")])
    plan = RULES["CreateTopics"](authz, ctx(), request)
    assert plan is not None and plan.skip and plan.empty is not None
    answer = plan.after(plan.empty())
    assert [t.error_code for t in answer.topics] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]


def test_node_configs_need_the_cluster(authz: GatewayAuthorizer) -> None:
    request = admin_pb2.DescribeConfigsRequest(topics=["ok-a"], all_nodes=True)
    with pytest.raises(RiverlogError) as info:
        RULES["DescribeConfigs"](authz, ctx(), request)
    assert info.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_whole_call_refusals_carry_kafka_codes(authz: GatewayAuthorizer) -> None:
    cases = [
        ("JoinGroup", coordinator_pb2.JoinGroupRequest(group_id="h"), 30),
        ("ElectLeaders", admin_pb2.ElectLeadersRequest(), 31),
        ("EndTxn", transactions_pb2.EndTxnRequest(transactional_id="tx"), 53),
        ("OffsetCommit", coordinator_pb2.OffsetCommitRequest(group_id="h"), 30),
    ]  # fmt: skip
    for method, request, code in cases:
        with pytest.raises(RiverlogError) as info:
            RULES[method](authz, ctx(), request)
        assert info.value.code == code, method
    RULES["JoinGroup"](authz, ctx(), coordinator_pb2.JoinGroupRequest(group_id="g"))
    RULES["ElectLeaders"](authz, ctx("root"), admin_pb2.ElectLeadersRequest())  # super user


def test_offset_commit_refuses_per_partition(authz: GatewayAuthorizer) -> None:
    topics = [
        coordinator_pb2.OffsetCommitTopic(
            name=name,
            partitions=[coordinator_pb2.OffsetCommitPartition(partition=p) for p in (0, 1)],
        )
        for name in ("no", "ok-a")
    ]
    request = coordinator_pb2.OffsetCommitRequest(group_id="g", topics=topics)
    plan = RULES["OffsetCommit"](authz, ctx(), request)
    assert plan is not None and plan.after is not None and not plan.skip
    assert [t.name for t in request.topics] == ["ok-a"]  # only this one is committed
    committed = coordinator_pb2.OffsetCommitResponse(
        topics=[
            coordinator_pb2.OffsetCommitTopicResponse(
                name="ok-a",
                partitions=[coordinator_pb2.OffsetCommitPartitionResponse(partition=0)],
            )
        ]
    )
    answer = plan.after(committed)
    assert [
        (t.name, [(p.partition, p.error_code) for p in t.partitions]) for t in answer.topics
    ] == [
        (
            "no",
            [(0, ErrorCode.TOPIC_AUTHORIZATION_FAILED), (1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)],
        ),
        ("ok-a", [(0, 0)]),
    ]
    only_refused = coordinator_pb2.OffsetCommitRequest(group_id="g", topics=topics[:1])
    skipped = RULES["OffsetCommit"](authz, ctx(), only_refused)
    assert skipped is not None and skipped.skip


def _fetched(response: coordinator_pb2.OffsetFetchResponse) -> list[tuple[str, list[tuple]]]:
    return [
        (t.name, [(p.partition, p.committed_offset, p.error_code) for p in t.partitions])
        for t in response.topics
    ]


def test_offset_fetch_answers_refused_topics_per_partition(authz: GatewayAuthorizer) -> None:
    """Kafka's broker: a topic the caller may not DESCRIBE is answered, each asked partition
    with offset -1 and TOPIC_AUTHORIZATION_FAILED, never left out (a consumer reads a missing
    partition as "nothing committed" and resets it)."""
    request = coordinator_pb2.OffsetFetchRequest(
        group_id="g",
        topics=[
            coordinator_pb2.OffsetFetchTopic(name="no", partitions=[0, 1]),
            coordinator_pb2.OffsetFetchTopic(name="ok-a", partitions=[0]),
        ],
    )
    plan = RULES["OffsetFetch"](authz, ctx(), request)
    assert plan is not None and plan.after is not None and not plan.skip
    assert [t.name for t in request.topics] == ["ok-a"]  # only this one is forwarded
    forwarded = coordinator_pb2.OffsetFetchResponse(
        topics=[
            coordinator_pb2.OffsetFetchTopicResponse(
                name="ok-a",
                partitions=[
                    coordinator_pb2.OffsetFetchPartitionResponse(partition=0, committed_offset=7)
                ],
            )
        ]
    )
    denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert _fetched(plan.after(forwarded)) == [
        ("no", [(0, -1, denied), (1, -1, denied)]),
        ("ok-a", [(0, 7, 0)]),
    ]
    refused = plan.after(forwarded).topics[0].partitions[0]
    assert refused.committed_leader_epoch == -1 and "DESCRIBE" in refused.error_message
    only_refused = coordinator_pb2.OffsetFetchRequest(
        group_id="g", topics=[coordinator_pb2.OffsetFetchTopic(name="no", partitions=[3])]
    )
    skipped = RULES["OffsetFetch"](authz, ctx(), only_refused)
    assert skipped is not None and skipped.skip and skipped.empty is not None
    assert skipped.after is not None
    assert _fetched(skipped.after(skipped.empty())) == [("no", [(3, -1, denied)])]


def test_offset_fetch_of_every_topic_shows_only_described_ones(authz: GatewayAuthorizer) -> None:
    """Kafka's all-topics OffsetFetch leaves out the topics the caller may not DESCRIBE."""
    request = coordinator_pb2.OffsetFetchRequest(group_id="g", all_topics=True)
    plan = RULES["OffsetFetch"](authz, ctx(), request)
    assert plan is not None and plan.after is not None and not plan.skip
    forwarded = coordinator_pb2.OffsetFetchResponse(
        topics=[
            coordinator_pb2.OffsetFetchTopicResponse(
                name=name,
                partitions=[
                    coordinator_pb2.OffsetFetchPartitionResponse(partition=0, committed_offset=1)
                ],
            )
            for name in ("secret", "ok-a")
        ]
    )
    assert _fetched(plan.after(forwarded)) == [("ok-a", [(0, 1, 0)])]


def test_offset_fetch_needs_describe_on_the_group(authz: GatewayAuthorizer) -> None:
    request = coordinator_pb2.OffsetFetchRequest(
        group_id="h", topics=[coordinator_pb2.OffsetFetchTopic(name="ok-a", partitions=[0])]
    )
    with pytest.raises(RiverlogError) as info:
        RULES["OffsetFetch"](authz, ctx(), request)
    assert info.value.code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert [t.name for t in request.topics] == ["ok-a"]  # untouched: the whole call fails


def test_idempotent_producer_needs_write_on_some_topic(authz: GatewayAuthorizer) -> None:
    RULES["InitProducerId"](authz, ctx(), transactions_pb2.InitProducerIdRequest())
    with pytest.raises(RiverlogError) as info:
        RULES["InitProducerId"](authz, ctx("bob"), transactions_pb2.InitProducerIdRequest())
    assert info.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_listings_show_only_what_may_be_described(authz: GatewayAuthorizer) -> None:
    plan = RULES["ListTopics"](authz, ctx(), admin_pb2.ListTopicsRequest())
    assert plan is not None and plan.after is not None
    answer = plan.after(admin_pb2.ListTopicsResponse(names=["ok-a", "secret", "ok-b"]))
    assert list(answer.names) == ["ok-a", "ok-b"]
    groups = RULES["ListGroups"](authz, ctx(), coordinator_pb2.ListGroupsRequest())
    assert groups is not None and groups.after is not None
    listed = groups.after(
        coordinator_pb2.ListGroupsResponse(
            groups=[coordinator_pb2.ListedGroup(group_id=g) for g in ("g", "h")]
        )
    )
    assert [g.group_id for g in listed.groups] == ["g"]
