"""Topic-level configuration: Kafka's names, types, defaults and valid ranges, in one table.

The metadata service validates `topics create --config` and `topics alter` against it (each
value with `validate()`, the resulting overrides as a whole with `check_combination()`); storage
nodes turn a topic's overrides into typed settings with `resolve()`. Unknown names, bad values
and refused combinations raise RiverlogError(INVALID_CONFIG) naming the keys, the values and
what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.replication_throttle import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    parse_throttled_replicas,
)

LONG_MAX: Final = 9_223_372_036_854_775_807
INT_MAX: Final = 2_147_483_647

ConfigValue = int | float | bool | str | tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: str  # "long" | "int" | "double" | "boolean" | "string" | "list" | "replicas"
    default: ConfigValue
    doc: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()

    def parse(self, raw: str) -> ConfigValue:
        """The typed value of `raw`; raises RiverlogError(INVALID_CONFIG)."""
        text = raw.strip()
        if self.type == "replicas":
            parse_throttled_replicas(self.name, raw)
            return text
        try:
            value = _PARSERS[self.type](text)
        except ValueError:
            raise _invalid(self.name, raw, f"expected a {self.type}") from None
        if isinstance(value, int | float) and not isinstance(value, bool):
            if self.min is not None and value < self.min:
                raise _invalid(self.name, raw, f"must be at least {_num(self.min)}")
            if self.max is not None and value > self.max:
                raise _invalid(self.name, raw, f"must be at most {_num(self.max)}")
        if self.choices:
            items = value if isinstance(value, tuple) else (value,)
            for item in items:
                if item not in self.choices:
                    raise _invalid(self.name, raw, f"must be one of {', '.join(self.choices)}")
        return value


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _invalid(name: str, raw: str, why: str) -> RiverlogError:
    return RiverlogError(f"invalid value {raw!r} for {name}: {why}", ErrorCode.INVALID_CONFIG)


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ValueError(text)
    return lowered == "true"


def _parse_list(text: str) -> tuple[str, ...]:
    items = tuple(item.strip() for item in text.split(",") if item.strip())
    if not items:
        raise ValueError(text)
    return items


_PARSERS: dict[str, Callable[[str], ConfigValue]] = {
    "long": int,
    "int": int,
    "double": float,
    "boolean": _parse_bool,
    "string": str,
    "list": _parse_list,
}

_DEFS = [
    ConfigDef(
        "cleanup.policy",
        "list",
        ("delete",),
        "delete and/or compact old segments",
        choices=("delete", "compact"),
    ),
    ConfigDef(
        "compression.type",
        "string",
        "producer",
        "final compression of stored batches",
        choices=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    ),
    ConfigDef("delete.retention.ms", "long", 86_400_000, "how long tombstones are kept", min=0),
    ConfigDef("file.delete.delay.ms", "long", 60_000, "delay before deleting a file", min=0),
    ConfigDef("flush.messages", "long", LONG_MAX, "fsync after this many records", min=1),
    ConfigDef("flush.ms", "long", LONG_MAX, "fsync after this long", min=0),
    ConfigDef(
        "index.interval.bytes",
        "int",
        4096,
        "bytes between offset index entries",
        min=0,
        max=INT_MAX,
    ),
    ConfigDef(
        FOLLOWER_THROTTLED_REPLICAS,
        "replicas",
        "",
        "partition:node pairs (or *) this topic's follower fetches are throttled on",
    ),
    ConfigDef(
        LEADER_THROTTLED_REPLICAS,
        "replicas",
        "",
        "partition:node pairs (or *) whose leader throttles out-of-sync followers",
    ),
    ConfigDef(
        "max.compaction.lag.ms", "long", LONG_MAX, "longest a record stays uncompacted", min=1
    ),
    ConfigDef(
        "max.message.bytes", "int", 1_048_588, "largest record batch accepted", min=0, max=INT_MAX
    ),
    ConfigDef(
        "message.timestamp.type",
        "string",
        "CreateTime",
        "the timestamp stored",
        choices=("CreateTime", "LogAppendTime"),
    ),
    ConfigDef(
        "message.timestamp.before.max.ms",
        "long",
        LONG_MAX,
        "how far in the past a CreateTime may be",
        min=0,
    ),
    ConfigDef(
        "message.timestamp.after.max.ms",
        "long",
        LONG_MAX,
        "how far in the future a CreateTime may be",
        min=0,
    ),
    ConfigDef(
        "min.cleanable.dirty.ratio",
        "double",
        0.5,
        "dirty share that triggers cleaning",
        min=0,
        max=1,
    ),
    ConfigDef(
        "local.retention.bytes",
        "long",
        -2,
        "size kept on local disk with remote.storage.enable (-2: retention.bytes)",
        min=-2,
    ),
    ConfigDef(
        "local.retention.ms",
        "long",
        -2,
        "age kept on local disk with remote.storage.enable (-2: retention.ms)",
        min=-2,
    ),
    ConfigDef("min.compaction.lag.ms", "long", 0, "shortest a record stays uncompacted", min=0),
    ConfigDef(
        "min.insync.replicas", "int", 1, "in-sync replicas needed for acks=all", min=1, max=INT_MAX
    ),
    ConfigDef(
        "remote.storage.enable",
        "boolean",
        False,
        "copy closed segments to the remote store (tiered storage, KIP-405)",
    ),
    ConfigDef("retention.bytes", "long", -1, "size kept per partition (-1: no limit)", min=-1),
    ConfigDef("retention.ms", "long", 604_800_000, "age kept (-1: forever)", min=-1),
    ConfigDef("segment.bytes", "int", 1_073_741_824, "segment file size", min=14, max=INT_MAX),
    ConfigDef("segment.index.bytes", "int", 10_485_760, "index file size", min=4, max=INT_MAX),
    ConfigDef("segment.jitter.ms", "long", 0, "random jitter on segment.ms", min=0),
    ConfigDef("segment.ms", "long", 604_800_000, "roll a segment after this long", min=1),
    ConfigDef(
        "unclean.leader.election.enable",
        "boolean",
        False,
        "elect an out-of-sync replica when no in-sync one is alive",
    ),
]

TOPIC_CONFIGS: Final[Mapping[str, ConfigDef]] = {d.name: d for d in _DEFS}


def validate(overrides: Mapping[str, str]) -> dict[str, str]:
    """Check override names and values; returns them normalized (stripped) or raises."""
    out: dict[str, str] = {}
    for name, raw in overrides.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise RiverlogError(f"unknown topic config {name!r}", ErrorCode.INVALID_CONFIG)
        if not isinstance(raw, str):
            raise _invalid(name, repr(raw), "values are strings")
        definition.parse(raw)
        out[name] = raw.strip()
    return out


def check_combination(overrides: Mapping[str, str]) -> None:
    """Refuse the combinations Kafka refuses as a whole (INVALID_CONFIG), for a topic's
    overrides as they would be after a create or an alter (values already validated):
    `remote.storage.enable=true` with a `cleanup.policy` that compacts (Kafka's
    LogConfig.validateNoRemoteStorageForCompactedTopic: tiered storage copies closed segments
    once and never rewrites them, which compaction would)."""
    remote = TOPIC_CONFIGS["remote.storage.enable"].parse(
        overrides.get("remote.storage.enable", "false")
    )
    policy = overrides.get("cleanup.policy", "delete")
    compacts = TOPIC_CONFIGS["cleanup.policy"].parse(policy)
    if remote is True and isinstance(compacts, tuple) and "compact" in compacts:
        raise RiverlogError(
            f"remote.storage.enable=true is not allowed with cleanup.policy={policy}: remote "
            "log storage only supports topics with cleanup.policy=delete",
            ErrorCode.INVALID_CONFIG,
        )


def resolve(overrides: Mapping[str, str]) -> dict[str, ConfigValue]:
    """Every topic config, typed: the overrides where set, Kafka's defaults elsewhere."""
    values: dict[str, ConfigValue] = {name: d.default for name, d in TOPIC_CONFIGS.items()}
    for name, raw in validate(overrides).items():
        values[name] = TOPIC_CONFIGS[name].parse(raw)
    return values


def render(value: ConfigValue) -> str:
    """A typed value back in the string form Kafka tools show."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)
