"""One trace from `Producer.send` through the gateway to the partition leader, on a cluster of
the test's own whose services write their spans to a file (RIVERLOG_TRACE_FILE), and a consumer
processing span linked to the producer's span. The client runs in a child process, because
tracing is configured once per process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from riverlog.cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLIENT = r"""
import json, sys
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from riverlog.common import tracing
exporter = InMemorySpanExporter()
tracing.configure_tracing("client", exporter)
from riverlog.client import Consumer, Producer, TopicPartition
from riverlog.client.tracing import process_span
address, topic = sys.argv[1], sys.argv[2]
with Producer(bootstrap_servers=address, linger_ms=0, acks="all") as p:
    p.send(topic, b"traced").result(30)
with Consumer(bootstrap_servers=address, auto_offset_reset="earliest") as c:
    c.assign([TopicPartition(topic, 0)])
    records = []
    for _ in range(60):
        records += [r for rs in c.poll(timeout_ms=500).values() for r in rs]
        if records:
            break
    with process_span(records[0]):
        pass
spans = {s.name: s for s in exporter.get_finished_spans()}
send, process = spans[topic + " send"], spans[topic + " process"]
print(json.dumps({
    "trace": format(send.context.trace_id, "032x"),
    "linked": [format(l.context.span_id, "016x") for l in process.links],
    "send": format(send.context.span_id, "016x"),
}))
"""


def _spans(path: Path) -> list[dict]:
    spans = []
    for line in path.read_text().splitlines():
        try:
            spans.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # two processes' lines may interleave; the others are enough
    return spans


@pytest.mark.timeout(240)
def test_one_trace_from_the_sdk_to_the_leader(tmp_path: Path) -> None:
    trace_file = tmp_path / "spans.jsonl"
    env = {"RIVERLOG_TRACE_FILE": str(trace_file)}
    with LocalCluster(tmp_path / "cluster", storage_nodes=1, metadata_nodes=1, env=env) as cluster:
        cluster.create_topic("traced", 1, 1)
        out = subprocess.run(
            [sys.executable, "-c", CLIENT, cluster.gateway_address, "traced"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout.strip().splitlines()[-1])
    # The cluster is stopped: every service has flushed its spans.
    trace = "0x" + report["trace"]
    services = {
        span["resource"]["attributes"].get("service.name")
        for span in _spans(trace_file)
        if span["context"]["trace_id"] == trace
    }
    assert any("gateway" in str(s) for s in services), services
    assert any("storage" in str(s) for s in services), services
    assert report["linked"] == [report["send"]]
