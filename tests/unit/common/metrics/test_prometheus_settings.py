"""`metrics.prometheus.*` settings: split off the overrides, parsed, bad input refused with
INVALID_CONFIG and the other keys left for the service's own config; HTTPS by default under
internal TLS (decision 0035, addendum)."""

from __future__ import annotations

import pytest

from riverlog.common.certificate_files import CertificateFiles
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.metrics.settings import (
    DEFAULT_LAG_INTERVAL_MS,
    MetricsTls,
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


NODE_CERT = CertificateFiles("node.pem", "node.key", "ca.pem")


def test_https_follows_the_internal_listener() -> None:
    """With an internal certificate (security.inter.broker.protocol=SSL) /metrics is HTTPS with
    it, scrapers' certificates not asked for; without one, plain HTTP as before."""
    plain = take_prometheus_settings({"metrics.prometheus.port": "0"})
    assert plain is not None and plain.tls is None and plain.scheme == "http"
    tls = take_prometheus_settings({"metrics.prometheus.port": "0"}, NODE_CERT)
    assert tls is not None and tls.scheme == "https"
    assert tls.tls == MetricsTls(NODE_CERT, client_auth_required=False)


def test_client_auth_and_an_explicit_plaintext_endpoint() -> None:
    required = take_prometheus_settings(
        {"metrics.prometheus.port": "0", "metrics.prometheus.ssl.client.auth": "Required"},
        NODE_CERT,
    )
    assert required is not None and required.tls == MetricsTls(NODE_CERT, True)
    opted_out = take_prometheus_settings(
        {"metrics.prometheus.port": "0", "metrics.prometheus.security.protocol": "plaintext"},
        NODE_CERT,
    )
    assert opted_out is not None and opted_out.tls is None


@pytest.mark.parametrize(
    ("overrides", "certificate", "message"),
    [
        (
            {"metrics.prometheus.security.protocol": "SSL"},
            None,
            "needs security.inter.broker.protocol=SSL",
        ),
        ({"metrics.prometheus.security.protocol": "TLS"}, NODE_CERT, "PLAINTEXT or SSL"),
        ({"metrics.prometheus.ssl.client.auth": "requested"}, NODE_CERT, "none or required"),
        ({"metrics.prometheus.ssl.client.auth": "required"}, None, "is plain HTTP"),
        ({"metrics.prometheus.ssl.ca.location": "x"}, NODE_CERT, "unknown setting"),
    ],
)
def test_bad_tls_settings_are_refused(
    overrides: dict[str, str], certificate: CertificateFiles | None, message: str
) -> None:
    with pytest.raises(RiverlogError) as info:
        take_prometheus_settings({"metrics.prometheus.port": "0", **overrides}, certificate)
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert message in str(info.value)
