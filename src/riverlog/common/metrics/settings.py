"""The `metrics.prometheus.*` settings every service process takes (decision 0033), split off
the `--config` overrides before the service's own config parses the rest.

- `metrics.prometheus.port`: serve `/metrics` on this port; 0 picks a free one (written to the
  ready file as `metrics_address`, which `riverlog cluster status` lists). Absent: no endpoint,
  no thread, no instrumentation (the default).
- `metrics.prometheus.host`: the address to bind; default the process's `--host`.
- `metrics.prometheus.lag.interval.ms`: how often a coordinator refreshes the high watermarks
  its consumer-lag gauges compare committed offsets with (default 10000).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass

from riverlog.common.errors import ErrorCode, RiverlogError

PREFIX = "metrics.prometheus."
PORT = PREFIX + "port"
HOST = PREFIX + "host"
LAG_INTERVAL_MS = PREFIX + "lag.interval.ms"
DEFAULT_LAG_INTERVAL_MS = 10_000


@dataclass(frozen=True, slots=True)
class PrometheusSettings:
    port: int
    host: str | None = None
    lag_interval_ms: int = DEFAULT_LAG_INTERVAL_MS


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


def take_prometheus_settings(overrides: MutableMapping[str, str]) -> PrometheusSettings | None:
    """Remove the `metrics.prometheus.*` keys from `overrides` and parse them; None when no
    port is set (no endpoint). RiverlogError(INVALID_CONFIG) for an unknown key or a bad
    value."""
    ours = {k: overrides.pop(k) for k in [k for k in overrides if k.startswith(PREFIX)]}
    unknown = set(ours) - {PORT, HOST, LAG_INTERVAL_MS}
    if unknown:
        raise RiverlogError(
            f"unknown setting {sorted(unknown)[0]!r} (one of {HOST}, {LAG_INTERVAL_MS}, {PORT})",
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
    )
