"""The quota service: the authoritative, cluster-wide windows of Kafka's client quotas.

Gateways measure locally and report usage deltas in the background; the instance owning an
entity (`MetricEntity.shard` over the live quota instances) sums them in its `QuotaLedger` and
answers with holds and allowances, so a client spread over several gateways gets its quota once
for the cluster. The pure domain shared with the gateways is `riverlog.common.quota`; here live
the ledger, the config, the gRPC servicer and the process wiring (`app`).
"""

from .ledger import QuotaLedger

__all__ = ["QuotaLedger"]
