"""Checks on topic requests, as Kafka makes them, each raising RiverlogError with a clear code:
names (`Topic.validate`: `[a-zA-Z0-9._-]`, 1..249 characters, not `.` or `..`), the `.`/`_`
collision rule, partition counts, replication factors and incremental config changes.

Pure functions: the controller calls them before any etcd write, so a bad request changes
nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from riverlog.common import topic_config
from riverlog.common.errors import ErrorCode, RiverlogError

MAX_NAME_LENGTH: Final = 249
# A bound on partitions per topic: each partition is an etcd key, and a CreateTopics with a
# huge count must get a clear error instead of exhausting etcd.
MAX_PARTITIONS: Final = 10_000
INTERNAL_TOPICS: Final = frozenset({"__consumer_offsets", "__transaction_state"})
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


@dataclass(frozen=True, slots=True)
class ConfigOp:
    """One incremental config change: SET name=value, or DELETE name (back to the default)."""

    name: str
    value: str
    op: str  # "SET" | "DELETE"


def validate_topic_name(name: str) -> None:
    if not name:
        raise _invalid_topic("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise _invalid_topic('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise _invalid_topic(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name[:40]}..."
        )
    if not _LEGAL.match(name):
        raise _invalid_topic(
            f"Topic name {name!r} is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )


def _invalid_topic(message: str) -> RiverlogError:
    return RiverlogError(message, ErrorCode.INVALID_TOPIC_EXCEPTION)


def collision_key(name: str) -> str:
    """Names that differ only by '.' versus '_' collide (their metric names would)."""
    return name.replace(".", "_")


def check_collision(name: str, existing: Iterable[str]) -> None:
    key = collision_key(name)
    for other in existing:
        if other != name and collision_key(other) == key:
            raise _invalid_topic(f"Topic '{name}' collides with existing topic: {other}")


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def resolve_partitions(requested: int, default: int) -> int:
    """-1 → the cluster default; otherwise 1..MAX_PARTITIONS."""
    value = default if requested == -1 else requested
    if value <= 0:
        raise RiverlogError(
            f"Number of partitions was set to an invalid non-positive value ({requested}).",
            ErrorCode.INVALID_PARTITIONS,
        )
    if value > MAX_PARTITIONS:
        raise RiverlogError(
            f"Number of partitions {value} is above the limit of {MAX_PARTITIONS}.",
            ErrorCode.INVALID_PARTITIONS,
        )
    return value


def resolve_replication_factor(requested: int, default: int, live_storage_nodes: int) -> int:
    """-1 → the cluster default; otherwise 1..live storage nodes."""
    value = default if requested == -1 else requested
    if value <= 0:
        raise RiverlogError(
            f"Replication factor was set to an invalid non-positive value ({requested}).",
            ErrorCode.INVALID_REPLICATION_FACTOR,
        )
    if value > live_storage_nodes:
        raise RiverlogError(
            f"Replication factor: {value} larger than available brokers: {live_storage_nodes}.",
            ErrorCode.INVALID_REPLICATION_FACTOR,
        )
    return value


def validate_partition_increase(name: str, current: int, requested: int) -> None:
    if requested == current:
        raise RiverlogError(
            f"Topic {name} already has {current} partitions.", ErrorCode.INVALID_PARTITIONS
        )
    if requested < current:
        raise RiverlogError(
            f"Topic currently has {current} partitions, which is higher than the requested "
            f"{requested}.",
            ErrorCode.INVALID_PARTITIONS,
        )
    if requested > MAX_PARTITIONS:
        raise RiverlogError(
            f"Number of partitions {requested} is above the limit of {MAX_PARTITIONS}.",
            ErrorCode.INVALID_PARTITIONS,
        )


def validate_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """Overrides checked against the topic-config catalog and as a whole (INVALID_CONFIG),
    normalized."""
    out = topic_config.validate(configs)
    topic_config.check_combination(out)
    return out


def apply_config_ops(current: Mapping[str, str], ops: Sequence[ConfigOp]) -> dict[str, str]:
    """A topic's overrides after incremental `ops`, checked as a whole; raises INVALID_CONFIG /
    INVALID_REQUEST."""
    out = apply_ops(current, ops, _check_topic_config_name, topic_config.validate)
    topic_config.check_combination(out)
    return out


def _check_topic_config_name(name: str) -> None:
    if name not in topic_config.TOPIC_CONFIGS:
        raise RiverlogError(f"unknown topic config {name!r}", ErrorCode.INVALID_CONFIG)


def apply_ops(
    current: Mapping[str, str],
    ops: Sequence[ConfigOp],
    check_name: Callable[[str], object],
    validate: Callable[[Mapping[str, str]], Mapping[str, str]],
) -> dict[str, str]:
    """The configs after Kafka's incremental ops (IncrementalAlterConfigs: SET, DELETE), each
    name checked by `check_name` and each value by `validate` (both raise INVALID_CONFIG); a
    name twice or an unknown operation is INVALID_REQUEST. Pure."""
    seen: set[str] = set()
    out = dict(current)
    for op in ops:
        if op.name in seen:
            raise RiverlogError(
                f"Duplicate config key {op.name!r} in one request", ErrorCode.INVALID_REQUEST
            )
        seen.add(op.name)
        check_name(op.name)
        if op.op == "SET":
            out.update(validate({op.name: op.value}))
        elif op.op == "DELETE":
            out.pop(op.name, None)
        else:
            raise RiverlogError(f"unknown config operation {op.op!r}", ErrorCode.INVALID_REQUEST)
    return out


def duplicates(names: Sequence[str]) -> set[str]:
    """Names that appear more than once in one request."""
    seen: set[str] = set()
    dup: set[str] = set()
    for name in names:
        (dup if name in seen else seen).add(name)
    return dup


def describe_configs(overrides: Mapping[str, str]) -> list[tuple[str, str, bool]]:
    """Every topic config as (name, value, is_default), by name."""
    out = []
    for name in sorted(topic_config.TOPIC_CONFIGS):
        if name in overrides:
            out.append((name, overrides[name], False))
        else:
            default = topic_config.TOPIC_CONFIGS[name].default
            out.append((name, topic_config.render(default), True))
    return out
