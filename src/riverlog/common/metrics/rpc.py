"""Request rate, latency and errors per gRPC method (Kafka's RequestMetrics), for every
service's server. `instrument(servicer, service)` returns a proxy whose unary RPC methods time
each call into a histogram; it is applied once, when the servicer is added to the server, so a
call pays one wrapper frame, two clock reads and one histogram observation, and nothing at all
when the process serves no `/metrics`. `RequestTimer` times requests inside streams and on
other transports under the same names."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import Counter, Histogram

from riverlog.common.errors import RiverlogError

from . import endpoint
from .catalog import spec

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

_duration_spec = spec("riverlog_request_duration_seconds")
_errors_spec = spec("riverlog_request_errors")
_DURATION = Histogram(
    _duration_spec.name, _duration_spec.help, _duration_spec.labels, buckets=BUCKETS
)
_ERRORS = Counter(_errors_spec.name, _errors_spec.help, _errors_spec.labels)


def _error_name(exc: BaseException) -> str:
    if isinstance(exc, RiverlogError):
        return exc.code.name
    return "UNKNOWN_SERVER_ERROR"


def _unary(service: str, api: str, method: Callable[..., Awaitable[Any]]) -> Any:
    observe = _DURATION.labels(service, api).observe
    clock = time.perf_counter

    @functools.wraps(method)
    async def timed(request: Any, context: Any) -> Any:
        start = clock()
        try:
            return await method(request, context)
        except Exception as exc:
            _ERRORS.labels(service, api, _error_name(exc)).inc()
            raise
        finally:
            observe(clock() - start)

    return timed


class RequestTimer:
    """Times the requests of one API where the generic wrapper cannot: requests inside a
    stream (ProduceStream, FetchStream: each request is one Produce or Fetch, as Kafka counts
    them) and those that come by another transport (the storage node's zero-copy channel).
    `start()` then `done(start)`; costs one clock read and a no-op call without `/metrics`."""

    def __init__(self, service: str, api: str) -> None:
        self._observe = (
            _DURATION.labels(service.rsplit(".", 1)[-1], api).observe
            if endpoint.enabled()
            else None
        )

    @staticmethod
    def start() -> float:
        return time.perf_counter()

    def done(self, start: float) -> None:
        observe = self._observe
        if observe is not None:
            observe(time.perf_counter() - start)


TIMED_INSIDE = "METRICS_TIMED_INSIDE"
"""A servicer's class attribute: the RPC methods it times itself with `RequestTimer`."""


class _Instrumented:
    """The servicer with its unary RPC methods (names starting with a capital) timed. Streams
    are left alone: a stream's lifetime is no request's latency."""

    def __init__(self, servicer: Any, service: str) -> None:
        self._servicer = servicer
        self._service = service
        self._skip: frozenset[str] = frozenset(getattr(servicer, TIMED_INSIDE, ()))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._servicer, name)
        if not name[:1].isupper() or name in self._skip or not callable(attr):
            return attr
        if not inspect.iscoroutinefunction(attr):
            return attr
        wrapped = _unary(self._service, name, attr)
        setattr(self, name, wrapped)
        return wrapped


def instrument(servicer: Any, service: str) -> Any:
    """`servicer`, timed per method when this process serves `/metrics`; else itself."""
    if not endpoint.enabled():
        return servicer
    return _Instrumented(servicer, service.rsplit(".", 1)[-1])
