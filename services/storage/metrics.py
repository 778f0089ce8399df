"""The storage node's replication metrics on the OpenTelemetry metrics API: what operators look
at first when replication is unwell (docs/design.md §7). Observable instruments read the replica
manager's counters at collection time, so the hot paths pay nothing; with no MeterProvider
configured the API is a no-op. The same numbers are in DescribeLogDirs.

- `riverlog.storage.isr.shrinks` / `riverlog.storage.isr.expands` (counters): ISR changes this
  node asked for as leader (Kafka's IsrShrinksPerSec / IsrExpandsPerSec).
- `riverlog.storage.under_replicated_partitions` (gauge): led partitions whose ISR is smaller
  than their replica set (Kafka's UnderReplicatedPartitions).
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry import metrics

from .replica.replica_manager import ReplicaManager


def register_replication_metrics(replicas: ReplicaManager) -> None:
    meter = metrics.get_meter("riverlog.storage")
    attributes = {"node_id": replicas.node_id}

    def shrinks(_options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        return [metrics.Observation(replicas.isr_shrinks, attributes)]

    def expands(_options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        return [metrics.Observation(replicas.isr_expands, attributes)]

    def under_replicated(_options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        return [metrics.Observation(replicas.under_replicated_partitions, attributes)]

    meter.create_observable_counter("riverlog.storage.isr.shrinks", [shrinks], unit="1")
    meter.create_observable_counter("riverlog.storage.isr.expands", [expands], unit="1")
    meter.create_observable_gauge(
        "riverlog.storage.under_replicated_partitions", [under_replicated], unit="1"
    )
