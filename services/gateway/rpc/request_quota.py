"""Kafka's request quota around every unary Gateway RPC: hold, time, charge, answer.

Kafka charges request_percentage for every client request, not only produce and fetch. Each
unary method of the servicer is wrapped here: the wrapper makes the call's `RequestContext`
(the method finds the same one again through `_context`), waits while the entity's request
quota holds it back, runs the method with its steps timed (`HandlerTime`), records that time
and puts the throttle time in the response's `throttle_time_ms`. Produce and fetch keep their
own checks (their byte quotas decide what the answer holds), so for them the wrapper only
times the handler and they charge it themselves. Streams time each request of the stream.
Without any quota configured the wrapper only makes the context. The byte quotas' proto side
is here too: a produce request's batch bytes, a fetch's capped `max_bytes`, and a throttled
fetch answer emptied (`GatewayQuotas` itself works on numbers).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Coroutine
from typing import TYPE_CHECKING, Any, Final, Protocol

import grpc

from riverlog.v1 import data_pb2, gateway_pb2

from ..context import RequestContext

if TYPE_CHECKING:
    from ..quotas import GatewayQuotas

_THROTTLE_FIELD: Final = "throttle_time_ms"

Handler = Callable[[Any, Any, grpc.aio.ServicerContext], Coroutine[Any, Any, Any]]


class _Servicer(Protocol):
    def _context(self, method: str, context: grpc.aio.ServicerContext) -> RequestContext: ...

    @property
    def quotas(self) -> GatewayQuotas | None: ...


def produce_size(request: data_pb2.ProduceRequest) -> int:
    """The batch bytes of a produce request (what producer_byte_rate measures)."""
    return sum(len(p.records) for p in request.partitions)


def empty(response: data_pb2.FetchResponse) -> None:
    """Drop the records of every partition (offsets and watermarks stay)."""
    for partition in response.partitions:
        partition.records = b""
        partition.zero_copy_records_size = 0


async def before_fetch(
    quotas: GatewayQuotas, ctx: RequestContext, request: data_pb2.FetchRequest
) -> int:
    """`GatewayQuotas.before_fetch` on a request: caps its `max_bytes`; the hold to answer
    with (positive: answer empty)."""
    held, request.max_bytes = await quotas.before_fetch(ctx, request.max_bytes)
    return held


def after_fetch(
    quotas: GatewayQuotas, ctx: RequestContext, response: data_pb2.FetchResponse, handler_ns: int
) -> int:
    """Record a handled fetch; when it crosses the bound, empty `response` (its bytes are
    taken back). Returns the throttle time."""
    size = sum(len(p.records) for p in response.partitions)
    throttle, emptied = quotas.fetched_records(ctx, size, handler_ns)
    if emptied:
        empty(response)
    return throttle


def unary_methods() -> list[str]:
    """The Gateway's unary-unary methods, from the service descriptor (a new RPC is covered
    without being listed anywhere)."""
    service = gateway_pb2.DESCRIPTOR.services_by_name["Gateway"]
    return [m.name for m in service.methods if not (m.client_streaming or m.server_streaming)]


def metered(method: str, handler: Handler, charge: bool) -> Handler:
    """`handler` with its handler time measured and, when `charge`, the request quota applied
    around it (hold before, record after, throttle time in the answer)."""

    async def call(self: _Servicer, request: Any, context: grpc.aio.ServicerContext) -> Any:
        ctx = self._context(method, context)
        quotas = self.quotas
        if quotas is None or not quotas.active:
            return await handler(self, request, context)
        if not charge:
            return await ctx.work.run(handler(self, request, context))
        await quotas.before_request(ctx)
        try:
            response = await ctx.work.run(handler(self, request, context))
        except BaseException:
            quotas.after_request(ctx, 0, ctx.work.busy_ns)  # a failed request was work too
            raise
        throttle = quotas.after_request(ctx, 0, ctx.work.busy_ns)
        if throttle > 0 and _THROTTLE_FIELD in response.DESCRIPTOR.fields_by_name:
            setattr(response, _THROTTLE_FIELD, max(getattr(response, _THROTTLE_FIELD), throttle))
        return response

    call.__name__ = call.__qualname__ = method
    call.__doc__ = handler.__doc__
    return call


def install(cls: type, own_quota_checks: Collection[str]) -> None:
    """Wrap every unary method of `cls` with `metered`; those in `own_quota_checks` are only
    timed."""
    for name in unary_methods():
        setattr(cls, name, metered(name, getattr(cls, name), name not in own_quota_checks))
