"""The process's `/metrics` endpoint: prometheus-client's WSGI app on a daemon thread
(`server.py`; HTTPS with the process's certificate under internal TLS), over the default
registry (which also carries prometheus-client's `process_*` and `python_*` families).

Lifecycle: `configure(settings)` while parsing the command line (so components built after it
know whether to instrument), `start(host)` once the process serves (returns the bound
`host:port`, which the ready file reports), `stop()` at exit. `register(key, collector)` adds a
collector, replacing the one registered under the same key before (a component rebuilt in the
same process, as tests do, must not fail on duplicate names).

`LoopCollector` reads state the event loop owns on the event loop itself: a scrape (on the HTTP
thread) schedules the snapshot function with `call_soon_threadsafe` and waits for it, so no
dict is iterated while the loop mutates it and nothing is computed between scrapes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Iterable

from prometheus_client import REGISTRY, disable_created_metrics
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from riverlog.common.errors import ErrorCode, RiverlogError

from .catalog import Kind, spec
from .server import MetricsServer, serve
from .settings import HOST, PORT, PrometheusSettings

log = logging.getLogger(__name__)

SNAPSHOT_TIMEOUT_S = 2.0

_lock = threading.Lock()
_settings: PrometheusSettings | None = None
_server: MetricsServer | None = None
_collectors: dict[str, Collector] = {}


def configure(settings: PrometheusSettings | None) -> None:
    """Set this process's endpoint (None: serve none). Counters are served without their
    `_created` series (a sample per series that dashboards never use)."""
    global _settings
    _settings = settings
    if settings is not None:
        disable_created_metrics()  # type: ignore[no-untyped-call]


def settings() -> PrometheusSettings | None:
    return _settings


def scheme() -> str:
    """`https` when `/metrics` is served over TLS (the process's certificate), else `http`."""
    return "http" if _settings is None else _settings.scheme


def enabled() -> bool:
    """True when this process serves `/metrics` (instrument only then)."""
    return _settings is not None


def start(default_host: str) -> str | None:
    """Serve `/metrics` (idempotent); the bound `host:port`, None when not configured.
    RiverlogError(INVALID_CONFIG) when the address cannot be bound (a port in use)."""
    global _server
    if _settings is None:
        return None
    with _lock:
        if _server is None:
            host = (_settings.host or default_host).strip("[]")  # an IPv6 literal unbracketed
            try:
                _server = serve(host, _settings.port, _settings.tls)
            except OSError as exc:
                raise RiverlogError(
                    f"cannot serve /metrics on {host}:{_settings.port} "
                    f"({PORT}, {HOST}{', over HTTPS' if _settings.tls else ''}):"
                    f" {exc.strerror or exc}",
                    ErrorCode.INVALID_CONFIG,
                ) from None
        bound_host, port = (str(part) for part in _server.server_address[:2])
        return f"[{bound_host}]:{port}" if ":" in bound_host else f"{bound_host}:{port}"


def stop() -> None:
    global _server
    with _lock:
        if _server is not None:
            _server.shutdown()
            _server.server_close()
            _server = None


def register(key: str, collector: Collector) -> None:
    """Add `collector` to the registry, replacing the one registered under `key` before."""
    with _lock:
        old = _collectors.pop(key, None)
        if old is not None:
            REGISTRY.unregister(old)
        REGISTRY.register(collector)
        _collectors[key] = collector


Family = CounterMetricFamily | GaugeMetricFamily


def unregister(key: str) -> None:
    """Remove the collector registered under `key`, if any."""
    with _lock:
        old = _collectors.pop(key, None)
        if old is not None:
            REGISTRY.unregister(old)


def family(name: str) -> Family:
    """An empty family of catalog metric `name`, labelled as the catalog says."""
    s = spec(name)
    if s.kind is Kind.COUNTER:
        return CounterMetricFamily(s.name, s.help, labels=s.labels)
    if s.kind is Kind.GAUGE:
        return GaugeMetricFamily(s.name, s.help, labels=s.labels)
    raise ValueError(f"{name} is a {s.kind.value}: build it with prometheus_client")


class LoopCollector(Collector):
    """Families computed by `snapshot()` on `loop` at scrape time. `names`: the catalog
    families it serves (for `describe`, so registering needs no snapshot)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        names: Iterable[str],
        snapshot: Callable[[], Iterable[Metric]],
    ) -> None:
        self._loop = loop
        self._names = tuple(names)
        self._snapshot = snapshot

    def describe(self) -> Iterable[Metric]:
        return [family(n) for n in self._names]

    def collect(self) -> Iterable[Metric]:
        if self._loop.is_closed():
            return []
        done: concurrent.futures.Future[list[Metric]] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(list(self._snapshot()))
            except BaseException as exc:
                done.set_exception(exc)

        try:
            self._loop.call_soon_threadsafe(run)
            return done.result(SNAPSHOT_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            log.warning(
                "event loop busy for %.0fs: scrape without %s",
                SNAPSHOT_TIMEOUT_S,
                ", ".join(self._names),
            )
        except Exception:
            log.exception("metrics snapshot failed")
        return []
