"""The storage node's settings: one frozen value built from the command line, so every component
reads typed numbers and a bad `--config key=value` stops the process at startup with a message
naming the key, instead of surfacing as an odd failure later.

Keys are Kafka's broker names. Broker-level log defaults (`log.segment.bytes`,
`log.retention.ms`, `message.max.bytes`, ...) become the base of every partition's log config;
a topic's own overrides from the metadata service apply on top of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError

from .remote_log_config import IMPL_PREFIX, NODE_LONGS, RemoteLogConfig, is_remote_key

LONG_MAX: Final = 2**63 - 1
MAX_REQUEST_FRAME: Final = (1 << 24) - 1
"""The zero-copy framing's largest request (riverlog.common.zerocopy's, whose module this
domain module may not import: it reads protobuf)."""

# Broker keys that only set a default for a topic-level key (Kafka's LogConfig synonyms).
TOPIC_DEFAULT_SYNONYMS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "log.segment.bytes": "segment.bytes",
        "log.roll.ms": "segment.ms",
        "log.index.size.max.bytes": "segment.index.bytes",
        "log.index.interval.bytes": "index.interval.bytes",
        "log.retention.ms": "retention.ms",
        "log.retention.bytes": "retention.bytes",
        "message.max.bytes": "max.message.bytes",
        "log.message.timestamp.type": "message.timestamp.type",
        "log.cleanup.policy": "cleanup.policy",
        "log.segment.delete.delay.ms": "file.delete.delay.ms",
        "min.insync.replicas": "min.insync.replicas",
        "unclean.leader.election.enable": "unclean.leader.election.enable",
        "log.flush.interval.messages": "flush.messages",
        "log.cleaner.delete.retention.ms": "delete.retention.ms",
        "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
        "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    }
)

# Broker keys the node itself reads, with Kafka's defaults.
_NODE_DEFAULTS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "log.retention.check.interval.ms": 300_000,
        "log.flush.offset.checkpoint.interval.ms": 60_000,
        # The default of the topic key flush.ms: the longest a message sits unflushed
        # (LONG_MAX: leave it to the OS and to recovery).
        "log.flush.interval.ms": LONG_MAX,
        # How often logs are checked against their flush.ms (Kafka's default is LONG_MAX,
        # which never honours a topic's flush.ms; a check is cheap, so once a second).
        "log.flush.scheduler.interval.ms": 1_000,
        "fetch.max.bytes": 57_671_680,
        "zero.copy.max.request.bytes": 1_048_576,
        "controlled.shutdown.grace.ms": 5_000,
        # Replication (Kafka's broker defaults).
        "replica.lag.time.max.ms": 30_000,
        "replica.fetch.wait.max.ms": 500,
        "replica.fetch.min.bytes": 1,
        "replica.fetch.max.bytes": 1_048_576,
        "replica.fetch.response.max.bytes": 10_485_760,
        "replica.fetch.backoff.ms": 1_000,
        # The window of the replication throttle rates (Kafka's defaults: 11 samples of 1 s).
        "replication.quota.window.num": 11,
        "replication.quota.window.size.seconds": 1,
        # Idempotence: forget a producer idle this long (Kafka's default, one day).
        "producer.id.expiration.ms": 86_400_000,
        # Log compaction (Kafka's defaults): the pause when no log needs cleaning, and the
        # memory of the cleaner's key -> offset map.
        "log.cleaner.backoff.ms": 15_000,
        "log.cleaner.dedupe.buffer.size": 134_217_728,
        # The direct port's limits (decision 0047; rpc/connection_limits.py): connections in
        # total (at most half the descriptor limit) and per client address (Kafka's names,
        # bounded here), the grant frame's deadline, the idle timeout (Kafka's default) and
        # the largest produce frame (8 MiB: 8 requests of the producer's default
        # max.request.size; at most the framing's 16 MiB).
        "max.connections": 1000,
        "max.connections.per.ip": 100,
        "direct.grant.timeout.ms": 10_000,
        "connections.max.idle.ms": 600_000,
        "direct.max.request.bytes": 8_388_608,
    }
)
# Boolean node keys (true/false).
_NODE_FLAGS: Final[Mapping[str, bool]] = MappingProxyType(
    {
        # Followers fetch over the leader's zero-copy channel (else over gRPC Fetch).
        "replica.fetch.zero.copy.enable": True,
        # Run the log cleaner (compaction of cleanup.policy=compact topics).
        "log.cleaner.enable": True,
        # KIP-890 part 1: a partition leader verifies with the transaction coordinator that
        # a transactional write belongs to an ongoing transaction before appending it.
        "transaction.partition.verification.enable": True,
    }
)
# String node keys.
_NODE_STRINGS: Final[Mapping[str, str]] = MappingProxyType(
    {
        # Direct data access (decision 0047): the file holding the cluster's direct-access key
        # (the gateways sign grants with it); "": no direct port.
        "direct.access.secret.key.file": "",
    }
)
_NODE_MINIMUMS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "log.retention.check.interval.ms": 1,
        "log.flush.offset.checkpoint.interval.ms": 1,
        "log.flush.interval.ms": 0,
        "log.flush.scheduler.interval.ms": 1,
        "fetch.max.bytes": 0,
        "zero.copy.max.request.bytes": 64,
        "controlled.shutdown.grace.ms": 0,
        "replica.lag.time.max.ms": 1,
        "replica.fetch.wait.max.ms": 0,
        "replica.fetch.min.bytes": 1,
        "replica.fetch.max.bytes": 1,
        "replica.fetch.response.max.bytes": 1,
        "replica.fetch.backoff.ms": 1,
        "replication.quota.window.num": 1,
        "replication.quota.window.size.seconds": 1,
        "producer.id.expiration.ms": 1,
        "log.cleaner.backoff.ms": 1,
        "log.cleaner.dedupe.buffer.size": 1024,
        "max.connections": 1,
        "max.connections.per.ip": 1,
        "direct.grant.timeout.ms": 1,
        "connections.max.idle.ms": 1,
        "direct.max.request.bytes": 64,
    }
)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The direct port's limits (decision 0047; enforced by rpc/connection_limits.py)."""

    max_connections: int = 1000
    max_connections_per_ip: int = 100
    grant_timeout_ms: int = 10_000
    idle_timeout_ms: int = 600_000
    max_request_bytes: int = 8_388_608


def known_keys() -> list[str]:
    remote = ["remote.log.storage.system.enable", "remote.log.storage.manager.class.name"]
    tiering = [*remote, IMPL_PREFIX, *NODE_LONGS]
    return sorted(
        [*_NODE_DEFAULTS, *_NODE_FLAGS, *_NODE_STRINGS, *TOPIC_DEFAULT_SYNONYMS, *tiering]
    )


def _invalid(message: str) -> RiverlogError:
    return RiverlogError(message, ErrorCode.INVALID_CONFIG)


@dataclass(frozen=True, slots=True)
class StorageConfig:
    """Everything the storage node process was started with. Build it with `from_settings`."""

    node_id: int
    host: str
    port: int
    zero_copy_port: int
    log_dirs: tuple[Path, ...]
    metadata_addresses: tuple[str, ...]
    rack: str = ""
    ready_file: str | None = None
    advertised_host: str = ""  # registered for peers and clients; "": the bind host
    direct_port: int = 0  # --direct-port: the direct data port (0: any free port)
    direct_host: str = ""  # --direct-host: the direct port's bind address ("": --host)
    direct_access_secret_key_file: str = ""  # "": no direct port (decision 0047)
    log_retention_check_interval_ms: int = 300_000
    log_flush_offset_checkpoint_interval_ms: int = 60_000
    log_flush_interval_ms: int = LONG_MAX
    log_flush_scheduler_interval_ms: int = 1_000
    fetch_max_bytes: int = 57_671_680
    zero_copy_max_request_bytes: int = 1_048_576
    controlled_shutdown_grace_ms: int = 5_000
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_backoff_ms: int = 1_000
    replica_fetch_zero_copy_enable: bool = True
    replication_quota_window_num: int = 11
    replication_quota_window_size_seconds: int = 1
    producer_id_expiration_ms: int = 86_400_000
    log_cleaner_enable: bool = True
    transaction_partition_verification_enable: bool = True
    log_cleaner_backoff_ms: int = 15_000
    log_cleaner_dedupe_buffer_size: int = 134_217_728
    direct_limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    # Tiered storage (remote.log.*, rsm.config.*; decision 0039).
    remote_log: RemoteLogConfig = field(default_factory=RemoteLogConfig)
    # Topic-level keys (`segment.bytes`, ...) with the broker's defaults for them.
    log_defaults: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_settings(
        cls,
        *,
        node_id: int,
        host: str,
        port: int,
        zero_copy_port: int,
        log_dirs: str,
        metadata: str,
        rack: str = "",
        ready_file: str | None = None,
        overrides: Mapping[str, str] | None = None,
        advertised_host: str | None = None,
        direct_port: int = 0,
        direct_host: str = "",
    ) -> StorageConfig:
        """Validate the command-line values and `--config` overrides; raises
        RiverlogError(INVALID_CONFIG) naming the first bad item."""
        if node_id < 0:
            raise _invalid(f"--node-id must be at least 0, got {node_id}")
        ports = (("--port", port), ("--zero-copy-port", zero_copy_port))
        for name, value in (*ports, ("--direct-port", direct_port)):
            if not 0 <= value <= 65535:
                raise _invalid(f"{name} must be a port number (0: any free port), got {value}")
        dirs = tuple(Path(d.strip()) for d in log_dirs.split(",") if d.strip())
        if not dirs:
            raise _invalid("--log-dirs needs at least one directory")
        if len(set(dirs)) != len(dirs):
            raise _invalid(f"--log-dirs lists a directory twice: {log_dirs}")
        addresses = tuple(a.strip() for a in metadata.split(",") if a.strip())
        if not addresses:
            raise _invalid("--metadata needs at least one host:port")
        node_values: dict[str, int] = dict(_NODE_DEFAULTS)
        log_defaults: dict[str, str] = {}
        flags: dict[str, bool] = dict(_NODE_FLAGS)
        strings: dict[str, str] = dict(_NODE_STRINGS)
        remote_log = RemoteLogConfig.from_overrides(overrides or {})
        for key, raw in (overrides or {}).items():
            if is_remote_key(key, remote_log.impl_prefix):
                continue
            if key in _NODE_DEFAULTS:
                node_values[key] = _parse_long(key, raw, _NODE_MINIMUMS[key])
            elif key in _NODE_FLAGS:
                flags[key] = _parse_bool(key, raw)
            elif key in _NODE_STRINGS:
                strings[key] = raw.strip()
            elif key in TOPIC_DEFAULT_SYNONYMS:
                log_defaults[TOPIC_DEFAULT_SYNONYMS[key]] = raw.strip()
            elif key == "log.retention.hours":
                hours = _parse_long(key, raw, -1)
                log_defaults.setdefault("retention.ms", str(-1 if hours < 0 else hours * 3600_000))
            else:
                raise _invalid(f"unknown storage config {key!r}; known: {', '.join(known_keys())}")
        if node_values["direct.max.request.bytes"] > MAX_REQUEST_FRAME:
            raise _invalid(
                f"direct.max.request.bytes must be at most {MAX_REQUEST_FRAME} (the framing's"
                f" limit), got {node_values['direct.max.request.bytes']}"
            )
        if node_values["log.flush.interval.ms"] != LONG_MAX:
            log_defaults.setdefault("flush.ms", str(node_values["log.flush.interval.ms"]))
        return cls(
            node_id=node_id,
            host=host,
            port=port,
            zero_copy_port=zero_copy_port,
            log_dirs=dirs,
            metadata_addresses=addresses,
            rack=rack,
            ready_file=ready_file,
            advertised_host=advertised_host or host,
            direct_port=direct_port,
            direct_host=direct_host or host,
            direct_access_secret_key_file=strings["direct.access.secret.key.file"],
            log_retention_check_interval_ms=node_values["log.retention.check.interval.ms"],
            log_flush_offset_checkpoint_interval_ms=node_values[
                "log.flush.offset.checkpoint.interval.ms"
            ],
            log_flush_interval_ms=node_values["log.flush.interval.ms"],
            log_flush_scheduler_interval_ms=node_values["log.flush.scheduler.interval.ms"],
            fetch_max_bytes=node_values["fetch.max.bytes"],
            zero_copy_max_request_bytes=node_values["zero.copy.max.request.bytes"],
            controlled_shutdown_grace_ms=node_values["controlled.shutdown.grace.ms"],
            replica_lag_time_max_ms=node_values["replica.lag.time.max.ms"],
            replica_fetch_wait_max_ms=node_values["replica.fetch.wait.max.ms"],
            replica_fetch_min_bytes=node_values["replica.fetch.min.bytes"],
            replica_fetch_max_bytes=node_values["replica.fetch.max.bytes"],
            replica_fetch_response_max_bytes=node_values["replica.fetch.response.max.bytes"],
            replica_fetch_backoff_ms=node_values["replica.fetch.backoff.ms"],
            replica_fetch_zero_copy_enable=flags["replica.fetch.zero.copy.enable"],
            replication_quota_window_num=node_values["replication.quota.window.num"],
            replication_quota_window_size_seconds=node_values[
                "replication.quota.window.size.seconds"
            ],
            producer_id_expiration_ms=node_values["producer.id.expiration.ms"],
            log_cleaner_enable=flags["log.cleaner.enable"],
            transaction_partition_verification_enable=flags[
                "transaction.partition.verification.enable"
            ],
            log_cleaner_backoff_ms=node_values["log.cleaner.backoff.ms"],
            log_cleaner_dedupe_buffer_size=node_values["log.cleaner.dedupe.buffer.size"],
            direct_limits=ConnectionLimits(
                max_connections=node_values["max.connections"],
                max_connections_per_ip=node_values["max.connections.per.ip"],
                grant_timeout_ms=node_values["direct.grant.timeout.ms"],
                idle_timeout_ms=node_values["connections.max.idle.ms"],
                max_request_bytes=node_values["direct.max.request.bytes"],
            ),
            remote_log=remote_log,
            log_defaults=MappingProxyType(log_defaults),
        )


def _parse_long(key: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise _invalid(f"invalid value {raw!r} for {key}: expected an integer") from None
    if value < minimum:
        raise _invalid(f"invalid value {raw!r} for {key}: must be at least {minimum}")
    return value


def _parse_bool(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise _invalid(f"invalid value {raw!r} for {key}: expected true or false")
    return value == "true"
