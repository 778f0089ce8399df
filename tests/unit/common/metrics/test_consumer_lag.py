"""Consumer lag: high watermark minus committed offset, never negative, and only where the
watermark is known."""

from __future__ import annotations

from riverlog.common.metrics.lag import consumer_lag, group_lags
from riverlog.common.types import TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
U0 = TopicPartition("u", 0)


def test_lag_is_the_distance_to_the_high_watermark() -> None:
    assert consumer_lag(3, 10) == 7
    assert consumer_lag(10, 10) == 0


def test_lag_is_never_negative() -> None:
    # committed past a watermark read before the commit, or past a truncated log
    assert consumer_lag(12, 10) == 0


def test_group_lags_per_group_and_partition() -> None:
    committed = {"g1": {T0: 3, T1: 7}, "g2": {T0: 10, U0: 1}}
    lags = group_lags(committed, {T0: 10, T1: 10})
    assert lags == {("g1", T0): 7, ("g1", T1): 3, ("g2", T0): 0}  # U0: watermark unknown


def test_group_lags_skip_offsets_that_mean_none() -> None:
    assert group_lags({"g": {T0: -1}}, {T0: 5}) == {}
