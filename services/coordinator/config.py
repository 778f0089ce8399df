"""The coordinator's settings: one frozen dataclass with Kafka's key names, built from
`--config key=value`. Unknown keys and values that are not integers are refused at start-up.

The group timeouts bound what members may ask for (`group.min.session.timeout.ms`...), the
offsets settings bound commits and their retention; tests lower the minimum session timeout
and the initial rebalance delay so a rebalance takes a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from riverlog.common.service import int_settings


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    """Settings by Kafka name (attribute = key with dots as underscores). Built once in
    `app.main`, shared read-only."""

    group_min_session_timeout_ms: int = 6_000
    """Smallest session.timeout.ms a member may join with (else INVALID_SESSION_TIMEOUT)."""

    group_max_session_timeout_ms: int = 1_800_000
    """Largest session.timeout.ms a member may join with."""

    group_initial_rebalance_delay_ms: int = 3_000
    """How long the first rebalance of an empty group waits for more members to join."""

    group_max_size: int = 2_147_483_647
    """Members one group may hold (GROUP_MAX_SIZE_REACHED beyond)."""

    offsets_retention_minutes: int = 10_080
    """How long the offsets of an empty group (or a simple consumer's) are kept."""

    offsets_retention_check_interval_ms: int = 600_000
    """How often the retention sweep runs."""

    offset_metadata_max_bytes: int = 4_096
    """Largest commit metadata string (OFFSET_METADATA_TOO_LARGE beyond)."""

    offsets_commit_timeout_ms: int = 5_000
    """How long a write to __consumer_offsets (acks=all) may take."""

    metadata_startup_timeout_ms: int = 60_000
    """How long start-up waits for the first metadata snapshot."""

    transaction_max_timeout_ms: int = 900_000
    """Largest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT)."""

    transactional_id_expiration_ms: int = 604_800_000
    """How long a transactional.id with no transaction open is kept (then it is removed)."""

    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    """How often open transactions past their timeout are looked for (and aborted)."""

    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    """How often idle transactional.ids past transactional.id.expiration.ms are removed."""

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str]) -> CoordinatorConfig:
        return cls(
            **int_settings(
                "coordinator", cls, overrides, minimum=0, too_small="must not be negative"
            )
        )

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
