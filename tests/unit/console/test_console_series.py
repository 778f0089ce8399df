"""Lag and throughput series: Kafka's lag per partition (never negative, none without a
commit), totals, bounded history, and rates from end-offset samples."""

from __future__ import annotations

import pytest

from riverlog.common.types import TopicPartition
from riverlog.console.series import (
    Point,
    Series,
    group_lag,
    partition_lag,
    rates,
    total_lag,
)

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_partition_lag_is_end_minus_committed_never_negative() -> None:
    assert partition_lag(5, 20) == 15
    assert partition_lag(20, 20) == 0
    assert partition_lag(25, 20) == 0  # a commit landed between the two reads
    assert partition_lag(None, 20) is None
    assert partition_lag(-1, 20) is None


def test_group_lag_covers_committed_and_ended_partitions() -> None:
    lags = group_lag({A0: 3, B0: 9}, {A0: 10, A1: 4})
    assert lags == {A0: 7, A1: None}  # b-0 has no end offset (deleted topic): left out
    assert list(lags) == [A0, A1]
    assert total_lag(lags.values()) == 7
    assert total_lag([]) == 0


def test_series_keeps_at_most_capacity_points_oldest_dropped() -> None:
    series = Series(capacity=3)
    for t in range(5):
        series.add(float(t), t * 10.0)
    assert [p.t for p in series.points()] == [2.0, 3.0, 4.0]
    assert len(series) == 3
    assert series.last == Point(4.0, 40.0)


def test_series_refuses_points_out_of_time_order() -> None:
    series = Series(capacity=3)
    series.add(10.0, 1.0)
    series.add(10.0, 2.0)  # the same time is fine
    with pytest.raises(ValueError, match="older than the last"):
        series.add(9.0, 3.0)
    with pytest.raises(ValueError):
        Series(capacity=1)


def test_rates_are_per_second_between_samples() -> None:
    points = [Point(0.0, 100.0), Point(2.0, 300.0), Point(3.0, 300.0)]
    assert rates(points) == [Point(2.0, 100.0), Point(3.0, 0.0)]
    assert rates([Point(0.0, 5.0)]) == []


def test_rates_start_afresh_when_the_counter_goes_down_or_time_stands_still() -> None:
    points = [Point(0.0, 500.0), Point(1.0, 10.0), Point(2.0, 30.0), Point(2.0, 40.0)]
    assert rates(points) == [Point(2.0, 20.0)]
