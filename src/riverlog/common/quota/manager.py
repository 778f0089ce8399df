"""Usage per metric entity, quota violations and throttle times, as Kafka's ClientQuotaManager.

Kafka's answer to "a client is over its quota" is not an error but a delay: the broker records
the request, measures the rate, and if the rate is above the bound returns how long the client
must wait for the rate to fall back to it, assuming it sends nothing meanwhile. With observed
rate O over a window W and bound T, a pause X brings the rate to O*W / (W + X) = T, so
X = (O - T) / T * W (`QuotaUtils.throttleTime`, rounded like Java's `Math.round`). Byte-rate
throttles are unbounded, as in Kafka; request_percentage throttles are capped at one sample
length (`ClientRequestQuotaManager.maxThrottleTimeMs` = quota.window.size.seconds), since one
expensive request should not silence a client for long. Request time becomes a percentage as in
Kafka: handler nanoseconds * 100 / 10^9, so a rate of 100 is one thread kept busy.

One `QuotaManager` per quota kind runs on each gateway (local usage) and on each quota service
instance (the cluster-wide sum); the exchange between them lives in `exchange.py`. A manager
also remembers until when it throttles each entity (Kafka's delay queue of muted channels), so
later requests of the same group are held back without being measured again.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from riverlog.common.clock import Clock

from .entity import MetricEntity, QuotaType
from .resolver import QuotaResolver
from .window import SampledRate, SampleState, WindowConfig

NANOS_TO_PERCENTAGE_PER_SECOND: Final = 100.0 / 1_000_000_000
"""Kafka's `ClientRequestQuotaManager.NANOS_TO_PERCENTAGE_PER_SECOND`."""

INACTIVE_EXPIRATION_MS: Final = 3_600_000
"""Kafka's `InactiveSensorExpirationTimeSeconds`: an entity idle this long is forgotten."""

_BOUND_CACHE_MAX: Final = 100_000

MAX_THROTTLE_TIME_MS: Final = 2**31 - 1
"""throttle_time_ms is an int32 on the wire; Kafka's cast would wrap, we saturate."""


def request_time_to_percentage(handler_time_ns: int) -> float:
    """Handler time as the value a request_percentage quota records."""
    return handler_time_ns * NANOS_TO_PERCENTAGE_PER_SECOND


def throttle_time_ms(observed: float, bound: float, window_ms: int) -> int:
    """Kafka's `QuotaUtils.throttleTime`: (O - T) / T * W, rounded half up. Negative when the
    rate is under the bound (callers treat that as no throttle); saturates at int32."""
    raw = (observed - bound) / bound * window_ms
    return min(math.floor(raw + 0.5), MAX_THROTTLE_TIME_MS)


def bounded_throttle_time_ms(observed: float, bound: float, window_ms: int, max_ms: int) -> int:
    """Kafka's `QuotaUtils.boundedThrottleTime`: the throttle time, at most `max_ms`."""
    return min(throttle_time_ms(observed, bound, window_ms), max_ms)


@dataclass(frozen=True, slots=True)
class ThrottleState:
    """A metric entity held back until `throttle_until_ms` for one quota kind.

    The time is on the monotonic clock of the process holding the value; across processes send
    `remaining_ms(now)` and rebuild with the receiver's clock."""

    quota_type: QuotaType
    entity: MetricEntity
    throttle_until_ms: int

    def remaining_ms(self, now_ms: int) -> int:
        return max(self.throttle_until_ms - now_ms, 0)


class QuotaManager:
    """Kafka's ClientQuotaManager for one quota kind: a `SampledRate` per metric entity, bounds
    from the current `QuotaResolver`, throttle times, and the throttled-until table.

    Lifecycle: created at start-up with the first resolver; `update_resolver` on each config
    change; `expire_inactive` from a periodic task. Not thread-safe: one asyncio task (the
    gateway's or quota service's event loop) owns it. Times default to `clock.monotonic_ms()`.
    """

    def __init__(
        self,
        quota_type: QuotaType,
        resolver: QuotaResolver,
        clock: Clock,
        window: WindowConfig | None = None,
    ) -> None:
        self._type = quota_type
        self._resolver = resolver
        self._clock = clock
        self._window = window or WindowConfig()
        self._rates: dict[MetricEntity, SampledRate] = {}
        self._throttled_until: dict[MetricEntity, int] = {}
        self._bounds: dict[MetricEntity, float | None] = {}
        # Kafka bounds only the request quota's throttle, by one sample length
        self._max_throttle_ms = (
            self._window.sample_ms if quota_type is QuotaType.REQUEST else MAX_THROTTLE_TIME_MS
        )

    @property
    def quota_type(self) -> QuotaType:
        return self._type

    @property
    def window(self) -> WindowConfig:
        return self._window

    @property
    def resolver(self) -> QuotaResolver:
        return self._resolver

    def update_resolver(self, resolver: QuotaResolver) -> None:
        """Take new bounds. Windows are kept (a changed bound applies to usage already
        measured, as Kafka updates the metric's config in place); held-back entities are
        re-judged with the new bounds at once, so a raised quota frees a client now."""
        self._resolver = resolver
        self._bounds.clear()
        now = self._clock.monotonic_ms()
        held = list(self._throttled_until)
        self._throttled_until.clear()
        for entity in held:
            self.throttle(entity, self.check_throttle_time_ms(entity, now), now)

    def bound(self, entity: MetricEntity) -> float | None:
        """The entity's bound (looked up once per resolver: it runs on every request)."""
        try:
            return self._bounds[entity]
        except KeyError:
            if len(self._bounds) >= _BOUND_CACHE_MAX:
                self._bounds.clear()
            bound = self._bounds[entity] = self._resolver.bound_for(self._type, entity)
            return bound

    def _now(self, now_ms: int | None) -> int:
        return self._clock.monotonic_ms() if now_ms is None else now_ms

    def _rate(self, entity: MetricEntity) -> SampledRate:
        rate = self._rates.get(entity)
        if rate is None:
            rate = self._rates[entity] = SampledRate(self._window)
        return rate

    def record(self, entity: MetricEntity, value: float, now_ms: int | None = None) -> None:
        """Add usage without judging it (Kafka's `recordNoThrottle`)."""
        self._rate(entity).record(value, self._now(now_ms))

    def unrecord(self, entity: MetricEntity, value: float, now_ms: int | None = None) -> None:
        """Take back usage recorded for a request answered empty (Kafka's
        `unrecordQuotaSensor`): a negative value in the current sample."""
        self._rate(entity).record(-value, self._now(now_ms))

    def measure(self, entity: MetricEntity, now_ms: int | None = None) -> float:
        """The entity's rate now (units per second); 0.0 for an entity never recorded."""
        rate = self._rates.get(entity)
        return 0.0 if rate is None else rate.measure(self._now(now_ms))

    def headroom(
        self, entity: MetricEntity, now_ms: int | None = None, horizon_ms: int = 0
    ) -> float | None:
        """How much usage could be added now with the rate staying within the bound until
        `horizon_ms` from now (see `SampledRate.headroom`; negative when over); None when no
        bound applies."""
        bound = self.bound(entity)
        if bound is None:
            return None
        rate = self._rates.get(entity) or SampledRate(self._window)
        return rate.headroom(bound, self._now(now_ms), horizon_ms)

    def check_throttle_time_ms(self, entity: MetricEntity, now_ms: int | None = None) -> int:
        """How long the entity must pause for its rate to fall back to its bound, judged on
        what is recorded so far (Kafka's `Sensor.checkQuotas` + `throttleTime`); 0 when within
        the bound (a rate equal to the bound is within it) or when no bound applies."""
        rate = self._rates.get(entity)
        bound = self.bound(entity)
        if rate is None or bound is None:
            return 0
        now = self._now(now_ms)
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        throttle = bounded_throttle_time_ms(
            observed, bound, rate.window_ms(now), self._max_throttle_ms
        )
        return max(throttle, 0)

    def record_and_get_throttle_time_ms(
        self, entity: MetricEntity, value: float, now_ms: int | None = None
    ) -> int:
        """Record, then judge (Kafka's `recordAndGetThrottleTimeMs`): the request that crosses
        the bound is accepted and told how long to wait, and the entity is held back that long.
        """
        now = self._now(now_ms)
        self._rate(entity).record(value, now)
        throttle = self.check_throttle_time_ms(entity, now)
        self.throttle(entity, throttle, now)
        return throttle

    def throttle(self, entity: MetricEntity, throttle_ms: int, now_ms: int | None = None) -> None:
        """Hold the entity back for `throttle_ms` from now (Kafka's `throttle`, which mutes the
        channel). A hold only ever extends: the later of the old and new end wins."""
        if throttle_ms <= 0:
            return
        until = self._now(now_ms) + throttle_ms
        if until > self._throttled_until.get(entity, 0):
            self._throttled_until[entity] = until

    def remaining_throttle_ms(self, entity: MetricEntity, now_ms: int | None = None) -> int:
        """How much longer the entity is held back (0: not held)."""
        until = self._throttled_until.get(entity)
        return 0 if until is None else max(until - self._now(now_ms), 0)

    def throttle_states(self, now_ms: int | None = None) -> list[ThrottleState]:
        """Every entity held back at `now`; ended holds are dropped on the way."""
        now = self._now(now_ms)
        ended = [e for e, until in self._throttled_until.items() if until <= now]
        for entity in ended:
            del self._throttled_until[entity]
        return [ThrottleState(self._type, e, u) for e, u in self._throttled_until.items()]

    def max_value_in_quota_window(self, entity: MetricEntity) -> float:
        """The most one request may carry without being throttled for sure (Kafka's
        `getMaxValueInQuotaWindow`: bound * (num - 1) * size); used to cap fetch sizes."""
        bound = self.bound(entity)
        if bound is None:
            return math.inf
        return bound * self._window.min_window_ms / 1000.0

    def take_window(
        self, entity: MetricEntity, now_ms: int | None = None
    ) -> tuple[tuple[SampleState, ...], int]:
        """Remove the entity's window and return its samples with the hold's remaining time,
        for the instance that owns it next. The hold itself stays here until it ends, so the
        gateways keep hearing it from this instance until they hear it from the new owner
        (holds from two sources only ever extend each other)."""
        now = self._now(now_ms)
        rate = self._rates.pop(entity, None)
        samples = () if rate is None else rate.export(now)
        return samples, self.remaining_throttle_ms(entity, now)

    def absorb_window(
        self,
        entity: MetricEntity,
        samples: tuple[SampleState, ...],
        throttle_ms: int,
        now_ms: int | None = None,
    ) -> None:
        """Merge a window handed over by the entity's previous owner: usage adds to what is
        here (never lowers it), the hold is the later of both, then the entity is judged."""
        now = self._now(now_ms)
        if samples:
            self._rate(entity).absorb(samples, now)
        self.throttle(entity, throttle_ms, now)
        self.throttle(entity, self.check_throttle_time_ms(entity, now), now)

    def entities(self) -> Iterator[MetricEntity]:
        return iter(self._rates)

    def expire_inactive(
        self, now_ms: int | None = None, inactive_ms: int = INACTIVE_EXPIRATION_MS
    ) -> list[MetricEntity]:
        """Forget entities with nothing recorded for `inactive_ms` and no hold in force (Kafka
        expires idle sensors after an hour); returns them."""
        now = self._now(now_ms)
        expired = [
            entity
            for entity, rate in self._rates.items()
            if (rate.last_record_ms is None or now - rate.last_record_ms >= inactive_ms)
            and self._throttled_until.get(entity, 0) <= now
        ]
        for entity in expired:
            del self._rates[entity]
            self._throttled_until.pop(entity, None)
        return expired

    def __repr__(self) -> str:
        return (
            f"QuotaManager({self._type.key}, {len(self._rates)} entities,"
            f" {len(self._throttled_until)} held)"
        )
