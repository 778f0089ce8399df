"""The `RequestContext` of a Gateway call, made once per call from what the call carries.

The client id comes from the `riverlog-client-id` metadata, the principal from the call's
credentials (`auth.py`; UNAUTHENTICATED when they are wrong), the deadline from the call's own
deadline and request.timeout.ms. The request-quota interceptor makes (and binds) the context
before the servicer method runs; the method and the forwarders it delegates to find the same
one again, and make it themselves when no interceptor did (a server without quotas).
"""

from __future__ import annotations

import grpc

from riverlog.common.quota.entity import ANONYMOUS
from riverlog.common.rpc.channel import CLIENT_ID_KEY

from ..auth import OPEN_METHODS, Authenticator
from ..config import GatewayConfig
from ..context import UNKNOWN_CLIENT, Deadline, RequestContext, bind, current_request

_MAX_CLIENT_ID = 256


def client_id_of(context: grpc.aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == CLIENT_ID_KEY:
            text = value if isinstance(value, str) else value.decode("utf-8", "replace")
            return text[:_MAX_CLIENT_ID] or UNKNOWN_CLIENT
    return UNKNOWN_CLIENT


def certificate_name(context: grpc.aio.ServicerContext) -> str | None:
    """The common name of the call's TLS client certificate, which gRPC reports only once it
    verified the certificate against ssl.ca.location; None on plaintext or without one."""
    names = (context.auth_context() or {}).get("x509_common_name") or ()
    for value in names:
        text = value if isinstance(value, str) else value.decode("utf-8", "replace")
        if text:
            return text
    return None


class RequestContexts:
    """Makes the calls' contexts; one per gateway process, shared by the servicer, its
    forwarders and the request-quota interceptor. Stateless between calls (the context of the
    running call lives in `context.current_request`)."""

    def __init__(self, config: GatewayConfig, auth: Authenticator | None = None) -> None:
        self._config = config
        self._auth = auth

    def of_call(self, method: str, context: grpc.aio.ServicerContext) -> RequestContext:
        """The call's context: made (and bound) once per call, found again when asked later
        in the same call."""
        bound = current_request.get()
        if bound is not None and bound.call is context:
            return bound
        ctx = RequestContext(
            method=method,
            deadline=Deadline.for_call(self._config.request_timeout_s, context.time_remaining()),
            client_id=client_id_of(context),
            peer=context.peer() or "",
            principal=self._principal(method, context),
            call=context,
        )
        bind(ctx)
        return ctx

    def of_stream_request(self, parent: RequestContext) -> RequestContext:
        """A fresh context (own deadline and handler time) for one request of a stream."""
        ctx = RequestContext(
            method=parent.method,
            deadline=Deadline.after(self._config.request_timeout_s),
            client_id=parent.client_id,
            peer=parent.peer,
            principal=parent.principal,
        )
        bind(ctx)
        return ctx

    def _principal(self, method: str, context: grpc.aio.ServicerContext) -> str:
        if self._auth is None:
            return ANONYMOUS
        metadata = context.invocation_metadata() or ()
        return self._auth.principal(
            metadata,
            anonymous_ok=method in OPEN_METHODS,
            certificate_name=certificate_name(context),
        )
