"""Dynamic storage-node configs (Kafka's dynamic broker configs): the names that may change at
run time through AlterConfigs, their validation, and how a node's value is resolved.

A node config is set for one storage node (entity name "2") or for the cluster-wide default
entity (entity name "", Kafka's `--entity-default` / `ConfigResource(BROKER, "")`); a node's own
value wins over the default, as in Kafka. Only the replication throttle rates are dynamic here
(issue 13 item 2); an unknown name, a negative or non-numeric value is INVALID_CONFIG and the
request changes nothing. Pure: the metadata service validates with it, storage nodes resolve
with it, the CLI and the SDK name the keys from it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.topic_config import LONG_MAX, ConfigDef, render

LEADER_THROTTLED_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE: Final = "follower.replication.throttled.rate"
THROTTLED_RATES: Final = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE)
"""The node configs a replication throttle sets on the nodes of its moves (one rate, both sides)."""
DEFAULT_ENTITY: Final = ""
"""The entity name of the cluster-wide default (Kafka's `<default>` broker)."""

_DEFS = [
    ConfigDef(
        LEADER_THROTTLED_RATE,
        "long",
        LONG_MAX,
        "bytes/s a leader serves to out-of-sync throttled replicas",
        min=0,
    ),
    ConfigDef(
        FOLLOWER_THROTTLED_RATE,
        "long",
        LONG_MAX,
        "bytes/s a follower fetches for its out-of-sync throttled replicas",
        min=0,
    ),
]

NODE_CONFIGS: Final[Mapping[str, ConfigDef]] = {d.name: d for d in _DEFS}

NodeConfigs = Mapping[str, Mapping[str, str]]
"""Entity name ("" for the default, else a node id in decimal) -> explicitly set configs."""


def validate_entity(name: str) -> str:
    """The entity name normalized: "" (the default) or a node id; INVALID_REQUEST otherwise."""
    text = name.strip()
    if text == DEFAULT_ENTITY:
        return text
    if not text.isdigit():
        raise RiverlogError(
            f"invalid node config entity {name!r}: a storage node id or the default ('')",
            ErrorCode.INVALID_REQUEST,
        )
    return str(int(text))


def entity_label(name: str) -> str:
    """How tools show an entity: the node id, or `<default>` as kafka-configs.sh does."""
    return "<default>" if name == DEFAULT_ENTITY else name


def check_name(name: str) -> ConfigDef:
    """The definition of a dynamic node config; INVALID_CONFIG naming the known ones."""
    definition = NODE_CONFIGS.get(name)
    if definition is None:
        known = ", ".join(sorted(NODE_CONFIGS))
        raise RiverlogError(
            f"unknown node config {name!r}; dynamic node configs: {known}",
            ErrorCode.INVALID_CONFIG,
        )
    return definition


def validate(configs: Mapping[str, str]) -> dict[str, str]:
    """Check names and values (INVALID_CONFIG naming the key and what is allowed); returns the
    values stripped."""
    out: dict[str, str] = {}
    for name, raw in configs.items():
        check_name(name).parse(raw)
        out[name] = raw.strip()
    return out


def effective(configs: NodeConfigs, node_id: int) -> dict[str, str]:
    """The node's explicitly set configs: its own over the default entity's."""
    out = dict(configs.get(DEFAULT_ENTITY, {}))
    out.update(configs.get(str(node_id), {}))
    return out


def rate(configs: NodeConfigs, node_id: int, name: str) -> int | None:
    """A throttle rate of the node in bytes/s, None when unset (no throttle)."""
    raw = effective(configs, node_id).get(name)
    if raw is None:
        return None
    value = NODE_CONFIGS[name].parse(raw)
    return int(value) if isinstance(value, int) and value < LONG_MAX else None


def describe(overrides: Mapping[str, str]) -> list[tuple[str, str, bool]]:
    """Every dynamic node config as (name, value, is_default), by name."""
    out = []
    for name in sorted(NODE_CONFIGS):
        if name in overrides:
            out.append((name, overrides[name], False))
        else:
            out.append((name, render(NODE_CONFIGS[name].default), True))
    return out


def rate_configs(nodes: Iterable[int], rate: int | None) -> dict[int, dict[str, int | None]]:
    """The node-config changes that set both throttled rates of `nodes` to `rate`, or remove
    them (None): what `partitions reassign --throttle`, `partitions drain --throttle` and the
    controller's replica balancer write."""
    return {node: dict.fromkeys(THROTTLED_RATES, rate) for node in sorted(set(nodes))}


def nodes_with_rates(explicit: Mapping[int, Collection[str]]) -> list[int]:
    """The nodes with a throttled rate set on them: `explicit` maps a node to the names of
    the configs set on its own entity (the cluster-wide default entity is not a node)."""
    return sorted(
        node for node, names in explicit.items() if any(k in names for k in THROTTLED_RATES)
    )
