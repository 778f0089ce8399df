"""The replication metrics reach an exporter once a MeterProvider is configured. Run in a child
process: the OpenTelemetry MeterProvider is process-global and can be set only once."""

import json
import subprocess
import sys

import pytest

SCRIPT = r"""
import json
from types import SimpleNamespace

from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from riverlog.common import tracing
from riverlog.services.storage.metrics import register_replication_metrics

reader = InMemoryMetricReader()
assert tracing.configure_metrics("storage-test", reader=reader) is not None
replicas = SimpleNamespace(node_id=3, isr_shrinks=2, isr_expands=1, under_replicated_partitions=4)
register_replication_metrics(replicas)
replicas.isr_shrinks = 5  # observed at collection time, not at registration
seen = {}
for rm in reader.get_metrics_data().resource_metrics:
    for sm in rm.scope_metrics:
        for metric in sm.metrics:
            point = list(metric.data.data_points)[0]
            seen[metric.name] = [point.value, dict(point.attributes)]
print(json.dumps(seen))
"""


@pytest.mark.timeout(60)
def test_replication_metrics_are_exported_with_their_current_values() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=50, check=True
    ).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["riverlog.storage.isr.shrinks"] == [5, {"node_id": 3}]
    assert seen["riverlog.storage.isr.expands"] == [1, {"node_id": 3}]
    assert seen["riverlog.storage.under_replicated_partitions"] == [4, {"node_id": 3}]


@pytest.mark.timeout(60)
def test_without_an_exporter_no_meter_provider_is_installed() -> None:
    script = (
        "import os; os.environ.pop('OTEL_EXPORTER_OTLP_ENDPOINT', None); "
        "os.environ.pop('RIVERLOG_METRICS_FILE', None); "
        "from riverlog.common import tracing; print(tracing.configure_metrics('x'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=50, check=True
    ).stdout
    assert out.strip() == "None"
