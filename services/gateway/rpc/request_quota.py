"""Kafka's request quota around every unary Gateway RPC: hold, time, charge, answer.

Kafka charges request_percentage for every client request, not only produce and fetch. Each
unary method of the servicer is wrapped here: the wrapper makes the call's `RequestContext`
(the method finds the same one again through `_context`), waits while the entity's request
quota holds it back, runs the method with its steps timed (`HandlerTime`), records that time
and puts the throttle time in the response's `throttle_time_ms`. Produce and fetch keep their
own checks (their byte quotas decide what the answer holds), so for them the wrapper only
times the handler and they charge it themselves. Streams time each request of the stream.
Without any quota configured the wrapper only makes the context.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Coroutine
from typing import TYPE_CHECKING, Any, Final, Protocol

import grpc

from riverlog.v1 import gateway_pb2

from ..context import RequestContext

if TYPE_CHECKING:
    from ..quotas import GatewayQuotas

_THROTTLE_FIELD: Final = "throttle_time_ms"

Handler = Callable[[Any, Any, grpc.aio.ServicerContext], Coroutine[Any, Any, Any]]


class _Servicer(Protocol):
    def _context(self, method: str, context: grpc.aio.ServicerContext) -> RequestContext: ...

    @property
    def quotas(self) -> GatewayQuotas | None: ...


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
