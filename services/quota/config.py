"""The quota service's settings: Kafka's quota window keys, from `--config key=value`.

A quota instance holds only in-memory windows, so all it can be told is how they measure:
`quota.window.num` samples (11) of `quota.window.size.seconds` (1 s) each, and how often idle
entities are forgotten. These must match the gateways' settings, since both sides judge the
same windows; the launcher passes the same values to both. Unknown keys and bad values are
refused at start-up with a message naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from riverlog.common.quota.window import WindowConfig
from riverlog.common.service import int_settings


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
        return cls(
            **int_settings("quota", cls, overrides, minimum=1, too_small="must be at least 1")
        )

    @property
    def window(self) -> WindowConfig:
        return WindowConfig.from_kafka(self.quota_window_num, self.quota_window_size_seconds)
