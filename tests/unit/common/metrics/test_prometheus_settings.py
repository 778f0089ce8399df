"""`metrics.prometheus.*` settings: split off the overrides, parsed, bad input refused with
INVALID_CONFIG and the other keys left for the service's own config."""

from __future__ import annotations

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.metrics.settings import (
    DEFAULT_LAG_INTERVAL_MS,
    PrometheusSettings,
    take_prometheus_settings,
)


def test_no_port_means_no_endpoint_and_other_keys_stay() -> None:
    overrides = {"log.segment.bytes": "1024"}
    assert take_prometheus_settings(overrides) is None
    assert overrides == {"log.segment.bytes": "1024"}


def test_settings_are_taken_out_of_the_overrides() -> None:
    overrides = {
        "metrics.prometheus.port": "0",
        "metrics.prometheus.host": "0.0.0.0",
        "metrics.prometheus.lag.interval.ms": "500",
        "group.min.session.timeout.ms": "500",
    }
    settings = take_prometheus_settings(overrides)
    assert settings == PrometheusSettings(port=0, host="0.0.0.0", lag_interval_ms=500)
    assert overrides == {"group.min.session.timeout.ms": "500"}


def test_defaults() -> None:
    settings = take_prometheus_settings({"metrics.prometheus.port": "9404"})
    assert settings == PrometheusSettings(9404, None, DEFAULT_LAG_INTERVAL_MS)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"metrics.prometheus.port": "x"}, "expected an integer"),
        ({"metrics.prometheus.port": "-1"}, "between 0 and 65535"),
        ({"metrics.prometheus.port": "70000"}, "between 0 and 65535"),
        ({"metrics.prometheus.prot": "1"}, "unknown setting 'metrics.prometheus.prot'"),
        ({"metrics.prometheus.host": "h"}, "needs metrics.prometheus.port"),
        (
            {"metrics.prometheus.port": "1", "metrics.prometheus.lag.interval.ms": "5"},
            "between 100 and",
        ),
    ],
)
def test_bad_settings_are_refused(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(RiverlogError) as info:
        take_prometheus_settings(dict(overrides))
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert message in str(info.value)
