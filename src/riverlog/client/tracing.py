"""Spans of the SDK, so one trace runs from `send` to the leader and a consumer's processing links
back to it.

When the process has configured tracing (`riverlog.common.tracing.configure_tracing`, before the
client is created), `Producer.send` opens a PRODUCER span per record and writes its W3C
`traceparent` into the record's headers; the sender thread issues each produce request inside a
`produce` span whose parent is the first traced record of the request and which links the
others; the instrumented channel then carries that context to the gateway. On the consumer side,
`process_span(record)` opens the application's CONSUMER span, linked to the producer's span found
in the record's `traceparent` header. Without tracing every function here is a no-op, and the
producer does not even call them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind

from riverlog.common import tracing
from riverlog.common.records.record import Header

TRACER_NAME = "riverlog.client"
MAX_LINKS = 32


def enabled() -> bool:
    """Whether this process records spans."""
    return tracing.enabled()


def start_send_span(topic: str, headers: Sequence[Header] | None) -> tuple[Span, Any, list[Header]]:
    """Open the PRODUCER span of one record: returns it, its context (kept by the batch) and
    the headers with `traceparent` added. The caller ends the span once the record is queued."""
    span = tracing.tracer(TRACER_NAME).start_span(
        f"{topic} send",
        kind=SpanKind.PRODUCER,
        attributes={"messaging.system": "riverlog", "messaging.destination.name": topic},
    )
    ctx = trace.set_span_in_context(span)
    token = otel_context.attach(ctx)
    try:
        traceparent = tracing.inject_traceparent()
    finally:
        otel_context.detach(token)
    out = [h for h in headers or () if h[0] != tracing.TRACEPARENT_HEADER]
    if traceparent is not None:
        out.append((tracing.TRACEPARENT_HEADER, traceparent))
    return span, ctx, out


@contextmanager
def request_span(contexts: Sequence[Any], name: str = "produce") -> Iterator[Span]:
    """Make a `produce` span current while a request is issued: child of the first record's
    send span, linked to the others'. The caller ends the yielded span when the call is done."""
    links = [
        Link(trace.get_current_span(ctx).get_span_context()) for ctx in contexts[1 : MAX_LINKS + 1]
    ]
    span = tracing.tracer(TRACER_NAME).start_span(
        name, context=contexts[0], kind=SpanKind.CLIENT, links=links
    )
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield span
    finally:
        otel_context.detach(token)


def traceparent_of(headers: Sequence[Header]) -> bytes | None:
    """The `traceparent` header value of a record, if any (the last one wins)."""
    found = None
    for key, value in headers:
        if key == tracing.TRACEPARENT_HEADER:
            found = value
    return found


@contextmanager
def process_span(record: Any, name: str | None = None) -> Iterator[Span]:
    """A CONSUMER span for the application's processing of `record` (a ConsumerRecord), linked
    to the span that produced it when the record carries a `traceparent` header:

        for record in records:
            with process_span(record):
                handle(record)

    The span is current inside the block; it is a no-op span when tracing is not configured.
    """
    topic = getattr(record, "topic", "")
    traceparent = traceparent_of(getattr(record, "headers", None) or ())
    links: list[Link] = []
    if traceparent is not None:
        producer = trace.get_current_span(tracing.extract_context(traceparent)).get_span_context()
        if producer.is_valid:
            links.append(Link(producer))
    attributes = {
        "messaging.system": "riverlog",
        "messaging.destination.name": topic,
        "messaging.destination.partition.id": str(getattr(record, "partition", "")),
        "messaging.riverlog.message.offset": int(getattr(record, "offset", -1)),
    }
    with tracing.tracer(TRACER_NAME).start_as_current_span(
        name or f"{topic} process", kind=SpanKind.CONSUMER, links=links, attributes=attributes
    ) as span:
        yield span
