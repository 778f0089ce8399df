"""The SDK's configuration, with Kafka's key names: one typed, frozen dataclass per client.

Each dataclass is the table: a field per key, named as the key with `.` written `_`
(`linger.ms` is `linger_ms`), whose metadata holds the parser (type, bounds, allowed values)
and a one-line doc. `from_kafka(conf, **kwargs)` accepts Kafka's names in a dict (string values
are converted, as from a properties file) and the same names as keyword arguments. An unknown
key, a value of the wrong type or out of range raises `ConfigError` naming the key; keys Kafka
has but Riverlog does not support yet say so. The objects are immutable and safe to share
between threads.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self, TypeVar

from riverlog.common.assignors import ASSIGNORS

from ._credentials import Credentials

T = TypeVar("T")
Deserializer = Callable[[bytes | None], Any]
Serializer = Callable[[Any], bytes | None]


class ConfigError(ValueError):
    """A configuration key is unknown, unsupported, missing or has an invalid value."""


def _parse_int(lo: int | None, hi: int | None) -> Callable[[str, object], int]:
    def parse(name: str, value: object) -> int:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise ConfigError(f"{name}: expected an integer, got {value!r}") from None
        if not isinstance(value, int):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        if lo is not None and value < lo:
            raise ConfigError(f"{name}: {value} is below the minimum {lo}")
        if hi is not None and value > hi:
            raise ConfigError(f"{name}: {value} is above the maximum {hi}")
        return value

    return parse


def _parse_str(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name}: expected a string, got {value!r}")
    return value


def _parse_choice(choices: tuple[str, ...]) -> Callable[[str, object], str]:
    def parse(name: str, value: object) -> str:
        text = str(value).strip().lower()
        if text not in choices:
            raise ConfigError(f"{name}: {value!r} is not one of {', '.join(choices)}")
        return text

    return parse


def _parse_bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{name}: expected true or false, got {value!r}")


def _parse_servers(name: str, value: object) -> tuple[str, ...]:
    items: list[object]
    if isinstance(value, str):
        items = list(value.split(","))
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise ConfigError(f"{name}: expected 'host:port,host:port', got {value!r}")
    servers = tuple(str(item).strip() for item in items if str(item).strip())
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"{name}: {server!r} is not host:port")
    return servers


def _parse_callable(name: str, value: object) -> Any:
    if value is not None and not callable(value):
        raise ConfigError(f"{name}: expected a callable or None, got {value!r}")
    return value


def _parse_acks(name: str, value: object) -> int:
    text = str(value).strip().lower()
    acks = {"0": 0, "1": 1, "all": -1, "-1": -1}.get(text)
    if acks is None:
        raise ConfigError(f"{name}: {value!r} is not one of 0, 1, all, -1")
    return acks


_ASSIGNOR_CLASSES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def _parse_assignors(name: str, value: object) -> tuple[str, ...]:
    """partition.assignment.strategy: assignor names in preference order, as a comma-separated
    string or a list; Kafka's class names are accepted for the four built-in assignors."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ConfigError(f"{name}: expected a list of assignor names, got {value!r}")
    names: list[str] = []
    for item in items:
        text = str(item).strip()
        text = _ASSIGNOR_CLASSES.get(text, text)
        if not text:
            continue
        if text not in ASSIGNORS:
            known = ", ".join(sorted(ASSIGNORS))
            raise ConfigError(f"{name}: unknown assignor {text!r} (known: {known})")
        if text not in names:
            names.append(text)
    if not names:
        raise ConfigError(f"{name}: at least one assignor is required")
    return tuple(names)


def _key(default: T, parse: Callable[[str, object], Any], doc: str) -> T:
    meta = {"parse": parse, "doc": doc}
    return dataclasses.field(default=default, metadata=meta)


def _int(default: int, doc: str, lo: int | None = 0, hi: int | None = None) -> int:
    return _key(default, _parse_int(lo, hi), doc)


def _callable(doc: str) -> Any:
    """A key whose value is a callable (a serializer) or None."""
    return _key(None, _parse_callable, doc)


def _choice(default: str, choices: tuple[str, ...], doc: str) -> str:
    return _key(default, _parse_choice(choices), doc)


_UNSUPPORTED: dict[str, str] = {}


@dataclasses.dataclass(frozen=True, slots=True)
class _ClientConfig:
    """Keys every client has."""

    kind: ClassVar[str] = "client"

    bootstrap_servers: tuple[str, ...] = _key(
        (), _parse_servers, "Comma-separated host:port list of GATEWAY addresses (required)"
    )
    client_id: str = _key("", _parse_str, "Sent as riverlog-client-id on every call")
    sasl_username: str = _key("", _parse_str, "User to authenticate as (empty: ANONYMOUS)")
    sasl_password: str = _key("", _parse_str, "Password of sasl.username")
    sasl_oauthbearer_token: str = _key(
        "", _parse_str, "Token (`riverlog users add --token`), sent as authorization: Bearer"
    )
    security_protocol: str = _choice(
        "plaintext", ("plaintext", "ssl"), "PLAINTEXT or SSL (TLS to the gateways)"
    )
    ssl_ca_location: str = _key("", _parse_str, "PEM CA file trusted for SSL (empty: system)")
    ssl_certificate_location: str = _key("", _parse_str, "PEM client certificate (mTLS)")
    ssl_key_location: str = _key("", _parse_str, "PEM private key of ssl.certificate.location")
    request_timeout_ms: int = _int(30_000, "Deadline of one RPC", lo=1)
    retry_backoff_ms: int = _int(100, "Wait before retrying a retriable failure")
    retry_backoff_max_ms: int = _int(1000, "Cap of the exponential retry back-off")
    metadata_max_age_ms: int = _int(300_000, "Refresh cached topic metadata this often")

    @classmethod
    def keys(cls) -> dict[str, dataclasses.Field[Any]]:
        """Kafka name → field, for every key of this client."""
        return {f.name.replace("_", "."): f for f in dataclasses.fields(cls)}

    @classmethod
    def from_kafka(cls, conf: Mapping[str, object] | None = None, **kwargs: object) -> Self:
        """Parse Kafka-named keys from `conf` and keyword arguments (`_` for `.`)."""
        known = cls.keys()
        values: dict[str, object] = {}
        for raw, value in [*(conf or {}).items(), *kwargs.items()]:
            name = raw.strip().replace("_", ".")
            field = known.get(name)
            if field is None:
                if name in _UNSUPPORTED:
                    raise ConfigError(f"{cls.kind} config {name!r}: {_UNSUPPORTED[name]}")
                close = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(f"unknown {cls.kind} config {raw!r}{hint}")
            values[field.name] = field.metadata["parse"](name, value)
        config = cls(**values)  # type: ignore[arg-type]
        config.validate()
        return config

    def validate(self) -> None:
        """Checks across keys; subclasses extend."""
        if not self.bootstrap_servers:
            raise ConfigError(f"{self.kind} config 'bootstrap.servers' is required")
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ConfigError("retry.backoff.max.ms must be at least retry.backoff.ms")

    def get(self, name: str) -> object:
        """A value by its Kafka name."""
        return getattr(self, name.replace(".", "_"))

    @property
    def credentials(self) -> Credentials | None:
        """The user, password, token and TLS files, or None when none is configured
        (PLAINTEXT and ANONYMOUS)."""
        credentials = Credentials(
            self.sasl_username,
            self.sasl_password,
            self.sasl_oauthbearer_token,
            self.security_protocol == "ssl",
            self.ssl_ca_location,
            self.ssl_certificate_location,
            self.ssl_key_location,
        )
        return None if credentials == Credentials() else credentials


@dataclasses.dataclass(frozen=True, slots=True)
class ProducerConfig(_ClientConfig):
    """Producer keys; defaults are Kafka 3.x's."""

    kind: ClassVar[str] = "producer"

    acks: int = _key(-1, _parse_acks, "0, 1 or all (-1): replicas that must have a record")
    linger_ms: int = _int(5, "Wait this long for more records before sending a batch")
    batch_size: int = _int(16_384, "Target bytes of one partition's batch", lo=1)
    buffer_memory: int = _int(33_554_432, "Bytes of records waiting to be sent", lo=1)
    max_block_ms: int = _int(60_000, "How long send() may block (buffer full, metadata)")
    max_request_size: int = _int(1_048_576, "Bytes of one produce request", lo=1)
    compression_type: str = _choice(
        "none", ("none", "gzip", "snappy", "lz4", "zstd"), "Codec of every batch"
    )
    retries: int = _int(2_147_483_647, "Retries of a failed batch (bounded by delivery.timeout.ms)")
    delivery_timeout_ms: int = _int(120_000, "Upper bound from send() to success or failure", lo=1)
    max_in_flight_requests_per_connection: int = _int(5, "Unanswered produce requests", lo=1)
    partitioner_ignore_keys: bool = _key(False, _parse_bool, "Sticky partitioning for keys too")
    enable_idempotence: bool = _key(
        True,
        _parse_bool,
        "Exactly one copy of each record per partition, in order (needs acks=all)",
    )
    transactional_id: str = _key(
        "", _parse_str, "Makes the producer transactional (implies enable.idempotence, acks=all)"
    )
    transaction_timeout_ms: int = _int(
        60_000, "The coordinator aborts a transaction open longer than this", lo=1
    )
    key_serializer: Serializer | None = _callable("Turns a key into bytes")  # noqa: RUF009
    value_serializer: Serializer | None = _callable("Turns a value into bytes")  # noqa: RUF009
    direct_access: bool = _key(
        True,
        _parse_bool,
        "Send to partition leaders' direct ports under a gateway grant (false: the gateway)",
    )

    @classmethod
    def from_kafka(
        cls, conf: Mapping[str, object] | None = None, **kwargs: object
    ) -> ProducerConfig:
        """As `_ClientConfig.from_kafka`; enable.idempotence defaults to true, as in Kafka 3.x,
        but when it is not set and acks, retries or max.in.flight.requests.per.connection
        conflict with it, it is off (Kafka 3.2+ does the same) rather than an error. A
        transactional.id needs idempotence: the conflicts are errors then."""
        parse = _ClientConfig.from_kafka.__func__  # type: ignore[attr-defined]
        keys = [str(k).strip().replace("_", ".") for k in [*(conf or {}), *kwargs]]
        if "enable.idempotence" not in keys and "transactional.id" not in keys:
            config: ProducerConfig = parse(
                cls, {**(conf or {}), "enable.idempotence": False}, **kwargs
            )
            if _idempotence_conflicts(config):
                return config
        result: ProducerConfig = parse(cls, conf, **kwargs)
        return result

    def validate(self) -> None:
        _ClientConfig.validate(self)
        if self.transactional_id and not self.enable_idempotence:
            raise ConfigError(
                "Cannot set a transactional.id without also enabling idempotence "
                "(enable.idempotence=true)."
            )
        if self.enable_idempotence:
            conflicts = _idempotence_conflicts(self)
            if conflicts:
                raise ConfigError(f"enable.idempotence: {conflicts[0]}")
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ConfigError(
                f"delivery.timeout.ms ({self.delivery_timeout_ms}) must be at least "
                f"linger.ms + request.timeout.ms ({self.linger_ms + self.request_timeout_ms})"
            )


def _idempotence_conflicts(config: ProducerConfig) -> list[str]:
    """Kafka's ProducerConfig messages for settings the idempotent producer cannot work with."""
    conflicts = []
    if config.max_in_flight_requests_per_connection > 5:
        conflicts.append(
            "Must set max.in.flight.requests.per.connection to at most 5 to use the idempotent "
            "producer."
        )
    if config.retries == 0:
        conflicts.append("Must set retries to non-zero when using the idempotent producer.")
    if config.acks != -1:
        conflicts.append(
            "Must set acks to all in order to use the idempotent producer. Otherwise we cannot "
            "guarantee idempotence."
        )
    return conflicts


KAFKA_PARTITION_FETCH_BYTES = 1_048_576
"""Kafka's default max.partition.fetch.bytes."""
AUTO_PARTITION_FETCH_BYTES = 4 * 1_048_576
"""max.partition.fetch.bytes when not set, for a consumer of few partitions (decision 0046)."""


def partition_fetch_bytes(configured: int, fetch_max_bytes: int, partitions: int | None) -> int:
    """The max.partition.fetch.bytes a fetch asks for. `configured` (the key; 0 when not set) is
    used as it is when set. Not set: AUTO_PARTITION_FETCH_BYTES while `partitions` (the count
    assigned) x that x 2 fits `fetch_max_bytes` (each partition can have two fetches of it in
    flight within fetch.max.bytes; up to 6 partitions with the 50 MiB default), else Kafka's
    1 MiB. `partitions` None: a reader that keeps Kafka's 1 MiB when not set (Spark's source).
    Costs per fetch in Python across gateway and storage make 1 MiB slow at small records
    (decision 0046)."""
    if configured > 0:
        return configured
    if partitions is not None and max(partitions, 1) * AUTO_PARTITION_FETCH_BYTES * 2 <= (
        fetch_max_bytes
    ):
        return AUTO_PARTITION_FETCH_BYTES
    return KAFKA_PARTITION_FETCH_BYTES


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerConfig(_ClientConfig):
    """Consumer keys; defaults are Kafka 3.x's. Group keys matter only with group.id."""

    kind: ClassVar[str] = "consumer"

    auto_offset_reset: str = _choice(
        "latest", ("latest", "earliest", "none"), "Where to start without a valid position"
    )
    max_poll_records: int = _int(500, "Records one poll() returns at most", lo=1)
    fetch_min_bytes: int = _int(1, "Bytes the gateway waits for before answering a fetch")
    fetch_max_wait_ms: int = _int(500, "How long the gateway may wait for fetch.min.bytes")
    fetch_max_bytes: int = _int(52_428_800, "Bytes of one fetch response", lo=1)
    max_partition_fetch_bytes: int = _int(
        0,
        "Bytes per partition in a fetch (0: automatic, 4 MiB while the assigned partitions x "
        "8 MiB fit fetch.max.bytes, up to 16 MiB buffered for one partition, else Kafka's "
        "1 MiB; 1048576 for Kafka's behaviour; decision 0046)",
        lo=0,
    )
    fetch_push_credit: int = _int(
        1_000, "Answers the gateway may push unasked per caught-up partition (0: ask each time)"
    )
    isolation_level: str = _choice(
        "read_uncommitted", ("read_uncommitted", "read_committed"), "Read past open txns or not"
    )
    default_api_timeout_ms: int = _int(60_000, "Deadline of blocking offset look-ups", lo=1)
    check_crcs: bool = _key(True, _parse_bool, "Verify the CRC-32C of every fetched batch")
    key_deserializer: Deserializer | None = _callable("Turns key bytes back")  # noqa: RUF009
    value_deserializer: Deserializer | None = _callable("Turns value bytes back")  # noqa: RUF009
    group_id: str = _key("", _parse_str, "The consumer group; needed by subscribe() and commits")
    group_instance_id: str = _key("", _parse_str, "Static membership: a stable member identity")
    session_timeout_ms: int = _int(
        45_000, "Without a heartbeat this long a member is removed", lo=1
    )
    heartbeat_interval_ms: int = _int(3_000, "Time between heartbeats to the coordinator", lo=1)
    max_poll_interval_ms: int = _int(300_000, "Leave the group if poll() is not called", lo=1)
    enable_auto_commit: bool = _key(True, _parse_bool, "Commit positions in the background")
    auto_commit_interval_ms: int = _int(5_000, "Time between automatic commits", lo=0)
    partition_assignment_strategy: tuple[str, ...] = _key(
        ("range", "cooperative-sticky"),
        _parse_assignors,
        "Assignors in preference order (range, roundrobin, sticky, cooperative-sticky)",
    )
    client_rack: str = _key("", _parse_str, "This consumer's rack (assignors, nearest replica)")
    direct_access: bool = _key(
        True,
        _parse_bool,
        "Fetch from partition leaders' direct ports under a gateway's grant where the cluster "
        "offers it (false: always through the gateway; decision 0047)",
    )
    exclude_internal_topics: bool = _key(True, _parse_bool, "Patterns never match __ topics")

    def validate(self) -> None:
        _ClientConfig.validate(self)
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError(
                f"heartbeat.interval.ms ({self.heartbeat_interval_ms}) must be lower than "
                f"session.timeout.ms ({self.session_timeout_ms})"
            )
        if self.group_instance_id and not self.group_id:
            raise ConfigError("group.instance.id needs group.id")


@dataclasses.dataclass(frozen=True, slots=True)
class AdminConfig(_ClientConfig):
    """AdminClient keys."""

    kind: ClassVar[str] = "admin"

    default_api_timeout_ms: int = _int(60_000, "Deadline of one admin operation", lo=1)
    retries: int = _int(5, "Retries of a retriable admin failure")
