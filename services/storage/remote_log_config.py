"""The node's tiered-storage settings, in Kafka's broker names (KIP-405's RemoteLogManagerConfig).

`remote.log.storage.system.enable` turns tiering on for the node (topics still opt in with
`remote.storage.enable`); `remote.log.storage.manager.class.name` picks the store (`directory`
or `s3`: Riverlog names its two implementations instead of taking a Java class); every key that
starts with `remote.log.storage.manager.impl.prefix` (default `rsm.config.`) is handed to the
store with the prefix removed, as Kafka hands them to the RemoteStorageManager's configure().
The store's own keys are checked here, at startup, so a missing bucket stops the process with a
message naming the key instead of failing the first upload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError

ENABLE: Final = "remote.log.storage.system.enable"
CLASS_NAME: Final = "remote.log.storage.manager.class.name"
IMPL_PREFIX: Final = "remote.log.storage.manager.impl.prefix"
DEFAULT_IMPL_PREFIX: Final = "rsm.config."

DIRECTORY: Final = "directory"
S3: Final = "s3"
STORE_CLASSES: Final = (DIRECTORY, S3)

# The store's keys (below the impl prefix), each with whether it is required per class.
STORE_KEYS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        DIRECTORY: ("dir", "prefix"),
        S3: (
            "s3.bucket",
            "s3.endpoint",
            "s3.region",
            "s3.prefix",
            "s3.access.key.id",
            "s3.secret.access.key",
            "s3.session.token",
            "s3.request.timeout.ms",
        ),
    }
)
_REQUIRED: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {DIRECTORY: ("dir",), S3: ("s3.bucket",)}
)

# Numeric node keys of the remote log manager, with Kafka's defaults and minimums.
NODE_LONGS: Final[Mapping[str, tuple[int, int]]] = MappingProxyType(
    {
        "remote.log.manager.task.interval.ms": (30_000, 1),
        "remote.log.manager.task.retry.backoff.ms": (500, 1),
        "remote.log.manager.task.retry.backoff.max.ms": (30_000, 1),
        # Riverlog's: the bounded cache of remote segment chunks that fetches read through.
        "remote.log.reader.cache.size.bytes": (67_108_864, 1_048_576),
        # Riverlog's: records of a partition's remote log metadata between two snapshots
        # (compaction: the records below a snapshot are deleted).
        "remote.log.metadata.snapshot.interval.records": (1_000, 1),
    }
)


def _invalid(message: str) -> RiverlogError:
    return RiverlogError(message, ErrorCode.INVALID_CONFIG)


def is_remote_key(key: str, impl_prefix: str) -> bool:
    """Whether `key` belongs to tiered storage (this module parses it)."""
    return (
        key in (ENABLE, CLASS_NAME, IMPL_PREFIX)
        or key in NODE_LONGS
        or (key.startswith(impl_prefix))
    )


@dataclass(frozen=True, slots=True)
class RemoteLogConfig:
    """What the node was started with for tiering. `store` holds the store's keys without the
    impl prefix (`s3.bucket`, `dir`, ...)."""

    enabled: bool = False
    class_name: str = DIRECTORY
    impl_prefix: str = DEFAULT_IMPL_PREFIX
    store: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    task_interval_ms: int = 30_000
    retry_backoff_ms: int = 500
    retry_backoff_max_ms: int = 30_000
    reader_cache_size_bytes: int = 67_108_864
    metadata_snapshot_interval_records: int = 1_000

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str]) -> RemoteLogConfig:
        """The tiering keys among `overrides` (others are ignored: the caller parses them).
        Raises RiverlogError(INVALID_CONFIG) naming the first bad key."""
        prefix = overrides.get(IMPL_PREFIX, DEFAULT_IMPL_PREFIX).strip()
        if not prefix:
            raise _invalid(f"{IMPL_PREFIX} must not be empty")
        enabled = False
        if ENABLE in overrides:
            raw = overrides[ENABLE].strip().lower()
            if raw not in ("true", "false"):
                raise _invalid(f"invalid value {overrides[ENABLE]!r} for {ENABLE}: true or false")
            enabled = raw == "true"
        class_name = overrides.get(CLASS_NAME, DIRECTORY).strip()
        if class_name not in STORE_CLASSES:
            raise _invalid(
                f"invalid value {class_name!r} for {CLASS_NAME}: one of {', '.join(STORE_CLASSES)}"
            )
        longs = {key: default for key, (default, _) in NODE_LONGS.items()}
        for key, (_, minimum) in NODE_LONGS.items():
            if key in overrides:
                longs[key] = _parse_long(key, overrides[key], minimum)
        store: dict[str, str] = {}
        for key, raw in overrides.items():
            if not key.startswith(prefix):
                continue
            name = key[len(prefix) :]
            if name not in STORE_KEYS[class_name]:
                raise _invalid(
                    f"unknown {class_name} store config {key!r}; known: "
                    + ", ".join(prefix + k for k in STORE_KEYS[class_name])
                )
            store[name] = raw.strip()
        if enabled:
            for name in _REQUIRED[class_name]:
                if not store.get(name):
                    raise _invalid(f"{prefix}{name} is required with {CLASS_NAME}={class_name}")
        if "s3.request.timeout.ms" in store:
            _parse_long(prefix + "s3.request.timeout.ms", store["s3.request.timeout.ms"], 1)
        return cls(
            enabled=enabled,
            class_name=class_name,
            impl_prefix=prefix,
            store=MappingProxyType(store),
            task_interval_ms=longs["remote.log.manager.task.interval.ms"],
            retry_backoff_ms=longs["remote.log.manager.task.retry.backoff.ms"],
            retry_backoff_max_ms=longs["remote.log.manager.task.retry.backoff.max.ms"],
            reader_cache_size_bytes=longs["remote.log.reader.cache.size.bytes"],
            metadata_snapshot_interval_records=longs[
                "remote.log.metadata.snapshot.interval.records"
            ],
        )


def _parse_long(key: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise _invalid(f"invalid value {raw!r} for {key}: expected an integer") from None
    if value < minimum:
        raise _invalid(f"invalid value {raw!r} for {key}: must be at least {minimum}")
    return value
