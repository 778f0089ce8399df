"""The quota service's settings: Kafka's quota window keys, from `--config key=value`.

A quota instance holds only in-memory windows, so all it can be told is how they measure:
`quota.window.num` samples (11) of `quota.window.size.seconds` (1 s) each, and how often idle
entities are forgotten. These must match the gateways' settings, since both sides judge the
same windows; the launcher passes the same values to both. Unknown keys and bad values are
refused at start-up with a message naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.window import WindowConfig

_MINIMUM: Final = {"quota_window_num": 1, "quota_window_size_seconds": 1}


@dataclass(frozen=True, slots=True)
class QuotaConfig:
    """Settings by Kafka name (the attribute is the key with dots as underscores).

    Lifecycle: built once in `app.main`, read-only afterwards."""

    quota_window_num: int = 11
    """Samples in a quota's measurement window."""

    quota_window_size_seconds: int = 1
    """Length of one sample."""

    quota_expire_interval_ms: int = 60_000
    """How often entities idle for an hour are forgotten."""

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str]) -> QuotaConfig:
        known = {f.name.replace("_", "."): f.name for f in fields(cls)}
        values: dict[str, int] = {}
        for key, raw in overrides.items():
            attr = known.get(key)
            if attr is None:
                raise RiverlogError(
                    f"unknown quota setting {key!r} (one of {', '.join(sorted(known))})",
                    ErrorCode.INVALID_CONFIG,
                )
            try:
                value = int(raw)
            except ValueError:
                raise RiverlogError(
                    f"invalid value {raw!r} for {key}: expected an integer",
                    ErrorCode.INVALID_CONFIG,
                ) from None
            if value < _MINIMUM.get(attr, 1):
                raise RiverlogError(
                    f"invalid value {raw!r} for {key}: must be at least {_MINIMUM.get(attr, 1)}",
                    ErrorCode.INVALID_CONFIG,
                )
            values[attr] = value
        return cls(**values)

    @property
    def window(self) -> WindowConfig:
        return WindowConfig.from_kafka(self.quota_window_num, self.quota_window_size_seconds)
