"""Request rate, latency and errors per gRPC method (Kafka's RequestMetrics), for every
service's server: `instrument(servicer, service)` returns a proxy whose RPC methods time each
call into a histogram. It is applied once, when the servicer is added to the server, so a call
pays one wrapper frame, two clock reads and one histogram observation (about as much as one
`Counter.inc()` more), and nothing at all when the process serves no `/metrics`."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
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


def _streaming(service: str, api: str, method: Callable[..., AsyncIterator[Any]]) -> Any:
    observe = _DURATION.labels(service, api).observe
    clock = time.perf_counter

    @functools.wraps(method)
    async def timed(request: Any, context: Any) -> AsyncIterator[Any]:
        start = clock()
        try:
            async for item in method(request, context):
                yield item
        except Exception as exc:
            _ERRORS.labels(service, api, _error_name(exc)).inc()
            raise
        finally:
            observe(clock() - start)

    return timed


class _Instrumented:
    """The servicer with its RPC methods (names starting with a capital) timed."""

    def __init__(self, servicer: Any, service: str) -> None:
        self._servicer = servicer
        self._service = service

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._servicer, name)
        if not name[:1].isupper() or not callable(attr):
            return attr
        if inspect.isasyncgenfunction(attr):
            wrapped = _streaming(self._service, name, attr)
        elif inspect.iscoroutinefunction(attr):
            wrapped = _unary(self._service, name, attr)
        else:
            return attr
        setattr(self, name, wrapped)
        return wrapped


def instrument(servicer: Any, service: str) -> Any:
    """`servicer`, timed per method when this process serves `/metrics`; else itself."""
    if not endpoint.enabled():
        return servicer
    return _Instrumented(servicer, service.rsplit(".", 1)[-1])
