"""OpenTelemetry set-up for every Riverlog process, with the gRPC instrumentation from
opentelemetry-instrumentation-grpc (no hand-written span code on the RPC path).

Metrics (ISR shrinks/expands, under-replicated and offline partitions, elections...) are
instruments on the OpenTelemetry metrics API; `configure_metrics()` installs a MeterProvider
exporting them over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set, or one JSON document per
export interval to RIVERLOG_METRICS_FILE; with neither the API stays a no-op.

`configure_tracing()` installs a TracerProvider once per process. Exporter choice:
an explicit exporter (tests pass an InMemorySpanExporter); OTLP when
OTEL_EXPORTER_OTLP_ENDPOINT is set; one JSON span per line appended to RIVERLOG_TRACE_FILE
when that is set; otherwise spans are not recorded at all (the gRPC interceptors are left out,
so an untraced process pays nothing). W3C trace context travels in gRPC metadata, and
producers also put `traceparent` in record headers so a consumer can link to it.
"""

from __future__ import annotations

import os
import threading
from typing import IO, Any

from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)

TRACE_FILE_ENV = "RIVERLOG_TRACE_FILE"
METRICS_FILE_ENV = "RIVERLOG_METRICS_FILE"
OTLP_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACEPARENT_HEADER = "traceparent"

_lock = threading.Lock()
_provider: TracerProvider | None = None
_trace_file: IO[str] | None = None
_meter_provider: Any = None
_metrics_file: IO[str] | None = None


def _one_line(span: ReadableSpan) -> str:
    return str(span.to_json(indent=None)) + "\n"


def _default_exporter() -> SpanExporter | None:
    global _trace_file
    if os.environ.get(OTLP_ENV):
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    path = os.environ.get(TRACE_FILE_ENV)
    if path:
        _trace_file = open(path, "a", buffering=1, encoding="utf-8")
        return ConsoleSpanExporter(out=_trace_file, formatter=_one_line)
    return None


def configure_tracing(
    service_name: str, exporter: SpanExporter | None = None, *, simple: bool = False
) -> TracerProvider | None:
    """Install the process's tracer provider; idempotent. Returns None when nothing exports."""
    global _provider
    with _lock:
        if _provider is not None:
            return _provider
        chosen = exporter or _default_exporter()
        if chosen is None:
            return None
        provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        processor = (
            SimpleSpanProcessor(chosen) if simple or exporter else BatchSpanProcessor(chosen)
        )
        provider.add_span_processor(processor)
        trace.set_tracer_provider(provider)
        _provider = provider
        return provider


def configure_metrics(service_name: str, reader: Any = None) -> Any:
    """Install the process's MeterProvider; idempotent. `reader`: a MetricReader (tests pass an
    InMemoryMetricReader); else OTLP or RIVERLOG_METRICS_FILE; None when nothing exports."""
    global _meter_provider, _metrics_file
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        PeriodicExportingMetricReader,
    )

    with _lock:
        if _meter_provider is not None:
            return _meter_provider
        if reader is None:
            if os.environ.get(OTLP_ENV):
                from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                    OTLPMetricExporter,
                )

                reader = PeriodicExportingMetricReader(OTLPMetricExporter())
            elif path := os.environ.get(METRICS_FILE_ENV):
                _metrics_file = open(path, "a", buffering=1, encoding="utf-8")
                exporter = ConsoleMetricExporter(
                    out=_metrics_file, formatter=lambda data: data.to_json(indent=None) + "\n"
                )
                reader = PeriodicExportingMetricReader(exporter)
            else:
                return None
        resource = Resource.create({"service.name": service_name})
        provider = MeterProvider(resource=resource, metric_readers=[reader])
        metrics.set_meter_provider(provider)
        _meter_provider = provider
        return provider


def enabled() -> bool:
    return _provider is not None


def shutdown() -> None:
    """Flush and stop exporting (at process exit)."""
    if _provider is not None:
        _provider.shutdown()
    if _meter_provider is not None:
        _meter_provider.shutdown()
    if _trace_file is not None:
        _trace_file.close()
    if _metrics_file is not None:
        _metrics_file.close()


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)


def aio_server_interceptor() -> Any:
    if _provider is None:
        return None
    from opentelemetry.instrumentation.grpc import aio_server_interceptor as make

    return make(tracer_provider=_provider)  # type: ignore[no-untyped-call]


def aio_client_interceptors() -> list[Any]:
    if _provider is None:
        return []
    from opentelemetry.instrumentation.grpc import aio_client_interceptors as make

    return list(make(tracer_provider=_provider))  # type: ignore[no-untyped-call]


def client_interceptor() -> Any:
    if _provider is None:
        return None
    from opentelemetry.instrumentation.grpc import client_interceptor as make

    return make(tracer_provider=_provider)  # type: ignore[no-untyped-call]


def inject_traceparent() -> bytes | None:
    """The current span's W3C traceparent, for a record header; None when not tracing."""
    if _provider is None:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    value = carrier.get(TRACEPARENT_HEADER)
    return value.encode() if value else None


def extract_context(traceparent: bytes) -> Any:
    """A context whose span is the producer's, from a record's traceparent header."""
    return propagate.extract({TRACEPARENT_HEADER: traceparent.decode("ascii", "replace")})
