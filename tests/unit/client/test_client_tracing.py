"""Traces through the SDK: a send span per record whose traceparent travels in the record's
headers, the produce RPC in the same trace (the `produce` span and the instrumented gRPC call
under it), and a consumer processing span linked to the producer's span.

Tracing is configured once per process, so the scenario runs in a child Python process with an
in-memory exporter and reports the spans it saw as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import riverlog

SCENARIO = r"""
import json, sys
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from riverlog.common import tracing
exporter = InMemorySpanExporter()
tracing.configure_tracing("client-test", exporter)
from client_fakes import FakeServer
from riverlog.client import Consumer, Producer, TopicPartition
from riverlog.client.tracing import process_span
server = FakeServer()
server.gateway.create("t", 1)
with Producer(bootstrap_servers=server.address, linger_ms=0) as p:
    p.send("t", b"v", headers=[("h", b"1")]).result(10)
with Consumer(bootstrap_servers=server.address, auto_offset_reset="earliest") as c:
    c.assign([TopicPartition("t", 0)])
    records = []
    for _ in range(50):
        records += [r for rs in c.poll(timeout_ms=200).values() for r in rs]
        if records:
            break
    with process_span(records[0]):
        pass
server.stop()
spans = [
    {
        "name": s.name,
        "kind": s.kind.name,
        "trace": format(s.context.trace_id, "032x"),
        "span": format(s.context.span_id, "016x"),
        "parent": format(s.parent.span_id, "016x") if s.parent else None,
        "links": [format(l.context.span_id, "016x") for l in s.links],
    }
    for s in exporter.get_finished_spans()
]
headers = [[k, v.decode() if v else v] for k, v in records[0].headers]
print(json.dumps({"spans": spans, "headers": headers}))
"""


# A traced producer without idempotence: records sent with send_many carry no trace context,
# so their request rides the ProduceStream; a traced send's request is a unary call of its own,
# with no order to the stream's. The gateway holds the stream's request until another Produce
# was appended (or 0.5 s): the traced request must not be that one.
ORDER_SCENARIO = r"""
import json
from riverlog.common import tracing
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
tracing.configure_tracing("client-test", InMemorySpanExporter())
from client_fakes import FakeServer, StreamingFakeGateway
from riverlog.client import Producer
from riverlog.common.records.reader import iter_batches_records
gateway = StreamingFakeGateway()
server = FakeServer(gateway)
gateway.create("t", 1)
gateway.hold_next_stream_s = 0.5
config = {"linger.ms": 0, "enable.idempotence": False, "acks": "1"}
with Producer({"bootstrap.servers": server.address, **config}) as p:
    first = p.send_many("t", [b"0"], partition=0)
    assert gateway.holding.wait(10)  # the untraced request is at the gateway, held
    second = p.send("t", b"1", partition=0)
    p.flush()
    offsets = [first[0].result(10).offset, second.result(10).offset]
server.stop()
values = [r.value.decode() for r in iter_batches_records(gateway.records("t", 0))]
print(json.dumps({"values": values, "offsets": offsets}))
"""


def _run(scenario: str) -> dict[str, Any]:
    here = Path(__file__).resolve().parent
    source = Path(riverlog.__file__).resolve().parents[1]  # the riverlog under test
    out = subprocess.run(
        [sys.executable, "-c", scenario],
        cwd=here,
        env={"PYTHONPATH": f"{here}{os.pathsep}{source}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    report: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return report


def test_a_traced_request_does_not_overtake_a_streamed_one() -> None:
    """Without idempotence nothing restores a partition's order, so a request that goes as a
    unary call (traced) waits for the partition's streamed request already in flight."""
    report = _run(ORDER_SCENARIO)
    assert report["values"] == ["0", "1"]
    assert report["offsets"] == [0, 1]


def test_one_trace_from_send_to_the_rpc_and_a_linked_consumer_span() -> None:
    report = _run(SCENARIO)
    spans = {s["name"]: s for s in report["spans"]}
    send = spans["t send"]
    produce = spans["produce"]
    rpc = spans["/riverlog.v1.Gateway/Produce"]
    process = spans["t process"]
    assert send["kind"] == "PRODUCER" and process["kind"] == "CONSUMER"
    assert produce["trace"] == send["trace"] and produce["parent"] == send["span"]
    assert rpc["trace"] == send["trace"] and rpc["parent"] == produce["span"]
    headers = dict(report["headers"])
    assert headers["h"] == "1"
    assert headers["traceparent"].startswith(f"00-{send['trace']}-{send['span']}-")
    assert process["links"] == [send["span"]]
