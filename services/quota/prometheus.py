"""The quota instance's metrics for Prometheus (decision 0033): how long each client is held
back now, per quota kind, user and client-id (Kafka's per-client `throttle-time` of the
Produce, Fetch and Request quota managers). The instance's view is cluster-wide for the
entities it owns. Read from the ledger on the event loop at scrape time."""

from __future__ import annotations

import asyncio

from prometheus_client.core import Metric

from riverlog.common.clock import Clock
from riverlog.common.metrics import endpoint
from riverlog.common.metrics.endpoint import LoopCollector, family

from .ledger import QuotaLedger

NAMES = ("riverlog_client_throttle_time_ms",)


def snapshot(ledger: QuotaLedger, clock: Clock) -> list[Metric]:
    (throttle,) = (family(n) for n in NAMES)
    now = clock.monotonic_ms()
    for state in ledger.throttle_states(now):
        entity = state.entity
        throttle.add_metric(
            [state.quota_type.name.lower(), entity.user or "", entity.client_id or ""],
            state.remaining_ms(now),
        )
    return [throttle]


def register_prometheus_metrics(ledger: QuotaLedger, clock: Clock) -> None:
    """Serve the families on `/metrics` (no-op when this process serves none)."""
    if not endpoint.enabled():
        return
    loop = asyncio.get_running_loop()
    endpoint.register("quota", LoopCollector(loop, NAMES, lambda: snapshot(ledger, clock)))
