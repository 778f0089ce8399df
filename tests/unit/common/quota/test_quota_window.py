"""Kafka's sampled rate, number by number: the window at start-up, in steady state, after idle
periods (obsolete samples purged), a sample overlapping the window's start, and invariants over
random traffic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota import SampledRate, WindowConfig

T0 = 1_700_000_000_000


def rate(samples: int = 11, sample_ms: int = 1000) -> SampledRate:
    return SampledRate(WindowConfig(samples, sample_ms))


def test_defaults_are_kafkas():
    config = WindowConfig()
    assert (config.samples, config.sample_ms) == (11, 1000)
    assert WindowConfig.from_kafka(11, 1) == config
    assert config.expire_age_ms == 11_000
    assert config.min_window_ms == 10_000


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: WindowConfig(0, 1000), "quota.window.num"),
        (lambda: WindowConfig(11, 0), "quota.window.size.seconds"),
        (lambda: WindowConfig.from_kafka(11, 0), "quota.window.size.seconds"),
        (lambda: WindowConfig.from_kafka(-1, 1), "quota.window.num"),
    ],
)
def test_bad_window_settings_are_refused(build, fragment):
    with pytest.raises(RiverlogError) as info:
        build()
    assert info.value.code is ErrorCode.INVALID_CONFIG
    assert fragment in info.value.message


def test_nothing_recorded_measures_zero_over_the_minimum_window():
    r = rate()
    assert r.measure(T0) == 0.0
    assert r.window_ms(T0) == 10_000
    assert r.last_record_ms is None


def test_at_start_up_missing_samples_count_as_idle_time():
    r = rate()
    r.record(1000, T0)
    # (num - 1) whole samples plus what has elapsed of the current one
    assert r.window_ms(T0) == 10_000
    assert r.measure(T0) == 100.0
    assert r.window_ms(T0 + 500) == 10_500
    r.record(1000, T0 + 1000)
    r.record(1000, T0 + 2000)
    assert r.window_ms(T0 + 2500) == 10_500  # 2 full samples + 500 ms, padded by 8 samples
    assert r.measure(T0 + 2500) == pytest.approx(3000 / 10.5)
    assert r.last_record_ms == T0 + 2000


def test_values_within_one_sample_length_share_a_sample_started_by_the_first():
    r = rate()
    r.record(10, T0 + 300)  # this sample runs [300, 1300)
    r.record(10, T0 + 1299)
    r.record(10, T0 + 1300)  # a new sample starts here, not on a 1000 ms grid
    assert r.window_ms(T0 + 2299) == 10_999  # 1 full sample since 300, padded by 9
    assert r.window_ms(T0 + 2300) == 10_000  # 2 full samples since 300, padded by 8
    assert r.total(T0 + 2300) == 30
    # the first sample (last event 1299) expires alone, a full window after its last event
    assert r.total(T0 + 12_298) == 30
    assert r.total(T0 + 12_299) == 10
    assert r.window_ms(T0 + 12_299) == 10_999  # now measured from the sample started at 1300
    assert r.total(T0 + 12_300) == 0


def test_steady_state_measures_over_the_kept_samples():
    r = rate()
    for second in range(21):
        r.record(1000, T0 + second * 1000)
    # kept: the samples started at 10 s .. 20 s (the one at 9 s is a full window old)
    assert r.total(T0 + 20_000) == 11_000
    assert r.window_ms(T0 + 20_000) == 10_000
    assert r.measure(T0 + 20_000) == 1100.0
    assert r.measure(T0 + 20_500) == pytest.approx(11_000 / 10.5)
    assert r.window_ms(T0 + 20_999) == 10_999


def test_after_an_idle_period_obsolete_samples_are_purged():
    r = rate()
    r.record(5000, T0)
    assert r.total(T0 + 10_999) == 5000  # last event 10.999 s ago: still in
    assert r.measure(T0 + 10_999) == pytest.approx(5000 / 10.999)
    assert r.total(T0 + 11_000) == 0  # a full window (11 x 1 s) old: purged
    assert r.measure(T0 + 11_000) == 0.0
    assert r.window_ms(T0 + 11_000) == 10_000
    r.record(100, T0 + 30_000)  # back after 30 s: measured as after start-up
    assert r.measure(T0 + 30_000) == 10.0


def test_a_sample_overlapping_the_window_start_is_kept_until_its_last_event_expires():
    r = rate()
    r.record(100, T0)
    r.record(100, T0 + 900)  # same sample: started at 0, last event at 900
    assert r.total(T0 + 11_500) == 200
    assert r.window_ms(T0 + 11_500) == 11_500  # measured from the sample's start
    assert r.measure(T0 + 11_500) == pytest.approx(200 / 11.5)
    assert r.total(T0 + 11_900) == 0


def test_negative_values_take_usage_back():
    r = rate()
    r.record(4000, T0)
    r.record(-4000, T0 + 10)
    r.record(500, T0 + 20)
    assert r.total(T0 + 20) == 500
    assert r.measure(T0 + 20) == pytest.approx(500 / 10.02)


def test_a_single_sample_window_never_divides_by_zero():
    r = rate(samples=1)
    r.record(7, T0)
    assert r.window_ms(T0) == 1
    assert r.measure(T0) == 7000.0
    assert r.window_ms(T0 + 400) == 400
    assert r.total(T0 + 1000) == 0


def test_other_sample_lengths_scale_the_window():
    r = rate(samples=4, sample_ms=250)
    r.record(30, T0)
    assert r.window_ms(T0) == 750
    assert r.measure(T0) == 40.0
    assert r.total(T0 + 999) == 30
    assert r.total(T0 + 1000) == 0


events = st.lists(
    st.tuples(st.integers(0, 3000), st.floats(0, 1e6, allow_nan=False)),
    min_size=1,
    max_size=80,
)


@given(events, st.integers(0, 15_000), st.sampled_from([(11, 1000), (3, 500), (2, 1)]))
def test_only_recent_usage_counts_and_the_window_never_shrinks_below_the_minimum(
    timeline, tail_ms, shape
):
    samples, sample_ms = shape
    r = rate(samples, sample_ms)
    now = T0
    recorded: list[tuple[int, float]] = []
    for gap, value in timeline:
        now += gap
        r.record(value, now)
        recorded.append((now, value))
    now += tail_ms
    total = r.total(now)
    expire = samples * sample_ms
    recent = sum(v for t, v in recorded if now - t < expire)
    everything = sum(v for _, v in recorded)
    # usage from less than a full window ago is always kept; nothing is counted twice
    assert recent * (1 - 1e-9) - 1e-6 <= total <= everything * (1 + 1e-9) + 1e-6
    window = r.window_ms(now)
    assert window >= (samples - 1) * sample_ms
    assert window <= expire + sample_ms  # at most one overlapping sample beyond num x size
    assert r.measure(now) == pytest.approx(total / (window / 1000))
    assert len(r._samples) <= samples + 1  # bounded memory: the ring never grows


def test_headroom_now_is_what_keeps_the_rate_at_the_bound():
    r = rate()
    r.record(5000, T0)
    assert r.headroom(1000, T0 + 600) == 1000 * 10.6 - 5000
    r.record(5600, T0 + 600)
    assert r.measure(T0 + 600) == pytest.approx(1000)


def test_headroom_over_a_horizon_sees_the_start_up_padding_restart():
    r = rate()
    r.record(5000, T0)
    assert r.headroom(1000, T0 + 600, horizon_ms=100) == 5600  # no sample boundary before 700
    # at 1000 ms one sample is full and the window drops from 10.999 s to 10 s
    assert r.headroom(1000, T0 + 600, horizon_ms=500) == 5000


def test_headroom_over_a_horizon_sees_a_purge_shrink_the_window():
    r = rate()
    r.record(100, T0)  # a small sample that starts the window at 0
    r.record(9000, T0 + 5000)
    assert r.headroom(1000, T0 + 10_950) == 1000 * 10.95 - 9100
    # at 11 000 the first sample leaves: 100 less usage, but 950 ms less window
    assert r.headroom(1000, T0 + 10_950, horizon_ms=100) == 1000 * 10.0 - 9000


def test_headroom_is_negative_over_the_bound():
    r = rate()
    r.record(12_000, T0)
    assert r.headroom(1000, T0) == -2000


@given(
    events, st.integers(0, 15_000), st.integers(0, 2000), st.sampled_from([(11, 1000), (3, 500)])
)
def test_spending_the_headroom_keeps_the_rate_within_the_bound_over_the_horizon(
    timeline, tail_ms, horizon, shape
):
    samples, sample_ms = shape
    r = rate(samples, sample_ms)
    now = T0
    for gap, value in timeline:
        now += gap
        r.record(value, now)
    now += tail_ms
    bound = 50_000.0
    room = r.headroom(bound, now)
    assert room == pytest.approx(bound * r.window_ms(now) / 1000 - r.total(now))
    spendable = r.headroom(bound, now, horizon)
    assert spendable <= room + 1e-6
    if spendable <= 0:
        return
    r.record(spendable, now)
    for at in range(now, now + horizon + 1, 7):
        assert r.measure(at) <= bound * (1 + 1e-9)
