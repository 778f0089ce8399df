"""The `metrics.prometheus.*` settings every service process takes (decision 0033), split off
the `--config` overrides before the service's own config parses the rest.

- `metrics.prometheus.port`: serve `/metrics` on this port; 0 picks a free one (written to the
  ready file as `metrics_address`, which `riverlog cluster status` lists). Absent: no endpoint,
  no thread, no instrumentation (the default).
- `metrics.prometheus.host`: the address to bind; default the process's `--host`.
- `metrics.prometheus.lag.interval.ms`: how often a coordinator refreshes the high watermarks
  its consumer-lag gauges compare committed offsets with (default 10000).
- `metrics.prometheus.security.protocol`: `PLAINTEXT` (HTTP) or `SSL` (HTTPS with the process's
  own certificate, the internal listener's `listener.name.internal.ssl.*` files); default the
  process's `security.inter.broker.protocol`, so a TLS cluster serves HTTPS (decision 0035,
  addendum). SSL needs those files (internal TLS on).
- `metrics.prometheus.ssl.client.auth`: `none` (default) or `required`: scrapers must present
  a certificate signed by the cluster CA (Prometheus's `tls_config.cert_file`/`key_file`).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass

from riverlog.common.certificate_files import CertificateFiles
from riverlog.common.errors import ErrorCode, RiverlogError

PREFIX = "metrics.prometheus."
PORT = PREFIX + "port"
HOST = PREFIX + "host"
LAG_INTERVAL_MS = PREFIX + "lag.interval.ms"
SECURITY_PROTOCOL = PREFIX + "security.protocol"
CLIENT_AUTH = PREFIX + "ssl.client.auth"
KEYS = (HOST, LAG_INTERVAL_MS, PORT, SECURITY_PROTOCOL, CLIENT_AUTH)
DEFAULT_LAG_INTERVAL_MS = 10_000


@dataclass(frozen=True, slots=True)
class MetricsTls:
    """HTTPS for `/metrics`: the process's certificate, and whether a scraper must present a
    client certificate signed by `files.ca`."""

    files: CertificateFiles
    client_auth_required: bool = False


@dataclass(frozen=True, slots=True)
class PrometheusSettings:
    port: int
    host: str | None = None
    lag_interval_ms: int = DEFAULT_LAG_INTERVAL_MS
    tls: MetricsTls | None = None  # None: plain HTTP

    @property
    def scheme(self) -> str:
        return "http" if self.tls is None else "https"


def _int(key: str, raw: str, minimum: int, maximum: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise RiverlogError(
            f"invalid value {raw!r} for {key}: expected an integer", ErrorCode.INVALID_CONFIG
        ) from None
    if not minimum <= value <= maximum:
        raise RiverlogError(
            f"invalid value {raw!r} for {key}: must be between {minimum} and {maximum}",
            ErrorCode.INVALID_CONFIG,
        )
    return value


def _tls(ours: dict[str, str], certificate: CertificateFiles | None) -> MetricsTls | None:
    """HTTPS or not: `security.protocol` (default SSL exactly when the process has an internal
    certificate) and `ssl.client.auth` (none or required; only under SSL)."""
    default = "PLAINTEXT" if certificate is None else "SSL"
    protocol = ours.get(SECURITY_PROTOCOL, default).strip().upper()
    if protocol not in ("PLAINTEXT", "SSL"):
        raise RiverlogError(
            f"invalid value {ours[SECURITY_PROTOCOL]!r} for {SECURITY_PROTOCOL}: PLAINTEXT or SSL",
            ErrorCode.INVALID_CONFIG,
        )
    client_auth = ours.get(CLIENT_AUTH, "none").strip().lower()
    if client_auth not in ("none", "required"):
        raise RiverlogError(
            f"invalid value {ours[CLIENT_AUTH]!r} for {CLIENT_AUTH}: none or required",
            ErrorCode.INVALID_CONFIG,
        )
    if protocol == "PLAINTEXT":
        if CLIENT_AUTH in ours:
            raise RiverlogError(
                f"{CLIENT_AUTH} is set but /metrics is plain HTTP ({SECURITY_PROTOCOL} is"
                " PLAINTEXT)",
                ErrorCode.INVALID_CONFIG,
            )
        return None
    if certificate is None:
        raise RiverlogError(
            f"{SECURITY_PROTOCOL}=SSL serves the process's own certificate: it needs"
            " security.inter.broker.protocol=SSL and the listener.name.internal.ssl.* files",
            ErrorCode.INVALID_CONFIG,
        )
    return MetricsTls(certificate, client_auth_required=client_auth == "required")


def take_prometheus_settings(
    overrides: MutableMapping[str, str], certificate: CertificateFiles | None = None
) -> PrometheusSettings | None:
    """Remove the `metrics.prometheus.*` keys from `overrides` and parse them; None when no
    port is set (no endpoint). `certificate`: the process's internal TLS files (None: it has
    none), which make the endpoint HTTPS by default. RiverlogError(INVALID_CONFIG) for an
    unknown key or a bad value."""
    ours = {k: overrides.pop(k) for k in [k for k in overrides if k.startswith(PREFIX)]}
    unknown = set(ours) - set(KEYS)
    if unknown:
        raise RiverlogError(
            f"unknown setting {sorted(unknown)[0]!r} (one of {', '.join(KEYS)})",
            ErrorCode.INVALID_CONFIG,
        )
    if PORT not in ours:
        if ours:
            raise RiverlogError(f"{sorted(ours)[0]} needs {PORT}", ErrorCode.INVALID_CONFIG)
        return None
    port = _int(PORT, ours[PORT], 0, 65535)
    lag = ours.get(LAG_INTERVAL_MS)
    return PrometheusSettings(
        port=port,
        host=ours.get(HOST) or None,
        lag_interval_ms=(
            _int(LAG_INTERVAL_MS, lag, 100, 3_600_000) if lag else DEFAULT_LAG_INTERVAL_MS
        ),
        tls=_tls(ours, certificate),
    )
