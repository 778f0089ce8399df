"""Kafka's ACL checks around every unary Gateway RPC, as a gRPC server interceptor (decision
0032): refuse, screen, or filter, before anything is forwarded.

Each method has one rule (`RULES`), run with the call's `RequestContext` and request before the
method: it raises Kafka's *_AUTHORIZATION_FAILED error for a call refused whole (cluster
operations, group membership, transactions), or takes the refused items out of the request
(topics to create or delete, configs, partitions to list offsets of or delete records from,
groups to delete, topics whose committed offsets are fetched or committed) and returns a
step that puts their refusals back into the answer in request order, or leaves the request
whole and returns a step that filters the answer (metadata and list calls show only what the
caller may DESCRIBE). A call whose every item was refused is not
forwarded at all, so nothing is written. Produce and fetch (per partition, also on streams)
are checked by the servicer itself (`GatewayAuthorizer.split`). With the authorizer dormant the
interceptor passes every call straight through.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import grpc

from riverlog.common.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from riverlog.common.rpc.convert import error_code_to_proto
from riverlog.v1 import (
    admin_pb2,
    coordinator_pb2,
    data_pb2,
    gateway_pb2,
    transactions_pb2,
)

from ..authorization import GatewayAuthorizer, denied
from ..context import RequestContext
from .request_context import RequestContexts

Op = AclOperation
TOPIC: Final = ResourceType.TOPIC
GROUP: Final = ResourceType.GROUP
TXN: Final = ResourceType.TRANSACTIONAL_ID

After = Callable[[Any], Any]
Behavior = Callable[[Any, grpc.aio.ServicerContext], Coroutine[Any, Any, Any]]


@dataclass(frozen=True, slots=True)
class Plan:
    """What a rule decided: `after` reworks the answer; `skip` answers `after(empty())`
    without calling the method (every item was refused)."""

    after: After | None = None
    skip: bool = False
    empty: Callable[[], Any] | None = None


Rule = Callable[[GatewayAuthorizer, RequestContext, Any], Plan | None]

CLUSTER_OPS: Final[dict[str, AclOperation]] = {
    "ElectLeaders": Op.ALTER,
    "AlterPartitionReassignments": Op.ALTER,
    "ListPartitionReassignments": Op.DESCRIBE,
    "DescribeLogDirs": Op.DESCRIBE,
    "BalanceReplicas": Op.ALTER,
    "AlterNodeDraining": Op.ALTER,
    "AlterClientQuotas": Op.ALTER_CONFIGS,
    "DescribeClientQuotas": Op.DESCRIBE_CONFIGS,
    "UpsertUser": Op.ALTER,
    "DeleteUser": Op.ALTER,
    "ListUsers": Op.DESCRIBE,
    "CreateAcls": Op.ALTER,
    "DescribeAcls": Op.DESCRIBE,
    "DeleteAcls": Op.ALTER,
    # an operator's abort of someone's hanging transaction: Kafka's abort goes through
    # WriteTxnMarkers (CLUSTER_ACTION, a broker's permission); an operator holds ALTER
    "AbortTransaction": Op.ALTER,
}
"""Kafka's cluster operations for the admin calls that change or read the cluster as a whole."""


def _cluster(op: AclOperation) -> Rule:
    def rule(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> None:
        authz.require_cluster(ctx, op)

    return rule


def _screen(
    request: Any,
    field: str,
    allowed: Callable[[Any], bool],
    refusal: Callable[[Any], dict[str, Any]],
    request_key: Callable[[Any], Hashable],
    response_key: Callable[[Any], Hashable],
    response_field: str,
    empty: Callable[[], Any],
    keep_call: bool = False,
) -> Plan | None:
    """Take the refused items of `request.<field>` out; the plan puts `refusal(item)` rows
    back into `response.<response_field>` in request order. `keep_call`: forward even when
    every item was refused (the request carries more than these items)."""
    items: Sequence[Any] = list(getattr(request, field))
    refused = [i for i, item in enumerate(items) if not allowed(item)]
    if not refused:
        return None
    kept = [item for i, item in enumerate(items) if i not in set(refused)]
    del getattr(request, field)[:]
    getattr(request, field).extend(kept)
    refused_set = set(refused)

    def after(response: Any) -> Any:
        rows = list(getattr(response, response_field))
        by_key: dict[Hashable, list[Any]] = {}
        for row in rows:
            by_key.setdefault(response_key(row), []).append(row)
        ordered: list[Any] = []
        for i, item in enumerate(items):
            if i in refused_set:
                ordered.append(refusal(item))
                continue
            found = by_key.get(request_key(item))
            if found:
                ordered.append(found.pop(0))
        leftovers = [row for rest in by_key.values() for row in rest]
        out = getattr(response, response_field)
        del out[:]
        for row in ordered + leftovers:
            if isinstance(row, dict):
                out.add(**row)
            else:
                out.append(row)
        return response

    return Plan(after, skip=not kept and not keep_call, empty=empty)


def _refusal(
    authz: GatewayAuthorizer, ctx: RequestContext, op: AclOperation, rtype: ResourceType
) -> Callable[[str], dict[str, Any]]:
    def row(name: str) -> dict[str, Any]:
        error = denied(ctx, op, rtype, name)
        return {"error_code": error_code_to_proto(error.code), "error_message": error.message}

    return row


def _topic_items(
    field: str, op: AclOperation, name_of: Callable[[Any], str], empty: Callable[[], Any]
) -> Rule:
    """Per-topic admin calls: refused topics answered here, the rest forwarded."""

    def rule(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> Plan | None:
        if op == Op.CREATE:

            def ok(item: Any) -> bool:
                return authz.may_create_topic(ctx, name_of(item))
        else:

            def ok(item: Any) -> bool:
                return authz.allowed(ctx, op, TOPIC, name_of(item))

        nodes = bool(getattr(request, "nodes", ())) or bool(getattr(request, "all_nodes", False))
        if nodes:
            node_op = Op.ALTER_CONFIGS if op == Op.ALTER_CONFIGS else Op.DESCRIBE_CONFIGS
            authz.require_cluster(ctx, node_op)
        refusal = _refusal(authz, ctx, op, TOPIC)
        return _screen(
            request,
            field,
            ok,
            lambda item: {"name": name_of(item), **refusal(name_of(item))},
            name_of,
            lambda row: row.name,
            "topics",
            empty,
            keep_call=nodes,
        )

    return rule


def _partition_items(op: AclOperation, empty: Callable[[], Any]) -> Rule:
    """ListOffsets and DeleteRecords: refused partitions answered here."""

    def rule(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> Plan | None:
        refusal = _refusal(authz, ctx, op, TOPIC)
        return _screen(
            request,
            "partitions",
            lambda p: authz.allowed(ctx, op, TOPIC, p.topic),
            lambda p: {"topic": p.topic, "partition": p.partition, **refusal(p.topic)},
            lambda p: (p.topic, p.partition),
            lambda row: (row.topic, row.partition),
            "partitions",
            empty,
        )

    return rule


def _delete_groups(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> Plan | None:
    refusal = _refusal(authz, ctx, Op.DELETE, GROUP)
    return _screen(
        request,
        "groups",
        lambda g: authz.allowed(ctx, Op.DELETE, GROUP, g),
        lambda g: {"group_id": g, **refusal(g)},
        lambda g: g,
        lambda row: row.group_id,
        "results",
        coordinator_pb2.DeleteGroupsResponse,
    )


# --- answers filtered to what the caller may DESCRIBE ---------------------------------------


def _list_topics(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> Plan:
    def after(response: admin_pb2.ListTopicsResponse) -> Any:
        kept = [n for n in response.names if authz.allowed(ctx, Op.DESCRIBE, TOPIC, n)]
        del response.names[:]
        response.names.extend(kept)
        return response

    return Plan(after)


def _describe_topics(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> Plan:
    named = bool(request.names)
    refusal = _refusal(authz, ctx, Op.DESCRIBE, TOPIC)

    def after(response: admin_pb2.DescribeTopicsResponse) -> Any:
        rows = []
        for row in response.topics:
            if authz.allowed(ctx, Op.DESCRIBE, TOPIC, row.name):
                rows.append(row)
            elif named:  # asked by name: say why it is not described (Kafka's per-topic error)
                rows.append(
                    admin_pb2.DescribeTopicsResponse.Topic(name=row.name, **refusal(row.name))
                )
        del response.topics[:]
        response.topics.extend(rows)
        return response

    return Plan(after)


def _get_metadata(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> Plan:
    named = set(request.topics)
    refusal = _refusal(authz, ctx, Op.DESCRIBE, TOPIC)

    def after(response: gateway_pb2.GetMetadataResponse) -> Any:
        kept = []
        for topic in response.topics:
            if authz.allowed(ctx, Op.DESCRIBE, TOPIC, topic.name):
                kept.append(topic)
            elif topic.name in named:
                response.errors.add(name=topic.name, **refusal(topic.name))
        del response.topics[:]
        response.topics.extend(kept)
        for error in response.errors:  # a hidden name does not say whether it exists
            if not authz.allowed(ctx, Op.DESCRIBE, TOPIC, error.name):
                row = refusal(error.name)
                error.error_code, error.error_message = row["error_code"], row["error_message"]
        return response

    return Plan(after)


def _list_groups(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> Plan | None:
    if authz.allowed(ctx, Op.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return None  # Kafka: DESCRIBE on the cluster lists every group

    def after(response: coordinator_pb2.ListGroupsResponse) -> Any:
        kept = [g for g in response.groups if authz.allowed(ctx, Op.DESCRIBE, GROUP, g.group_id)]
        del response.groups[:]
        response.groups.extend(kept)
        return response

    return Plan(after)


def _describe_groups(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> Plan:
    refusal = _refusal(authz, ctx, Op.DESCRIBE, GROUP)

    def after(response: coordinator_pb2.DescribeGroupsResponse) -> Any:
        rows = [
            g
            if authz.allowed(ctx, Op.DESCRIBE, GROUP, g.group_id)
            else coordinator_pb2.DescribedGroup(group_id=g.group_id, **refusal(g.group_id))
            for g in response.groups
        ]
        del response.groups[:]
        response.groups.extend(rows)
        return response

    return Plan(after)


def _list_transactions(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> Plan:
    def after(response: transactions_pb2.ListTransactionsResponse) -> Any:
        kept = [
            t
            for t in response.transactions
            if authz.allowed(ctx, Op.DESCRIBE, TXN, t.transactional_id)
        ]
        del response.transactions[:]
        response.transactions.extend(kept)
        return response

    return Plan(after)


def _describe_transactions(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> Plan:
    refusal = _refusal(authz, ctx, Op.DESCRIBE, TXN)

    def after(response: transactions_pb2.DescribeTransactionsResponse) -> Any:
        rows = [
            t
            if authz.allowed(ctx, Op.DESCRIBE, TXN, t.transactional_id)
            else transactions_pb2.TransactionDescription(
                transactional_id=t.transactional_id, **refusal(t.transactional_id)
            )
            for t in response.transactions
        ]
        del response.transactions[:]
        response.transactions.extend(rows)
        return response

    return Plan(after)


def _offset_fetch(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> Plan | None:
    """Kafka's handleOffsetFetchRequest: DESCRIBE on the group or the whole call fails with
    GROUP_AUTHORIZATION_FAILED; topics asked by name need DESCRIBE, a refused one's partitions
    are answered TOPIC_AUTHORIZATION_FAILED with offset -1 (not left out, which a consumer would
    read as "nothing committed" and reset); an all-topics answer shows only the topics the
    caller may DESCRIBE."""
    authz.require(ctx, Op.DESCRIBE, GROUP, request.group_id)
    if request.all_topics:
        return _offset_fetch_all(authz, ctx)
    refusal = _refusal(authz, ctx, Op.DESCRIBE, TOPIC)
    return _screen(
        request,
        "topics",
        lambda t: authz.allowed(ctx, Op.DESCRIBE, TOPIC, t.name),
        lambda t: {
            "name": t.name,
            "partitions": [
                {
                    "partition": p,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    **refusal(t.name),
                }
                for p in t.partitions
            ],
        },
        lambda t: t.name,
        lambda row: row.name,
        "topics",
        coordinator_pb2.OffsetFetchResponse,
    )


def _offset_fetch_all(authz: GatewayAuthorizer, ctx: RequestContext) -> Plan:
    def after(response: coordinator_pb2.OffsetFetchResponse) -> Any:
        kept = [t for t in response.topics if authz.allowed(ctx, Op.DESCRIBE, TOPIC, t.name)]
        del response.topics[:]
        response.topics.extend(kept)
        return response

    return Plan(after)


# --- calls refused whole ------------------------------------------------------------------


def _topics_of(request: Any) -> list[str]:
    return [t.name for t in request.topics]


def _group_member(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> None:
    authz.require(ctx, Op.READ, GROUP, request.group_id)


def _require_topics(
    authz: GatewayAuthorizer, ctx: RequestContext, op: AclOperation, names: Sequence[str]
) -> None:
    for name in names:
        authz.require(ctx, op, TOPIC, name)


def _commit_topics(
    authz: GatewayAuthorizer, ctx: RequestContext, request: Any, empty: Callable[[], Any]
) -> Plan | None:
    """READ on each committed topic: a refused topic's partitions are answered with
    TOPIC_AUTHORIZATION_FAILED (Kafka's per-partition answer) and not committed."""
    refusal = _refusal(authz, ctx, Op.READ, TOPIC)
    return _screen(
        request,
        "topics",
        lambda t: authz.allowed(ctx, Op.READ, TOPIC, t.name),
        lambda t: {
            "name": t.name,
            "partitions": [{"partition": p.partition, **refusal(t.name)} for p in t.partitions],
        },
        lambda t: t.name,
        lambda row: row.name,
        "topics",
        empty,
    )


def _offset_commit(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> Plan | None:
    authz.require(ctx, Op.READ, GROUP, request.group_id)
    return _commit_topics(authz, ctx, request, coordinator_pb2.OffsetCommitResponse)


def _txn_offset_commit(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> Plan | None:
    authz.require(ctx, Op.WRITE, TXN, request.transactional_id)
    authz.require(ctx, Op.READ, GROUP, request.group_id)
    return _commit_topics(authz, ctx, request, coordinator_pb2.TxnOffsetCommitResponse)


def _txn_write(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> None:
    authz.require(ctx, Op.WRITE, TXN, request.transactional_id)


def _add_partitions_to_txn(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> None:
    _txn_write(authz, ctx, request)
    _require_topics(authz, ctx, Op.WRITE, _topics_of(request))


def _add_offsets_to_txn(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> None:
    _txn_write(authz, ctx, request)
    authz.require(ctx, Op.READ, GROUP, request.group_id)


def _init_producer_id(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> None:
    if request.transactional_id:
        _txn_write(authz, ctx, request)
    elif not authz.may_write_idempotently(ctx):
        raise denied(ctx, Op.IDEMPOTENT_WRITE, ResourceType.CLUSTER, "")


def _find_coordinator(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> None:
    rtype = TXN if request.key_type == coordinator_pb2.COORDINATOR_KEY_TYPE_TRANSACTION else GROUP
    for key in request.keys:
        authz.require(ctx, Op.DESCRIBE, rtype, key)


def _produce_records(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> None:
    authz.require(ctx, Op.WRITE, TOPIC, request.topic)


def _fetch_records(authz: GatewayAuthorizer, ctx: RequestContext, request: Any) -> None:
    authz.require(ctx, Op.READ, TOPIC, request.topic)


RULES: Final[dict[str, Rule]] = {
    **{method: _cluster(op) for method, op in CLUSTER_OPS.items()},
    "CreateTopics": _topic_items(
        "topics", Op.CREATE, lambda t: t.name, admin_pb2.CreateTopicsResponse
    ),
    "DeleteTopics": _topic_items("names", Op.DELETE, lambda n: n, admin_pb2.DeleteTopicsResponse),
    "CreatePartitions": _topic_items(
        "topics", Op.ALTER, lambda t: t.name, admin_pb2.CreatePartitionsResponse
    ),
    "AlterConfigs": _topic_items(
        "topics", Op.ALTER_CONFIGS, lambda t: t.name, admin_pb2.AlterConfigsResponse
    ),
    "DescribeConfigs": _topic_items(
        "topics", Op.DESCRIBE_CONFIGS, lambda n: n, admin_pb2.DescribeConfigsResponse
    ),
    "ListTopics": _list_topics,
    "DescribeTopics": _describe_topics,
    "GetMetadata": _get_metadata,
    "ListOffsets": _partition_items(Op.DESCRIBE, data_pb2.ListOffsetsResponse),
    "DeleteRecords": _partition_items(Op.DELETE, data_pb2.DeleteRecordsResponse),
    "ProduceRecords": _produce_records,
    "FetchRecords": _fetch_records,
    "FindCoordinator": _find_coordinator,
    "JoinGroup": _group_member,
    "SyncGroup": _group_member,
    "Heartbeat": _group_member,
    "LeaveGroup": _group_member,
    "OffsetCommit": _offset_commit,
    "TxnOffsetCommit": _txn_offset_commit,
    "OffsetFetch": _offset_fetch,
    "ListGroups": _list_groups,
    "DescribeGroups": _describe_groups,
    "DeleteGroups": _delete_groups,
    "InitProducerId": _init_producer_id,
    "AddPartitionsToTxn": _add_partitions_to_txn,
    "AddOffsetsToTxn": _add_offsets_to_txn,
    "EndTxn": _txn_write,
    "DescribeTransactions": _describe_transactions,
    "ListTransactions": _list_transactions,
}
"""Every unary Gateway method but Produce, Fetch (checked per partition by the servicer) and
DescribeCluster (open: node addresses, asked before anyone holds credentials)."""

CHECKED_BY_SERVICER: Final = frozenset(
    {"Produce", "Fetch", "ProduceStream", "FetchStream", "GrantDataAccess"}
)
"""Checked per partition in the servicer (`GatewayServicer._produce` / `_fetch`), or per topic
in the grant's own checks (`direct_access.DataAccess`: refusals go in its answer)."""

OPEN: Final = frozenset({"DescribeCluster"})
"""Never checked (`auth.OPEN_METHODS`: readiness probes, `riverlog cluster status`)."""

_SERVICE = gateway_pb2.DESCRIPTOR.services_by_name["Gateway"]


class AuthorizationInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Runs each Gateway method's rule before the method, and the rule's answer step after.
    Installed inside the request-quota interceptor (which makes the call's context)."""

    def __init__(self, contexts: RequestContexts, authz: GatewayAuthorizer) -> None:
        self._contexts = contexts
        self._authz = authz
        self._methods = {f"/{_SERVICE.full_name}/{name}": name for name in RULES}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        name = self._methods.get(handler_call_details.method)
        if handler is None or name is None or not handler.unary_unary:
            return handler
        return handler._replace(unary_unary=self.checked(name, handler.unary_unary))

    def checked(self, method: str, behavior: Behavior) -> Behavior:
        rule = RULES[method]
        authz = self._authz
        contexts = self._contexts

        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if not authz.active:
                return await behavior(request, context)
            ctx = contexts.of_call(method, context)
            plan = rule(authz, ctx, request)
            if plan is None:
                return await behavior(request, context)
            if plan.skip and plan.empty is not None:
                response = plan.empty()
            else:
                response = await behavior(request, context)
            return plan.after(response) if plan.after is not None else response

        return call
