"""The gateway's settings: one frozen dataclass with Kafka's key names, built from `--config`.

A gateway holds no state of its own, so everything it can be told is about time and size: how
long a request may take at most (retries on stale routes included), how it backs off while the
metadata catches up, how many requests one stream may have in flight, and the fetch size caps.
Unknown keys and bad values are refused at start-up with a message naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from riverlog.common.errors import ErrorCode, RiverlogError

_MIB: Final = 1024 * 1024
MIN_GRANT_MS: Final = 10_000
"""The shortest direct.access.grant.ms the gateway accepts (decision 0047)."""
_BOOL_KEYS: Final = frozenset(
    {
        "allow_anonymous",
        "storage_zero_copy_enable",
        "authorizer_enable",
        "allow_everyone_if_no_acl_found",
    }
)
_STR_KEYS: Final = frozenset(
    {
        "ssl_certificate_location",
        "ssl_key_location",
        "ssl_ca_location",
        "ssl_client_auth",
        "super_users",
        "replica_selector_class",
        "direct_access_secret_key_file",
    }
)
REPLICA_SELECTORS: Final = ("leader", "rack-aware")
CLIENT_AUTH_CHOICES: Final = ("none", "required")
"""Kafka's `requested` is not offered: gRPC Python's server either requires and verifies a client
certificate or does not ask for one."""


def _parse_bool(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise RiverlogError(
            f"invalid value {raw!r} for {key}: expected true or false", ErrorCode.INVALID_CONFIG
        )
    return value == "true"


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """Settings by Kafka name (the attribute is the key with dots as underscores).

    Lifecycle: built once in `app.main` and shared read-only by every component.
    """

    request_timeout_ms: int = 30_000
    """Upper bound of one request at the gateway, retries on stale routes included. A client's
    gRPC deadline, when shorter, wins."""

    retry_backoff_ms: int = 100
    """First pause before re-sending a partition after a stale-route error when no newer metadata
    arrives sooner; doubles at each retry of the same request."""

    retry_backoff_max_ms: int = 1_000
    """Cap of the pause above."""

    max_block_ms: int = 5_000
    """How long a partition with no leader (an election in progress) waits for the metadata to
    show one before LEADER_NOT_AVAILABLE; also how long topic admin calls wait for this gateway's
    metadata to show their effect."""

    max_in_flight_requests_per_connection: int = 64
    """Requests one ProduceStream or FetchStream may have in progress at once; the stream stops
    reading while the limit is reached."""

    fetch_max_bytes: int = 50 * _MIB
    """Cap on a fetch's max_bytes (larger asks are lowered to it)."""

    max_partition_fetch_bytes: int = _MIB
    """A partition's share when a fetch leaves partition_max_bytes at 0."""

    replica_selector_class: str = "leader"
    """Kafka's replica.selector.class: `leader` (every fetch goes to the leader) or `rack-aware`
    (a consumer that sends its `client.rack` reads from an in-sync replica in that rack;
    decision 0038)."""

    metadata_max_age_ms: int = 300_000
    """How long a follower that failed a consumer's fetch (behind, out of range, unreachable)
    is passed over for its partition before being chosen again (Kafka's consumer forgets its
    preferred read replica after metadata.max.age.ms)."""

    metadata_startup_timeout_ms: int = 60_000
    """How long start-up waits for the first metadata snapshot."""

    quota_window_num: int = 11
    """Kafka's quota.window.num: samples in a quota's measurement window."""

    quota_window_size_seconds: int = 1
    """Kafka's quota.window.size.seconds: the length of one sample."""

    quota_report_interval_ms: int = 100
    """How often usage is reported to the quota service (in the background)."""

    allow_anonymous: bool = True
    """Whether calls without credentials are served, as the ANONYMOUS user (true/false)."""

    storage_zero_copy_enable: bool = True
    """Whether fetches go to leaders over their zero-copy channels (one framed request per
    exchange on pooled TCP connections) instead of gRPC (true/false); with tracing on they take
    gRPC regardless, which carries the trace context (decision 0018)."""

    ssl_certificate_location: str = ""
    """PEM certificate chain the gateway serves TLS with; empty: plaintext gRPC (with
    ssl.key.location)."""

    ssl_key_location: str = ""
    """PEM private key of ssl.certificate.location."""

    ssl_ca_location: str = ""
    """PEM CA certificates client certificates are verified against (needed for
    ssl.client.auth requested/required)."""

    ssl_client_auth: str = "none"
    """Kafka's ssl.client.auth: none or required (`requested` is refused: gRPC Python cannot
    ask for an optional certificate). A verified certificate's common name is the principal of
    a call without credentials in its metadata."""

    authorizer_enable: bool = True
    """Whether ACLs are enforced (true/false). Even when true, a cluster holding no ACL binding
    at all authorizes everything, as before ACLs existed (decision 0032)."""

    super_users: str = ""
    """Kafka's super.users: principals allowed everything, `;`-separated (`User:admin;User:ops`)."""

    allow_everyone_if_no_acl_found: bool = False
    """Kafka's allow.everyone.if.no.acl.found, once the cluster holds any ACL: whether a
    resource no binding covers is open to everyone (false: refused, as Kafka in production)."""

    direct_access_secret_key_file: str = ""
    """Direct data access (decision 0047): the file with the cluster's direct-access key, with
    which GrantDataAccess signs grants (the storage nodes check them with the same key). Empty:
    GrantDataAccess answers DELEGATION_TOKEN_AUTH_DISABLED and clients use the gateway. Off on a
    TLS gateway too (the direct port is plaintext)."""

    direct_access_grant_bytes: int = 64 * _MIB
    """Bytes one grant covers on its node (charged to the caller's byte-rate quota when
    issued; capped at one quota sample's worth when a quota applies)."""

    direct_access_grant_ms: int = 60_000
    """How long a grant is valid: also how long a revoked ACL may still work on a direct
    port. At least MIN_GRANT_MS (a shorter grant would expire before a client could use it:
    clocks, the call's round trip)."""

    @property
    def super_user_list(self) -> list[str]:
        return [p.strip() for p in self.super_users.split(";") if p.strip()]

    @property
    def tls(self) -> bool:
        return bool(self.ssl_certificate_location)

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str]) -> GatewayConfig:
        """Defaults with `key=value` overrides by Kafka name; RiverlogError(INVALID_CONFIG) for
        an unknown key or a value that is not a positive integer."""
        known = {f.name.replace("_", "."): f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        flags: dict[str, Any] = {}
        for key, raw in overrides.items():
            attr = known.get(key)
            if attr is None:
                allowed = ", ".join(sorted(known))
                raise RiverlogError(
                    f"unknown gateway setting {key!r} (one of {allowed})", ErrorCode.INVALID_CONFIG
                )
            if attr in _BOOL_KEYS:
                flags[attr] = _parse_bool(key, raw)
                continue
            if attr in _STR_KEYS:
                flags[attr] = raw.strip()
                continue
            try:
                value = int(raw)
            except ValueError:
                raise RiverlogError(
                    f"invalid value {raw!r} for {key}: expected an integer",
                    ErrorCode.INVALID_CONFIG,
                ) from None
            if value <= 0:
                raise RiverlogError(
                    f"invalid value {raw!r} for {key}: must be positive", ErrorCode.INVALID_CONFIG
                )
            values[attr] = value
        config = cls(**values, **flags)
        config._check_tls()
        if config.replica_selector_class not in REPLICA_SELECTORS:
            raise RiverlogError(
                f"invalid value {config.replica_selector_class!r} for replica.selector.class: "
                f"expected one of {', '.join(REPLICA_SELECTORS)}",
                ErrorCode.INVALID_CONFIG,
            )
        if config.direct_access_grant_ms < MIN_GRANT_MS:
            raise RiverlogError(
                f"invalid value {config.direct_access_grant_ms} for direct.access.grant.ms:"
                f" must be at least {MIN_GRANT_MS} (a shorter grant expires before clients"
                " can use it)",
                ErrorCode.INVALID_CONFIG,
            )
        if config.retry_backoff_max_ms < config.retry_backoff_ms:
            raise RiverlogError(
                "retry.backoff.max.ms must be at least retry.backoff.ms", ErrorCode.INVALID_CONFIG
            )
        return config

    def _check_tls(self) -> None:
        if self.ssl_client_auth not in CLIENT_AUTH_CHOICES:
            raise RiverlogError(
                f"invalid value {self.ssl_client_auth!r} for ssl.client.auth: one of"
                f" {', '.join(CLIENT_AUTH_CHOICES)}",
                ErrorCode.INVALID_CONFIG,
            )
        if bool(self.ssl_certificate_location) != bool(self.ssl_key_location):
            raise RiverlogError(
                "ssl.certificate.location and ssl.key.location go together",
                ErrorCode.INVALID_CONFIG,
            )
        if self.ssl_client_auth == "required" and not (self.tls and self.ssl_ca_location):
            raise RiverlogError(
                f"ssl.client.auth={self.ssl_client_auth} needs ssl.certificate.location,"
                " ssl.key.location and ssl.ca.location",
                ErrorCode.INVALID_CONFIG,
            )

    @property
    def request_timeout_s(self) -> float:
        return self.request_timeout_ms / 1000

    @property
    def retry_backoff_s(self) -> float:
        return self.retry_backoff_ms / 1000

    @property
    def retry_backoff_max_s(self) -> float:
        return self.retry_backoff_max_ms / 1000

    @property
    def max_block_s(self) -> float:
        return self.max_block_ms / 1000
