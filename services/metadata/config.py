"""Settings of a metadata instance, by Kafka's names where Kafka has one.

`MetadataConfig.from_args` takes the process flags and the `--config key=value` overrides and
checks every value up front, so a bad setting stops the process at start with a clear message
rather than misbehaving later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Final

# Kafka name → dataclass field, with the bounds each value must respect.
_KEYS: Final[dict[str, tuple[str, int, int]]] = {
    "broker.session.timeout.ms": ("session_timeout_ms", 1_000, 3_600_000),
    "broker.heartbeat.interval.ms": ("heartbeat_interval_ms", 10, 600_000),
    "num.partitions": ("num_partitions", 1, 100_000),
    "default.replication.factor": ("default_replication_factor", 1, 1_000),
    "metadata.controller.lease.ms": ("controller_lease_ms", 1_000, 600_000),
    "metadata.etcd.timeout.ms": ("etcd_timeout_ms", 100, 600_000),
    "metadata.forward.timeout.ms": ("forward_timeout_ms", 100, 600_000),
    "leader.imbalance.check.interval.seconds": ("leader_imbalance_check_interval_s", 1, 86_400),
    "leader.imbalance.per.broker.percentage": ("leader_imbalance_per_broker_percentage", 0, 100),
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", 1, 1_000),
    "offsets.topic.replication.factor": ("offsets_topic_replication_factor", 1, 1_000),
    "transaction.state.log.num.partitions": ("transaction_state_log_num_partitions", 1, 1_000),
    "transaction.state.log.replication.factor": (
        "transaction_state_log_replication_factor",
        1,
        1_000,
    ),
    "transaction.state.log.min.isr": ("transaction_state_log_min_isr", 1, 1_000),
    "balancer.max.concurrent.moves": ("balancer_max_concurrent_moves", 1, 10_000),
    "balancer.imbalance.threshold": ("balancer_imbalance_threshold", 1, 1_000_000),
    "balancer.replication.throttled.rate": (
        "balancer_replication_throttled_rate",
        0,
        9_223_372_036_854_775_807,
    ),
}
# etcd's client TLS (decision 0035, addendum): on when the `--etcd` URLs are https://, as
# etcdctl's --endpoints; the files are PEM, named as the ssl.*.location keys elsewhere.
ETCD_SSL_CA_KEY: Final = "metadata.etcd.ssl.ca.location"
ETCD_SSL_CERTIFICATE_KEY: Final = "metadata.etcd.ssl.certificate.location"
ETCD_SSL_KEY_KEY: Final = "metadata.etcd.ssl.key.location"
_STRING_KEYS: Final[dict[str, str]] = {
    "metadata.etcd.prefix": "etcd_prefix",
    ETCD_SSL_CA_KEY: "etcd_ssl_ca_location",
    ETCD_SSL_CERTIFICATE_KEY: "etcd_ssl_certificate_location",
    ETCD_SSL_KEY_KEY: "etcd_ssl_key_location",
}
_BOOL_KEYS: Final[dict[str, str]] = {
    "auto.leader.rebalance.enable": "auto_leader_rebalance",
    "balancer.enable": "balancer_enable",
}
DEFAULT_PREFIX: Final = "/riverlog/"


@dataclass(frozen=True, slots=True)
class MetadataConfig:
    """One metadata instance's configuration (immutable once the process started)."""

    instance_id: int
    host: str = "127.0.0.1"
    port: int = 0
    etcd_endpoints: tuple[str, ...] = ("http://127.0.0.1:2379",)
    # broker.session.timeout.ms: the TTL of a node's lease; it is gone this long after its
    # last heartbeat.
    session_timeout_ms: int = 9_000
    # broker.heartbeat.interval.ms: how often nodes are told to heartbeat (capped at a third
    # of the session timeout).
    heartbeat_interval_ms: int = 2_000
    num_partitions: int = 1
    default_replication_factor: int = 1
    # metadata.controller.lease.ms: the TTL of this instance's lease, which holds the
    # controller key while this instance is the controller.
    controller_lease_ms: int = 6_000
    etcd_timeout_ms: int = 5_000
    forward_timeout_ms: int = 10_000
    # metadata.etcd.prefix: the root of every key; distinct prefixes share one etcd.
    etcd_prefix: str = DEFAULT_PREFIX
    # metadata.etcd.ssl.*.location: with https:// etcd endpoints, the CA etcd's certificate is
    # verified against (required) and the client certificate and key this instance presents
    # (etcd's --client-cert-auth asks for one; both or neither). Empty: not set.
    etcd_ssl_ca_location: str = ""
    etcd_ssl_certificate_location: str = ""
    etcd_ssl_key_location: str = ""
    # auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds, move
    # leadership back to preferred replicas on nodes whose share of partitions led elsewhere
    # exceeds leader.imbalance.per.broker.percentage.
    auto_leader_rebalance: bool = True
    leader_imbalance_check_interval_s: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    # offsets.topic.num.partitions / offsets.topic.replication.factor: __consumer_offsets,
    # created by the controller once a coordinator registers (the factor is capped at the live
    # storage nodes); decision 0008.
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    # transaction.state.log.*: __transaction_state, created beside __consumer_offsets. Its
    # partition q is owned by the coordinator of __consumer_offsets partition q mod the offsets
    # partition count, under that partition's epoch (decision 0028).
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    # balancer.enable: the controller's replica balancer runs by itself (decision 0025) when a
    # storage node with no replica joins, when a rack holds two replicas of a partition that
    # could be spread, or when the replica-count spread (max - min over the live storage nodes)
    # exceeds balancer.imbalance.threshold; it then moves at most
    # balancer.max.concurrent.moves partitions at a time until the counts are within one.
    balancer_enable: bool = False
    balancer_max_concurrent_moves: int = 3
    balancer_imbalance_threshold: int = 2
    # balancer.replication.throttled.rate: bytes/s the balancer sets as
    # leader/follower.replication.throttled.rate on the nodes of its moves while they run
    # (Cruise Control's default.replication.throttle), removed when they are done; a node (or
    # the default entity) with a rate an operator set keeps it. 0: no throttle. 10 MiB/s by
    # default (decision 0025, addendum).
    balancer_replication_throttled_rate: int = 10 * 1024 * 1024

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def told_heartbeat_interval_ms(self) -> int:
        return max(1, min(self.heartbeat_interval_ms, self.session_timeout_ms // 3))

    @classmethod
    def from_args(
        cls,
        instance_id: int,
        host: str,
        port: int,
        etcd: str,
        overrides: Mapping[str, str],
    ) -> MetadataConfig:
        """Build and check; raises ValueError naming the bad key or value."""
        if instance_id < 0:
            raise ValueError(f"--instance-id must be >= 0, got {instance_id}")
        endpoints = tuple(e.strip() for e in etcd.split(",") if e.strip())
        if not endpoints:
            raise ValueError("--etcd needs at least one endpoint")
        values: dict[str, object] = {}
        for key, raw in overrides.items():
            if key in _STRING_KEYS:
                values[_STRING_KEYS[key]] = raw
                continue
            if key in _BOOL_KEYS:
                if raw.strip().lower() not in ("true", "false"):
                    raise ValueError(f"{key} must be true or false, got {raw!r}")
                values[_BOOL_KEYS[key]] = raw.strip().lower() == "true"
                continue
            if key not in _KEYS:
                known = ", ".join(sorted([*_KEYS, *_STRING_KEYS, *_BOOL_KEYS]))
                raise ValueError(f"unknown setting {key!r} (known: {known})")
            name, low, high = _KEYS[key]
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"{key} must be an integer, got {raw!r}") from None
            if not low <= value <= high:
                raise ValueError(f"{key} must be in [{low}, {high}], got {value}")
            values[name] = value
        prefix = str(values.get("etcd_prefix", DEFAULT_PREFIX))
        if not prefix.startswith("/") or not prefix.endswith("/") or len(prefix) < 2:
            raise ValueError(f"metadata.etcd.prefix must look like /name/, got {prefix!r}")
        tls_error = etcd_tls_error(
            endpoints,
            str(values.get("etcd_ssl_ca_location", "")),
            str(values.get("etcd_ssl_certificate_location", "")),
            str(values.get("etcd_ssl_key_location", "")),
        )
        if tls_error is not None:
            raise ValueError(tls_error)
        return cls(
            instance_id=instance_id,
            host=host,
            port=port,
            etcd_endpoints=endpoints,
            **values,  # type: ignore[arg-type]
        )

    @property
    def etcd_tls(self) -> bool:
        """Whether this instance talks to etcd over TLS (its endpoints are https://)."""
        return etcd_scheme(self.etcd_endpoints[0]) == "https"

    def describe(self) -> dict[str, object]:
        """Every setting, for the start-up log line."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def etcd_scheme(endpoint: str) -> str:
    """`http` or `https` (what etcd's client URLs say), lower case; `http` without a scheme
    (`host:port`, as before TLS); any other scheme as given, for the caller to refuse."""
    scheme, sep, _ = endpoint.partition("://")
    return scheme.strip().lower() if sep else "http"


def etcd_tls_error(endpoints: tuple[str, ...], ca: str, certificate: str, key: str) -> str | None:
    """What is wrong with the etcd TLS settings, None when nothing: endpoints all http:// or all
    https://; https:// needs metadata.etcd.ssl.ca.location; certificate and key go together;
    no file setting with http:// endpoints (it would silently do nothing)."""
    schemes = sorted({etcd_scheme(e) for e in endpoints})
    unknown = [s for s in schemes if s not in ("http", "https")]
    if unknown:
        return f"--etcd: unknown scheme {unknown[0]!r} (http:// or https://)"
    if len(schemes) > 1:
        return "--etcd: the endpoints mix http:// and https:// (etcd serves clients one way)"
    given = {ETCD_SSL_CA_KEY: ca, ETCD_SSL_CERTIFICATE_KEY: certificate, ETCD_SSL_KEY_KEY: key}
    if schemes == ["http"]:
        set_keys = [k for k, v in given.items() if v]
        if set_keys:
            return f"{set_keys[0]} is set but the --etcd endpoints are http:// (use https://)"
        return None
    if not ca:
        return f"https:// etcd endpoints need {ETCD_SSL_CA_KEY} (the CA of etcd's certificate)"
    if bool(certificate) != bool(key):
        missing = ETCD_SSL_KEY_KEY if certificate else ETCD_SSL_CERTIFICATE_KEY
        present = ETCD_SSL_CERTIFICATE_KEY if certificate else ETCD_SSL_KEY_KEY
        return f"{present} needs {missing} (a client certificate and its key go together)"
    return None
