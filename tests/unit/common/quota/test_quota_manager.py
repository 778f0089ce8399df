"""Throttle times against Kafka's formula with worked numbers (Kafka's own tests replayed),
request_percentage, holds, quota changes, fetch caps and expiry of idle entities."""

from __future__ import annotations

import math

import pytest

from riverlog.common.clock import ManualClock
from riverlog.common.quota import (
    MetricEntity,
    QuotaManager,
    QuotaResolver,
    QuotaType,
    ThrottleState,
    WindowConfig,
    bounded_throttle_time_ms,
    request_time_to_percentage,
    throttle_time_ms,
)


def manager(
    quota_type: QuotaType, path: str, bound: float, window: WindowConfig | None = None
) -> tuple[QuotaManager, ManualClock]:
    clock = ManualClock(0)
    resolver = QuotaResolver.from_paths({path: {quota_type.key: bound}})
    return QuotaManager(quota_type, resolver, clock, window), clock


def millis_to_percent(ms: float) -> float:
    return request_time_to_percentage(round(ms * 1_000_000))


# Kafka's QuotaUtilsTest: windows of `numSamples - 1` seconds, max throttle 500 ms.
@pytest.mark.parametrize(
    ("observed", "bound", "window_ms", "expected"),
    [
        (100.0, 50.0, 2000, 2000),  # testThrottleTimeObservedRateAboveQuota (3 samples)
        (16.5, 16.5, 9000, 0),  # equals quota
        (16.5, 16.5, 10_000, 0),  # ... whatever the window
        (1.5, 1.0, 1, 1),  # 0.5 rounds up, like Java's Math.round
        (3.5, 1.0, 1, 3),  # 2.5 -> 3 (Python's round() would give 2)
        (0.5, 1.0, 1, 0),  # -0.5 -> 0
        (1e12, 1.0, 10_000, 2**31 - 1),  # saturates at int32 instead of wrapping
    ],
)
def test_throttle_time_is_kafkas_formula(observed, bound, window_ms, expected):
    assert throttle_time_ms(observed, bound, window_ms) == expected


def test_throttle_time_under_the_quota_is_negative():
    assert throttle_time_ms(16.5, 20.4, 9000) < 0
    assert bounded_throttle_time_ms(16.5, 22.4, 9000, 500) < 0


@pytest.mark.parametrize(
    ("observed", "bound", "window_ms", "expected"),
    [
        (55.0, 50.0, 1000, 100),  # above quota, below the limit
        (100.0, 50.0, 9000, 500),  # above the limit: capped
        (18.2, 18.2, 9000, 0),
    ],
)
def test_bounded_throttle_time_caps_at_the_limit(observed, bound, window_ms, expected):
    assert bounded_throttle_time_ms(observed, bound, window_ms, 500) == expected


def test_kafkas_quota_violation_scenario():
    """ClientQuotaManagerTest.testQuotaViolation: 500 B/s on /config/clients/<default>."""
    m, clock = manager(QuotaType.PRODUCE, "/config/clients/<default>", 500)
    entity = MetricEntity(None, "unknown")
    for _ in range(10):
        assert m.record_and_get_throttle_time_ms(entity, 400) == 0
        clock.advance(1000)
    # a spike: (400 x 10 + 2300) / 10.5 s = 600 B/s; (600 - 500) / 500 x 10.5 s = 2100 ms
    clock.advance(500)
    assert m.measure(entity) == pytest.approx(4000 / 10.5)
    throttle = m.record_and_get_throttle_time_ms(entity, 2300)
    assert throttle == 2100
    assert m.measure(entity) == pytest.approx(600.0)
    assert m.remaining_throttle_ms(entity) == 2100
    clock.advance(2100)
    assert m.remaining_throttle_ms(entity) == 0
    # delays continue until the bursty sample rolls over
    for _ in range(10):
        m.record_and_get_throttle_time_ms(entity, 400)
        clock.advance(1000)
    assert m.record_and_get_throttle_time_ms(entity, 0) == 0


def test_kafkas_request_percentage_scenario():
    """ClientRequestQuotaManagerTest: 1% of a thread (10 ms per second) for ANONYMOUS."""
    m, clock = manager(QuotaType.REQUEST, "/config/users/ANONYMOUS/clients/test-client", 1)
    resolved = m.resolver.resolve(QuotaType.REQUEST, None, "test-client")
    assert resolved is not None
    entity = resolved.entity
    for _ in range(10):
        assert m.record_and_get_throttle_time_ms(entity, millis_to_percent(4)) == 0
        clock.advance(1000)
    # (4 x 10 + 67.1) ms / 10.5 s = 10.2 ms/s; (10.2 - 10) / 10 x 10.5 s = 210 ms
    clock.advance(500)
    throttle = m.record_and_get_throttle_time_ms(entity, millis_to_percent(67.1))
    assert throttle == 210
    clock.advance(throttle)
    for _ in range(11):
        m.record_and_get_throttle_time_ms(entity, millis_to_percent(4))
        clock.advance(1000)
    assert m.record_and_get_throttle_time_ms(entity, 0) == 0
    # a spike needing far more than a window: request throttles are capped at one sample
    assert m.record_and_get_throttle_time_ms(entity, millis_to_percent(500)) == 1000
    for _ in range(10):
        clock.advance(1000)
        assert m.record_and_get_throttle_time_ms(entity, 0) == 1000
    clock.advance(1000)
    assert m.record_and_get_throttle_time_ms(entity, 0) == 0


def test_request_time_becomes_a_percentage_of_one_thread():
    assert request_time_to_percentage(10_000_000) == pytest.approx(1.0)  # 10 ms of a second
    assert request_time_to_percentage(1_000_000_000) == pytest.approx(100.0)
    m, _ = manager(QuotaType.REQUEST, "/config/clients/c1", 50)
    entity = MetricEntity(None, "c1")
    # 5 s of handler time at start-up: 500 % over a 10 s window = 10 % of a thread
    m.record(entity, request_time_to_percentage(5 * 1_000_000_000))
    assert m.measure(entity) == pytest.approx(50.0)
    assert m.check_throttle_time_ms(entity) == 0  # exactly at the bound is within it


def test_byte_rate_throttles_are_not_capped():
    m, _ = manager(QuotaType.PRODUCE, "/config/users/alice", 1_000_000)
    entity = MetricEntity("alice", None)
    # 20 MB at start-up over 10 s = 2 MB/s: (2 - 1) / 1 x 10 s
    assert m.record_and_get_throttle_time_ms(entity, 20_000_000) == 10_000


def test_a_rate_equal_to_the_bound_is_within_it():
    m, _ = manager(QuotaType.FETCH, "/config/clients/c1", 100)
    entity = MetricEntity(None, "c1")
    assert m.record_and_get_throttle_time_ms(entity, 1000) == 0  # 1000 / 10 s = 100
    assert m.record_and_get_throttle_time_ms(entity, 1) == 10  # 100.1: (0.1 / 100) x 10 s


def test_entities_without_a_bound_are_never_throttled():
    m, _ = manager(QuotaType.PRODUCE, "/config/clients/c1", 100)
    other = MetricEntity(None, "c2")
    assert m.bound(other) is None
    assert m.record_and_get_throttle_time_ms(other, 1e12) == 0
    assert m.max_value_in_quota_window(other) == math.inf


def test_unrecord_takes_back_a_throttled_fetch():
    m, _ = manager(QuotaType.FETCH, "/config/clients/c1", 100)
    entity = MetricEntity(None, "c1")
    m.record(entity, 900)
    before = m.measure(entity)
    assert m.check_throttle_time_ms(entity) == 0
    m.record(entity, 5000)  # the fetch would cross the bound ...
    assert m.check_throttle_time_ms(entity) == 49_000  # (590 - 100) / 100 x 10 s
    m.unrecord(entity, 5000)  # ... so it is answered empty and not counted
    assert m.measure(entity) == pytest.approx(before)
    assert m.check_throttle_time_ms(entity) == 0


def test_holds_only_extend_and_are_listed_until_they_end():
    m, clock = manager(QuotaType.PRODUCE, "/config/clients/c1", 100)
    entity = MetricEntity(None, "c1")
    m.throttle(entity, 500)
    m.throttle(entity, 100)  # shorter: ignored
    m.throttle(entity, 0)
    assert m.remaining_throttle_ms(entity) == 500
    assert m.throttle_states() == [ThrottleState(QuotaType.PRODUCE, entity, 500)]
    clock.advance(200)
    m.throttle(entity, 900)  # ends later: wins
    assert m.remaining_throttle_ms(entity) == 900
    state = m.throttle_states()[0]
    assert (state.throttle_until_ms, state.remaining_ms(clock.monotonic_ms())) == (1100, 900)
    clock.advance(900)
    assert m.throttle_states() == []
    assert state.remaining_ms(clock.monotonic_ms()) == 0


def test_a_raised_quota_frees_a_held_entity_and_a_lowered_one_applies_to_past_usage():
    m, clock = manager(QuotaType.PRODUCE, "/config/clients/c1", 100)
    entity = MetricEntity(None, "c1")
    assert m.record_and_get_throttle_time_ms(entity, 2000) == 10_000  # 200 B/s vs 100
    clock.advance(1000)
    m.update_resolver(QuotaResolver.from_paths({"/config/clients/c1": {"producer_byte_rate": 500}}))
    assert m.remaining_throttle_ms(entity) == 0
    assert m.record_and_get_throttle_time_ms(entity, 0) == 0
    m.update_resolver(QuotaResolver.from_paths({"/config/clients/c1": {"producer_byte_rate": 50}}))
    # the window was kept: 2000 B over 10 s against 50 B/s
    assert m.check_throttle_time_ms(entity) == 30_000


def test_max_value_in_quota_window_caps_a_fetch():
    m, _ = manager(QuotaType.FETCH, "/config/clients/c1", 1000)
    assert m.max_value_in_quota_window(MetricEntity(None, "c1")) == 10_000
    # Kafka's testGetMaxValueInQuotaWindowWithNonDefaultQuotaWindow: 3 full windows
    m, _ = manager(QuotaType.FETCH, "/config/users/<default>", 10, WindowConfig(4, 1000))
    assert m.max_value_in_quota_window(MetricEntity("userA", None)) == 30


def test_idle_entities_expire_after_an_hour_unless_held():
    m, clock = manager(QuotaType.PRODUCE, "/config/clients/<default>", 100)
    idle, busy, held = (MetricEntity(None, c) for c in ("idle", "busy", "held"))
    m.record(idle, 1)
    m.record(held, 1)
    m.throttle(held, 4_000_000)
    clock.advance(3_599_999)
    m.record(busy, 1)
    assert m.expire_inactive() == []
    clock.advance(1)
    assert m.expire_inactive() == [idle]
    assert set(m.entities()) == {busy, held}
    assert m.measure(idle) == 0.0


def test_headroom_is_what_may_still_be_added_under_the_bound():
    m, _ = manager(QuotaType.PRODUCE, "/config/clients/c1", 100)
    entity = MetricEntity(None, "c1")
    assert m.headroom(entity) == 1000  # nothing yet: 100 B/s over the 10 s minimum window
    assert list(m.entities()) == []  # asking does not create a window
    m.record(entity, 400)
    assert m.headroom(entity) == 600
    assert m.headroom(MetricEntity(None, "c2")) is None
