"""One quota for the whole cluster: gateways account locally, the quota service sums and judges.

Kafka enforces quotas per broker, so a client spread over N brokers gets N quotas. Here every
gateway measures its own traffic per metric entity (`LocalQuotaView`, no network hop on the
request path) and, in the background, sends what it recorded since its last report
(`UsageReport`: deltas, not rates, so reports add up). The quota service instance owning an
entity (`MetricEntity.shard`) adds every gateway's deltas into one window per entity
(`QuotaLedger`) and answers each report (`QuotaAnswer`) with:

- holds (`ThrottleState`): entities over their bound and until when, by Kafka's formula;
- allowances (`Allowance`): for each entity the gateway serves, its share of the headroom left
  under the bound (bound x window - usage, split among the gateways that carry the entity now),
  and never more than the bound times the time since that gateway's last report (paced: see
  `QuotaLedger`), less what it overspent of its previous allowance.

Holds alone are not enough: a gateway learns that the cluster crossed the bound only at its next
report, so after every hold a client runs unthrottled for up to a report interval on every
gateway, and such bursts are forgotten, not repaid, once their sample leaves the window. In a
simulation of a producer offering 20x a 1 MB/s quota through two gateways reporting every
100-250 ms, holds alone gave 20-second averages of 1.25-1.6x the quota; with allowances
1.09-1.2x, and 0.98-1.04x over ten minutes (what remains over 20 s is mostly Kafka's start-up
window, which admits about (num - 1) samples' worth of quota at once). With allowances a gateway
stops by itself once its share is spent: it holds the entity until its next answer is due, and
the answer brings a new share or a hold.

A gateway enforces the latest end of three: its own judgement of its own traffic (a lower bound
of the cluster's usage, so never stricter than the service), the service's holds, and a spent
allowance. When the service is unreachable its allowances go stale and are ignored, its holds
run out, and the local view keeps enforcing alone, as a single Kafka broker would.

Delivery is at least once: a report carries the gateway incarnation's id and a sequence number,
and the ledger ignores a sequence it has merged already. Usage is recorded on the ledger's clock
when it arrives; with reports every ~100 ms and one-second samples the shift stays in a sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from riverlog.common.clock import Clock

from .entity import MetricEntity, QuotaType, owner_of
from .manager import INACTIVE_EXPIRATION_MS, QuotaManager, ThrottleState, request_time_to_percentage
from .resolver import QuotaResolver, ResolvedQuota
from .window import WindowConfig

Key = tuple[QuotaType, MetricEntity]

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
    """What one gateway incarnation sends the quota service; `seq` grows with each report. A
    report without deltas is a heartbeat that fetches the current answer."""

    gateway_id: str
    seq: int
    deltas: tuple[UsageDelta, ...]
    interval_ms: int = 100
    """When the gateway will report next: how long the allowances it gets must last."""

    def split(self, owners: Sequence[int]) -> dict[int, UsageReport]:
        """One report per quota instance (node id) owning some of the entities among the live
        `owners` (`owner_of`, the function the quota instances hand windows over by), with
        the same id and seq."""
        by_owner: dict[int, list[UsageDelta]] = {}
        for delta in self.deltas:
            by_owner.setdefault(owner_of(delta.entity, owners), []).append(delta)
        return {
            owner: UsageReport(self.gateway_id, self.seq, tuple(deltas), self.interval_ms)
            for owner, deltas in by_owner.items()
        }


@dataclass(frozen=True, slots=True)
class Allowance:
    """Usage one gateway may still accept for an entity until its next answer: its share of
    what keeps the cluster's rate within the bound until then."""

    quota_type: QuotaType
    entity: MetricEntity
    value: float


@dataclass(frozen=True, slots=True)
class QuotaAnswer:
    """A quota instance's answer to one report: every hold in force on that instance and the
    reporting gateway's allowances. Entities without an allowance are not limited by it."""

    holds: tuple[ThrottleState, ...] = ()
    allowances: tuple[Allowance, ...] = ()


@dataclass(slots=True)
class _Source:
    """What one quota instance last told this gateway (times on this gateway's clock)."""

    answered_ms: int
    holds: dict[Key, int] = field(default_factory=dict)
    allowances: dict[Key, float] = field(default_factory=dict)


def managers_for(
    resolver: QuotaResolver, clock: Clock, window: WindowConfig | None
) -> dict[QuotaType, QuotaManager]:
    return {t: QuotaManager(t, resolver, clock, window) for t in QuotaType}


class LocalQuotaView:
    """The gateway's side: local measurement, pending deltas, and per quota instance (source)
    the holds and allowances of its latest answer.

    Lifecycle: one per gateway process, built with the first resolver; `update_resolver` on each
    config change; every `report_interval_ms` the background reporter sends `drain_report()`
    and hands the answer to `apply_answer`; `expire_inactive` from a periodic task. A source not
    heard from for `stale_after_ms` no longer limits by allowance. Only the gateway's event loop
    calls it.
    """

    def __init__(
        self,
        gateway_id: str,
        resolver: QuotaResolver,
        clock: Clock,
        window: WindowConfig | None = None,
        report_interval_ms: int = 100,
        stale_after_ms: int | None = None,
    ) -> None:
        self._gateway_id = gateway_id
        self._resolver = resolver
        self._clock = clock
        self._managers = managers_for(resolver, clock, window)
        self._report_interval_ms = report_interval_ms
        self._stale_after_ms = stale_after_ms or 3 * report_interval_ms
        self._resolved: dict[tuple[QuotaType, str | None, str | None], ResolvedQuota | None] = {}
        self._pending: dict[Key, float] = {}
        self._sources: dict[str, _Source] = {}
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

    def _remaining(self, key: Key, now: int, allowances: bool = True) -> int:
        remaining = self._managers[key[0]].remaining_throttle_ms(key[1], now)
        for source in self._sources.values():
            until = source.holds.get(key)
            if until is not None and until - now > remaining:
                remaining = until - now
            allowance = source.allowances.get(key) if allowances else None
            if (
                allowance is not None
                and allowance <= 0
                and now - source.answered_ms <= self._stale_after_ms
            ):
                # spent: wait for the next answer (or, if it is late, one more interval)
                due = source.answered_ms + self._report_interval_ms - now
                remaining = max(remaining, due if due > 0 else self._report_interval_ms)
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
        return self._remaining((quota_type, resolved.entity), self._now(now_ms))

    def over_quota_ms(
        self,
        quota_type: QuotaType,
        user: str | None,
        client_id: str | None,
        now_ms: int | None = None,
    ) -> int:
        """The hold by Kafka's judgement alone (this gateway's and the service's), without
        the wait for a spent allowance: whether a fetch just recorded went over the bound and
        must be answered empty, rather than only having used up this interval's share."""
        resolved = self.resolve(quota_type, user, client_id)
        if resolved is None:
            return 0
        return self._remaining((quota_type, resolved.entity), self._now(now_ms), False)

    def _add(self, key: Key, value: float) -> None:
        self._pending[key] = self._pending.get(key, 0.0) + value
        for source in self._sources.values():
            if key in source.allowances:
                source.allowances[key] -= value

    def record_local(
        self,
        quota_type: QuotaType,
        user: str | None,
        client_id: str | None,
        value: float,
        now_ms: int | None = None,
    ) -> int:
        """Record a request's usage (bytes, or a request percentage) and return the throttle
        time for its response: the latest of the local judgement, the service's hold and a
        spent allowance. 0 and nothing recorded when no quota of this kind applies."""
        resolved = self.resolve(quota_type, user, client_id)
        if resolved is None:
            return 0
        now = self._now(now_ms)
        key = (quota_type, resolved.entity)
        self._managers[quota_type].record_and_get_throttle_time_ms(resolved.entity, value, now)
        self._add(key, value)
        return self._remaining(key, now)

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
        """Take back the usage of a request answered empty (a throttled fetch): locally, in
        the allowance and in the next report."""
        resolved = self.resolve(quota_type, user, client_id)
        if resolved is None:
            return
        self._managers[quota_type].unrecord(resolved.entity, value, self._now(now_ms))
        self._add((quota_type, resolved.entity), -value)

    def max_value_in_quota_window(
        self, quota_type: QuotaType, user: str | None, client_id: str | None
    ) -> float:
        """Cap for one fetch's size (Kafka's `getMaxValueInQuotaWindow`); inf without quota."""
        resolved = self.resolve(quota_type, user, client_id)
        if resolved is None:
            return float("inf")
        return self._managers[quota_type].max_value_in_quota_window(resolved.entity)

    def drain_report(self) -> UsageReport:
        """The usage recorded since the last report, as the next report (send it even when it
        has no deltas: the answer refreshes holds and allowances)."""
        deltas = tuple(UsageDelta(t, e, v) for (t, e), v in self._pending.items() if v != 0.0)
        self._pending.clear()
        self._seq += 1
        return UsageReport(self._gateway_id, self._seq, deltas, self._report_interval_ms)

    def requeue(self, report: UsageReport) -> None:
        """Fold a report that surely did not arrive back into the next one."""
        for delta in report.deltas:
            key = (delta.quota_type, delta.entity)
            self._pending[key] = self._pending.get(key, 0.0) + delta.value

    def apply_answer(self, source: str, answer: QuotaAnswer, now_ms: int | None = None) -> None:
        """Replace what quota instance `source` said with its answer to the latest report.
        Hold times are on this process's clock (rebuild them from the remaining time sent on
        the wire). Usage recorded since that report was drained counts against the new
        allowances, and so does the amount by which the previous allowance was overspent (a
        request is admitted while any allowance is left, so it may cross it)."""
        now = self._now(now_ms)
        view = _Source(now)
        previous = self._sources.get(source)
        for hold in answer.holds:
            if hold.throttle_until_ms > now:
                view.holds[(hold.quota_type, hold.entity)] = hold.throttle_until_ms
        for allowance in answer.allowances:
            key = (allowance.quota_type, allowance.entity)
            pending = self._pending.get(key, 0.0)
            value = allowance.value - pending
            if previous is not None and key in previous.allowances:
                # what the last allowance was overspent by when the report was drained (one
                # request may cross it) is repaid from this one
                value += min(previous.allowances[key] + pending, 0.0)
            view.allowances[key] = value
        self._sources[source] = view

    def forget_source(self, source: str) -> None:
        """Drop a quota instance's answer (it left the cluster or its shards moved)."""
        self._sources.pop(source, None)

    def expire_inactive(
        self, now_ms: int | None = None, inactive_ms: int = INACTIVE_EXPIRATION_MS
    ) -> int:
        """Forget entities idle for `inactive_ms` and holds that have ended."""
        now = self._now(now_ms)
        expired = sum(len(m.expire_inactive(now, inactive_ms)) for m in self._managers.values())
        for view in self._sources.values():
            view.holds = {k: until for k, until in view.holds.items() if until > now}
        return expired
