"""The Gateway's consumer-group RPCs (coordinator.proto messages), which the servicer delegates
to a `GroupForwarder`: each builds the request context, fills what the gateway knows of the
caller (client id and host for JoinGroup), and hands the call to the `GroupRouter`, which finds
the group's coordinator and retries coordinator moves until the deadline. The proto work of the
requests the gateway splits or merges (ListGroups over every coordinator, DescribeGroups and
DeleteGroups per group) and FindCoordinator's answer from the image are here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc

from riverlog.common.cluster.convert import find_coordinator_to_proto
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import coordinator_pb2 as pb

from ..config import GatewayConfig
from ..context import Deadline, RequestContext, measured
from ..groups import GroupRouter
from .request_context import RequestContexts

_JOIN_MARGIN_S = 5.0


def host_of(peer: str) -> str:
    """The host part of a gRPC peer string (`ipv4:127.0.0.1:5555`, `ipv6:[::1]:5555`)."""
    _, _, rest = peer.partition(":")
    host = rest.rpartition(":")[0] or rest
    return host.strip("[]")


def find(router: GroupRouter, request: pb.FindCoordinatorRequest) -> pb.FindCoordinatorResponse:
    transactional = request.key_type == pb.COORDINATOR_KEY_TYPE_TRANSACTION
    image = router.cache.image
    if transactional and image.transaction_partitions() == 0:
        router.call_soon_create_transaction_topic()
    return find_coordinator_to_proto(image, request.keys, transactional)


async def merge_from_every_coordinator(
    router: GroupRouter,
    method: str,
    request: Any,
    out: Any,
    rows: Callable[[Any], Any],
    key: Callable[[Any], str],
    deadline: Deadline,
) -> None:
    """`method` on every live coordinator at once; each row (by `key`) once into `rows(out)`,
    and the last error of any that failed into `out` (ListGroups, ListTransactions: a
    partition moving between owners is listed by both)."""
    results = await asyncio.gather(
        *(
            measured(router.peers.call(n, method, request, deadline.remaining()))
            for n in router.coordinators()
        ),
        return_exceptions=True,
    )
    seen: set[str] = set()
    for result in results:
        if isinstance(result, BaseException):
            out.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            out.error_message = str(result)
            continue
        if result.error_code != ErrorCode.NONE:
            out.error_code, out.error_message = result.error_code, result.error_message
        for row in rows(result):
            if key(row) not in seen:
                seen.add(key(row))
                rows(out).append(row)


async def list_groups(
    router: GroupRouter, request: pb.ListGroupsRequest, deadline: Deadline
) -> pb.ListGroupsResponse:
    """Every live coordinator's groups, each group once; the last error of any that failed."""
    out = pb.ListGroupsResponse()
    await merge_from_every_coordinator(
        router, "ListGroups", request, out, lambda r: r.groups, lambda g: g.group_id, deadline
    )
    return out


_PerGroup = TypeVar("_PerGroup", pb.DescribeGroupsResponse, pb.DeleteGroupsResponse)


async def _per_group(
    router: GroupRouter,
    method: str,
    groups: Sequence[str],
    request_type: Callable[..., Any],
    response_type: type[_PerGroup],
    rows: Callable[[_PerGroup], Any],
    deadline: Deadline,
) -> list[Any]:
    """`method` once per group, each to its own coordinator (so each retries its own moves),
    all at once; every group's row in the request's order. A coordinator that answered with
    a whole-response error and no row gets a row carrying that error."""

    async def one(group_id: str) -> Any:
        single = request_type(groups=[group_id])
        answer = await router.call(group_id, method, single, response_type, deadline)
        if not rows(answer):
            rows(answer).add(
                group_id=group_id, error_code=answer.error_code, error_message=answer.error_message
            )
        return rows(answer)

    answers = await asyncio.gather(*(measured(one(g)) for g in groups))
    return [row for answer in answers for row in answer]


async def describe_groups(
    router: GroupRouter, request: pb.DescribeGroupsRequest, deadline: Deadline
) -> pb.DescribeGroupsResponse:
    groups = await _per_group(
        router,
        "DescribeGroups",
        request.groups,
        pb.DescribeGroupsRequest,
        pb.DescribeGroupsResponse,
        lambda answer: answer.groups,
        deadline,
    )
    return pb.DescribeGroupsResponse(groups=groups)


async def delete_groups(
    router: GroupRouter, request: pb.DeleteGroupsRequest, deadline: Deadline
) -> pb.DeleteGroupsResponse:
    results = await _per_group(
        router,
        "DeleteGroups",
        request.groups,
        pb.DeleteGroupsRequest,
        pb.DeleteGroupsResponse,
        lambda answer: answer.results,
        deadline,
    )
    return pb.DeleteGroupsResponse(results=results)


class GroupForwarder:
    """One per gateway process, owned by `GatewayServicer`; called from the servicer's methods
    on the event loop, one task per call. Without a router (`groups` None) every call fails
    with COORDINATOR_NOT_AVAILABLE."""

    def __init__(
        self, router: GroupRouter | None, config: GatewayConfig, contexts: RequestContexts
    ) -> None:
        self.router = router
        self.config = config
        self._contexts = contexts

    def _context(self, method: str, context: grpc.aio.ServicerContext) -> RequestContext:
        return self._contexts.of_call(method, context)

    def _router(self) -> GroupRouter:
        router = self.router
        if router is None:
            raise RiverlogError(
                "this gateway routes no group requests", ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
        return router

    async def FindCoordinator(
        self, request: pb.FindCoordinatorRequest, context: grpc.aio.ServicerContext
    ) -> pb.FindCoordinatorResponse:
        self._context("FindCoordinator", context)
        return find(self._router(), request)

    async def JoinGroup(
        self, request: pb.JoinGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.JoinGroupResponse:
        ctx = self._context("JoinGroup", context)
        # A join waits for the whole rebalance: up to the member's rebalance timeout.
        limit = max(
            self.config.request_timeout_s, request.rebalance_timeout_ms / 1000 + _JOIN_MARGIN_S
        )
        deadline = Deadline.for_call(limit, context.time_remaining())
        if not request.client_id:
            request.client_id = ctx.client_id
        if not request.client_host:
            request.client_host = host_of(ctx.peer)
        response: pb.JoinGroupResponse = await self._router().call(
            request.group_id, "JoinGroup", request, pb.JoinGroupResponse, deadline
        )
        return response

    async def route(
        self, method: str, request: Any, response_type: type[Any], context: grpc.aio.ServicerContext
    ) -> Any:
        """Hand `request` to its group's coordinator as it is (SyncGroup, Heartbeat,
        LeaveGroup, OffsetCommit, OffsetFetch)."""
        ctx = self._context(method, context)
        return await self._router().call(
            request.group_id, method, request, response_type, ctx.deadline
        )

    async def ListGroups(
        self, request: pb.ListGroupsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListGroupsResponse:
        ctx = self._context("ListGroups", context)
        return await list_groups(self._router(), request, ctx.deadline)

    async def DescribeGroups(
        self, request: pb.DescribeGroupsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DescribeGroupsResponse:
        ctx = self._context("DescribeGroups", context)
        return await describe_groups(self._router(), request, ctx.deadline)

    async def DeleteGroups(
        self, request: pb.DeleteGroupsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteGroupsResponse:
        ctx = self._context("DeleteGroups", context)
        return await delete_groups(self._router(), request, ctx.deadline)
