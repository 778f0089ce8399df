"""The Gateway's administration RPCs (admin.proto messages), which the servicer delegates to
an `AdminForwarder`: topic
and config changes, cluster descriptions, client quotas and users all go to the metadata
service as they are (`MetadataPeer` finds an instance and retries until the deadline). Topic
changes are screened first: items whose name cannot be a topic are answered here and never
sent; creates, deletes and partition additions then wait until this gateway's metadata shows
them, so a produce right after a create finds the topic."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from riverlog.common.errors import ErrorCode
from riverlog.v1 import admin_pb2

from ..admin import Admin
from ..context import RequestContext
from ..peers.metadata import MetadataPeer
from ..validation import topic_error
from .request_context import RequestContexts

log = logging.getLogger(__name__)


class AdminForwarder:
    """One per gateway process, owned by `GatewayServicer`; called from the servicer's methods
    on the event loop, one task per call."""

    def __init__(self, admin: Admin, metadata: MetadataPeer, contexts: RequestContexts) -> None:
        self.admin = admin
        self.metadata = metadata
        self._contexts = contexts

    def _context(self, method: str, context: grpc.aio.ServicerContext) -> RequestContext:
        return self._contexts.of_call(method, context)

    async def forward(self, method: str, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Forward `request` to the metadata service as it is (DescribeConfigs, ListTopics,
        client quotas, users...)."""
        ctx = self._context(method, context)
        return await self.metadata.call(method, request, ctx.deadline)

    # --- topic administration: screened, then passed through ----------------------------------

    async def CreateTopics(
        self, request: admin_pb2.CreateTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.CreateTopicsResponse:
        ctx = self._context("CreateTopics", context)
        response: admin_pb2.CreateTopicsResponse = await self._screened(
            ctx, request, "topics", lambda t: t.name, admin_pb2.CreateTopicsResponse
        )
        if not request.validate_only:
            created = {t.name: t.topic_id for t in response.topics if t.error_code == 0}
            await self.admin.await_created(created, ctx.deadline)
        return response

    async def DeleteTopics(
        self, request: admin_pb2.DeleteTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DeleteTopicsResponse:
        ctx = self._context("DeleteTopics", context)
        before = self.admin.topic_ids(list(request.names))
        response: admin_pb2.DeleteTopicsResponse = await self._screened(
            ctx, request, "names", lambda n: n, admin_pb2.DeleteTopicsResponse
        )
        deleted = {t.name: before.get(t.name, "") for t in response.topics if t.error_code == 0}
        await self.admin.await_deleted(deleted, ctx.deadline)
        return response

    async def CreatePartitions(
        self, request: admin_pb2.CreatePartitionsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.CreatePartitionsResponse:
        ctx = self._context("CreatePartitions", context)
        response: admin_pb2.CreatePartitionsResponse = await self._screened(
            ctx, request, "topics", lambda t: t.name, admin_pb2.CreatePartitionsResponse
        )
        if not request.validate_only:
            ok = {r.name for r in response.topics if r.error_code == 0}
            counts = {t.name: t.count for t in request.topics if t.name in ok}
            await self.admin.await_partitions(counts, ctx.deadline)
        return response

    async def AlterConfigs(
        self, request: admin_pb2.AlterConfigsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.AlterConfigsResponse:
        ctx = self._context("AlterConfigs", context)
        response: admin_pb2.AlterConfigsResponse = await self._screened(
            ctx, request, "topics", lambda t: t.name, admin_pb2.AlterConfigsResponse
        )
        return response

    async def _screened(
        self,
        ctx: RequestContext,
        request: Any,
        field: str,
        name_of: Callable[[Any], str],
        response_type: Callable[[], Any],
    ) -> Any:
        """Forward `request` without the items whose name cannot be a topic; those are answered
        here with INVALID_TOPIC_EXCEPTION. Results come back in request order, matched by name
        (the metadata service answers each name once)."""
        items: Sequence[Any] = getattr(request, field)
        bad = {i: topic_error(name_of(item)) for i, item in enumerate(items)}
        refused = {i: e for i, e in bad.items() if e is not None}
        if not refused:
            return await self.metadata.call(ctx.method, request, ctx.deadline)
        response = response_type()
        kept = [item for i, item in enumerate(items) if i not in refused]
        answers: dict[str, Any] = {}
        # AlterConfigs may also carry node entities: they go along with the kept topics.
        others = list(getattr(request, "nodes", ()))
        if kept or others:
            forwarded = type(request)()
            forwarded.CopyFrom(request)
            del getattr(forwarded, field)[:]
            getattr(forwarded, field).extend(kept)
            sent = await self.metadata.call(ctx.method, forwarded, ctx.deadline)
            answers = {t.name: t for t in sent.topics}
            if others:
                response.nodes.extend(sent.nodes)
        for i, item in enumerate(items):
            error = refused.get(i)
            if error is not None:
                response.topics.add(
                    name=name_of(item), error_code=error.code, error_message=error.message
                )
            elif name_of(item) in answers:
                response.topics.append(answers[name_of(item)])
            else:
                response.topics.add(
                    name=name_of(item),
                    error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                    error_message="the metadata service gave no result for this topic",
                )
        log.info("[%s] refused %d invalid topic names before forwarding", ctx, len(refused))
        return response
