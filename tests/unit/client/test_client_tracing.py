"""Traces through the SDK: a send span per record whose traceparent travels in the record's
headers, the produce RPC in the same trace (the `produce` span and the instrumented gRPC call
under it), and a consumer processing span linked to the producer's span.

Tracing is configured once per process, so the scenario runs in a child Python process with an
in-memory exporter and reports the spans it saw as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


def test_one_trace_from_send_to_the_rpc_and_a_linked_consumer_span() -> None:
    here = Path(__file__).resolve().parent
    out = subprocess.run(
        [sys.executable, "-c", SCENARIO],
        cwd=here,
        env={"PYTHONPATH": str(here), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
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
