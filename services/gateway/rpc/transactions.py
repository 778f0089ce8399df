"""The Gateway's transaction RPCs (transactions.proto), which the servicer delegates to a
`TransactionForwarder`: each goes through the `GroupRouter` to the coordinator of its
transactional id (retrying coordinator moves until the deadline); ListTransactions asks every
live coordinator and merges, DescribeTransactions is split per id."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import transactions_pb2 as pb

from ..context import Deadline, measured
from ..groups import GroupRouter
from .groups import merge_from_every_coordinator
from .request_context import RequestContexts


async def list_transactions(
    router: GroupRouter, request: pb.ListTransactionsRequest, deadline: Deadline
) -> pb.ListTransactionsResponse:
    """Every live coordinator's transactions, each id once; the last error of any that failed."""
    out = pb.ListTransactionsResponse()
    await merge_from_every_coordinator(
        router,
        "ListTransactions",
        request,
        out,
        lambda r: r.transactions,
        lambda t: t.transactional_id,
        deadline,
    )
    return out


async def describe_transactions(
    router: GroupRouter, request: pb.DescribeTransactionsRequest, deadline: Deadline
) -> pb.DescribeTransactionsResponse:
    """Each id to its own coordinator, all at once; a row per id in the request's order."""

    async def one(tid: str) -> list[pb.TransactionDescription]:
        single = pb.DescribeTransactionsRequest(transactional_ids=[tid])
        answer = await router.call(
            tid,
            "DescribeTransactions",
            single,
            pb.DescribeTransactionsResponse,
            deadline,
            transactional=True,
        )
        if not answer.transactions:  # no coordinator answered
            answer.transactions.add(
                transactional_id=tid,
                error_code=answer.error_code,
                error_message=answer.error_message,
            )
        return list(answer.transactions)

    answers = await asyncio.gather(*(measured(one(t)) for t in request.transactional_ids))
    return pb.DescribeTransactionsResponse(transactions=[row for rows in answers for row in rows])


class TransactionForwarder:
    """One per gateway process, owned by `GatewayServicer`. Without a router every call fails
    with COORDINATOR_NOT_AVAILABLE."""

    def __init__(self, router: GroupRouter | None, contexts: RequestContexts) -> None:
        self.router = router
        self._contexts = contexts

    def _router(self) -> GroupRouter:
        if self.router is None:
            raise RiverlogError(
                "this gateway routes no transaction requests", ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
        return self.router

    async def route(
        self, method: str, request: Any, response_type: type[Any], context: grpc.aio.ServicerContext
    ) -> Any:
        """Hand `request` to its transactional id's coordinator as it is (InitProducerId,
        AddPartitionsToTxn, AddOffsetsToTxn, EndTxn)."""
        ctx = self._contexts.of_call(method, context)
        return await self._router().call(
            request.transactional_id,
            method,
            request,
            response_type,
            ctx.deadline,
            transactional=True,
        )

    async def ListTransactions(
        self, request: pb.ListTransactionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTransactionsResponse:
        ctx = self._contexts.of_call("ListTransactions", context)
        return await list_transactions(self._router(), request, ctx.deadline)

    async def DescribeTransactions(
        self, request: pb.DescribeTransactionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DescribeTransactionsResponse:
        ctx = self._contexts.of_call("DescribeTransactions", context)
        return await describe_transactions(self._router(), request, ctx.deadline)
