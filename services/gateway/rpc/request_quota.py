"""Kafka's request quota around every unary Gateway RPC, as a gRPC server interceptor: hold,
time, charge, answer.

Kafka charges request_percentage for every client request, not only produce and fetch. The
interceptor wraps each unary Gateway method's handler: the wrapper makes the call's
`RequestContext` (`RequestContexts`; the servicer finds the same one again), waits while the
entity's request quota holds it back, runs the method with its steps timed (`HandlerTime`),
records that time and puts the throttle time in the response's `throttle_time_ms`. Produce and
fetch keep their own checks (their byte quotas decide what the answer holds), so for them the
wrapper only times the handler and they charge it themselves. Streams time each request of the
stream. Without any quota configured the wrapper only makes the context. The byte quotas' proto
side is here too: a produce request's batch bytes, a fetch's capped `max_bytes`, and a
throttled fetch answer emptied (`GatewayQuotas` itself works on numbers).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Coroutine, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

import grpc

from riverlog.v1 import data_pb2, gateway_pb2

from ..context import RequestContext
from ..fetch import FetchPartResult
from ..produce import ProducePart
from .request_context import RequestContexts

if TYPE_CHECKING:
    from ..quotas import GatewayQuotas

_THROTTLE_FIELD: Final = "throttle_time_ms"

_SERVICE = gateway_pb2.DESCRIPTOR.services_by_name["Gateway"]

# Produce and fetch charge the handler time themselves, next to their byte quotas.
OWN_QUOTA_CHECKS: Final = ("Produce", "Fetch", "ProduceRecords", "FetchRecords")

Behavior = Callable[[Any, grpc.aio.ServicerContext], Coroutine[Any, Any, Any]]


def produce_size(parts: Sequence[ProducePart]) -> int:
    """The batch bytes of a produce request (what producer_byte_rate measures), counted on
    the converted parts: reading a bytes field of the protobuf message would copy it."""
    return sum(len(p.records) for p in parts)


async def before_fetch(
    quotas: GatewayQuotas, ctx: RequestContext, request: data_pb2.FetchRequest
) -> int:
    """`GatewayQuotas.before_fetch` on a request: caps its `max_bytes`; the hold to answer
    with (positive: answer empty)."""
    held, request.max_bytes = await quotas.before_fetch(ctx, request.max_bytes)
    return held


def after_fetch(
    quotas: GatewayQuotas,
    ctx: RequestContext,
    results: Sequence[FetchPartResult],
    handler_ns: int,
) -> tuple[int, list[FetchPartResult]]:
    """Record a handled fetch of `results`' record bytes: the throttle time, and the results to
    answer with, emptied when the fetch crosses the bound (their bytes are taken back; offsets
    and watermarks stay)."""
    size = sum(len(r.records) for r in results)
    throttle, emptied = quotas.fetched_records(ctx, size, handler_ns)
    if emptied:
        return throttle, [replace(r, records=b"", aborted_transactions=()) for r in results]
    return throttle, list(results)


def unary_methods() -> list[str]:
    """The Gateway's unary-unary methods, from the service descriptor (a new RPC is covered
    without being listed anywhere)."""
    return [m.name for m in _SERVICE.methods if not (m.client_streaming or m.server_streaming)]


class RequestQuotaInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Wraps every unary Gateway method with `metered`; those in `own_quota_checks` are only
    timed. Other services' methods (health, reflection) pass untouched. Installed inside the
    error interceptor, so a refusal here (UNAUTHENTICATED...) is mapped like any other."""

    def __init__(
        self,
        contexts: RequestContexts,
        quotas: GatewayQuotas | None,
        own_quota_checks: Collection[str] = OWN_QUOTA_CHECKS,
    ) -> None:
        self._contexts = contexts
        self._quotas = quotas
        self._methods = {
            f"/{_SERVICE.full_name}/{name}": (name, name not in own_quota_checks)
            for name in unary_methods()
        }

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        entry = self._methods.get(handler_call_details.method)
        if handler is None or entry is None or not handler.unary_unary:
            return handler
        name, charge = entry
        return handler._replace(unary_unary=self.metered(name, handler.unary_unary, charge))

    def metered(self, method: str, behavior: Behavior, charge: bool) -> Behavior:
        """`behavior` with its handler time measured and, when `charge`, the request quota
        applied around it (hold before, record after, throttle time in the answer)."""
        contexts = self._contexts
        quotas = self._quotas

        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            ctx = contexts.of_call(method, context)
            if quotas is None or not quotas.active:
                return await behavior(request, context)
            if not charge:
                return await ctx.work.run(behavior(request, context))
            await quotas.before_request(ctx)
            try:
                response = await ctx.work.run(behavior(request, context))
            except BaseException:
                quotas.after_request(ctx, 0, ctx.work.busy_ns)  # a failed request was work too
                raise
            throttle = quotas.after_request(ctx, 0, ctx.work.busy_ns)
            if throttle > 0 and _THROTTLE_FIELD in response.DESCRIPTOR.fields_by_name:
                setattr(
                    response, _THROTTLE_FIELD, max(getattr(response, _THROTTLE_FIELD), throttle)
                )
            return response

        return call
