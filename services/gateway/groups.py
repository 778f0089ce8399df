"""Consumer-group requests: each goes to the coordinator instance that owns the group's
`__consumer_offsets` partition (abs(javaHash(group)) % partitions, owner from the controller's
assignment in the cluster image), as Kafka clients go to the group coordinator.

The gateway hides coordinator moves from clients: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and
COORDINATOR_LOAD_IN_PROGRESS (answered before the coordinator changed anything) are retried
against the newest image until the request's deadline; what is left is returned to the client
in the response's error_code. ListGroups asks every live coordinator; DescribeGroups and
DeleteGroups are split per group. FindCoordinator is answered from the image alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

from riverlog.common.cluster.image import OFFSETS_TOPIC, find_coordinator_to_proto
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import coordinator_pb2 as pb

from .config import GatewayConfig
from .context import Deadline, RequestContext, measured
from .peers.coordinator import CoordinatorPeers
from .routing.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

RETRIABLE: Final = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


class GroupRouter:
    """Stateless apart from the metadata cache and the coordinator channels; one per gateway."""

    def __init__(
        self, cache: MetadataCache, peers: CoordinatorPeers, config: GatewayConfig
    ) -> None:
        self.cache = cache
        self.peers = peers
        self.config = config

    async def call(
        self,
        group_id: str,
        method: str,
        request: Any,
        response_type: Callable[[], Any],
        deadline: Deadline,
    ) -> Any:
        """`method` on the group's coordinator, retried on moves until `deadline`; a response
        of `response_type` carrying the last error when no coordinator answered."""
        backoff = self.config.retry_backoff_s
        error = RiverlogError(
            f"{OFFSETS_TOPIC} does not exist yet", ErrorCode.COORDINATOR_NOT_AVAILABLE
        )
        while True:
            image = self.cache.image
            _, node = image.coordinator_for(group_id)
            if node is not None:
                try:
                    response = await self.peers.call(node, method, request, deadline.remaining())
                except RiverlogError as exc:
                    error = exc
                else:
                    code = ErrorCode(response.error_code) if response.error_code in _CODES else None
                    if code not in RETRIABLE:
                        return response
                    error = RiverlogError(response.error_message or None, code)
            if error.code == ErrorCode.REQUEST_TIMED_OUT or deadline.remaining() <= backoff:
                break
            await self.cache.wait_newer(image.version, backoff)
            await asyncio.sleep(min(backoff, deadline.remaining()) / 2)
            backoff = min(backoff * 2, self.config.retry_backoff_max_s)
        log.info("group %s: %s gave up: %s", group_id, method, error)
        out = response_type()
        out.error_code = int(error.code)
        out.error_message = error.message
        return out

    def find(self, request: pb.FindCoordinatorRequest) -> pb.FindCoordinatorResponse:
        return find_coordinator_to_proto(self.cache.image, request.keys)

    async def list_groups(
        self, request: pb.ListGroupsRequest, deadline: Deadline
    ) -> pb.ListGroupsResponse:
        out = pb.ListGroupsResponse()
        nodes = self.cache.image.nodes_of_kind("coordinator")
        results = await asyncio.gather(
            *(
                measured(self.peers.call(n, "ListGroups", request, deadline.remaining()))
                for n in nodes
            ),
            return_exceptions=True,
        )
        seen: set[str] = set()
        for result in results:
            if isinstance(result, BaseException):
                out.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE  # type: ignore[assignment]
                out.error_message = str(result)
                continue
            if result.error_code != ErrorCode.NONE:
                out.error_code, out.error_message = result.error_code, result.error_message
            for group in result.groups:
                if group.group_id not in seen:
                    seen.add(group.group_id)
                    out.groups.append(group)
        return out

    async def describe_groups(
        self, request: pb.DescribeGroupsRequest, ctx: RequestContext
    ) -> pb.DescribeGroupsResponse:
        async def one(group_id: str) -> pb.DescribeGroupsResponse:
            single = pb.DescribeGroupsRequest(groups=[group_id])
            answer: pb.DescribeGroupsResponse = await self.call(
                group_id, "DescribeGroups", single, pb.DescribeGroupsResponse, ctx.deadline
            )
            if not answer.groups:
                answer.groups.add(
                    group_id=group_id,
                    error_code=answer.error_code,
                    error_message=answer.error_message,
                )
            return answer

        out = pb.DescribeGroupsResponse()
        for answer in await asyncio.gather(*(measured(one(g)) for g in request.groups)):
            out.groups.extend(answer.groups)
        return out

    async def delete_groups(
        self, request: pb.DeleteGroupsRequest, ctx: RequestContext
    ) -> pb.DeleteGroupsResponse:
        async def one(group_id: str) -> pb.DeleteGroupsResponse:
            single = pb.DeleteGroupsRequest(groups=[group_id])
            answer: pb.DeleteGroupsResponse = await self.call(
                group_id, "DeleteGroups", single, pb.DeleteGroupsResponse, ctx.deadline
            )
            if not answer.results:
                answer.results.add(
                    group_id=group_id,
                    error_code=answer.error_code,
                    error_message=answer.error_message,
                )
            return answer

        out = pb.DeleteGroupsResponse()
        for answer in await asyncio.gather(*(measured(one(g)) for g in request.groups)):
            out.results.extend(answer.results)
        return out


_CODES: Final = frozenset(int(c) for c in ErrorCode)
