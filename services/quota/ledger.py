"""The quota service's books: the cluster-wide windows of the entities one instance owns.

Every gateway's usage deltas for an entity land in one `QuotaManager` window here, so the rate
judged is the cluster's, and Kafka's formula turns it into holds. Each answer also splits the
headroom left under an entity's bound among the gateways that carry the entity at the moment
(those that reported usage for it within one sample length), so between two reports the
gateways together cannot accept much more than the bound allows (see `exchange.py` for why
holds alone overshoot). The headroom is the lowest it will be until the gateway's next report,
since a sample leaving the window can shrink the window by more than the usage it takes along.
Which gateways carry what is remembered for one full window, so a gateway whose client paused
under a hold still gets its allowance when the hold ends.

An allowance is also paced: never more than the bound times the time since that gateway's
previous report (at most three intervals), shared the same way. Headroom alone admits a burst
of (num - 1) samples' worth whenever the window is empty (Kafka's padding), then nothing until
that sample leaves the window: a client offering more than its quota went in bursts of ten
seconds' worth every eleven seconds, 1.12x on average in the gateway simulation and never
steady. Paced, the cluster admits about the bound in every interval.
"""

from __future__ import annotations

from riverlog.common.clock import Clock
from riverlog.common.quota.entity import MetricEntity, QuotaType
from riverlog.common.quota.exchange import Allowance, Key, QuotaAnswer, UsageReport, managers_for
from riverlog.common.quota.handover import EntityWindow, moves
from riverlog.common.quota.manager import INACTIVE_EXPIRATION_MS, QuotaManager, ThrottleState
from riverlog.common.quota.resolver import QuotaResolver
from riverlog.common.quota.window import WindowConfig

_MAX_PACE_INTERVALS = 3


class QuotaLedger:
    """Cluster-wide usage, holds and allowances for the entities of one quota instance.

    Lifecycle: one per quota service process, built with the first resolver; `merge` for each
    gateway report; `update_resolver` on each config change; `expire_inactive` from a periodic
    task. Only the service's event loop calls it.
    """

    def __init__(
        self, resolver: QuotaResolver, clock: Clock, window: WindowConfig | None = None
    ) -> None:
        self._clock = clock
        self._managers = managers_for(resolver, clock, window)
        self._window = window or WindowConfig()
        self._last_seq: dict[str, tuple[int, int]] = {}
        # entity -> gateway -> when it last reported usage for it, and the reverse
        self._carriers: dict[Key, dict[str, int]] = {}
        self._served: dict[str, dict[Key, int]] = {}
        self._recent: set[Key] = set()  # recorded since the last `hand_out`

    def manager(self, quota_type: QuotaType) -> QuotaManager:
        return self._managers[quota_type]

    def update_resolver(self, resolver: QuotaResolver) -> None:
        for manager in self._managers.values():
            manager.update_resolver(resolver)

    def _now(self, now_ms: int | None) -> int:
        return self._clock.monotonic_ms() if now_ms is None else now_ms

    def merge(self, report: UsageReport, now_ms: int | None = None) -> QuotaAnswer:
        """Add a gateway's deltas to the cluster windows, judge the entities they touch, and
        answer with every hold in force and the gateway's allowances. A report whose sequence
        was merged already changes nothing (the answer is still current)."""
        now = self._now(now_ms)
        gateway = report.gateway_id
        last = self._last_seq.get(gateway)
        since_ms = report.interval_ms if last is None else now - last[1]
        if last is None or report.seq > last[0]:
            self._last_seq[gateway] = (report.seq, now)
            self._record(gateway, report, now)
        else:
            self._last_seq[gateway] = (last[0], now)
        # pace: about one interval's worth of the bound, whatever headroom a window has
        pace_ms = min(max(since_ms, report.interval_ms), _MAX_PACE_INTERVALS * report.interval_ms)
        allowances = self._allowances(gateway, now, report.interval_ms, pace_ms)
        return QuotaAnswer(tuple(self.throttle_states(now)), allowances)

    def _record(self, gateway: str, report: UsageReport, now: int) -> None:
        touched: set[Key] = set()
        served = self._served.setdefault(gateway, {})
        for delta in report.deltas:
            key = (delta.quota_type, delta.entity)
            self._managers[delta.quota_type].record(delta.entity, delta.value, now)
            touched.add(key)
            self._recent.add(key)
            served[key] = now
            self._carriers.setdefault(key, {})[gateway] = now
        for quota_type, entity in touched:
            manager = self._managers[quota_type]
            manager.throttle(entity, manager.check_throttle_time_ms(entity, now), now)

    def _allowances(
        self, gateway: str, now: int, horizon_ms: int, pace_ms: int
    ) -> tuple[Allowance, ...]:
        served = self._served.get(gateway)
        if not served:
            return ()
        remembered = self._window.expire_age_ms
        active = self._window.sample_ms
        allowances = []
        for key, seen in list(served.items()):
            if now - seen >= remembered:
                del served[key]
                continue
            quota_type, entity = key
            manager = self._managers[quota_type]
            headroom = manager.headroom(entity, now, horizon_ms)
            if headroom is None:
                continue  # no bound (any more): nothing to share
            if manager.remaining_throttle_ms(entity, now) > 0 or headroom <= 0:
                allowances.append(Allowance(quota_type, entity, 0.0))
                continue
            carriers = self._carriers.get(key, {})
            sharing = {g for g, at in carriers.items() if now - at < active} | {gateway}
            bound = manager.bound(entity) or 0.0
            paced = min(headroom, bound * pace_ms / 1000.0)
            allowances.append(Allowance(quota_type, entity, paced / len(sharing)))
        return tuple(allowances)

    def throttle_states(self, now_ms: int | None = None) -> list[ThrottleState]:
        now = self._now(now_ms)
        return [s for m in self._managers.values() for s in m.throttle_states(now)]

    def measure(
        self, quota_type: QuotaType, entity: MetricEntity, now_ms: int | None = None
    ) -> float:
        """The entity's cluster-wide rate (for describe and metrics)."""
        return self._managers[quota_type].measure(entity, self._now(now_ms))

    def keys(self) -> list[Key]:
        """Every (kind, entity) with a window here."""
        return [(t, e) for t, m in self._managers.items() for e in m.entities()]

    def hand_out(
        self,
        node_id: int,
        owners: list[int],
        now_ms: int | None = None,
        *,
        only_recent: bool = False,
    ) -> dict[int, list[EntityWindow]]:
        """Take out the windows this instance (`node_id`) holds but does not own among
        `owners`, by new owner; an empty `owners` hands nothing. `only_recent`: look only at
        the entities reported since the previous call (the periodic sweep for gateways still
        on an old set; a changed set needs every entity looked at). The caller sends them,
        and `absorb`s back what it could not deliver."""
        now = self._now(now_ms)
        keys = list(self._recent) if only_recent else self.keys()
        self._recent = set()
        out: dict[int, list[EntityWindow]] = {}
        for owner, moved in moves(keys, node_id, owners).items():
            for quota_type, entity in moved:
                samples, throttle = self._managers[quota_type].take_window(entity, now)
                out.setdefault(owner, []).append(
                    EntityWindow(quota_type, entity, samples, throttle)
                )
                self._carriers.pop((quota_type, entity), None)
        return out

    def absorb(self, windows: list[EntityWindow], now_ms: int | None = None) -> None:
        """Merge windows handed over by their previous owner (or given back after a failed
        send): usage adds up, never lowers; holds keep the later end."""
        now = self._now(now_ms)
        for window in windows:
            self._recent.add(window.key)  # the next sweep checks it is ours (or sends it on)
            self._managers[window.quota_type].absorb_window(
                window.entity, window.samples, window.throttle_ms, now
            )

    def expire_inactive(
        self, now_ms: int | None = None, inactive_ms: int = INACTIVE_EXPIRATION_MS
    ) -> int:
        """Forget idle entities, and gateways and carriers not heard from for `inactive_ms`."""
        now = self._now(now_ms)
        for gateway in [g for g, (_, at) in self._last_seq.items() if now - at >= inactive_ms]:
            del self._last_seq[gateway]
            self._served.pop(gateway, None)
        for key in list(self._carriers):
            carriers = self._carriers[key]
            for gateway in [g for g, at in carriers.items() if now - at >= inactive_ms]:
                del carriers[gateway]
            if not carriers:
                del self._carriers[key]
        return sum(len(m.expire_inactive(now, inactive_ms)) for m in self._managers.values())
