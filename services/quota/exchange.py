"""One quota for the whole cluster: gateways account locally, the quota service sums and judges.

Kafka enforces quotas per broker, so a client spread over N brokers gets N quotas. Here every
gateway measures its own traffic per metric entity (`LocalQuotaView`, no network hop on the
request path) and, in the background, sends what it recorded since its last report
(`UsageReport`: deltas, not rates, so reports add up). The quota service instance that owns an
entity (`MetricEntity.shard`) adds every gateway's deltas into one window per entity
(`QuotaLedger`), judges it with Kafka's formula, and answers each report with the complete set
of entities it holds back (`ThrottleState`). A gateway enforces the later of two ends: the
service's (the cluster's usage) and its own (its usage alone, which can only be lower, so it is
never stricter than the cluster's). When the service is unreachable the service's holds run out
and the local view keeps enforcing on its own, as a single Kafka broker would.

Delivery is at least once: a report carries the gateway's incarnation id and a sequence number,
and the ledger ignores a sequence it has already merged, so a retried report is not counted
twice. Usage is recorded at the ledger's clock when it arrives: with reports every few hundred
milliseconds and one-second samples, the shift is well inside a sample.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from riverlog.common.clock import Clock

from .entity import MetricEntity, QuotaType
from .manager import INACTIVE_EXPIRATION_MS, QuotaManager, ThrottleState, request_time_to_percentage
from .resolver import QuotaResolver, ResolvedQuota
from .window import WindowConfig

_RESOLVE_CACHE_MAX = 100_000


@dataclass(frozen=True, slots=True)
class UsageDelta:
    """Usage a gateway recorded for one entity and kind since its previous report (negative
    when it took back more than it added)."""

    quota_type: QuotaType
    entity: MetricEntity
    value: float


@dataclass(frozen=True, slots=True)
class UsageReport:
    """What one gateway incarnation sends the quota service; `seq` grows by one per report."""

    gateway_id: str
    seq: int
    deltas: tuple[UsageDelta, ...]

    def split(self, num_shards: int) -> dict[int, UsageReport]:
        """One report per quota instance owning some of the entities (same id and seq)."""
        by_shard: dict[int, list[UsageDelta]] = {}
        for delta in self.deltas:
            by_shard.setdefault(delta.entity.shard(num_shards), []).append(delta)
        return {
            shard: UsageReport(self.gateway_id, self.seq, tuple(deltas))
            for shard, deltas in by_shard.items()
        }


def _managers(
    resolver: QuotaResolver, clock: Clock, window: WindowConfig | None
) -> dict[QuotaType, QuotaManager]:
    return {t: QuotaManager(t, resolver, clock, window) for t in QuotaType}


class LocalQuotaView:
    """The gateway's side: local measurement, pending deltas, and the holds the quota service
    announced, per source (one source per quota instance).

    Lifecycle: one per gateway process, built with the first resolver; `update_resolver` on
    each config change; `drain_report` / `apply_throttle_states` from the background reporter;
    `expire_inactive` from a periodic task. Only the gateway's event loop calls it.
    """

    def __init__(
        self,
        gateway_id: str,
        resolver: QuotaResolver,
        clock: Clock,
        window: WindowConfig | None = None,
    ) -> None:
        self._gateway_id = gateway_id
        self._resolver = resolver
        self._clock = clock
        self._managers = _managers(resolver, clock, window)
        self._resolved: dict[tuple[QuotaType, str | None, str | None], ResolvedQuota | None] = {}
        self._pending: dict[tuple[QuotaType, MetricEntity], float] = {}
        self._remote: dict[str, dict[tuple[QuotaType, MetricEntity], int]] = {}
        self._seq = 0

    @property
    def gateway_id(self) -> str:
        return self._gateway_id

    def manager(self, quota_type: QuotaType) -> QuotaManager:
        return self._managers[quota_type]

    def update_resolver(self, resolver: QuotaResolver) -> None:
        self._resolver = resolver
        self._resolved.clear()
        for manager in self._managers.values():
            manager.update_resolver(resolver)

    def resolve(
        self, quota_type: QuotaType, user: str | None, client_id: str | None
    ) -> ResolvedQuota | None:
        """The resolver's answer, cached until the next config change."""
        key = (quota_type, user, client_id)
        try:
            return self._resolved[key]
        except KeyError:
            pass
        if len(self._resolved) >= _RESOLVE_CACHE_MAX:
            self._resolved.clear()
        resolved = self._resolved[key] = self._resolver.resolve(quota_type, user, client_id)
        return resolved

    def _now(self, now_ms: int | None) -> int:
        return self._clock.monotonic_ms() if now_ms is None else now_ms

    def _remaining(self, quota_type: QuotaType, entity: MetricEntity, now: int) -> int:
        remaining = self._managers[quota_type].remaining_throttle_ms(entity, now)
        key = (quota_type, entity)
        for holds in self._remote.values():
            until = holds.get(key)
            if until is not None and until - now > remaining:
                remaining = until - now
        return remaining

    def throttle_time_ms(
        self,
        quota_type: QuotaType,
        user: str | None,
        client_id: str | None,
        now_ms: int | None = None,
    ) -> int:
        """How long a request of this connection must still be held back, without recording
        anything (check before a fetch; a held fetch is answered empty with this time)."""
        resolved = self.resolve(quota_type, user, client_id)
        if resolved is None:
            return 0
        return self._remaining(quota_type, resolved.entity, self._now(now_ms))

    def record_local(
        self,
        quota_type: QuotaType,
        user: str | None,
        client_id: str | None,
        value: float,
        now_ms: int | None = None,
    ) -> int:
        """Record a request's usage (bytes, or a request percentage) and return the throttle
        time for its response: the later of the local judgement and the service's hold. No-op
        returning 0 when no quota of this kind applies to the connection."""
        resolved = self.resolve(quota_type, user, client_id)
        if resolved is None:
            return 0
        now = self._now(now_ms)
        entity = resolved.entity
        self._managers[quota_type].record_and_get_throttle_time_ms(entity, value, now)
        key = (quota_type, entity)
        self._pending[key] = self._pending.get(key, 0.0) + value
        return self._remaining(quota_type, entity, now)

    def record_request_time(
        self,
        user: str | None,
        client_id: str | None,
        handler_time_ns: int,
        now_ms: int | None = None,
    ) -> int:
        """`record_local` for request_percentage, from the handler's time in nanoseconds."""
        percentage = request_time_to_percentage(handler_time_ns)
        return self.record_local(QuotaType.REQUEST, user, client_id, percentage, now_ms)

    def unrecord_local(
        self,
        quota_type: QuotaType,
        user: str | None,
        client_id: str | None,
        value: float,
        now_ms: int | None = None,
    ) -> None:
        """Take back usage of a request answered empty (a throttled fetch), here and in the
        next report."""
        resolved = self.resolve(quota_type, user, client_id)
        if resolved is None:
            return
        self._managers[quota_type].unrecord(resolved.entity, value, self._now(now_ms))
        key = (quota_type, resolved.entity)
        self._pending[key] = self._pending.get(key, 0.0) - value

    def max_value_in_quota_window(
        self, quota_type: QuotaType, user: str | None, client_id: str | None
    ) -> float:
        """Cap for one fetch's size (Kafka's `getMaxValueInQuotaWindow`); inf without quota."""
        resolved = self.resolve(quota_type, user, client_id)
        if resolved is None:
            return float("inf")
        return self._managers[quota_type].max_value_in_quota_window(resolved.entity)

    def drain_report(self) -> UsageReport | None:
        """The usage recorded since the last report, as the next report (None: nothing)."""
        deltas = tuple(UsageDelta(t, e, v) for (t, e), v in self._pending.items() if v != 0.0)
        self._pending.clear()
        if not deltas:
            return None
        self._seq += 1
        return UsageReport(self._gateway_id, self._seq, deltas)

    def requeue(self, report: UsageReport) -> None:
        """Fold a report that surely did not arrive back into the next one."""
        for delta in report.deltas:
            key = (delta.quota_type, delta.entity)
            self._pending[key] = self._pending.get(key, 0.0) + delta.value

    def apply_throttle_states(
        self, source: str, states: Iterable[ThrottleState], now_ms: int | None = None
    ) -> None:
        """Replace what quota instance `source` holds back with its latest answer. Times are
        on this process's clock (rebuild them from the remaining time sent on the wire)."""
        now = self._now(now_ms)
        self._remote[source] = {
            (s.quota_type, s.entity): s.throttle_until_ms
            for s in states
            if s.throttle_until_ms > now
        }

    def forget_source(self, source: str) -> None:
        """Drop a quota instance's holds (it left the cluster or its shard moved)."""
        self._remote.pop(source, None)

    def expire_inactive(
        self, now_ms: int | None = None, inactive_ms: int = INACTIVE_EXPIRATION_MS
    ) -> int:
        now = self._now(now_ms)
        expired = sum(len(m.expire_inactive(now, inactive_ms)) for m in self._managers.values())
        for source, holds in self._remote.items():
            self._remote[source] = {k: until for k, until in holds.items() if until > now}
        return expired


class QuotaLedger:
    """The quota service's side: the cluster-wide windows of the entities this instance owns.

    Lifecycle: one per quota service process, built with the first resolver; `merge` for each
    gateway report; `update_resolver` on each config change; `expire_inactive` from a periodic
    task. Only the service's event loop calls it.
    """

    def __init__(
        self, resolver: QuotaResolver, clock: Clock, window: WindowConfig | None = None
    ) -> None:
        self._clock = clock
        self._managers = _managers(resolver, clock, window)
        self._last_seq: dict[str, tuple[int, int]] = {}

    def manager(self, quota_type: QuotaType) -> QuotaManager:
        return self._managers[quota_type]

    def update_resolver(self, resolver: QuotaResolver) -> None:
        for manager in self._managers.values():
            manager.update_resolver(resolver)

    def _now(self, now_ms: int | None) -> int:
        return self._clock.monotonic_ms() if now_ms is None else now_ms

    def merge(self, report: UsageReport, now_ms: int | None = None) -> list[ThrottleState]:
        """Add a gateway's deltas to the cluster windows, judge the entities they touch, and
        return every hold in force (the gateway's new view of this instance). A report whose
        sequence was already merged changes nothing."""
        now = self._now(now_ms)
        last = self._last_seq.get(report.gateway_id)
        if last is None or report.seq > last[0]:
            self._last_seq[report.gateway_id] = (report.seq, now)
            touched: set[tuple[QuotaType, MetricEntity]] = set()
            for delta in report.deltas:
                self._managers[delta.quota_type].record(delta.entity, delta.value, now)
                touched.add((delta.quota_type, delta.entity))
            for quota_type, entity in touched:
                manager = self._managers[quota_type]
                manager.throttle(entity, manager.check_throttle_time_ms(entity, now), now)
        return self.throttle_states(now)

    def throttle_states(self, now_ms: int | None = None) -> list[ThrottleState]:
        now = self._now(now_ms)
        return [s for m in self._managers.values() for s in m.throttle_states(now)]

    def measure(
        self, quota_type: QuotaType, entity: MetricEntity, now_ms: int | None = None
    ) -> float:
        """The entity's cluster-wide rate (for describe and metrics)."""
        return self._managers[quota_type].measure(entity, self._now(now_ms))

    def expire_inactive(
        self, now_ms: int | None = None, inactive_ms: int = INACTIVE_EXPIRATION_MS
    ) -> int:
        """Forget idle entities and gateways not heard from for `inactive_ms`."""
        now = self._now(now_ms)
        gone = [g for g, (_, seen) in self._last_seq.items() if now - seen >= inactive_ms]
        for gateway_id in gone:
            del self._last_seq[gateway_id]
        return sum(len(m.expire_inactive(now, inactive_ms)) for m in self._managers.values())
