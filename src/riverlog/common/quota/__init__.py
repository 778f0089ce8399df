"""Kafka's client quotas (producer_byte_rate, consumer_byte_rate, request_percentage) per
(user, client-id): the pure domain every process that measures or judges usage shares.

Gateways and quota service instances both need it, and services may not import each other, so it
lives here: `entity` (config and metric entities, validation), `resolver` (Kafka's eight levels
of precedence), `window` (Kafka's sampled rate), `manager` (Kafka's ClientQuotaManager: throttle
times and holds), `exchange` (what gateways and the service tell each other, and the gateway's
local view). None of these modules imports grpc or a `_pb2` module; the service's cluster-wide
books (`QuotaLedger`) stay in `riverlog.services.quota`.
"""

from .entity import (
    ANONYMOUS,
    DEFAULT,
    ConfigLevel,
    MetricEntity,
    QuotaEntity,
    QuotaType,
    parse_quota_configs,
    validate_quota_value,
    validate_quota_values,
)
from .exchange import Allowance, LocalQuotaView, QuotaAnswer, UsageDelta, UsageReport
from .manager import (
    QuotaManager,
    ThrottleState,
    bounded_throttle_time_ms,
    request_time_to_percentage,
    throttle_time_ms,
)
from .resolver import QuotaResolver, ResolvedQuota
from .window import SampledRate, WindowConfig

__all__ = [
    "ANONYMOUS",
    "DEFAULT",
    "Allowance",
    "ConfigLevel",
    "LocalQuotaView",
    "MetricEntity",
    "QuotaAnswer",
    "QuotaEntity",
    "QuotaManager",
    "QuotaResolver",
    "QuotaType",
    "ResolvedQuota",
    "SampledRate",
    "ThrottleState",
    "UsageDelta",
    "UsageReport",
    "WindowConfig",
    "bounded_throttle_time_ms",
    "parse_quota_configs",
    "request_time_to_percentage",
    "throttle_time_ms",
    "validate_quota_value",
    "validate_quota_values",
]
